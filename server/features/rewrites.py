"""Rewrites as code actions: listing them costs no model call; picking one runs a command with work-done progress
per agent step and cancellation. A paragraph rewrite becomes a WorkspaceEdit for the document version it was
computed from: if the document changed meanwhile, nothing is applied (picking the action again replays the cached
model answers). A lay article is a new Markdown file beside the manuscript, never over an existing one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types

from margin.workflows.manuscript.source import Position, SourceFile, normalize_uri, path_to_uri, uri_to_path
from margin.workflows.registry import AGENTSIMP
from margin.workflows.rewrite.types import Rewrite, RewriteStatus

from .. import pipelines
from ..diagnostics import lsp_range
from .base import Command, Feature

if TYPE_CHECKING:
    from margin.workflows.rewrite.edits import Target
    from margin.workflows.rewrite.transcript import Transcript

    from ..session import DocumentView, Session

log = logging.getLogger("margin.rewrites")

T = TypeVar("T")

SIMPLIFY_PARAGRAPH = "margin.simplifyParagraph"
SIMPLIFY_DOCUMENT = "margin.simplifyDocument"
LAY_ARTICLE = "margin.generateLayArticle"


class OutcomeStatus(StrEnum):
    """What a rewrite command did, as the client reads it from the command's result."""

    APPLIED = "applied"  # the editor applied the edit
    WRITTEN = "written"  # the lay article was written
    UNCHANGED = RewriteStatus.UNCHANGED.value  # the agents found nothing to change
    REFUSED = RewriteStatus.REFUSED.value  # the rewrite would lose or add something: not applied
    FAILED = RewriteStatus.FAILED.value  # the models gave nothing usable
    STALE = "stale"  # the document changed while margin worked
    REJECTED = "rejected"  # the editor did not apply the edit
    CANCELLED = "cancelled"  # the user cancelled it from the progress
    BUSY = "busy"  # the same rewrite is already running
    NONE = "none"  # nothing to rewrite there


_QUIET = (OutcomeStatus.UNCHANGED, OutcomeStatus.NONE)  # said as information, not as a warning


@dataclass(frozen=True, slots=True)
class Outcome:
    status: OutcomeStatus
    message: str = ""
    rewritten: int = 0
    refused: int = 0
    failed: int = 0
    path: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "message": self.message,
            "rewritten": self.rewritten,
            "refused": self.refused,
            "failed": self.failed,
            "path": self.path,
        }


class Rewrites(Feature):
    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self.running: dict[tuple[str, ...], asyncio.Task[Any]] = {}

    def commands(self) -> Mapping[str, Command]:
        return {
            SIMPLIFY_PARAGRAPH: Command(self.simplify_paragraph),
            SIMPLIFY_DOCUMENT: Command(self.simplify_document),
            LAY_ARTICLE: Command(self.lay_article),
        }

    def status(self) -> dict[str, Any]:
        return {"rewrites": len(self.running)}

    async def shutdown(self) -> None:
        for task in list(self.running.values()):
            task.cancel()

    async def code_actions(
        self, params: types.CodeActionParams, view: DocumentView | None
    ) -> list[types.CodeAction]:
        if view is None:
            return []
        uri = params.text_document.uri
        start = params.range.start
        actions = []
        if view.manuscript.paragraph_at(uri, Position(start.line, start.character)) is not None:
            actions.append(
                _action(
                    "Simplify paragraph",
                    types.CodeActionKind.RefactorRewrite,
                    SIMPLIFY_PARAGRAPH,
                    [uri, start.line, start.character],
                )
            )
        actions.append(_action("Simplify document", types.CodeActionKind.Source, SIMPLIFY_DOCUMENT, [uri]))
        actions.append(_action("Generate lay article", types.CodeActionKind.Source, LAY_ARTICLE, [uri]))
        return actions

    # -- the three commands -------------------------------------------------------------------------------------

    async def simplify_paragraph(self, uri: str, line: int, character: int) -> dict[str, Any]:
        return (await self._simplify_paragraph(uri, line, character)).to_json()

    async def simplify_document(self, uri: str) -> dict[str, Any]:
        return (await self._simplify_document(uri)).to_json()

    async def lay_article(self, uri: str) -> dict[str, Any]:
        return (await self._lay_article(uri)).to_json()

    async def _simplify_paragraph(self, uri: str, line: int, character: int) -> Outcome:
        await pipelines.ready()
        from margin.workflows.rewrite.edits import target_of

        from ..application.rewrite import simplify, simplify_method, simplify_transcript

        view = await self.session.view(uri)
        if view is None:
            return self._tell(Outcome(OutcomeStatus.NONE, "this document cannot be analysed"))
        paragraph = view.manuscript.paragraph_at(uri, Position(line, character))
        if paragraph is None:
            return self._tell(
                Outcome(OutcomeStatus.NONE, "there is no paragraph to simplify at that position")
            )
        target = target_of(paragraph)
        llm = self.session.models.client(view.settings, asked=True)
        method = simplify_method(view.settings, single=True)
        transcript = simplify_transcript(method, view.settings)
        simplified = await self._run(
            ("paragraph", normalize_uri(uri), paragraph.id),
            "Simplifying the paragraph",
            lambda step: simplify(view.manuscript, [target], method, view.settings, llm, step, transcript),
        )
        self._save_transcript(transcript, view)
        if isinstance(simplified, Outcome):
            return simplified
        [rewrite] = simplified.rewrites
        if rewrite.status is not RewriteStatus.REWRITTEN:
            return self._tell(_unapplied(rewrite))
        return await self._apply(view.source, [(target, rewrite)], "margin: simplify paragraph")

    async def _simplify_document(self, uri: str) -> Outcome:
        await pipelines.ready()
        from ..application.rewrite import document_targets, simplify, simplify_transcript

        view = await self.session.view(uri)
        if view is None:
            return self._tell(Outcome(OutcomeStatus.NONE, "this document cannot be analysed"))
        targets = document_targets(view.manuscript, uri)
        if not targets:
            return self._tell(Outcome(OutcomeStatus.NONE, "this document has no paragraphs to simplify"))
        llm = self.session.models.client(view.settings, asked=True)
        transcript = simplify_transcript(AGENTSIMP, view.settings)
        simplified = await self._run(
            ("document", normalize_uri(uri)),
            f"Simplifying {len(targets)} paragraphs",
            lambda step: simplify(view.manuscript, targets, AGENTSIMP, view.settings, llm, step, transcript),
        )
        self._save_transcript(transcript, view)
        if isinstance(simplified, Outcome):
            return simplified
        changed = simplified.changed
        refused = simplified.with_status(RewriteStatus.REFUSED)
        failed = simplified.with_status(RewriteStatus.FAILED)
        notes = []
        if refused:
            notes.append(
                f"{len(refused)} paragraph(s) kept as they were: "
                f"{refused[0][1].message.removeprefix('not applied: ')}"
            )
        if failed:
            notes.append(f"{len(failed)} paragraph(s) failed: {failed[0][1].message}")
        if not changed:
            status = (
                OutcomeStatus.FAILED
                if failed
                else (OutcomeStatus.REFUSED if refused else OutcomeStatus.UNCHANGED)
            )
            return self._tell(
                Outcome(status, "; ".join(notes) or "nothing to change", 0, len(refused), len(failed))
            )
        if notes:
            self.session.tell_user("; ".join(notes), types.MessageType.Info)
        outcome = await self._apply(view.source, changed, "margin: simplify document")
        return Outcome(outcome.status, outcome.message, len(changed), len(refused), len(failed))

    async def _lay_article(self, uri: str) -> Outcome:
        await pipelines.ready()
        from margin.workflows.rewrite.output import create_beside

        from ..application.rewrite import lay_article, lay_article_path, lay_transcript

        view = await self.session.view(uri)
        if view is None:
            return self._tell(Outcome(OutcomeStatus.NONE, "this document cannot be analysed"))
        root = uri_to_path(view.manuscript.root_uri) or uri_to_path(uri)
        if root is None:
            return self._tell(
                Outcome(
                    OutcomeStatus.NONE,
                    "save the manuscript to a file first: the article is written beside it",
                )
            )
        llm = self.session.models.client(view.settings, asked=True)
        transcript = lay_transcript(view.settings)
        run = await self._run(
            ("lay", normalize_uri(view.manuscript.root_uri)),
            "Writing a lay article",
            lambda step: lay_article(view.manuscript, view.settings, llm, step, transcript=transcript),
        )
        self._save_transcript(transcript, view)
        if isinstance(run, Outcome):
            return run
        article = run.article
        if not article.ok:
            reason = article.failures[-1] if article.failures else "no draft"
            return self._tell(Outcome(OutcomeStatus.FAILED, f"no lay article was written: {reason}"))
        try:
            path = create_beside(lay_article_path(root), run.text(root.name))
        except OSError as error:
            return self._tell(
                Outcome(OutcomeStatus.FAILED, f"cannot write the lay article beside {root.name}: {error}")
            )
        if not await self.session.show_document(path_to_uri(path)):
            self.session.tell_user(f"lay article written to {path}", types.MessageType.Info)
        for warning in article.warnings:
            self.session.tell_user(warning, types.MessageType.Warning)
        return Outcome(OutcomeStatus.WRITTEN, f"lay article written to {path.name}", path=str(path))

    # -- shared machinery ---------------------------------------------------------------------------------------

    async def _run(
        self, key: tuple[str, ...], title: str, work: Callable[[Callable[[str], None]], Awaitable[T]]
    ) -> T | Outcome:
        """Run one rewrite with progress. An Outcome instead of the result when the same rewrite is already
        running or the user cancelled it from the progress."""
        if key in self.running:
            return self._tell(Outcome(OutcomeStatus.BUSY, "this rewrite is already running"))
        started: list[asyncio.Task[T]] = []
        progress = self.session.progress("rewrite", lambda: [task.cancel() for task in started])
        self.running[key] = asyncio.current_task()  # type: ignore[assignment]  # holds the key while progress starts
        try:
            await progress.begin(title)
        except BaseException:
            del self.running[key]
            raise
        task = asyncio.ensure_future(work(progress.step))
        started.append(task)
        self.running[key] = task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                task.cancel()
                raise  # the command itself was cancelled ($/cancelRequest)
            log.info("%s: cancelled by the user", title)
            return Outcome(OutcomeStatus.CANCELLED, "")
        finally:
            del self.running[key]
            progress.end("cancelled" if task.cancelled() else "done")

    async def _apply(self, source: SourceFile, rewrites: list[tuple[Target, Rewrite]], label: str) -> Outcome:
        """Send the edit for the document version the rewrite was computed from, if it is still current."""
        current = self.session.documents.get(source.uri)
        if (
            current is None
            or current.version != source.version
            or any(current.text[t.start : t.end] != r.original for t, r in rewrites)
        ):
            return self._tell(
                Outcome(
                    OutcomeStatus.STALE,
                    "the document changed while margin was working, so nothing was changed. Pick the action "
                    "again to apply the rewrite to the current text (its model answers are cached).",
                )
            )
        edits = [
            types.TextEdit(range=lsp_range(source.range(target.start, target.end)), new_text=rewrite.text)
            for target, rewrite in rewrites
        ]
        if self.session.supports_document_changes:
            edit = types.WorkspaceEdit(
                document_changes=[
                    types.TextDocumentEdit(
                        text_document=types.OptionalVersionedTextDocumentIdentifier(
                            uri=source.uri, version=source.version
                        ),
                        edits=edits,  # type: ignore[arg-type]
                    )
                ]
            )
        else:
            edit = types.WorkspaceEdit(changes={source.uri: edits})
        try:
            result = await self.session.apply_edit(edit, label)
        except Exception as error:  # a timeout, or the client answered with an error
            return self._tell(Outcome(OutcomeStatus.REJECTED, f"the editor did not apply the edit: {error}"))
        if not result.applied:
            reason = result.failure_reason or "no reason given"
            return self._tell(
                Outcome(OutcomeStatus.REJECTED, f"the editor did not apply the edit ({reason})")
            )
        return Outcome(OutcomeStatus.APPLIED, rewritten=len(rewrites))

    def _tell(self, outcome: Outcome) -> Outcome:
        if outcome.message:
            kind = types.MessageType.Info if outcome.status in _QUIET else types.MessageType.Warning
            self.session.tell_user(outcome.message, kind)
        return outcome

    def _save_transcript(self, transcript: Transcript, view: DocumentView) -> None:
        from ..application.rewrite import TRANSCRIPT_FOLDER, save_transcript

        if not view.settings.rewrite.transcripts or not transcript.turns:
            return
        path = uri_to_path(view.uri)
        folder = self.session.folder_of(view.uri) / TRANSCRIPT_FOLDER
        save_transcript(transcript, folder, path.stem if path is not None else "untitled")


def _action(title: str, kind: types.CodeActionKind, command: str, arguments: list[Any]) -> types.CodeAction:
    return types.CodeAction(
        title=title, kind=kind, command=types.Command(title=title, command=command, arguments=arguments)
    )


def _unapplied(rewrite: Rewrite) -> Outcome:
    if rewrite.status is RewriteStatus.REFUSED:
        return Outcome(
            OutcomeStatus.REFUSED,
            f"the simplification was not applied: {rewrite.message.removeprefix('not applied: ')}",
            refused=1,
        )
    if rewrite.status is RewriteStatus.FAILED:
        return Outcome(
            OutcomeStatus.FAILED, f"the paragraph could not be simplified: {rewrite.message}", failed=1
        )
    return Outcome(OutcomeStatus.UNCHANGED, "the agents found nothing to simplify in this paragraph")

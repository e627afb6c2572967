"""Rewrites in the editor: "Simplify paragraph", "Simplify document" and "Generate lay article".

Each runs when the user picks its code action (listing costs no model call), with work-done progress per agent
step and cancellation. A paragraph rewrite becomes a WorkspaceEdit for the document version it was computed from:
if the document changed meanwhile, nothing is applied (picking the action again replays the cached model answers).
A lay article is a new Markdown file beside the manuscript, never over an existing one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lsprotocol import types

from margin.workflows.manuscript.model import Manuscript
from margin.workflows.manuscript.source import Position, SourceFile, normalize_uri, path_to_uri, uri_to_path
from margin.workflows.rewrite.edits import Target, target_of, targets_in
from margin.workflows.rewrite.output import create_beside
from margin.workflows.rewrite.transcript import Transcript
from margin.workflows.rewrite.types import Rewrite, RewriteStatus

from . import pipelines
from .diagnostics import lsp_range
from .progress import Progress
from .settings import Settings

if TYPE_CHECKING:
    from .lsp import MarginServer

log = logging.getLogger("margin.rewrites")

T = TypeVar("T")
DOCUMENT_MIN_WORDS = 8  # shorter paragraphs (headings turned list items, one-liners) are left alone
TRANSCRIPT_FOLDER = Path(".margin") / "transcripts"


@dataclass(frozen=True, slots=True)
class Outcome:
    status: (
        str  # applied | unchanged | refused | failed | stale | rejected | cancelled | busy | none | written
    )
    message: str = ""
    rewritten: int = 0
    refused: int = 0
    failed: int = 0
    path: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "message": self.message,
            "rewritten": self.rewritten,
            "refused": self.refused,
            "failed": self.failed,
            "path": self.path,
        }


class RewriteCoordinator:
    def __init__(self, server: MarginServer) -> None:
        self.server = server
        self.running: dict[tuple[str, ...], asyncio.Task[Any]] = {}

    # -- the three actions ----------------------------------------------------------------------------------------

    async def simplify_paragraph(self, uri: str, line: int, character: int) -> Outcome:
        settings, manuscript, source = await self._current(uri)
        from margin.workflows.rewrite.simplify import simplify_targets

        if manuscript is None or source is None:
            return self._tell(Outcome("none", "this document cannot be analysed"))
        paragraph = manuscript.paragraph_at(uri, Position(line, character))
        if paragraph is None:
            return self._tell(Outcome("none", "there is no paragraph to simplify at that position"))
        target = target_of(paragraph)
        method = settings.values["simplify.paragraphMethod"]
        transcript = Transcript(method, settings.section("simplify"))
        llm = self.server.reviews.llm(settings, asked=True)

        async def work(on_step: Callable[[str], None]) -> Rewrite:
            [rewrite] = await simplify_targets(
                [target],
                method,
                manuscript,
                llm,
                soms_options=settings.soms_options(),
                agentsimp_options=settings.agentsimp_options(),
                transcript=transcript,
                on_step=on_step,
            )
            return rewrite

        rewrite = await self._run(
            ("paragraph", normalize_uri(uri), paragraph.id), "Simplifying the paragraph", work
        )
        self._save_transcript(transcript, uri, settings)
        if isinstance(rewrite, Outcome):
            return rewrite
        if rewrite.status is not RewriteStatus.REWRITTEN:
            return self._tell(_unapplied(rewrite))
        return await self._apply(source, [(target, rewrite)], "margin: simplify paragraph")

    async def simplify_document(self, uri: str) -> Outcome:
        settings, manuscript, source = await self._current(uri)
        from margin.workflows.rewrite.simplify import AGENTSIMP, simplify_targets

        if manuscript is None or source is None:
            return self._tell(Outcome("none", "this document cannot be analysed"))
        targets = targets_in(manuscript, uri, DOCUMENT_MIN_WORDS)
        if not targets:
            return self._tell(Outcome("none", "this document has no paragraphs to simplify"))
        transcript = Transcript("agentsimp", settings.section("simplify"))
        llm = self.server.reviews.llm(settings, asked=True)

        async def work(on_step: Callable[[str], None]) -> list[Rewrite]:
            return await simplify_targets(
                targets,
                AGENTSIMP,
                manuscript,
                llm,
                agentsimp_options=settings.agentsimp_options(),
                transcript=transcript,
                on_step=on_step,
            )

        key = ("document", normalize_uri(uri))
        rewrites = await self._run(key, f"Simplifying {len(targets)} paragraphs", work)
        self._save_transcript(transcript, uri, settings)
        if isinstance(rewrites, Outcome):
            return rewrites
        changed = [
            (target, rewrite) for target, rewrite in zip(targets, rewrites, strict=True) if rewrite.changed
        ]
        refused = [rewrite for rewrite in rewrites if rewrite.status is RewriteStatus.REFUSED]
        failed = [rewrite for rewrite in rewrites if rewrite.status is RewriteStatus.FAILED]
        notes = []
        if refused:
            notes.append(
                f"{len(refused)} paragraph(s) kept as they were: {refused[0].message.removeprefix('not applied: ')}"
            )
        if failed:
            notes.append(f"{len(failed)} paragraph(s) failed: {failed[0].message}")
        if not changed:
            status = "failed" if failed else ("refused" if refused else "unchanged")
            return self._tell(
                Outcome(status, "; ".join(notes) or "nothing to change", 0, len(refused), len(failed))
            )
        if notes:
            self.server.tell_user("; ".join(notes), types.MessageType.Info)
        outcome = await self._apply(source, changed, "margin: simplify document")
        return Outcome(outcome.status, outcome.message, len(changed), len(refused), len(failed))

    async def lay_article(self, uri: str) -> Outcome:
        settings, manuscript, source = await self._current(uri)
        from margin.workflows.rewrite import jrel

        if manuscript is None or source is None:
            return self._tell(Outcome("none", "this document cannot be analysed"))
        root = uri_to_path(manuscript.root_uri) or uri_to_path(uri)
        if root is None:
            return self._tell(
                Outcome("none", "save the manuscript to a file first: the article is written beside it")
            )
        transcript = Transcript("jrel", settings.section("lay"))
        llm = self.server.reviews.llm(settings, asked=True)

        async def work(on_step: Callable[[str], None]) -> jrel.LayArticle:
            return await jrel.write_lay_article(
                manuscript, llm, settings.lay_options(), transcript=transcript, on_step=on_step
            )

        key = ("lay", normalize_uri(manuscript.root_uri))
        article = await self._run(key, "Writing a lay article", work)
        self._save_transcript(transcript, uri, settings)
        if isinstance(article, Outcome):
            return article
        if not article.ok:
            reason = article.failures[-1] if article.failures else "no draft"
            return self._tell(Outcome("failed", f"no lay article was written: {reason}"))
        try:
            path = create_beside(jrel.article_path(root), jrel.render_article(article, root.name))
        except OSError as error:
            return self._tell(Outcome("failed", f"cannot write the lay article beside {root.name}: {error}"))
        await self._show(path)
        for warning in article.warnings:
            self.server.tell_user(warning, types.MessageType.Warning)
        return Outcome("written", f"lay article written to {path.name}", path=str(path))

    # -- shared machinery -----------------------------------------------------------------------------------------

    async def _current(self, uri: str) -> tuple[Settings, Manuscript | None, SourceFile | None]:
        await pipelines.ready()
        settings = await self.server.settings_for(uri)
        manuscript = await self.server.manuscript(uri, settings)
        return settings, manuscript, self.server.documents.get(uri)

    async def _run(
        self,
        key: tuple[str, ...],
        title: str,
        work: Callable[[Callable[[str], None]], Awaitable[T]],
    ) -> T | Outcome:
        """Run one rewrite with progress. An Outcome instead of the result when the same rewrite is already
        running or the user cancelled it from the progress."""
        if key in self.running:
            return self._tell(Outcome("busy", "this rewrite is already running"))
        progress = Progress(self.server, "rewrite")
        started: list[asyncio.Task[T]] = []
        self.running[key] = asyncio.current_task()  # type: ignore[assignment]  # holds the key while progress starts
        try:
            await progress.begin(title, lambda: [task.cancel() for task in started])
        except BaseException:
            del self.running[key]
            raise
        task = asyncio.ensure_future(work(lambda step: progress.report(step)))
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
            return Outcome("cancelled", "")
        finally:
            del self.running[key]
            progress.end("cancelled" if task.cancelled() else "done")

    async def _apply(self, source: SourceFile, rewrites: list[tuple[Target, Rewrite]], label: str) -> Outcome:
        """Send the edit for the document version the rewrite was computed from, if it is still current."""
        current = self.server.documents.get(source.uri)
        if (
            current is None
            or current.version != source.version
            or any(current.text[t.start : t.end] != r.original for t, r in rewrites)
        ):
            return self._tell(
                Outcome(
                    "stale",
                    "the document changed while margin was working, so nothing was changed. Pick the action "
                    "again to apply the rewrite to the current text (its model answers are cached).",
                )
            )
        edits = [
            types.TextEdit(range=lsp_range(source.range(target.start, target.end)), new_text=rewrite.text)
            for target, rewrite in rewrites
        ]
        if self._supports_document_changes:
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
            result = await asyncio.wait_for(
                self.server.workspace_apply_edit_async(
                    types.ApplyWorkspaceEditParams(edit=edit, label=label)
                ),
                timeout=60,
            )
        except (TimeoutError, Exception) as error:
            if isinstance(error, asyncio.CancelledError):
                raise
            return self._tell(Outcome("rejected", f"the editor did not apply the edit: {error}"))
        if not result.applied:
            reason = result.failure_reason or "no reason given"
            return self._tell(Outcome("rejected", f"the editor did not apply the edit ({reason})"))
        return Outcome("applied", rewritten=len(rewrites))

    @property
    def _supports_document_changes(self) -> bool:
        workspace = self.server.client_capabilities.workspace
        edit = workspace.workspace_edit if workspace is not None else None
        return bool(edit is not None and edit.document_changes)

    async def _show(self, path: Path) -> None:
        window = self.server.client_capabilities.window
        if window is not None and window.show_document is not None and window.show_document.support:
            try:
                await asyncio.wait_for(
                    self.server.window_show_document_async(
                        types.ShowDocumentParams(uri=path_to_uri(path), take_focus=True)
                    ),
                    timeout=10,
                )
                return
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log.info("the editor did not show %s: %s", path, error)
        self.server.tell_user(f"lay article written to {path}", types.MessageType.Info)

    def _tell(self, outcome: Outcome) -> Outcome:
        if outcome.message:
            kind = (
                types.MessageType.Info
                if outcome.status in ("unchanged", "none")
                else types.MessageType.Warning
            )
            self.server.tell_user(outcome.message, kind)
        return outcome

    def _save_transcript(self, transcript: Transcript, uri: str, settings: Settings) -> None:
        if not settings.values["rewrite.transcripts"] or not transcript.turns:
            return
        folder = self.server.reviews.store_for(uri).path.parent.parent / TRANSCRIPT_FOLDER
        path = uri_to_path(uri)
        try:
            saved = transcript.save(folder, path.stem if path is not None else "untitled")
            log.info("transcript saved to %s", saved)
        except OSError as error:
            log.warning("cannot save the transcript in %s: %s", folder, error)


def _unapplied(rewrite: Rewrite) -> Outcome:
    status = rewrite.status.value
    if rewrite.status is RewriteStatus.REFUSED:
        return Outcome(
            status,
            f"the simplification was not applied: {rewrite.message.removeprefix('not applied: ')}",
            refused=1,
        )
    if rewrite.status is RewriteStatus.FAILED:
        return Outcome(status, f"the paragraph could not be simplified: {rewrite.message}", failed=1)
    return Outcome(status, "the agents found nothing to simplify in this paragraph")

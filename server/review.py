"""Focused feedback in the editor: when reviews run, their progress and cancellation, and their findings as
diagnostics, hovers and dismissals.

Results are kept by paragraph id (a hash of the paragraph's text), never by position: a finding is shown only
while a paragraph with exactly that text exists, at wherever that paragraph is now. Editing a paragraph gives it
a new id, which cancels the old text's review and keeps its result from ever being published.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from margin.workflows.feedback.dismissals import DismissalStore, dismissal_key
from margin.workflows.feedback.types import Finding, ParagraphReview, Source
from margin.workflows.llm.config import INSTALL_HINT, EndpointKind
from margin.workflows.llm.types import Priority
from margin.workflows.manuscript.model import Manuscript, Paragraph
from margin.workflows.manuscript.source import normalize_uri, uri_to_path

from . import pipelines
from .diagnostics import SOURCE, lsp_range
from .progress import Progress

if TYPE_CHECKING:
    from margin.workflows.feedback.literature import Literature
    from margin.workflows.llm.client import LLMClient

    from .lsp import MarginServer
    from .settings import Settings

log = logging.getLogger("margin.review")

NO_MODEL_MESSAGE = (
    "no model for focused feedback: nothing answers at http://localhost:8000/v1 and the embedded model is not "
    "installed. Readability works without one. For feedback, start a model server (for example `vllm serve "
    f"MODEL`) and set margin.llm.endpoint to it, or install the embedded model with `{INSTALL_HINT}`."
)

_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


@dataclass(frozen=True, slots=True)
class Shown:
    """A finding as it stands in a document now."""

    paragraph: Paragraph
    finding: Finding
    key: str  # its dismissal key


class ReviewCoordinator:
    def __init__(self, server: MarginServer) -> None:
        self.server = server
        self.results: dict[str, ParagraphReview] = {}
        self.tasks: dict[str, asyncio.Task[ParagraphReview]] = {}
        self.task_uri: dict[str, str] = {}
        self._runs: set[asyncio.Task[None]] = set()
        self._clients: dict[str, LLMClient] = {}
        self._stores: dict[Path, DismissalStore] = {}
        self._refused_folders: set[Path] = set()
        self._announced: set[str] = set()
        self._no_model: str | None = None

    # -- resources ----------------------------------------------------------------------------------------------

    def llm(self, settings: Settings, asked: bool = False) -> LLMClient:
        """One client per distinct LLM configuration (folders may differ); a client in use is never closed.
        `asked`: the user asked for this work, so endpoints found dead are tried again now. Only after
        `pipelines.ready()`."""
        from margin.workflows.llm.client import LLMClient

        config = settings.llm_config()
        key = repr(config)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = LLMClient(config)
        if asked:
            client.retry_now()
            self._announced.clear()
        return client

    def retry_now(self) -> None:
        """Settings changed: try every endpoint again, and say again what is wrong if it still is."""
        for client in self._clients.values():
            client.retry_now()
        self._announced.clear()

    def problem(self) -> str | None:
        """Why focused feedback cannot run now, if it cannot (for the status): the latest outage."""
        latest = max(
            (outage for client in self._clients.values() for outage in client.pool.current_outages()),
            key=lambda outage: outage.until,
            default=None,
        )
        return latest.error.message if latest is not None else self._no_model

    def _announce(self, message: str) -> None:
        """Tell the user once what stops the models, instead of a message per paragraph."""
        if message in self._announced:
            return
        self._announced.add(message)
        self.server.tell_user(message, types.MessageType.Error)

    def _announce_outages(self, client: LLMClient) -> None:
        for outage in client.pool.current_outages():
            self._announce(f"focused feedback stopped: {outage.error.message}")

    def endpoints_in_use(self) -> list[dict[str, str | None]]:
        """The endpoints the LLM clients have resolved so far, with their model and structured-output mode."""
        return [
            {
                "url": endpoint.base_url,
                "model": client.config.default.model or (endpoint.models[0] if endpoint.models else None),
                "mode": endpoint.mode.value if endpoint.mode else None,
            }
            for client in self._clients.values()
            for endpoint in client.pool.endpoints()
        ]

    async def close(self) -> None:
        for task in list(self.tasks.values()):
            task.cancel()
        for client in self._clients.values():
            await client.close()

    def _spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coroutine)
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)
        return task

    def store_for(self, uri: str) -> DismissalStore:
        """The dismissal store of the workspace folder that holds the document (else its own folder)."""
        path = uri_to_path(uri)
        folder = path.parent if path is not None else Path.cwd()
        roots = [workspace_folder.uri for workspace_folder in self.server.workspace.folders.values()]
        if self.server.workspace.root_uri:
            roots.append(self.server.workspace.root_uri)
        for root_uri in roots:
            root = uri_to_path(root_uri)
            if root is not None and path is not None and path.is_relative_to(root):
                folder = root
                break
        return self._stores.setdefault(folder, DismissalStore(folder))

    async def _literature(self, manuscript: Manuscript, settings: Settings, uri: str) -> Literature:
        from margin.workflows.feedback.literature import Literature

        base = uri_to_path(uri)
        boundary = self.server.analyzer.provider.boundary
        folders = []
        for entry in settings.values["review.literatureFolders"]:
            folder = Path(entry).expanduser()
            if not folder.is_absolute() and base is not None:
                folder = self.store_for(uri).path.parent.parent / folder
            if boundary is not None and not boundary.allows(folder):
                # A workspace's settings must not send PDFs from elsewhere on the disk to the model.
                if folder not in self._refused_folders:
                    self._refused_folders.add(folder)
                    self.server.tell_user(
                        f"review.literatureFolders: {folder} is outside the workspace; its PDFs are not read. "
                        "To allow it, add it to margin.allowedFolders in your user settings."
                    )
                continue
            folders.append(folder)
        online = settings.online_searches()
        return await Literature.gather(manuscript, folders, online.web, scholarly=online.scholarly)

    # -- when ---------------------------------------------------------------------------------------------------

    def schedule(self, uri: str, reason: str) -> None:
        """Review a document's new or changed paragraphs in the background, if the trigger setting says so."""
        self._spawn(self._maybe_review(uri, reason))

    async def _maybe_review(self, uri: str, reason: str) -> None:
        settings = await self.server.settings_for(uri)
        trigger = settings.values["review.trigger"]
        if trigger == "manual":
            return
        await pipelines.ready()
        client = self.llm(settings)
        if client.pool.outage(client.config.default.base_url) is not None:
            return  # already said; a command, new settings or the retry timer try again
        kind = await client.pool.kind_of(client.config.default)
        if kind is EndpointKind.NONE:
            self._no_model = NO_MODEL_MESSAGE
            self._announce(NO_MODEL_MESSAGE)
            return
        self._no_model = None
        if settings.review_trigger(kind) == "save" and reason != "save":
            return
        await self.review(uri)

    def cancel_stale(self, uri: str, manuscript: Manuscript) -> None:
        """Cancel the reviews of this document's paragraphs whose text is gone (they were edited)."""
        current = {paragraph.id for paragraph in manuscript.paragraphs}
        key = normalize_uri(uri)
        for paragraph_id, task_uri in list(self.task_uri.items()):
            if task_uri == key and paragraph_id not in current:
                task = self.tasks.get(paragraph_id)
                if task is not None and not task.done():
                    log.debug("cancelling the review of edited paragraph %s", paragraph_id)
                    task.cancel()

    def cancel_document(self, uri: str) -> None:
        key = normalize_uri(uri)
        for paragraph_id, task_uri in list(self.task_uri.items()):
            task = self.tasks.get(paragraph_id)
            if task_uri == key and task is not None and not task.done():
                task.cancel()

    # -- running ------------------------------------------------------------------------------------------------

    async def review(
        self, uri: str, only: Iterable[Paragraph] | None = None, interactive: bool = False
    ) -> int:
        """Review the document's reviewable paragraphs that have no result yet (or `only` those); return how
        many were reviewed (the reviewer answered). Shows progress; cancelling the progress cancels the
        reviews."""
        await pipelines.ready()
        from margin.workflows.feedback.pipeline import ReviewContext, review_paragraph, reviewable

        settings = await self.server.settings_for(uri)
        manuscript = await self.server.manuscript(uri, settings)
        if manuscript is None:
            return 0
        llm = self.llm(settings, asked=interactive)
        options = settings.review_options(await llm.pool.kind_of(llm.config.default))
        options.priority = Priority.INTERACTIVE if interactive else Priority.BACKGROUND
        key = normalize_uri(uri)
        candidates = (
            list(only)
            if only is not None
            else [p for p in manuscript.paragraphs if normalize_uri(p.uri) == key]
        )
        chosen = only is not None  # an explicitly chosen paragraph is reviewed whatever its length
        todo = list(
            {
                paragraph.id: paragraph
                for paragraph in candidates
                if (chosen or reviewable(paragraph, options))
                and paragraph.id not in self.tasks
                and (interactive or paragraph.id not in self.results)
            }.values()
        )  # identical paragraphs share one review
        if not todo:
            return 0
        context = await ReviewContext.build(manuscript, await self._literature(manuscript, settings, uri))
        tasks = []
        for paragraph in todo:
            task = asyncio.ensure_future(review_paragraph(paragraph, context, llm, options))
            self.tasks[paragraph.id] = task
            self.task_uri[paragraph.id] = key
            tasks.append((paragraph, task))
        return await self._follow(uri, tasks, llm)

    async def _follow(
        self, uri: str, tasks: list[tuple[Paragraph, asyncio.Task[ParagraphReview]]], llm: LLMClient
    ) -> int:
        """Wait for the reviews, publishing as each one ends; return how many completed (the reviewer
        answered)."""
        total = len(tasks)
        progress = Progress(self.server, "review")
        await progress.begin(f"Reviewing 0/{total} paragraphs", lambda: [task.cancel() for _, task in tasks])
        done = 0
        completed = 0
        try:
            for future in asyncio.as_completed([task for _, task in tasks]):
                try:
                    result = await future
                except asyncio.CancelledError:
                    if asyncio.current_task() is not None and asyncio.current_task().cancelling():  # type: ignore[union-attr]
                        raise  # we ourselves are being cancelled, not just one review
                    result = None
                except Exception:  # a bug in one review must not stop the others or reach the editor
                    log.exception("a paragraph review failed")
                    result = None
                done += 1
                if result is not None:
                    for failure in result.failures:
                        log.debug("review of %s: %s", result.paragraph_id, failure)
                    self._announce_outages(llm)
                    if result.completed:  # a review whose reviewer failed is tried again next time
                        completed += 1
                        self.results[result.paragraph_id] = result
                        await self.server.refresh(uri)
                progress.report(f"Reviewing {done}/{total} paragraphs", done * 100 // total)
        finally:
            for paragraph, task in tasks:
                task.cancel()  # no-op for finished ones; stops the rest if we are leaving early
                if self.tasks.get(paragraph.id) is task:
                    del self.tasks[paragraph.id]
                    self.task_uri.pop(paragraph.id, None)
            progress.end(f"Reviewed {completed}/{total} paragraphs")
        return completed

    # -- showing ------------------------------------------------------------------------------------------------

    def shown(self, manuscript: Manuscript, uri: str) -> list[Shown]:
        """Findings for the paragraphs of this document as they are now, without dismissed ones."""
        key = normalize_uri(uri)
        store = self.store_for(uri)
        shown = []
        for paragraph in manuscript.paragraphs:
            result = self.results.get(paragraph.id)
            if result is None or normalize_uri(paragraph.uri) != key:
                continue
            for finding in result.findings:
                current = _relocated(finding, paragraph.text, result.text)
                if current is None:
                    continue
                dismissal = dismissal_key(paragraph.text, current.label.value, current.quote)
                if not store.is_dismissed(dismissal):
                    shown.append(Shown(paragraph, current, dismissal))
        return shown

    def diagnostics(self, manuscript: Manuscript, uri: str, settings: Settings) -> list[types.Diagnostic]:
        severity = _SEVERITY[settings.values["review.severity"]]
        return [self._diagnostic(item, manuscript, severity) for item in self.shown(manuscript, uri)]

    def _diagnostic(
        self, item: Shown, manuscript: Manuscript, severity: types.DiagnosticSeverity
    ) -> types.Diagnostic:
        finding = item.finding
        return types.Diagnostic(
            range=lsp_range(item.paragraph.range_of(finding.start, finding.end)),
            message=finding.review,
            severity=severity,
            source=SOURCE,
            code=finding.label.value,
            related_information=_evidence_locations(finding, manuscript) or None,
            data={
                "paragraphId": item.paragraph.id,
                "label": finding.label.value,
                "quote": finding.quote,
                "dismissal": item.key,
            },
        )

    def hover(self, manuscript: Manuscript, uri: str, line: int, character: int) -> str | None:
        for item in self.shown(manuscript, uri):
            span = item.paragraph.range_of(item.finding.start, item.finding.end)
            start, end = span.start, span.end
            if (start.line, start.character) <= (line, character) <= (end.line, end.character):
                return finding_markdown(item.finding)
        return None

    def dismiss(self, uri: str, manuscript: Manuscript, dismissal: str) -> bool:
        """Dismiss a shown finding for good; False when there is none with that key, or (after telling the user
        why) when the dismissal cannot be saved: a read-only workspace is the user's to know, not an error."""
        from margin.workflows.rewrite.output import reason

        for item in self.shown(manuscript, uri):
            if item.key == dismissal:
                store = self.store_for(uri)
                try:
                    store.dismiss(
                        dismissal, item.finding.label.value, item.finding.quote, item.paragraph.text
                    )
                except OSError as error:
                    self.server.tell_user(
                        f"the finding was not dismissed: cannot save {store.path}: {reason(error)}",
                        types.MessageType.Error,
                    )
                    return False
                return True
        return False


def _relocated(finding: Finding, text: str, reviewed_text: str) -> Finding | None:
    """The finding in the paragraph's current text. The id ignores white space and case, so the text may differ
    slightly from the reviewed one: then the quote is looked up again (exactly), or the finding is not shown."""
    if text == reviewed_text:
        return finding
    start = text.find(finding.quote)
    if start < 0:
        return None
    return replace(finding, start=start, end=start + len(finding.quote))


def _evidence_locations(finding: Finding, manuscript: Manuscript) -> list[types.DiagnosticRelatedInformation]:
    """Where the evidence is now: passages are found again by their paragraph, so they follow edits."""
    paragraphs = {paragraph.id: paragraph for paragraph in manuscript.paragraphs}
    related = []
    for evidence in finding.evidence:
        if evidence.source is not Source.PAPER:
            continue
        for passage in evidence.passages[:2]:
            paragraph = paragraphs.get(passage.paragraph_id or "")
            if paragraph is None or paragraph.text[passage.plain_start : passage.plain_end] != passage.text:
                continue
            answer = f": {evidence.answer}" if evidence.answer else ""
            message = f"Evidence for “{evidence.question}”{answer}"
            related.append(
                types.DiagnosticRelatedInformation(
                    location=types.Location(
                        uri=paragraph.uri,
                        range=lsp_range(paragraph.range_of(passage.plain_start, passage.plain_end)),
                    ),
                    message=message[:300],
                )
            )
    return related[:6]


def finding_markdown(finding: Finding) -> str:
    lines = [f"**margin · {finding.label.value}**", "", finding.review]
    if finding.reasoning:
        lines += ["", f"*Reasoning:* {finding.reasoning}"]
    answered = [item for item in finding.evidence if item.answer]
    if answered:
        lines += ["", "*Evidence gathered:*"]
        for item in answered:
            origin = "paper" if item.source is Source.PAPER else "literature"
            lines.append(f"- ({origin}) **{item.question}** {item.answer}")
    return "\n".join(lines)

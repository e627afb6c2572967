"""Focused feedback in the editor: when reviews run, their progress and cancellation, and their findings as
diagnostics, hovers, code actions and dismissals.

Results are kept by paragraph id (a hash of the paragraph's text), never by position: a finding is shown only
while a paragraph with exactly that text exists, at wherever that paragraph is now. Editing a paragraph gives it
a new id, which cancels the old text's review and keeps its result from ever being published.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from margin.workflows.feedback.dismissals import DismissalStore
from margin.workflows.llm.config import INSTALL_HINT, EndpointKind
from margin.workflows.llm.types import Priority
from margin.workflows.manuscript.source import Position, normalize_uri, uri_to_path

from .. import pipelines
from . import findings
from .base import Command, Feature

if TYPE_CHECKING:
    from margin.workflows.feedback.types import ParagraphReview
    from margin.workflows.llm.client import LLMClient
    from margin.workflows.manuscript.model import Paragraph

    from ..session import DocumentView, Session

log = logging.getLogger("margin.review")

REVIEW_PARAGRAPH = "margin.reviewParagraph"
REVIEW_DOCUMENT = "margin.reviewDocument"
DISMISS_FINDING = "margin.dismissFinding"

NO_MODEL_MESSAGE = (
    "no model for focused feedback: nothing answers at http://localhost:8000/v1 and the embedded model is not "
    "installed. Readability works without one. For feedback, start a model server (for example `vllm serve "
    f"MODEL`) and set margin.llm.endpoint to it, or install the embedded model with `{INSTALL_HINT}`."
)


class Review(Feature):
    late_diagnostics = True
    hover_precedence = (
        1  # a finding over its paragraph's readability, even when it quotes the whole paragraph
    )

    def __init__(self, session: Session) -> None:
        super().__init__(session)
        self.results: dict[str, ParagraphReview] = {}
        self.tasks: dict[str, asyncio.Task[ParagraphReview]] = {}
        self.task_uri: dict[str, str] = {}
        self._stores: dict[Path, DismissalStore] = {}
        self._refused_folders: set[Path] = set()

    # -- events -------------------------------------------------------------------------------------------------

    async def opened(self, uri: str) -> None:
        self.session.spawn(self._maybe_review(uri, "open"))

    async def saved(self, uri: str) -> None:
        self.session.spawn(self._maybe_review(uri, "save"))

    async def changed(self, uri: str) -> None:
        """An edited paragraph's review is for text that no longer exists: stop it."""
        if not self.tasks:
            return
        view = await self.session.view(uri)
        if view is None:
            return
        current = {paragraph.id for paragraph in view.manuscript.paragraphs}
        key = normalize_uri(uri)
        for paragraph_id, task_uri in list(self.task_uri.items()):
            task = self.tasks.get(paragraph_id)
            if task_uri == key and paragraph_id not in current and task is not None and not task.done():
                log.debug("cancelling the review of edited paragraph %s", paragraph_id)
                task.cancel()

    def closed(self, uri: str) -> None:
        key = normalize_uri(uri)
        for paragraph_id, task_uri in list(self.task_uri.items()):
            task = self.tasks.get(paragraph_id)
            if task_uri == key and task is not None and not task.done():
                task.cancel()

    async def shutdown(self) -> None:
        for task in list(self.tasks.values()):
            task.cancel()

    def status(self) -> dict[str, Any]:
        return {"reviews": sum(not task.done() for task in self.tasks.values())}

    # -- answers ------------------------------------------------------------------------------------------------

    def _shown(self, view: DocumentView) -> list[findings.Shown]:
        return findings.shown(self.results, view.paragraphs(), self.store_for(view.uri))

    async def diagnostics(self, view: DocumentView) -> list[types.Diagnostic]:
        severity = findings.SEVERITY[view.settings.review.severity]
        return [findings.diagnostic(item, view.manuscript, severity) for item in self._shown(view)]

    async def hover(self, view: DocumentView, position: Position) -> types.Hover | None:
        for item in self._shown(view):
            span = item.range
            if (
                (span.start.line, span.start.character)
                <= (position.line, position.character)
                <= (
                    span.end.line,
                    span.end.character,
                )
            ):
                return types.Hover(
                    contents=types.MarkupContent(
                        kind=types.MarkupKind.Markdown, value=findings.finding_markdown(item.finding)
                    ),
                    range=span,
                )
        return None

    async def code_actions(
        self, params: types.CodeActionParams, view: DocumentView | None
    ) -> list[types.CodeAction]:
        uri = params.text_document.uri
        actions = []
        for diagnostic in params.context.diagnostics:
            data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
            if diagnostic.source == "margin" and data.get("dismissal"):
                title = f"Dismiss this finding ({data.get('label', 'margin')})"
                actions.append(
                    types.CodeAction(
                        title=title,
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        command=types.Command(
                            title="Dismiss this finding",
                            command=DISMISS_FINDING,
                            arguments=[uri, data["dismissal"]],
                        ),
                    )
                )
        start = params.range.start
        if view is not None and view.manuscript.paragraph_at(uri, Position(start.line, start.character)):
            actions.append(
                types.CodeAction(
                    title="Review this paragraph",
                    kind=types.CodeActionKind.Source,
                    command=types.Command(
                        title="Review this paragraph",
                        command=REVIEW_PARAGRAPH,
                        arguments=[uri, start.line, start.character],
                    ),
                )
            )
        return actions

    def commands(self) -> Mapping[str, Command]:
        return {
            REVIEW_PARAGRAPH: Command(self.review_paragraph_command),
            REVIEW_DOCUMENT: Command(self.review_document_command),
            DISMISS_FINDING: Command(self.dismiss_command, cancellable=False),
        }

    # -- commands -----------------------------------------------------------------------------------------------

    async def review_paragraph_command(self, uri: str, line: int, character: int) -> dict[str, int]:
        view = await self.session.view(uri)
        paragraph = view.manuscript.paragraph_at(uri, Position(line, character)) if view else None
        if paragraph is None:
            self.session.tell_user("there is no paragraph to review at that position", types.MessageType.Info)
            return {"reviewed": 0}
        return {"reviewed": await self.review(uri, [paragraph], interactive=True)}

    async def review_document_command(self, uri: str) -> dict[str, int]:
        return {"reviewed": await self.review(uri, interactive=True)}

    async def dismiss_command(self, uri: str, dismissal: str) -> dict[str, bool]:
        view = await self.session.view(uri)
        dismissed = view is not None and self.dismiss(view, dismissal)
        if dismissed:
            await self.session.refresh(uri)
        return {"dismissed": dismissed}

    def dismiss(self, view: DocumentView, dismissal: str) -> bool:
        """Dismiss a shown finding for good; False when there is none with that key, or (after telling the user
        why) when the dismissal cannot be saved: a read-only workspace is the user's to know, not an error."""
        from margin.workflows.rewrite.output import reason

        for item in self._shown(view):
            if item.key == dismissal:
                store = self.store_for(view.uri)
                try:
                    store.dismiss(
                        dismissal, item.finding.label.value, item.finding.quote, item.paragraph.text
                    )
                except OSError as error:
                    self.session.tell_user(
                        f"the finding was not dismissed: cannot save {store.path}: {reason(error)}",
                        types.MessageType.Error,
                    )
                    return False
                return True
        return False

    def store_for(self, uri: str) -> DismissalStore:
        """The dismissal store of the workspace folder that holds the document (else its own folder)."""
        folder = self.session.folder_of(uri)
        return self._stores.setdefault(folder, DismissalStore(folder))

    # -- running ------------------------------------------------------------------------------------------------

    def _announce_outages(self, client: LLMClient) -> None:
        """Tell the user once what stops the models, instead of a message per paragraph."""
        for outage in client.pool.current_outages():
            message = f"focused feedback stopped: {outage.error.message}"
            if self.session.models.first_time(message):
                self.session.tell_user(message, types.MessageType.Error)

    async def _maybe_review(self, uri: str, reason: str) -> None:
        """Review a document's new or changed paragraphs in the background, if the trigger setting says so."""
        settings = await self.session.settings_for(uri)
        if settings.review.trigger == "manual":
            return
        await pipelines.ready()
        models = self.session.models
        client = models.client(settings)
        if client.pool.outage(client.config.default.urls) is not None:
            return  # already said; a command, new settings or the retry timer try again
        kind = await client.pool.kind_of(client.config.default)
        if kind is EndpointKind.NONE:
            models.no_model = NO_MODEL_MESSAGE
            if models.first_time(NO_MODEL_MESSAGE):
                self.session.tell_user(NO_MODEL_MESSAGE, types.MessageType.Error)
            return
        models.no_model = None
        if settings.review_trigger(kind) == "save" and reason != "save":
            return
        await self.review(uri)

    async def review(
        self, uri: str, only: Iterable[Paragraph] | None = None, interactive: bool = False
    ) -> int:
        """Review the document's reviewable paragraphs that have no result yet (or `only` those); return how
        many were reviewed (the reviewer answered). Shows progress; cancelling the progress cancels the
        reviews."""
        await pipelines.ready()
        from margin.workflows.feedback.pipeline import reviewable

        from ..application.review import Reviews, follow, gather_literature

        view = await self.session.view(uri)
        if view is None:
            return 0
        llm = self.session.models.client(view.settings, asked=interactive)
        options = view.settings.review_options(await llm.pool.kind_of(llm.config.default))
        options.priority = Priority.INTERACTIVE if interactive else Priority.BACKGROUND
        chosen = only is not None  # an explicitly chosen paragraph is reviewed whatever its length
        candidates = list(only) if chosen else [p for p in view.paragraphs() if reviewable(p, options)]
        todo = list(
            {
                paragraph.id: paragraph
                for paragraph in candidates
                if paragraph.id not in self.tasks and (interactive or paragraph.id not in self.results)
            }.values()
        )  # identical paragraphs share one review
        if not todo:
            return 0
        literature = await gather_literature(view.manuscript, view.settings, self._literature_folders(view))
        reviews = await Reviews.prepare(view.manuscript, llm, options, literature)
        key = normalize_uri(uri)
        tasks = []
        for paragraph in todo:
            task = reviews.start(paragraph)
            self.tasks[paragraph.id] = task
            self.task_uri[paragraph.id] = key
            tasks.append(task)

        async def publish(result: ParagraphReview) -> None:
            self._announce_outages(llm)
            if result.completed:  # a review whose reviewer failed is tried again next time
                self.results[result.paragraph_id] = result
                await self.session.refresh(uri)

        progress = self.session.progress("review", lambda: [task.cancel() for task in tasks])
        try:
            followed = await follow(tasks, progress, publish)
        finally:
            for paragraph, task in zip(todo, tasks, strict=True):
                if self.tasks.get(paragraph.id) is task:
                    del self.tasks[paragraph.id]
                    self.task_uri.pop(paragraph.id, None)
        return followed.completed

    def _literature_folders(self, view: DocumentView) -> list[Path]:
        from ..application.review import literature_folders

        base = self.session.folder_of(view.uri) if uri_to_path(view.uri) is not None else None
        folders = literature_folders(view.settings, base, self.session.read_boundary)
        for folder in folders.refused:
            if folder not in self._refused_folders:
                self._refused_folders.add(folder)
                self.session.tell_user(
                    f"review.literatureFolders: {folder} is outside the workspace; its PDFs are not read. "
                    "To allow it, add it to margin.allowedFolders in your user settings."
                )
        return folders.readable

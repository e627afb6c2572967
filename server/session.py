"""One editor session: the open documents and their manuscripts, the settings in force, the workspace, the LLM
clients, and the way results reach the client (publish, refresh, edits, progress, messages).

Features (server/features/) see the editor only through this object; the LSP handlers (server/lsp.py) keep it
up to date and fan requests out to the features.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from margin.workflows.manuscript.boundary import ReadBoundary, project_folder
from margin.workflows.manuscript.model import Manuscript, Paragraph
from margin.workflows.manuscript.source import SourceFile, normalize_uri, uri_to_path
from margin.workflows.readability import ReadabilityCache

from . import logs
from .clients import ModelClients
from .configuration import Configuration
from .documents import Analyzer, DocumentIndex, NotAnalysable
from .progress import LspProgress
from .settings import DEFAULTS, SECTION, Settings

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

    from .features.base import Feature

log = logging.getLogger(f"{logs.LOGGER_NAME}.session")

_LOG_TYPES = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}


@dataclass(frozen=True, slots=True)
class DocumentView:
    """A document as features answer about it: its settings, its manuscript and its text (one version)."""

    uri: str
    settings: Settings
    manuscript: Manuscript
    source: SourceFile

    def paragraphs(self) -> list[Paragraph]:
        """The manuscript's paragraphs that are in this document (a manuscript spans files)."""
        return self.manuscript.paragraphs_in(self.uri)


class Session:
    def __init__(self, server: LanguageServer) -> None:
        self._server = server
        self.documents = DocumentIndex(self._document_text)
        self.analyzer = Analyzer(self.documents, DEFAULTS.max_file_bytes)
        self.configuration = Configuration(self.tell_user)
        self.models = ModelClients()
        self.scores = (
            ReadabilityCache()
        )  # readability of paragraph texts, shared by the features that show it
        self.features: Sequence[Feature] = ()
        self.publishing: set[asyncio.Future[list[types.Diagnostic]]] = set()
        self._background: set[asyncio.Task[Any]] = set()
        self._not_analysable: set[str] = set()

    # -- the client ---------------------------------------------------------------------------------------------

    def _document_text(self, uri: str) -> tuple[str, int | None] | None:
        document = self._server.workspace.text_documents.get(uri)
        if document is None:
            return None
        return document.source, document.version

    @property
    def capabilities(self) -> types.ClientCapabilities:
        return self._server.client_capabilities

    @property
    def pulls_diagnostics(self) -> bool:
        text_document = self.capabilities.text_document
        return text_document is not None and text_document.diagnostic is not None

    @property
    def pull_refresh_supported(self) -> bool:
        workspace = self.capabilities.workspace
        return bool(workspace and workspace.diagnostics and workspace.diagnostics.refresh_support)

    @property
    def has_configuration(self) -> bool:
        workspace = self.capabilities.workspace
        return bool(workspace is not None and workspace.configuration)

    @property
    def supports_document_changes(self) -> bool:
        workspace = self.capabilities.workspace
        edit = workspace.workspace_edit if workspace is not None else None
        return bool(edit is not None and edit.document_changes)

    def log_to_editor(self) -> None:
        """From now on margin's log also goes to the editor's (window/logMessage)."""
        handler = logs.EditorLogHandler(self._send_log)
        handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
        logging.getLogger(logs.LOGGER_NAME).addHandler(handler)

    def _send_log(self, level: int, message: str) -> None:
        kind = _LOG_TYPES.get(level, types.MessageType.Log)
        self._server.window_log_message(types.LogMessageParams(type=kind, message=message))

    def tell_user(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        log.warning(message)
        self._server.window_show_message(types.ShowMessageParams(type=kind, message=f"margin: {message}"))

    def progress(self, kind: str, on_cancel: Callable[[], object]) -> LspProgress:
        """Work-done progress for a long run; the user cancelling it calls `on_cancel`."""
        return LspProgress(self._server, kind, on_cancel)

    async def apply_edit(self, edit: types.WorkspaceEdit, label: str) -> types.ApplyWorkspaceEditResult:
        """Ask the client to apply an edit (the only way margin changes a user's file)."""
        return await asyncio.wait_for(
            self._server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=label)),
            timeout=60,
        )

    async def show_document(self, uri: str) -> bool:
        """Open a document in the editor, if the client can; False when it cannot or did not."""
        window = self.capabilities.window
        if window is None or window.show_document is None or not window.show_document.support:
            return False
        try:
            await asyncio.wait_for(
                self._server.window_show_document_async(types.ShowDocumentParams(uri=uri, take_focus=True)),
                timeout=10,
            )
        except Exception as error:
            log.info("the editor did not show %s: %s", uri, error)
            return False
        return True

    def refresh_inlay_hints(self) -> None:
        """Ask the client to request inlay hints again (their settings changed), if it can be asked."""
        workspace = self.capabilities.workspace
        if (
            workspace is not None
            and workspace.inlay_hint is not None
            and workspace.inlay_hint.refresh_support
        ):
            self._server.workspace_inlay_hint_refresh(None)

    def spawn(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Background work the session keeps a reference to (the event loop holds tasks weakly)."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- settings -----------------------------------------------------------------------------------------------

    @property
    def global_settings(self) -> Settings:
        return self.configuration.global_settings

    def apply_user_settings(self, initialization_options: Any) -> None:
        self.configuration.apply_user(initialization_options)
        self._server_wide()

    def apply_global_settings(self, raw: Any) -> None:
        self.configuration.apply_global(raw)
        self._server_wide()

    def _server_wide(self) -> None:
        """What the server-wide settings decide: the log level, the size limit for files read from disk and the
        folders outside the workspace that may be read."""
        settings = self.global_settings
        logs.set_level(settings.log_level)
        self.analyzer.max_bytes = settings.max_file_bytes
        self.update_read_boundary()

    async def settings_for(self, uri: str) -> Settings:
        ask = self._ask_configuration if self.has_configuration else None
        return await self.configuration.for_document(uri, ask)

    async def _ask_configuration(self, uri: str) -> Any:
        return await self._server.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(scope_uri=uri, section=SECTION)])
        )

    # -- the workspace ------------------------------------------------------------------------------------------

    def workspace_folders(self, with_root: bool = False) -> list[Path]:
        """The workspace folders (else the root folder; `with_root`: and the root folder too, last)."""
        try:
            workspace = self._server.workspace
        except RuntimeError:  # before initialize
            return []
        folders = [uri_to_path(folder.uri) for folder in workspace.folders.values()]
        if workspace.root_uri and (with_root or not folders):
            folders.append(uri_to_path(workspace.root_uri))
        return [folder for folder in folders if folder is not None]

    def folder_of(self, uri: str) -> Path:
        """The workspace folder that holds a document, else the document's own folder: where margin keeps what
        it writes for the user (dismissals, transcripts) and what relative settings are relative to."""
        path = uri_to_path(uri)
        if path is None:
            return Path.cwd()
        for root in self.workspace_folders(with_root=True):
            if path.is_relative_to(root):
                return root
        return path.parent

    def update_read_boundary(self) -> None:
        """Files may be read inside the workspace folders, the user's allowed folders, and the project folder
        of an open document that lies outside every workspace folder (an editor opened on a single file)."""
        boundary = ReadBoundary(self.workspace_folders(), self.global_settings.allowed_folders)
        extra = []
        for uri in self.documents.uris():
            path = uri_to_path(uri)
            if path is not None and path.is_absolute() and not boundary.allows(path):
                extra.append(project_folder(path))
        self.analyzer.provider.boundary = boundary.with_folders(extra)

    @property
    def read_boundary(self) -> ReadBoundary | None:
        return self.analyzer.provider.boundary

    # -- documents ----------------------------------------------------------------------------------------------

    async def manuscript(self, uri: str, settings: Settings) -> Manuscript | None:
        """The manuscript for a document, or None (after telling the user once) when it is not analysable."""
        if self.documents.get(uri) is None:
            return None
        key = normalize_uri(uri)
        try:
            # Parsing happens in a worker thread, so no document's parse, however large or hostile, holds up
            # the answers about another; an unchanged manuscript is served straight from the analyzer.
            manuscript = self.analyzer.cached(uri)
            if manuscript is None:
                manuscript = await asyncio.to_thread(self.analyzer.manuscript, uri, settings.max_file_bytes)
        except NotAnalysable as reason:
            if key not in self._not_analysable:
                self._not_analysable.add(key)
                self.tell_user(str(reason), types.MessageType.Info)
            return None
        except Exception:
            # The parsers are built never to raise; if one does, the editor must keep working.
            log.exception("analysis of %s failed", uri)
            return None
        self._not_analysable.discard(key)
        return manuscript

    async def view(self, uri: str) -> DocumentView | None:
        """The document with its settings and manuscript, or None when it is not open or not analysable."""
        settings = await self.settings_for(uri)
        manuscript = await self.manuscript(uri, settings)
        source = self.documents.get(uri)
        if manuscript is None or source is None:
            return None
        return DocumentView(uri, settings, manuscript, source)

    # -- diagnostics --------------------------------------------------------------------------------------------

    @property
    def _late_pushed(self) -> bool:
        """A pulling client that cannot be asked to pull again gets late diagnostics (findings) pushed."""
        return self.pulls_diagnostics and not self.pull_refresh_supported

    async def diagnostics(self, uri: str) -> list[types.Diagnostic]:
        """Every feature's diagnostics for a document (late ones are pushed separately to some clients)."""
        view = await self.view(uri)
        if view is None:
            return []
        found: list[types.Diagnostic] = []
        for feature in self.features:
            if not (feature.late_diagnostics and self._late_pushed):
                found += await feature.diagnostics(view)
        return found

    async def _push_late(self, uri: str) -> None:
        view = await self.view(uri)
        if view is None:
            return
        late: list[types.Diagnostic] = []
        for feature in self.features:
            if feature.late_diagnostics:
                late += await feature.diagnostics(view)
        self._server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=late, version=view.source.version)
        )

    async def refresh(self, uri: str) -> None:
        """New late diagnostics for a document: push them, or ask a pulling client to pull again."""
        if not self.pulls_diagnostics:
            await self.publish(uri)
        elif self.pull_refresh_supported:
            self._server.workspace_diagnostic_refresh(None)
        else:
            await self._push_late(uri)

    async def publish(self, uri: str) -> None:
        """Push a document's diagnostics to a client that does not pull them."""
        if self.pulls_diagnostics:
            return
        source = self.documents.get(uri)
        if source is None:
            return
        publishing = asyncio.ensure_future(self.diagnostics(uri))
        self.publishing.add(publishing)  # shutdown lets diagnostics already being computed reach the client
        publishing.add_done_callback(self.publishing.discard)
        diagnostics = await publishing
        current = self.documents.get(uri)
        if current is None or current.version != source.version:
            return  # the document moved on while we worked; its own change will publish
        self._server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=source.version)
        )

    def clear(self, uri: str) -> None:
        """A closed document keeps no diagnostics in a client that does not pull them."""
        if not self.pulls_diagnostics:
            self._server.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
            )

    async def refresh_all(self) -> None:
        if self.pulls_diagnostics:
            if self.pull_refresh_supported:
                self._server.workspace_diagnostic_refresh(None)
            return
        for uri in self.documents.uris():
            await self.publish(uri)

    # -- the end ------------------------------------------------------------------------------------------------

    async def shutdown(self) -> None:
        if self.publishing:  # a document opened just before: its diagnostics are seconds away at most
            await asyncio.wait(list(self.publishing), timeout=5)
            await asyncio.sleep(0)  # and the handlers waiting on them publish
        for feature in self.features:
            await feature.shutdown()
        await self.models.close()

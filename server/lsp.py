"""The language server: documents in, diagnostics and hovers out. Thin by design; the work is in workflows."""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.workspace import TextDocument, Workspace

from margin.workflows import readability
from margin.workflows.manuscript.boundary import ReadBoundary, project_folder
from margin.workflows.manuscript.model import Manuscript
from margin.workflows.manuscript.source import Position, normalize_uri, uri_to_path
from margin.workflows.readability import ReadabilityCache

from . import __version__, logs
from .diagnostics import document_diagnostics, hover_markdown
from .documents import Analyzer, DocumentIndex, NotAnalysable
from .review import ReviewCoordinator
from .rewrites import RewriteCoordinator
from .rpc import HardenedProtocol
from .settings import DEFAULTS, SECTION, Settings, ignored_message, keep_user_values, parse_settings

log = logging.getLogger(f"{logs.LOGGER_NAME}.lsp")

Handler = Callable[..., Awaitable[Any]]

_LOG_TYPES = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}


class MarginProtocol(HardenedProtocol, LanguageServerProtocol):
    """pygls' protocol behind margin's transport (transport.py), with JSON-RPC and LSP rules enforced
    (rpc.py): malformed messages and requests after shutdown get error responses instead of silence."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # pygls runs a command handler as a task of its own under another id, so $/cancelRequest for
        # workspace/executeCommand would only cancel the reply: commands register their task here by request id.
        self.command_tasks: dict[Any, asyncio.Task[Any]] = {}

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        task = self.command_tasks.pop(msg_id, None)
        super()._handle_cancel_notification(msg_id)
        if task is not None:
            task.cancel()

    @contextmanager
    def cancellable_command(self) -> Iterator[None]:
        """Within a command handler: let $/cancelRequest of its request cancel it."""
        msg_id = self._ctx_msg_id.get(None)
        task = asyncio.current_task()
        if msg_id is None or task is None:
            yield
            return
        self.command_tasks[msg_id] = task
        try:
            yield
        finally:
            self.command_tasks.pop(msg_id, None)

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):  # type: ignore[override]
        # margin counts positions in UTF-16, LSP's default that every client supports; without this pygls would
        # take the client's first preference (Neovim offers UTF-8 first).
        if params.capabilities.general is not None:
            params.capabilities.general.position_encodings = None
        result = yield from super().lsp_initialize(params)
        # Documents open only after initialize; from then on they count lines as LSP does.
        self._workspace.__class__ = LspLinesWorkspace
        return result


_LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


class LspLinesDocument(TextDocument):
    """pygls splits lines with str.splitlines, which also breaks at form feeds, U+2028 and U+0085; LSP breaks
    lines only at \\n, \\r\\n and \\r, so ranged edits from the client would land in the wrong place."""

    @property
    def lines(self) -> Sequence[str]:
        return tuple(match.group() for match in _LSP_LINE.finditer(self.source))


class LspLinesWorkspace(Workspace):
    def _create_text_document(
        self,
        doc_uri: str,
        source: str | None = None,
        version: int | None = None,
        language_id: str | None = None,
    ) -> TextDocument:
        return LspLinesDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self._position_codec,
        )


class MarginServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("margin", __version__, protocol_cls=MarginProtocol)
        self.documents = DocumentIndex(self._document_text)
        self.analyzer = Analyzer(self.documents, DEFAULTS.max_file_bytes)
        self.scores = ReadabilityCache()
        self.global_settings: Settings = DEFAULTS
        # What the editor's launch configuration sent (initializationOptions): the user's level, the only
        # source of user-only settings unless the client itself keeps workspaces from setting them.
        self.user_settings: Settings = DEFAULTS
        self.client_enforces_scopes = False
        self._ignored_reported: set[tuple[str, ...]] = set()
        self.publishing: set[asyncio.Future[list[types.Diagnostic]]] = set()
        self._document_settings: dict[str, Settings] = {}
        self._reported: set[str] = set()
        self.reviews = ReviewCoordinator(self)
        self.rewrites = RewriteCoordinator(self)

    _reporting_error = False

    def report_server_error(self, error: Exception, source: Any) -> None:
        """pygls shows out-of-band errors in the editor; sending that message can itself fail (the client went
        away, stdout is closed) and pygls would report that failure again, recursively, flooding stderr and
        blocking the exit. One report at a time, and only to stderr while one is being sent."""
        if self._reporting_error:
            log.error("while reporting an error: %s", error)
            return
        self._reporting_error = True
        try:
            super().report_server_error(error, source)
        except Exception as failure:
            log.error("cannot show the error %s in the editor: %s", error, failure)
        finally:
            self._reporting_error = False

    # -- client facts -------------------------------------------------------------------------------------------

    def _document_text(self, uri: str) -> tuple[str, int | None] | None:
        document = self.workspace.text_documents.get(uri)
        if document is None:
            return None
        return document.source, document.version

    @property
    def client_pulls_diagnostics(self) -> bool:
        text_document = self.client_capabilities.text_document
        return text_document is not None and text_document.diagnostic is not None

    @property
    def client_has_configuration(self) -> bool:
        workspace = self.client_capabilities.workspace
        return bool(workspace is not None and workspace.configuration)

    # -- messages -----------------------------------------------------------------------------------------------

    def tell_user(self, message: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        log.warning(message)
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"margin: {message}"))

    def send_log(self, level: int, message: str) -> None:
        self.window_log_message(
            types.LogMessageParams(type=_LOG_TYPES.get(level, types.MessageType.Log), message=message)
        )

    # -- settings -----------------------------------------------------------------------------------------------

    def apply_user_settings(self, initialization_options: Any) -> None:
        """initializationOptions: the user's own settings, and whether the client enforces setting scopes."""
        if isinstance(initialization_options, dict):
            # The VS Code extension declares user-only settings machine-scoped, so VS Code never lets a
            # workspace set them; it says so here and its workspace/configuration answers are then trusted.
            self.client_enforces_scopes = initialization_options.get("enforcesSettingScopes") is True
        settings, problems = parse_settings(initialization_options)
        self.user_settings = settings
        self._set_global(settings, problems)

    def apply_global_settings(self, raw: Any) -> None:
        """Settings pushed by a client without workspace/configuration (didChangeConfiguration)."""
        settings, problems = parse_settings(raw)
        self._set_global(self.workspace_level(settings, "workspace/didChangeConfiguration"), problems)

    def _set_global(self, settings: Settings, problems: list[str]) -> None:
        """Settings for the whole server: they also set the log level, the size limit for files read from disk
        and the folders outside the workspace that may be read."""
        self.global_settings = settings
        self._report(problems)
        logs.set_level(settings.log_level)
        self.analyzer.max_bytes = settings.max_file_bytes
        self.update_read_boundary()

    def workspace_level(self, settings: Settings, source: str) -> Settings:
        """Settings from a channel a project can write: user-only values come from the user's settings."""
        if self.client_enforces_scopes:
            return settings
        settings, ignored = keep_user_values(settings, self.user_settings)
        if ignored and tuple(ignored) not in self._ignored_reported:
            self._ignored_reported.add(tuple(ignored))
            self.tell_user(ignored_message(ignored, source))
        return settings

    def workspace_folders(self) -> list[Path]:
        try:
            workspace = self.workspace
        except RuntimeError:  # before initialize
            return []
        folders = [uri_to_path(folder.uri) for folder in workspace.folders.values()]
        if not folders and workspace.root_uri:
            folders = [uri_to_path(workspace.root_uri)]
        return [folder for folder in folders if folder is not None]

    def update_read_boundary(self) -> None:
        """Files may be read inside the workspace folders, the user's allowed folders, and the project folder
        of an open document that lies outside every workspace folder (an editor opened on a single file)."""
        folders = self.workspace_folders()
        boundary = ReadBoundary(folders, self.global_settings.allowed_folders)
        extra = []
        for uri in self.documents.uris():
            path = uri_to_path(uri)
            if path is not None and path.is_absolute() and not boundary.allows(path):
                extra.append(project_folder(path))
        self.analyzer.provider.boundary = boundary.with_folders(extra)

    def _report(self, problems: list[str]) -> None:
        """One message for a settings object however many problems it has (each is in the log)."""
        if not problems:
            return
        for problem in problems[1:]:
            log.info("%s", problem)
        more = (
            f" (and {len(problems) - 1} more problem(s) with the settings: see margin's log)"
            if len(problems) > 1
            else ""
        )
        self.tell_user(problems[0] + more)

    async def settings_for(self, uri: str) -> Settings:
        """Settings in force for a document: workspace/configuration scoped to it when the client has it."""
        key = normalize_uri(uri)
        cached = self._document_settings.get(key)
        if cached is not None:
            return cached
        settings = self.global_settings
        if self.client_has_configuration:
            try:
                answer = await asyncio.wait_for(
                    self.workspace_configuration_async(
                        types.ConfigurationParams(
                            items=[types.ConfigurationItem(scope_uri=uri, section=SECTION)]
                        )
                    ),
                    timeout=5,
                )
                if answer and answer[0] is not None:
                    # Scoped to this document only: nothing here changes other documents' behaviour.
                    settings, problems = parse_settings(answer[0])
                    self._report(problems)
                    settings = self.workspace_level(settings, "workspace/configuration")
            except asyncio.CancelledError:
                raise
            except Exception as error:  # a client that fails this request still gets diagnostics
                log.info("workspace/configuration failed (%s); using initialization settings", error)
        self._document_settings[key] = settings
        return settings

    def forget_settings(self) -> None:
        self._document_settings.clear()

    # -- analysis -----------------------------------------------------------------------------------------------

    async def manuscript(self, uri: str, settings: Settings) -> Manuscript | None:
        """The manuscript for a document, or None (after telling the user once) when it is not analysable."""
        source = self.documents.get(uri)
        if source is None:
            return None
        limit = settings.max_file_bytes
        try:
            # Parsing happens in a worker thread, so no document's parse, however large or hostile, holds up
            # the answers about another; an unchanged manuscript is served straight from the analyzer.
            manuscript = self.analyzer.cached(uri)
            if manuscript is None:
                manuscript = await asyncio.to_thread(self.analyzer.manuscript, uri, limit)
        except NotAnalysable as reason:
            key = normalize_uri(uri)
            if key not in self._reported:
                self._reported.add(key)
                self.tell_user(str(reason), types.MessageType.Info)
            return None
        except Exception:
            # The parsers are built never to raise; if one does, the editor must keep working.
            log.exception("analysis of %s failed", uri)
            return None
        self._reported.discard(normalize_uri(uri))
        return manuscript

    async def diagnostics(self, uri: str) -> list[types.Diagnostic]:
        settings = await self.settings_for(uri)
        manuscript = await self.manuscript(uri, settings)
        if manuscript is None:
            return []
        # Readability of every paragraph: milliseconds per paragraph the first time, so off the event loop.
        found = await asyncio.to_thread(document_diagnostics, manuscript, uri, settings, self.scores)
        if self.client_pulls_diagnostics and not self.pull_refresh_supported:
            return found  # findings reach this client by push (see refresh)
        return found + self.reviews.diagnostics(manuscript, uri, settings)

    @property
    def pull_refresh_supported(self) -> bool:
        workspace = self.client_capabilities.workspace
        return bool(workspace and workspace.diagnostics and workspace.diagnostics.refresh_support)

    async def _push_findings(self, uri: str) -> None:
        """A pulling client that cannot be asked to pull again gets findings pushed (readability stays pulled)."""
        settings = await self.settings_for(uri)
        manuscript = await self.manuscript(uri, settings)
        source = self.documents.get(uri)
        if manuscript is None or source is None:
            return
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri,
                diagnostics=self.reviews.diagnostics(manuscript, uri, settings),
                version=source.version,
            )
        )

    async def refresh(self, uri: str) -> None:
        """New findings for a document: push them, or ask a pulling client to pull again."""
        if not self.client_pulls_diagnostics:
            await self.publish(uri)
        elif self.pull_refresh_supported:
            self._request_pull()
        else:
            await self._push_findings(uri)

    def _request_pull(self) -> None:
        if self.pull_refresh_supported:
            self.workspace_diagnostic_refresh(None)

    async def publish(self, uri: str) -> None:
        if self.client_pulls_diagnostics:
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
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=source.version)
        )

    async def refresh_all(self) -> None:
        if self.client_pulls_diagnostics:
            self._request_pull()
            return
        for uri in self.documents.uris():
            await self.publish(uri)


server = MarginServer()


@server.feature(types.INITIALIZE)
def on_initialize(ls: MarginServer, params: types.InitializeParams) -> None:
    ls.apply_user_settings(params.initialization_options)


@server.feature(types.INITIALIZED)
async def on_initialized(ls: MarginServer, params: types.InitializedParams) -> None:
    handler = logs.EditorLogHandler(ls.send_log)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logging.getLogger(logs.LOGGER_NAME).addHandler(handler)
    log.info(
        "margin %s ready (%s diagnostics)", __version__, "pull" if ls.client_pulls_diagnostics else "push"
    )
    # Loading the pronouncing dictionary takes about half a second: do it now, off the event loop.
    await asyncio.to_thread(readability.warm_up)


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
async def on_open(ls: MarginServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.documents.opened(params.text_document.uri)
    ls.update_read_boundary()
    ls.analyzer.changed()
    await ls.publish(params.text_document.uri)
    ls.reviews.schedule(params.text_document.uri, "open")


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
async def on_change(ls: MarginServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.analyzer.changed(uri)
    if ls.reviews.tasks:  # an edited paragraph's review is for text that no longer exists: stop it
        manuscript = await ls.manuscript(uri, await ls.settings_for(uri))
        if manuscript is not None:
            ls.reviews.cancel_stale(uri, manuscript)
    await ls.publish(uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
async def on_save(ls: MarginServer, params: types.DidSaveTextDocumentParams) -> None:
    ls.analyzer.changed()
    await ls.publish(params.text_document.uri)
    ls.reviews.schedule(params.text_document.uri, "save")


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def on_close(ls: MarginServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.documents.closed(uri)
    ls.reviews.cancel_document(uri)
    ls.analyzer.forget(uri)
    ls.analyzer.changed()
    if not ls.client_pulls_diagnostics:
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(
    types.TEXT_DOCUMENT_DIAGNOSTIC,
    types.DiagnosticOptions(identifier=SECTION, inter_file_dependencies=True, workspace_diagnostics=False),
)
async def on_pull_diagnostics(
    ls: MarginServer, params: types.DocumentDiagnosticParams
) -> types.FullDocumentDiagnosticReport:
    return types.FullDocumentDiagnosticReport(items=await ls.diagnostics(params.text_document.uri))


@server.feature(types.TEXT_DOCUMENT_HOVER)
async def on_hover(ls: MarginServer, params: types.HoverParams) -> types.Hover | None:
    uri = params.text_document.uri
    manuscript = await ls.manuscript(uri, await ls.settings_for(uri))
    if manuscript is None:
        return None
    finding = ls.reviews.hover(manuscript, uri, params.position.line, params.position.character)
    if finding is not None:
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=finding))
    position = Position(params.position.line, params.position.character)
    key = normalize_uri(uri)
    for paragraph in manuscript.paragraphs:
        if normalize_uri(paragraph.uri) == key and paragraph.contains(position):
            scores = ls.scores.score(paragraph.text)
            return types.Hover(
                contents=types.MarkupContent(
                    kind=types.MarkupKind.Markdown, value=hover_markdown(paragraph, scores)
                )
            )
    return None


@server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
async def on_workspace_folders(ls: MarginServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    ls.update_read_boundary()  # pygls has already updated its folders
    ls.analyzer.changed()
    await ls.refresh_all()


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def on_configuration(ls: MarginServer, params: types.DidChangeConfigurationParams) -> None:
    ls.forget_settings()
    ls.reviews.retry_now()  # new settings may have fixed the endpoint
    if params.settings is not None and not ls.client_has_configuration:
        ls.apply_global_settings(params.settings)
    await ls.refresh_all()


REVIEW_PARAGRAPH = "margin.reviewParagraph"
REVIEW_DOCUMENT = "margin.reviewDocument"
DISMISS_FINDING = "margin.dismissFinding"
SIMPLIFY_PARAGRAPH = "margin.simplifyParagraph"
SIMPLIFY_DOCUMENT = "margin.simplifyDocument"
LAY_ARTICLE = "margin.generateLayArticle"
STATUS = "margin.status"


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(
        code_action_kinds=[
            types.CodeActionKind.QuickFix,
            types.CodeActionKind.RefactorRewrite,
            types.CodeActionKind.Source,
        ]
    ),
)
async def on_code_action(ls: MarginServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """Listing actions costs no model call: the work runs when the user picks one (a command)."""
    uri = params.text_document.uri
    actions: list[types.CodeAction] = []
    for diagnostic in params.context.diagnostics:
        data = diagnostic.data if isinstance(diagnostic.data, dict) else {}
        if diagnostic.source == "margin" and data.get("dismissal"):
            actions.append(
                types.CodeAction(
                    title=f"Dismiss this finding ({data.get('label', 'margin')})",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    command=types.Command(
                        title="Dismiss this finding",
                        command=DISMISS_FINDING,
                        arguments=[uri, data["dismissal"]],
                    ),
                )
            )
    manuscript = await ls.manuscript(uri, await ls.settings_for(uri))
    if manuscript is not None:
        start = params.range.start
        key = normalize_uri(uri)
        for paragraph in manuscript.paragraphs:
            if normalize_uri(paragraph.uri) == key and paragraph.contains(
                Position(start.line, start.character)
            ):
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
                actions.append(
                    types.CodeAction(
                        title="Simplify paragraph",
                        kind=types.CodeActionKind.RefactorRewrite,
                        command=types.Command(
                            title="Simplify paragraph",
                            command=SIMPLIFY_PARAGRAPH,
                            arguments=[uri, start.line, start.character],
                        ),
                    )
                )
                break
        for title, command in (
            ("Simplify document", SIMPLIFY_DOCUMENT),
            ("Generate lay article", LAY_ARTICLE),
        ):
            actions.append(
                types.CodeAction(
                    title=title,
                    kind=types.CodeActionKind.Source,
                    command=types.Command(title=title, command=command, arguments=[uri]),
                )
            )
    # The client may ask for some kinds only (e.g. quick fixes for a diagnostic); kinds are hierarchical.
    only = params.context.only
    if only:
        wanted = [_kind(kind) for kind in only]
        actions = [
            action
            for action in actions
            if any(_kind(action.kind) == kind or _kind(action.kind).startswith(f"{kind}.") for kind in wanted)
        ]
    return actions


def _kind(kind: object) -> str:
    return str(getattr(kind, "value", kind))


def cancellable_command(name: str) -> Callable[[Handler], Handler]:
    """server.command for long-running commands: $/cancelRequest of the request cancels the handler's task."""

    def register(handler: Handler) -> Handler:
        @functools.wraps(handler)  # pygls reads the handler's parameters to convert the arguments
        async def run(ls: MarginServer, *arguments: Any) -> Any:
            with ls.protocol.cancellable_command():
                return await handler(ls, *arguments)

        server.command(name)(run)
        return handler

    return register


@cancellable_command(REVIEW_PARAGRAPH)
async def review_paragraph_command(ls: MarginServer, uri: str, line: int, character: int) -> dict[str, int]:
    manuscript = await ls.manuscript(uri, await ls.settings_for(uri))
    paragraph = manuscript.paragraph_at(uri, Position(line, character)) if manuscript else None
    if paragraph is None:
        ls.tell_user("there is no paragraph to review at that position", types.MessageType.Info)
        return {"reviewed": 0}
    return {"reviewed": await ls.reviews.review(uri, [paragraph], interactive=True)}


@cancellable_command(REVIEW_DOCUMENT)
async def review_document_command(ls: MarginServer, uri: str) -> dict[str, int]:
    return {"reviewed": await ls.reviews.review(uri, interactive=True)}


@cancellable_command(SIMPLIFY_PARAGRAPH)
async def simplify_paragraph_command(ls: MarginServer, uri: str, line: int, character: int) -> dict[str, Any]:
    return (await ls.rewrites.simplify_paragraph(uri, line, character)).to_json()


@cancellable_command(SIMPLIFY_DOCUMENT)
async def simplify_document_command(ls: MarginServer, uri: str) -> dict[str, Any]:
    return (await ls.rewrites.simplify_document(uri)).to_json()


@cancellable_command(LAY_ARTICLE)
async def lay_article_command(ls: MarginServer, uri: str) -> dict[str, Any]:
    return (await ls.rewrites.lay_article(uri)).to_json()


@server.command(STATUS)
async def status_command(ls: MarginServer) -> dict[str, Any]:
    """What an editor's status bar shows: the endpoint setting, the endpoints in use, the work running. No
    network: only what the server already knows."""
    return {
        "endpoint": ls.global_settings.values["llm.endpoint"] or "auto",
        "endpoints": ls.reviews.endpoints_in_use(),
        "reviews": sum(not task.done() for task in ls.reviews.tasks.values()),
        "rewrites": len(ls.rewrites.running),
        "problem": ls.reviews.problem(),  # why models cannot run now (nothing answers, a crash), or None
    }


@server.command(DISMISS_FINDING)
async def dismiss_finding_command(ls: MarginServer, uri: str, dismissal: str) -> dict[str, bool]:
    manuscript = await ls.manuscript(uri, await ls.settings_for(uri))
    dismissed = manuscript is not None and ls.reviews.dismiss(uri, manuscript, dismissal)
    if dismissed:
        await ls.refresh(uri)
    return {"dismissed": dismissed}


@server.feature(types.SHUTDOWN)
async def on_shutdown(ls: MarginServer, params: None) -> None:
    if ls.publishing:  # a document opened just before: its diagnostics are seconds away at most
        await asyncio.wait(list(ls.publishing), timeout=5)
        await asyncio.sleep(0)  # and the handlers waiting on them publish
    for task in list(ls.rewrites.running.values()):
        task.cancel()
    await ls.reviews.close()


def serve_stdio() -> int:
    """Serve the editor on stdin/stdout until `exit`; the exit code LSP prescribes (0 only after shutdown)."""
    from . import transport  # not pygls' start_io: see transport.py for what it gets wrong

    logs.configure()
    return transport.serve_stdio(server)


def serve_tcp(port: int, token_file: Path | None = None) -> int:
    """Serve one client on 127.0.0.1:port that presents the token (see transport.serve_tcp)."""
    from . import transport

    logs.configure()
    return transport.serve_tcp(server, port, token_file)

"""The language server: each LSP method registered once, fanned out to the features (server/features/).

The session (session.py) holds the editor's state; features answer. This module only keeps the session up to
date with the client's events and merges the features' answers, so adding a feature never touches it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from margin.workflows import readability
from margin.workflows.manuscript.source import Position

from . import __version__, logs
from .features import FEATURES, Command, Feature
from .features.base import hover_extent, implements
from .protocol import MarginProtocol
from .session import Session
from .settings import SECTION

log = logging.getLogger(f"{logs.LOGGER_NAME}.lsp")


class MarginServer(LanguageServer):
    def __init__(self, features: Sequence[type[Feature]] = FEATURES) -> None:
        super().__init__("margin", __version__, protocol_cls=MarginProtocol)
        self.session = Session(self)
        self.session.features = [feature(self.session) for feature in features]
        _register(self)

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


# -- the session's events -------------------------------------------------------------------------------------


def on_initialize(ls: MarginServer, params: types.InitializeParams) -> None:
    ls.session.apply_user_settings(params.initialization_options)


async def on_initialized(ls: MarginServer, params: types.InitializedParams) -> None:
    ls.session.log_to_editor()
    mode = "pull" if ls.session.pulls_diagnostics else "push"
    log.info("margin %s ready (%s diagnostics)", __version__, mode)
    # Loading the pronouncing dictionary takes about half a second: do it now, off the event loop.
    await asyncio.to_thread(readability.warm_up)


async def on_open(ls: MarginServer, params: types.DidOpenTextDocumentParams) -> None:
    session, uri = ls.session, params.text_document.uri
    session.documents.opened(uri)
    session.update_read_boundary()
    session.analyzer.changed()
    await session.publish(uri)
    for feature in session.features:
        await feature.opened(uri)


async def on_change(ls: MarginServer, params: types.DidChangeTextDocumentParams) -> None:
    session, uri = ls.session, params.text_document.uri
    session.analyzer.changed(uri)
    for feature in session.features:
        await feature.changed(uri)
    await session.publish(uri)


async def on_save(ls: MarginServer, params: types.DidSaveTextDocumentParams) -> None:
    session, uri = ls.session, params.text_document.uri
    session.analyzer.changed()
    await session.publish(uri)
    for feature in session.features:
        await feature.saved(uri)


def on_close(ls: MarginServer, params: types.DidCloseTextDocumentParams) -> None:
    session, uri = ls.session, params.text_document.uri
    session.documents.closed(uri)
    for feature in session.features:
        feature.closed(uri)
    session.analyzer.forget(uri)
    session.analyzer.changed()
    session.clear(uri)


async def on_workspace_folders(ls: MarginServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    ls.session.update_read_boundary()  # pygls has already updated its folders
    ls.session.analyzer.changed()
    await ls.session.refresh_all()


async def on_configuration(ls: MarginServer, params: types.DidChangeConfigurationParams) -> None:
    session = ls.session
    session.configuration.forget()
    session.models.retry_now()  # new settings may have fixed the endpoint
    if params.settings is not None and not session.has_configuration:
        session.apply_global_settings(params.settings)
    for feature in session.features:
        feature.settings_changed()
    await session.refresh_all()


async def on_shutdown(ls: MarginServer, params: None) -> None:
    await ls.session.shutdown()


# -- requests, answered by the features ---------------------------------------------------------------------------


async def on_pull_diagnostics(
    ls: MarginServer, params: types.DocumentDiagnosticParams
) -> types.FullDocumentDiagnosticReport:
    return types.FullDocumentDiagnosticReport(items=await ls.session.diagnostics(params.text_document.uri))


async def on_hover(ls: MarginServer, params: types.HoverParams) -> types.Hover | None:
    """The innermost answer wins (a finding's phrase over its paragraph's readability); on equal ranges, the
    feature with the higher hover_precedence."""
    view = await ls.session.view(params.text_document.uri)
    if view is None:
        return None
    position = Position(params.position.line, params.position.character)
    answers = [
        (hover_extent(hover), -feature.hover_precedence, hover)
        for feature in _having(ls, "hover")
        if (hover := await feature.hover(view, position))
    ]
    return min(answers, key=lambda answer: answer[:2], default=(None, None, None))[2]


async def on_code_action(ls: MarginServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    view = await ls.session.view(params.text_document.uri)
    actions = [
        action
        for feature in _having(ls, "code_actions")
        for action in await feature.code_actions(params, view)
    ]
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


async def on_inlay_hints(ls: MarginServer, params: types.InlayHintParams) -> list[types.InlayHint]:
    view = await ls.session.view(params.text_document.uri)
    if view is None:
        return []
    return [
        hint
        for feature in _having(ls, "inlay_hints")
        for hint in await feature.inlay_hints(view, params.range)
    ]


async def on_code_lens(ls: MarginServer, params: types.CodeLensParams) -> list[types.CodeLens]:
    view = await ls.session.view(params.text_document.uri)
    if view is None:
        return []
    return [lens for feature in _having(ls, "code_lenses") for lens in await feature.code_lenses(view)]


def _having(ls: MarginServer, hook: str) -> list[Feature]:
    return [feature for feature in ls.session.features if implements(type(feature), hook)]


# -- registration -------------------------------------------------------------------------------------------------

Handler = Callable[..., Any]

# LSP methods registered only when some feature implements the hook behind them (and with these options).
_OPTIONAL: tuple[tuple[str, str, Handler, Any], ...] = (
    ("hover", types.TEXT_DOCUMENT_HOVER, on_hover, None),
    (
        "code_actions",
        types.TEXT_DOCUMENT_CODE_ACTION,
        on_code_action,
        types.CodeActionOptions(
            code_action_kinds=[
                types.CodeActionKind.QuickFix,
                types.CodeActionKind.RefactorRewrite,
                types.CodeActionKind.Source,
            ]
        ),
    ),
    (
        "inlay_hints",
        types.TEXT_DOCUMENT_INLAY_HINT,
        on_inlay_hints,
        types.InlayHintOptions(resolve_provider=False),
    ),
    (
        "code_lenses",
        types.TEXT_DOCUMENT_CODE_LENS,
        on_code_lens,
        types.CodeLensOptions(resolve_provider=False),
    ),
)


def _register(server: MarginServer) -> None:
    always: tuple[tuple[str, Handler, Any], ...] = (
        (types.INITIALIZE, on_initialize, None),
        (types.INITIALIZED, on_initialized, None),
        (types.TEXT_DOCUMENT_DID_OPEN, on_open, None),
        (types.TEXT_DOCUMENT_DID_CHANGE, on_change, None),
        (types.TEXT_DOCUMENT_DID_SAVE, on_save, None),
        (types.TEXT_DOCUMENT_DID_CLOSE, on_close, None),
        (types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, on_workspace_folders, None),
        (types.WORKSPACE_DID_CHANGE_CONFIGURATION, on_configuration, None),
        (types.SHUTDOWN, on_shutdown, None),
        (
            types.TEXT_DOCUMENT_DIAGNOSTIC,
            on_pull_diagnostics,
            types.DiagnosticOptions(
                identifier=SECTION, inter_file_dependencies=True, workspace_diagnostics=False
            ),
        ),
    )
    for method, handler, options in always:
        server.feature(method, options)(handler)
    features = [type(feature) for feature in server.session.features]
    for hook, method, handler, options in _OPTIONAL:
        if any(implements(feature, hook) for feature in features):
            server.feature(method, options)(handler)
    for feature in server.session.features:
        for name, command in feature.commands().items():
            server.command(name)(_handler(server, command))


def _handler(server: MarginServer, command: Command) -> Callable[..., Awaitable[Any]]:
    """A command's handler as pygls takes it (a function: pygls marks it with attributes, which a bound method
    cannot take). A cancellable one is stopped by $/cancelRequest of its request (see MarginProtocol)."""

    @functools.wraps(command.handler)  # pygls reads the handler's parameters to convert the arguments
    async def run(*arguments: Any) -> Any:
        if not command.cancellable:
            return await command.handler(*arguments)
        with server.protocol.cancellable_command():
            return await command.handler(*arguments)

    return run


server = MarginServer()


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

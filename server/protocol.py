"""pygls' protocol and workspace as margin needs them: JSON-RPC and LSP rules enforced (rpc.py), commands
cancellable by their request id, UTF-16 positions, and lines split where LSP splits them."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.workspace import TextDocument, Workspace

from .rpc import HardenedProtocol


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

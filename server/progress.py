"""The progress protocol (application/progress.py) as LSP work-done progress, cancellable from the editor. A
client without progress support, or one that refuses the token, still gets the work done, just without the bar."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from lsprotocol import types

from .application.progress import percentage

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger("margin.progress")


class LspProgress:
    def __init__(self, server: LanguageServer, kind: str, on_cancel: Callable[[], object]) -> None:
        self.server = server
        self.kind = kind
        self.on_cancel = on_cancel
        self.token: str | None = None
        self.total: int | None = None

    async def begin(self, title: str, total: int | None = None) -> None:
        self.total = total
        window = self.server.client_capabilities.window
        if window is None or not window.work_done_progress:
            return
        token = f"margin-{self.kind}-{uuid.uuid4().hex[:8]}"
        try:
            await asyncio.wait_for(self.server.work_done_progress.create_async(token), timeout=5)
        except Exception as error:
            log.debug("no progress for this %s: %s", self.kind, error)
            return
        self.token = token
        self.server.work_done_progress.begin(
            token,
            types.WorkDoneProgressBegin(title="margin", message=title, cancellable=True, percentage=0),
        )
        cancelled = self.server.work_done_progress.tokens.get(token)
        if cancelled is not None:
            cancelled.add_done_callback(lambda _: self.on_cancel())

    def step(self, message: str, done: int | None = None) -> None:
        if self.token is not None:
            self.server.work_done_progress.report(
                self.token,
                types.WorkDoneProgressReport(message=message, percentage=percentage(done, self.total)),
            )

    def end(self, message: str) -> None:
        if self.token is not None:
            self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
            self.token = None

"""Work-done progress for long runs, cancellable from the editor. A client without progress support, or one that
refuses the token, still gets the work done, just without the bar."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger("margin.progress")


class Progress:
    def __init__(self, server: LanguageServer, kind: str) -> None:
        self.server = server
        self.kind = kind
        self.token: str | None = None

    async def begin(self, message: str, on_cancel: Callable[[], object]) -> None:
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
            types.WorkDoneProgressBegin(title="margin", message=message, cancellable=True, percentage=0),
        )
        cancelled = self.server.work_done_progress.tokens.get(token)
        if cancelled is not None:
            cancelled.add_done_callback(lambda _: on_cancel())

    def report(self, message: str, percentage: int | None = None) -> None:
        if self.token is not None:
            self.server.work_done_progress.report(
                self.token, types.WorkDoneProgressReport(message=message, percentage=percentage)
            )

    def end(self, message: str) -> None:
        if self.token is not None:
            self.server.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))
            self.token = None

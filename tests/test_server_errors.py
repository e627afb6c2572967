"""Errors the server cannot show in the editor end on stderr once: they never loop (a closed stdout made pygls
report its own failure to report, recursively, flooding stderr and blocking the exit)."""

from __future__ import annotations

from typing import Any

import pytest

from margin.server.lsp import MarginServer


class ClosedStdout:
    def write(self, data: bytes) -> None:
        raise BrokenPipeError("stdout is closed")

    def close(self) -> None:
        return None


def test_an_error_that_cannot_be_sent_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    server = MarginServer()
    server.protocol.writer = ClosedStdout()  # type: ignore[assignment]
    sends: list[Any] = []
    send = server.protocol._send_data

    def counting(data: Any) -> None:
        sends.append(data)
        send(data)

    server.protocol._send_data = counting  # type: ignore[method-assign]
    server.report_server_error(RuntimeError("boom"), None)

    assert len(sends) == 1  # the showMessage; its failure is not reported to the editor again
    assert (
        "cannot show the error boom in the editor" in caplog.text or "while reporting an error" in caplog.text
    )

"""One progress protocol for long runs: begin, a step at a time, end. The editor shows it as LSP work-done
progress (server/progress.py), the terminal as one line on stderr (server/cli/progress.py)."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    async def begin(self, title: str, total: int | None = None) -> None:
        """Work starts; `total` when the steps can be counted (paragraphs), else None (agent steps)."""

    def step(self, message: str, done: int | None = None) -> None:
        """One step; `done` of `total` when counted."""

    def end(self, message: str) -> None:
        """The work ended (done, cancelled or failed)."""


class NoProgress:
    """For callers that show nothing (tests, benchmarks, batch evaluation)."""

    async def begin(self, title: str, total: int | None = None) -> None:
        return None

    def step(self, message: str, done: int | None = None) -> None:
        return None

    def end(self, message: str) -> None:
        return None


def percentage(done: int | None, total: int | None) -> int | None:
    if done is None or not total:
        return None
    return min(100, done * 100 // total)

"""The progress protocol (margin.server.application.progress) in a terminal: one line of stderr, and only when
stderr is a terminal (never in logs, pipes or CI). Counted work (paragraphs, examples) shows a bar; work that
cannot be counted (an agent's steps) shows the current step."""

from __future__ import annotations

import sys
from typing import TextIO

BAR_WIDTH = 30
LONGEST_STEP = 200  # characters of a step line, so that it stays on one terminal line


class TerminalProgress:
    def __init__(self, label: str | None = None, unit: str = "", stream: TextIO | None = None) -> None:
        """`label` names the work on the line (else the title given to begin); `unit` follows the counts."""
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.title = label or ""
        self.total: int | None = None
        self.steps = 0
        self.showing = False  # a line is drawn and not ended yet

    async def begin(self, title: str, total: int | None = None) -> None:
        self.title = self.label or title
        self.total = total
        self.steps = 0

    def step(self, message: str, done: int | None = None) -> None:
        self.steps += 1
        if not self.enabled:
            return
        if self.total is None:
            self._write(f"\r\033[K{self.title} [{self.steps}] {message}"[:LONGEST_STEP])
            self.showing = True
            return
        if not self.total:
            return
        done = self.steps if done is None else done
        filled = BAR_WIDTH * min(done, self.total) // self.total
        counts = f"{done}/{self.total}" + (f" {self.unit}" if self.unit else "")
        finished = done >= self.total
        self._write(
            f"\r{self.title} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {counts}"
            + ("\n" if finished else "")
        )
        self.showing = not finished

    def end(self, message: str) -> None:
        """A finished bar stays on its line; a step line is cleared."""
        if self.enabled and self.showing:
            self._write("\n" if self.total is not None else "\r\033[K")
        self.showing = False

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

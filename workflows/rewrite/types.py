"""What the rewriting pipelines return, and the knobs they share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from margin.workflows.manuscript.loader import is_markdown

# Pipelines announce each agent step ("Reader taking notes, iteration 2/3") through this callback; the server
# turns it into work-done progress, the CLI into a progress line.
StepCallback = Callable[[str], None]


def no_steps(_: str) -> None:
    return None


class Language(StrEnum):
    LATEX = "latex"
    MARKDOWN = "markdown"

    @classmethod
    def of(cls, file_name: str) -> Language:
        """Markdown for a file with a Markdown suffix (the manuscript loader's table), else LaTeX."""
        return cls.MARKDOWN if is_markdown(file_name) else cls.LATEX


class RewriteStatus(StrEnum):
    REWRITTEN = "rewritten"
    UNCHANGED = "unchanged"  # the agents found nothing to change
    REFUSED = "refused"  # the rewrite would lose a citation, math or a link, or add a command, link or tag
    FAILED = "failed"  # the models did not produce a usable rewrite


@dataclass
class Rewrite:
    """One paragraph's outcome. `original` and `text` are source text (LaTeX or Markdown): the edit replaces
    the paragraph's source span with `text` when the status is REWRITTEN."""

    original: str
    text: str
    status: RewriteStatus
    message: str = ""
    missing: list[str] = field(default_factory=list)  # what a refused rewrite would have lost
    failures: list[str] = field(default_factory=list)  # model failures met on the way (the run went on)
    added: list[str] = field(default_factory=list)  # what a refused rewrite would have added (commands...)

    @property
    def changed(self) -> bool:
        return self.status is RewriteStatus.REWRITTEN and self.text != self.original

"""The prompt templates in margin.prompts: one plain-text file per agent role, with $placeholders; and how text
that is not ours (the manuscript, retrieved passages, other agents' answers) goes into a prompt: fenced, as data.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files
from string import Template

_BACKTICKS = re.compile(r"`+")
_BAR = re.compile(r"`{3,}")


@lru_cache(maxsize=64)
def prompt(name: str) -> str:
    """The text of prompts/NAME.txt, as shipped in the package."""
    return files("margin.prompts").joinpath(f"{name}.txt").read_text(encoding="utf-8").strip()


def render(name: str, **values: str) -> str:
    return Template(prompt(name)).substitute(values)


def role_prompt(name: str, **values: str) -> str:
    """A role's system prompt: its instructions, then the rule that fenced text is data (the same words for
    every role, so the shared part of the prompts stays the same for the server's prefix cache)."""
    return f"{render(name, **values)}\n\n{prompt('untrusted')}"


def fence(text: str) -> str:
    """`text` between two lines of backticks longer than any run of backticks in it (at least three), so
    nothing in the text can close the block early or stand outside it. The fence depends on the text alone, not
    on a random nonce: the same text gets the same fence, and prompts keep their shared prefix."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}\n{text}\n{bar}"


def fenced_blocks(text: str) -> list[tuple[int, int, int]]:
    """The fenced blocks of `text`, in order: where each opening line starts, and where its content starts and
    ends. A block opens with a line of three or more backticks and closes with the same line; one pass."""
    blocks: list[tuple[int, int, int]] = []
    bar, opened, position = "", 0, 0
    for line in text.split("\n"):
        if not bar and _BAR.fullmatch(line):
            bar, opened = line, position
        elif bar and line == bar:
            blocks.append((opened, opened + len(bar) + 1, max(position - 1, opened + len(bar) + 1)))
            bar = ""
        position += len(line) + 1
    return blocks


def fenced_after(text: str, marker: str) -> str | None:
    """What `fence` wrapped right after the last `marker` that stands outside every fenced block of `text` (a
    prompt), or None: what a scripted agent or a test reads back. A marker inside fenced text (a manuscript
    imitating the prompt) is the text's, never the prompt's."""
    found, previous_end = None, 0
    for opened, start, end in fenced_blocks(text):
        if text.startswith(marker, opened - len(marker)) and opened - len(marker) >= previous_end:
            found = text[start:end]
        previous_end = end
    return found

"""The prompt templates in margin.prompts: one plain-text file per agent role, with $placeholders."""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files
from string import Template


@lru_cache(maxsize=64)
def prompt(name: str) -> str:
    """The text of prompts/NAME.txt, as shipped in the package."""
    return files("margin.prompts").joinpath(f"{name}.txt").read_text(encoding="utf-8").strip()


def render(name: str, **values: str) -> str:
    return Template(prompt(name)).substitute(values)

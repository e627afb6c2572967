"""Findings and the evidence behind them; what the feedback pipeline returns for a paragraph."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from margin.workflows.llm.types import Usage

# What a model's answer may put into a finding, its evidence or a plan: findings become diagnostics and hovers
# in the editor and their questions become searches, so each field is bounded (a genuine review is a few
# sentences, a question one). A longer review or question is refused; reasoning and evidence are shortened.
MAX_REVIEW_CHARS = 2000
MAX_REASONING_CHARS = 2000
MAX_EVIDENCE_CHARS = 2000
MAX_QUESTION_CHARS = 500
MAX_LABEL_CHARS = 100


def shortened(text: str, limit: int) -> str:
    """`text`, cut to at most `limit` characters (ending in an ellipsis when cut)."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class WeaknessType(StrEnum):
    REPLICABILITY = "Replicability"
    ORIGINALITY = "Originality"
    SOUNDNESS = "Empirical and Theoretical Soundness"
    COMPARISON = "Meaningful Comparison"
    SUBSTANCE = "Substance"

    @classmethod
    def parse(cls, value: str) -> WeaknessType | None:
        """A label as models write it: the name in any case or spacing, or a known short form ("soundness")."""
        wanted = " ".join(re.sub(r"[_\-/]|\band\b", " ", value.casefold()).split())
        wanted = wanted.replace("empirical theoretical", "empirical and theoretical")
        for member in cls:
            if member.value.casefold() == wanted:
                return member
        return _LABEL_ALIASES.get(wanted)

    @property
    def code(self) -> str:
        """The diagnostic code: short and stable."""
        return {
            WeaknessType.REPLICABILITY: "replicability",
            WeaknessType.ORIGINALITY: "originality",
            WeaknessType.SOUNDNESS: "soundness",
            WeaknessType.COMPARISON: "comparison",
            WeaknessType.SUBSTANCE: "substance",
        }[self]


_LABEL_ALIASES = {
    "replicability": WeaknessType.REPLICABILITY,
    "reproducibility": WeaknessType.REPLICABILITY,
    "originality": WeaknessType.ORIGINALITY,
    "novelty": WeaknessType.ORIGINALITY,
    "soundness": WeaknessType.SOUNDNESS,
    "empirical soundness": WeaknessType.SOUNDNESS,
    "theoretical soundness": WeaknessType.SOUNDNESS,
    "comparison": WeaknessType.COMPARISON,
    "substance": WeaknessType.SUBSTANCE,
}


class Mode(StrEnum):
    FULL = "full"  # planner, controller, investigator, reviewer
    FAST = "fast"  # one reviewer call with context retrieved from the paper
    SINGLE = "single"  # the reviewer alone (the paper's GPT-4 baseline)


class Source(StrEnum):
    PAPER = "paper"
    LITERATURE = "literature"


@dataclass(frozen=True, slots=True)
class Passage:
    """A retrievable piece of text: from the manuscript (with where it is) or from the literature."""

    id: str
    text: str
    source: Source
    title: str = ""  # section path, or the work's title
    uri: str | None = None  # for manuscript passages: the file
    start: int = 0  # source offsets in that file (at the time the passage was made)
    end: int = 0
    paragraph_id: str | None = None
    plain_start: int = 0  # the span of the paragraph's plain text it covers (stable while the text is)
    plain_end: int = 0


# The "question" of fast mode's evidence: passages retrieved for the paragraph and given to the reviewer.
RETRIEVED_CONTEXT = "(retrieved for the paragraph)"


@dataclass(frozen=True, slots=True)
class Evidence:
    """One answered question and the passages the answer came from (in fast mode: the passages the reviewer
    was given, under RETRIEVED_CONTEXT, with no answer)."""

    question: str
    answer: str
    source: Source
    passages: tuple[Passage, ...] = ()


@dataclass(frozen=True, slots=True)
class Finding:
    """A validated weakness: its quote is found in the paragraph at plain[start:end]."""

    paragraph_id: str
    label: WeaknessType
    quote: str
    review: str
    reasoning: str
    start: int
    end: int
    evidence: tuple[Evidence, ...] = ()
    match: str = "exact"  # exact | normalized | fuzzy: how the quote was found


@dataclass
class ParagraphReview:
    paragraph_id: str
    mode: Mode
    findings: list[Finding] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    plan: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # why model findings were not shown
    failures: list[str] = field(default_factory=list)  # typed LLM failures met on the way
    usage: Usage = field(default_factory=Usage)
    no_weakness: bool = False
    completed: bool = False  # the reviewer answered (findings, or none); False: try again next time
    text: str = ""  # the paragraph text that was reviewed

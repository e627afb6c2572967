"""Degenerate repetition in generated text: the loop small models fall into (the same paragraph sixteen times).

`repetition(text)` says whether a text repeats itself past what prose does, and how; `collapse(text)` keeps the
first occurrence of every repeated paragraph and sentence. The LLM layer uses both on every answer: one retry
with repetition-discouraging sampling, then the collapsed text (plain answers) or a typed failure (JSON).
"""

from __future__ import annotations

import re
from collections import Counter

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+", re.UNICODE)
_MIN_SENTENCE_WORDS = 6  # short sentences ("Thank you.") may recur in good prose
_SENTENCE_REPEATS = 3  # the same long sentence three times is a loop, not style
_NGRAM = 12  # words: a run this long recurring often is copied, not written
_NGRAM_REPEATS = 4


def _normal(text: str) -> str:
    return " ".join(_WORD.findall(text.casefold()))


def repetition(text: str) -> str | None:
    """Why `text` is degenerate (a repeated paragraph, sentence or long run of words), or None."""
    paragraphs = [_normal(part) for part in _PARAGRAPH_BREAK.split(text) if len(_WORD.findall(part)) >= 8]
    repeated, count = _most_common(paragraphs)
    if count >= 2:
        return f"a paragraph appears {count} times ({_preview(repeated)})"
    sentences = [
        _normal(part)
        for part in _SENTENCE_BREAK.split(text)
        if len(_WORD.findall(part)) >= _MIN_SENTENCE_WORDS
    ]
    repeated, count = _most_common(sentences)
    if count >= _SENTENCE_REPEATS:
        return f"a sentence appears {count} times ({_preview(repeated)})"
    words = _WORD.findall(text.casefold())
    grams = [" ".join(words[index : index + _NGRAM]) for index in range(len(words) - _NGRAM + 1)]
    repeated, count = _most_common(grams)
    if count >= _NGRAM_REPEATS:
        return f"a run of {_NGRAM} words appears {count} times ({_preview(repeated)})"
    return None


def collapse(text: str) -> str:
    """The text with every repeated paragraph, then every repeated long sentence, kept once (its first time)."""
    seen_paragraphs: set[str] = set()
    seen_sentences: set[str] = set()
    paragraphs = []
    for paragraph in _PARAGRAPH_BREAK.split(text.strip()):
        key = _normal(paragraph)
        if key and key in seen_paragraphs:
            continue
        seen_paragraphs.add(key)
        sentences = []
        for sentence in _SENTENCE_BREAK.split(paragraph):
            key = _normal(sentence)
            if len(key.split()) >= _MIN_SENTENCE_WORDS and key in seen_sentences:
                continue
            seen_sentences.add(key)
            sentences.append(sentence)
        if sentences:
            paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs)


def _most_common(items: list[str]) -> tuple[str, int]:
    if not items:
        return "", 0
    item, count = Counter(items).most_common(1)[0]
    return item, count


def _preview(text: str) -> str:
    return f"“{text[:60]}…”" if len(text) > 60 else f"“{text}”"

"""Passages and BM25 retrieval (bm25s) over the manuscript and the literature."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Sequence

import bm25s

from margin.workflows.manuscript.model import Manuscript

from .types import Passage, Source

log = logging.getLogger("margin.feedback.retrieval")

PASSAGE_CHARACTERS = 1200  # long paragraphs are cut at sentence ends into passages about this long
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\[(])")


def _passage_id(*parts: str) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).hexdigest()


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence spans of plain text (a simple rule: end punctuation, then a capital)."""
    spans = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        spans.append((start, match.start()))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def manuscript_passages(manuscript: Manuscript, size: int = PASSAGE_CHARACTERS) -> list[Passage]:
    """The manuscript's paragraphs as passages, long ones cut at sentence ends, each knowing where it is."""
    passages: list[Passage] = []
    for paragraph in manuscript.paragraphs:
        title = " › ".join(paragraph.section)
        for start, end in _pieces(paragraph.text, size):
            source_start, source_end = paragraph.offsets.source_span(start, end)
            passages.append(
                Passage(
                    id=_passage_id(paragraph.id, str(start)),
                    text=paragraph.text[start:end],
                    source=Source.PAPER,
                    title=title,
                    uri=paragraph.uri,
                    start=source_start,
                    end=source_end,
                    paragraph_id=paragraph.id,
                    plain_start=start,
                    plain_end=end,
                )
            )
    return passages


def _pieces(text: str, size: int) -> Iterable[tuple[int, int]]:
    if len(text) <= size:
        yield 0, len(text)
        return
    piece_start: int | None = None
    piece_end = 0
    for start, end in split_sentences(text):
        if piece_start is None:
            piece_start = start
        elif end - piece_start > size:
            yield piece_start, piece_end
            piece_start = start
        piece_end = end
    if piece_start is not None:
        yield piece_start, piece_end


class PassageIndex:
    """A BM25 index over passages; build once per manuscript version and query many times."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.passages = list(passages)
        self._retriever: bm25s.BM25 | None = None
        texts = [f"{passage.title} {passage.text}" for passage in self.passages]
        if texts:
            tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
            if tokens.vocab:
                retriever = bm25s.BM25()
                retriever.index(tokens, show_progress=False)
                self._retriever = retriever

    def search(self, query: str, k: int = 5, exclude_paragraph: str | None = None) -> list[Passage]:
        """The k passages most relevant to the query (none scoring zero), optionally leaving one paragraph out."""
        if self._retriever is None or not query.strip():
            return []
        query_tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not query_tokens.vocab:
            return []
        wanted = min(len(self.passages), k + (4 if exclude_paragraph else 0))
        try:
            results, scores = self._retriever.retrieve(query_tokens, k=wanted, show_progress=False)
        except (ValueError, KeyError) as error:  # a query of only unknown words, in some bm25s versions
            log.debug("retrieval found nothing for %r: %s", query, error)
            return []
        found: list[Passage] = []
        for index, score in zip(results[0].tolist(), scores[0].tolist(), strict=True):
            passage = self.passages[int(index)]
            if score <= 0 or (exclude_paragraph and passage.paragraph_id == exclude_paragraph):
                continue
            found.append(passage)
            if len(found) == k:
                break
        return found


def numbered_context(passages: Sequence[Passage]) -> str:
    """Passages as the numbered list the investigator and reviewer read."""
    lines = []
    for number, passage in enumerate(passages, start=1):
        where = f" ({passage.title})" if passage.title else ""
        lines.append(f"[{number}]{where} {passage.text}")
    return "\n\n".join(lines)

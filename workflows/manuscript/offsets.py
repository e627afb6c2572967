"""Offset maps: from a paragraph's plain text back to exact spans of its source.

A map is a run of segments. An *exact* segment is plain text copied from the source character for character, so
any sub-span maps to the matching sub-span of source. A *replacement* segment stands for a whole source span
(an accent macro, a citation placeholder, collapsed white space): any part of it maps to all of that span.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Segment:
    plain_start: int
    plain_end: int
    source_start: int
    source_end: int
    exact: bool


class OffsetMap:
    """Segments with offsets relative to `base` in the source file; immutable, so safe to share from a cache."""

    __slots__ = ("_exact", "_plain_starts", "_source_ends", "_source_starts", "base", "length")

    def __init__(
        self,
        plain_starts: list[int],
        source_starts: list[int],
        source_ends: list[int],
        exact: list[bool],
        length: int,
        base: int = 0,
    ) -> None:
        self._plain_starts = plain_starts
        self._source_starts = source_starts
        self._source_ends = source_ends
        self._exact = exact
        self.length = length
        self.base = base

    def rebased(self, base: int) -> OffsetMap:
        """The same map for source that now starts at `base` (the text above it moved)."""
        return OffsetMap(
            self._plain_starts, self._source_starts, self._source_ends, self._exact, self.length, base
        )

    def shifted(self, amount: int) -> OffsetMap:
        """The same map with its segments moved `amount` characters later in the source."""
        return OffsetMap(
            self._plain_starts,
            [start + amount for start in self._source_starts],
            [end + amount for end in self._source_ends],
            self._exact,
            self.length,
            self.base,
        )

    def segments(self) -> Iterator[Segment]:
        count = len(self._plain_starts)
        for index in range(count):
            plain_end = self._plain_starts[index + 1] if index + 1 < count else self.length
            yield Segment(
                self._plain_starts[index],
                plain_end,
                self.base + self._source_starts[index],
                self.base + self._source_ends[index],
                self._exact[index],
            )

    def _locate(self, plain_offset: int) -> int:
        return max(0, bisect.bisect_right(self._plain_starts, plain_offset) - 1)

    def source_span(self, plain_start: int, plain_end: int) -> tuple[int, int]:
        """The absolute source span of plain[plain_start:plain_end]; an empty or inverted span gives a point."""
        if not self._plain_starts:
            return self.base, self.base
        plain_start = max(0, min(plain_start, self.length - 1 if self.length else 0))
        first = self._locate(plain_start)
        if self._exact[first]:
            start = self._source_starts[first] + plain_start - self._plain_starts[first]
        else:
            start = self._source_starts[first]
        if plain_end <= plain_start:
            return self.base + start, self.base + start
        last_char = min(plain_end, self.length) - 1
        last = self._locate(last_char)
        if self._exact[last]:
            end = self._source_starts[last] + last_char - self._plain_starts[last] + 1
        else:
            end = self._source_ends[last]
        return self.base + start, self.base + max(start, end)


class TextBuilder:
    """Accumulates plain text and its offset map while a converter walks the source."""

    __slots__ = ("_exact", "_parts", "_plain_starts", "_source_ends", "_source_starts", "length")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._plain_starts: list[int] = []
        self._source_starts: list[int] = []
        self._source_ends: list[int] = []
        self._exact: list[bool] = []
        self.length = 0

    def _push(self, text: str, source_start: int, source_end: int, exact: bool) -> None:
        if not text:
            return
        if exact and self._exact and self._exact[-1] and self._source_ends[-1] == source_start:
            # Contiguous copy: extend the previous exact segment instead of adding one.
            self._source_ends[-1] = source_end
        else:
            self._plain_starts.append(self.length)
            self._source_starts.append(source_start)
            self._source_ends.append(source_end)
            self._exact.append(exact)
        self._parts.append(text)
        self.length += len(text)

    def copy(self, text: str, source_start: int) -> None:
        """Append source text unchanged (it starts at `source_start`)."""
        self._push(text, source_start, source_start + len(text), True)

    def replace(self, text: str, source_start: int, source_end: int) -> None:
        """Append `text` standing for the whole source span."""
        self._push(text, source_start, source_end, False)

    def space(self, source_start: int, source_end: int) -> None:
        """Append one space for a run of white space, unless the text already ends in one or is empty."""
        if self.length and not self.ends_with_space():
            self._push(" ", source_start, source_end, False)

    def ends_with_space(self) -> bool:
        return bool(self._parts) and self._parts[-1][-1:].isspace()

    def build(self) -> tuple[str, OffsetMap]:
        """The plain text with surrounding white space trimmed, and its map."""
        text = "".join(self._parts)
        lead = len(text) - len(text.lstrip())
        trimmed = text.strip()
        end = lead + len(trimmed)
        plain_starts: list[int] = []
        source_starts: list[int] = []
        source_ends: list[int] = []
        exact: list[bool] = []
        count = len(self._plain_starts)
        for index in range(count):
            seg_start = self._plain_starts[index]
            seg_end = self._plain_starts[index + 1] if index + 1 < count else len(text)
            lo, hi = max(seg_start, lead), min(seg_end, end)
            if lo >= hi:
                continue
            src_start, src_end = self._source_starts[index], self._source_ends[index]
            if self._exact[index]:
                src_start, src_end = src_start + lo - seg_start, src_start + hi - seg_start
            plain_starts.append(lo - lead)
            source_starts.append(src_start)
            source_ends.append(src_end)
            exact.append(self._exact[index])
        return trimmed, OffsetMap(plain_starts, source_starts, source_ends, exact, len(trimmed))

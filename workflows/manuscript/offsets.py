"""Offset maps: from a paragraph's plain text back to exact spans of its source.

A map is a run of segments. An *exact* segment is plain text copied from the source character for character, so
any sub-span maps to the matching sub-span of source. A *replacement* segment stands for a whole source span
(an accent macro, a citation placeholder, collapsed white space): any part of it maps to all of that span.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Segment:
    plain_start: int
    plain_end: int
    source_start: int
    source_end: int
    exact: bool


class OffsetMap:
    """Segments with offsets relative to `base` in the source file; immutable, so safe to share from a cache.

    The offsets are kept in tuples: the garbage collector stops tracking a tuple of numbers, and a parse keeps
    hundreds of thousands of maps alive (in the manuscript and the chunk cache), which it would otherwise walk
    over and over.
    """

    __slots__ = ("_exact", "_plain_starts", "_source_ends", "_source_starts", "base", "length")

    def __init__(
        self,
        plain_starts: Sequence[int],
        source_starts: Sequence[int],
        source_ends: Sequence[int],
        exact: Sequence[bool],
        length: int,
        base: int = 0,
    ) -> None:
        self._plain_starts = tuple(plain_starts)
        self._source_starts = tuple(source_starts)
        self._source_ends = tuple(source_ends)
        self._exact = tuple(exact)
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
            tuple(start + amount for start in self._source_starts),
            tuple(end + amount for end in self._source_ends),
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

    def _add(self, text: str, source_start: int, source_end: int, exact: bool) -> None:
        """Append a new segment (text not empty)."""
        self._plain_starts.append(self.length)
        self._source_starts.append(source_start)
        self._source_ends.append(source_end)
        self._exact.append(exact)
        self._parts.append(text)
        self.length += len(text)

    def copy(self, text: str, source_start: int) -> None:
        """Append source text unchanged (it starts at `source_start`)."""
        if not text:
            return
        exact, ends = self._exact, self._source_ends
        if exact and exact[-1] and ends[-1] == source_start:
            # Contiguous copy: extend the previous exact segment instead of adding one.
            ends[-1] = source_start + len(text)
            self._parts.append(text)
            self.length += len(text)
        else:
            self._add(text, source_start, source_start + len(text), True)

    def replace(self, text: str, source_start: int, source_end: int) -> None:
        """Append `text` standing for the whole source span."""
        if text:
            self._add(text, source_start, source_end, False)

    def space(self, source_start: int, source_end: int) -> None:
        """Append one space for a run of white space, unless the text already ends in one or is empty."""
        parts = self._parts
        if parts and not parts[-1][-1:].isspace():
            self._add(" ", source_start, source_end, False)

    def ends_with_space(self) -> bool:
        return bool(self._parts) and self._parts[-1][-1:].isspace()

    def build(self) -> tuple[str, OffsetMap]:
        """The plain text with surrounding white space trimmed, and its map."""
        text = "".join(self._parts)
        trimmed = text.strip()
        if not trimmed:
            return trimmed, OffsetMap((), (), (), (), 0)
        lead = len(text) - len(text.lstrip())
        end = lead + len(trimmed)
        if len(self._exact) == 1:  # one segment (a short paragraph): no search, no slices
            start, stop = self._source_starts[0], self._source_ends[0]
            if self._exact[0]:
                start, stop = start + lead, start + end
            return trimmed, OffsetMap((0,), (start,), (stop,), self._exact, len(trimmed))
        # Only the segments at either end can be cut by the trimming; those between are kept as they are.
        plain = self._plain_starts
        first = bisect.bisect_right(plain, lead) - 1
        last = bisect.bisect_left(plain, end) - 1
        plain_starts = (
            [start - lead for start in plain[first : last + 1]] if lead else plain[first : last + 1]
        )
        source_starts = self._source_starts[first : last + 1]
        source_ends = self._source_ends[first : last + 1]
        exact = self._exact[first : last + 1]
        if exact[-1]:  # cut at the end first: it counts from the segment's original source start
            source_ends[-1] = source_starts[-1] + end - plain[last]
        if exact[0]:
            source_starts[0] += lead - plain[first]
        plain_starts[0] = 0
        return trimmed, OffsetMap(plain_starts, source_starts, source_ends, exact, len(trimmed))

"""The manuscript model: what every workflow reads, whatever the source format."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from enum import StrEnum

from .offsets import OffsetMap
from .source import Position, Range, SourceFile, normalize_uri

_WHITESPACE = re.compile(r"\s+")

# Placeholders put into plain text where the source has something that is not prose.
MATH = "[math]"
CITATION = "[citation]"
REFERENCE = "[reference]"
URL = "[url]"
CODE = "[code]"
_PLACEHOLDERS = re.compile(r"\[(?:math|citation|reference|url|code)\]")
_WORD = re.compile(r"[^\W\d_]{2,}")


class ParagraphKind(StrEnum):
    PARAGRAPH = "paragraph"
    CAPTION = "caption"
    FOOTNOTE = "footnote"
    LIST_ITEM = "list_item"
    QUOTE = "quote"


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFORMATION = "information"


def has_words(text: str) -> bool:
    """Whether plain text has prose in it (not just placeholders, numbers and punctuation)."""
    return _WORD.search(_PLACEHOLDERS.sub(" ", text)) is not None


def paragraph_id(text: str) -> str:
    """Stable id of a paragraph: a hash of its text with white space and case normalized."""
    normalized = _WHITESPACE.sub(" ", text).strip().casefold()
    return hashlib.blake2b(normalized.encode("utf-8"), digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class Paragraph:
    """A prose paragraph: plain text for models and metrics, mapped back to exact source ranges."""

    id: str
    kind: ParagraphKind
    section: tuple[str, ...]
    source: SourceFile
    text: str
    offsets: OffsetMap

    @property
    def file(self) -> str:
        return self.source.display_name

    @property
    def uri(self) -> str:
        return self.source.uri

    @property
    def source_span(self) -> tuple[int, int]:
        return self.offsets.source_span(0, len(self.text))

    @property
    def range(self) -> Range:
        return self.source.range(*self.source_span)

    def range_of(self, plain_start: int, plain_end: int) -> Range:
        """The exact source range of a span of the plain text (for a quoted phrase)."""
        return self.source.range(*self.offsets.source_span(plain_start, plain_end))

    def contains(self, position: Position) -> bool:
        return self.range.contains(position)


@dataclass(frozen=True, slots=True)
class Problem:
    """Something the user should know about the manuscript's files (missing include, bad bytes...)."""

    uri: str
    range: Range
    message: str
    severity: Severity = Severity.WARNING


@dataclass(slots=True)
class Section:
    title: str
    level: int
    source: SourceFile
    start: int
    end: int
    children: list[Section] = field(default_factory=list)
    paragraphs: list[Paragraph] = field(default_factory=list)

    @property
    def uri(self) -> str:
        return self.source.uri

    @property
    def range(self) -> Range:
        """The heading's source range (computed on demand: most parses never need it)."""
        return self.source.range(self.start, self.end)


@dataclass(slots=True)
class Manuscript:
    """A whole manuscript, possibly across several files, in reading order."""

    root_uri: str
    title: str | None = None
    abstract: list[Paragraph] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    paragraphs: list[Paragraph] = field(default_factory=list)
    files: list[SourceFile] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    # Files are compared by normalize_uri: an editor's URI and the one margin built for the same file may be
    # spelled differently (percent-encoding, a drive letter's case...).

    def paragraphs_in(self, uri: str) -> list[Paragraph]:
        """The paragraphs of one file of the manuscript, in reading order."""
        key = normalize_uri(uri)
        return [paragraph for paragraph in self.paragraphs if normalize_uri(paragraph.uri) == key]

    def problems_in(self, uri: str) -> list[Problem]:
        """The problems found in one file of the manuscript."""
        key = normalize_uri(uri)
        return [problem for problem in self.problems if normalize_uri(problem.uri) == key]

    def paragraph_at(self, uri: str, position: Position) -> Paragraph | None:
        """The paragraph of file `uri` whose source range holds `position`, if any."""
        key = normalize_uri(uri)
        for paragraph in self.paragraphs:
            if normalize_uri(paragraph.uri) == key and paragraph.contains(position):
                return paragraph
        return None

"""Source files: their text, and conversion between string offsets and LSP positions (UTF-16)."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlparse

_NEWLINE = re.compile(r"\r\n|\r|\n")
_BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True, slots=True)
class Position:
    """A position as LSP counts it: zero-based line, UTF-16 code units into the line."""

    line: int
    character: int

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "character": self.character}


@dataclass(frozen=True, slots=True)
class Range:
    start: Position
    end: Position

    def to_json(self) -> dict[str, dict[str, int]]:
        return {"start": self.start.to_json(), "end": self.end.to_json()}

    def contains(self, position: Position) -> bool:
        here = (position.line, position.character)
        return (self.start.line, self.start.character) <= here <= (self.end.line, self.end.character)


class LineIndex:
    """Maps Python string offsets (code points) to LSP positions and back.

    Built once per text version; conversions are a bisect plus, on non-ASCII lines only, a UTF-16 count.
    """

    __slots__ = ("_line_starts", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._line_starts = [0, *(m.end() for m in _NEWLINE.finditer(text))]

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def position(self, offset: int) -> Position:
        offset = max(0, min(offset, len(self._text)))
        line = bisect.bisect_right(self._line_starts, offset) - 1
        start = self._line_starts[line]
        prefix = self._text[start:offset]
        if prefix.isascii():
            return Position(line, offset - start)
        return Position(line, _utf16_length(prefix))

    def offset(self, position: Position) -> int:
        """The string offset of an LSP position; positions past a line's end clamp to the line's end."""
        if position.line < 0:
            return 0
        if position.line >= len(self._line_starts):
            return len(self._text)
        start = self._line_starts[position.line]
        end = (
            self._line_starts[position.line + 1]
            if position.line + 1 < len(self._line_starts)
            else len(self._text)
        )
        line_text = self._text[start:end].rstrip("\r\n")
        if line_text.isascii():
            return start + min(max(position.character, 0), len(line_text))
        units = 0
        for index, char in enumerate(line_text):
            if units >= position.character:
                return start + index
            units += 2 if ord(char) > 0xFFFF else 1
        return start + len(line_text)

    def range(self, start: int, end: int) -> Range:
        return Range(self.position(start), self.position(end))


def _utf16_length(text: str) -> int:
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


@dataclass(eq=False, slots=True)
class SourceFile:
    """One file of a manuscript at one version: where it lives and its text."""

    uri: str
    text: str
    version: int | None = None
    _index: LineIndex | None = field(default=None, repr=False)

    @property
    def path(self) -> Path | None:
        return uri_to_path(self.uri)

    @property
    def display_name(self) -> str:
        path = self.path
        return str(path) if path is not None else self.uri

    @property
    def lines(self) -> LineIndex:
        if self._index is None:
            self._index = LineIndex(self.text)
        return self._index

    def range(self, start: int, end: int) -> Range:
        return self.lines.range(start, end)


class UnreadableFile(Exception):
    """A file that cannot be used as manuscript text; the message says why, for the user."""


def decode_source(data: bytes, name: str) -> tuple[str, str | None]:
    """Decode file bytes as manuscript text.

    Returns the text and, when bytes had to be replaced, a warning for the user. Raises UnreadableFile for
    binary data (a NUL byte near the start, as git and grep decide).
    """
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        raise UnreadableFile(f"{name} looks like a binary file, not a LaTeX or Markdown manuscript")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as error:
        text = data.decode("utf-8", errors="replace")
        line = data[: error.start].count(b"\n") + 1
        return (
            text,
            f"{name} is not valid UTF-8 (first bad byte on line {line}); undecodable bytes shown as \ufffd",
        )


def read_source(path: Path) -> tuple[SourceFile, str | None]:
    """Read a manuscript file from disk. Raises UnreadableFile with a user-facing reason."""
    try:
        data = path.read_bytes()
    except IsADirectoryError as error:
        raise UnreadableFile(f"{path} is a directory") from error
    except FileNotFoundError as error:
        raise UnreadableFile(f"{path} does not exist") from error
    except OSError as error:
        raise UnreadableFile(f"{path} cannot be read: {error.strerror or error}") from error
    text, warning = decode_source(data, str(path))
    return SourceFile(uri=path_to_uri(path), text=text), warning


def path_to_uri(path: Path) -> str:
    return path.absolute().as_uri()


def uri_to_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path))


@lru_cache(maxsize=4096)
def normalize_uri(uri: str) -> str:
    """One spelling per file URI, so that editor URIs and paths we build compare equal."""
    path = uri_to_path(uri)
    if path is None or not path.is_absolute():
        return uri
    return path.as_uri()

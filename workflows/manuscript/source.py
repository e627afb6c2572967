"""Source files: their text, and conversion between string offsets and LSP positions (UTF-16)."""

from __future__ import annotations

import bisect
import os
import re
import stat
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlparse

_NEWLINE = re.compile(r"\r\n|\r|\n")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_BINARY_SNIFF = 8192  # how far into a file a NUL marks it as binary: git's and grep's rule


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

    __slots__ = ("_astral", "_line_starts", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._line_starts = [0, *(m.end() for m in _NEWLINE.finditer(text))]
        # Where the characters that take two UTF-16 units are: a position is then a bisect, never a count over
        # its line (a long line with many positions on it, such as a problem per \input, would be quadratic).
        self._astral = [] if text.isascii() else [m.start() for m in _ASTRAL.finditer(text)]

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def position(self, offset: int) -> Position:
        offset = max(0, min(offset, len(self._text)))
        line = bisect.bisect_right(self._line_starts, offset) - 1
        start = self._line_starts[line]
        if not self._astral:
            return Position(line, offset - start)
        astral = bisect.bisect_left(self._astral, offset) - bisect.bisect_left(self._astral, start)
        return Position(line, offset - start + astral)

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


def check_not_binary(data: bytes | str, name: str) -> None:
    """Raise UnreadableFile when `data`, a file's bytes or its text as an editor sent it, looks binary: a NUL
    among its first 8192 bytes (or characters), as git and grep decide. The one rule for the CLI and the server."""
    head = data[:_BINARY_SNIFF]
    if (b"\x00" if isinstance(head, bytes) else "\x00") in head:
        raise UnreadableFile(f"{name} looks like a binary file, not a LaTeX or Markdown manuscript")


def decode_source(data: bytes, name: str) -> tuple[str, str | None]:
    """Decode file bytes as manuscript text.

    Returns the text and, when bytes had to be replaced, a warning for the user. Raises UnreadableFile for
    binary data (see check_not_binary).
    """
    check_not_binary(data, name)
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


MAX_FILE_BYTES = 10 * 1024 * 1024


def read_regular_file(path: Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most `max_bytes`. Raises UnreadableFile with a user-facing reason.

    Devices, pipes and sockets are refused before a byte is read: a link to /dev/zero would be read until
    memory runs out, and a named pipe would block the reader for good. O_NONBLOCK keeps even the open of a pipe
    from waiting; the size is checked on the opened file, and the read is bounded in case it grows meanwhile.
    """
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    )
    try:
        descriptor = os.open(path, flags)
    except IsADirectoryError as error:
        raise UnreadableFile(f"{path} is a directory") from error
    except FileNotFoundError as error:
        raise UnreadableFile(f"{path} does not exist") from error
    except OSError as error:
        raise UnreadableFile(f"{path} cannot be read: {error.strerror or error}") from error
    try:
        status = os.fstat(descriptor)
        if stat.S_ISDIR(status.st_mode):
            raise UnreadableFile(f"{path} is a directory")
        if not stat.S_ISREG(status.st_mode):
            raise UnreadableFile(
                f"{path} is not a regular file (a device, pipe or socket); margin reads only files"
            )
        if status.st_size > max_bytes:
            raise UnreadableFile(_too_large(path, status.st_size, max_bytes))
        chunks: list[bytes] = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(descriptor, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        if remaining <= 0:
            raise UnreadableFile(_too_large(path, max_bytes + 1, max_bytes))
        return b"".join(chunks)
    except OSError as error:
        raise UnreadableFile(f"{path} cannot be read: {error.strerror or error}") from error
    finally:
        os.close(descriptor)


def _too_large(path: Path, size: int, max_bytes: int) -> str:
    return (
        f"{path} is {size / 2**20:.2f} MB, over margin's limit of {max_bytes / 2**20:.3g} MB "
        "(setting margin.maxFileSizeMB)"
    )


def read_source(path: Path, max_bytes: int = MAX_FILE_BYTES) -> tuple[SourceFile, str | None]:
    """Read a manuscript file from disk. Raises UnreadableFile with a user-facing reason."""
    text, warning = decode_source(read_regular_file(path, max_bytes), str(path))
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

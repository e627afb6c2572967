"""Where a parser gets the text of a manuscript's other files: the editor's open buffers first, then disk."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .source import SourceFile, UnreadableFile, path_to_uri, read_source

MAX_FILE_BYTES = 10 * 1024 * 1024


@dataclass
class SourceProvider:
    """Looks files up by path. `open_documents` is consulted first so unsaved edits win over disk."""

    open_documents: Callable[[str], SourceFile | None] = lambda uri: None
    max_bytes: int = MAX_FILE_BYTES
    _disk: dict[str, tuple[float, int, SourceFile, str | None]] = field(default_factory=dict)

    def load(self, path: Path) -> tuple[SourceFile, str | None]:
        """The file's current text and a warning about it, if any. Raises UnreadableFile."""
        uri = path_to_uri(path)
        document = self.open_documents(uri)
        if document is not None:
            return document, None
        try:
            status = path.stat()
        except OSError as error:
            raise UnreadableFile(f"{path} does not exist") from error
        if status.st_size > self.max_bytes:
            raise UnreadableFile(
                f"{path} is {status.st_size / 1e6:.1f} MB, over margin's limit of {self.max_bytes / 1e6:.0f} MB"
            )
        cached = self._disk.get(uri)
        if cached and cached[0] == status.st_mtime and cached[1] == status.st_size:
            return cached[2], cached[3]
        source, warning = read_source(path)
        self._disk[uri] = (status.st_mtime, status.st_size, source, warning)
        return source, warning

    def exists(self, path: Path) -> bool:
        return self.open_documents(path_to_uri(path)) is not None or path.is_file()

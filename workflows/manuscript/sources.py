"""Where a parser gets the text of a manuscript's other files: the editor's open buffers first, then disk."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .boundary import ReadBoundary
from .source import MAX_FILE_BYTES, SourceFile, UnreadableFile, path_to_uri, read_source


@dataclass
class SourceProvider:
    """Looks files up by path. `open_documents` is consulted first so unsaved edits win over disk.

    With a `boundary`, only files inside its folders are read (OutsideWorkspace otherwise); without one (tests,
    benchmarks, the evaluation harness) any path the caller names is read.
    """

    open_documents: Callable[[str], SourceFile | None] = lambda uri: None
    max_bytes: int = MAX_FILE_BYTES
    boundary: ReadBoundary | None = None
    _disk: dict[str, tuple[float, int, SourceFile, str | None]] = field(default_factory=dict)

    def load(self, path: Path) -> tuple[SourceFile, str | None]:
        """The file's current text and a warning about it, if any. Raises UnreadableFile."""
        if self.boundary is not None:
            self.boundary.check(path)
        uri = path_to_uri(path)
        document = self.open_documents(uri)
        if document is not None:
            return document, None
        try:
            status = path.stat()
        except OSError as error:
            raise UnreadableFile(f"{path} does not exist") from error
        cached = self._disk.get(uri)
        if cached and cached[0] == status.st_mtime and cached[1] == status.st_size:
            return cached[2], cached[3]
        source, warning = read_source(path, self.max_bytes)  # regular files only, size-checked, bounded
        self._disk[uri] = (status.st_mtime, status.st_size, source, warning)
        return source, warning

    def exists(self, path: Path) -> bool:
        """Whether something other than a folder is there (a pipe too: load() then says why it is not read)."""
        if self.open_documents(path_to_uri(path)) is not None:
            return True
        try:
            return path.exists() and not path.is_dir()
        except OSError:
            return False

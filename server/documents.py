"""Maps the editor's open documents to manuscripts, re-using the parsers' caches across keystrokes."""

from __future__ import annotations

import threading
from collections.abc import Callable

from margin.workflows.manuscript.loader import ManuscriptLoader, manuscript_format
from margin.workflows.manuscript.model import Manuscript
from margin.workflows.manuscript.source import SourceFile, normalize_uri
from margin.workflows.manuscript.sources import SourceProvider

_BINARY_SNIFF = 8192
# Documents above this size get a parser (and lock) of their own, so a slow parse of a huge file in a worker
# thread never holds up the keystroke path of ordinary documents.
LARGE_DOCUMENT = 512 * 1024


class NotAnalysable(Exception):
    """A document margin will not analyse (binary, too large); the message says why, for the user."""


class DocumentIndex:
    """Open documents by normalized URI, as SourceFiles built once per version."""

    def __init__(self, text_of: Callable[[str], tuple[str, int | None] | None]) -> None:
        self._text_of = text_of
        self._sources: dict[str, SourceFile] = {}
        self._uris: dict[str, str] = {}

    def opened(self, uri: str) -> None:
        self._uris[normalize_uri(uri)] = uri

    def closed(self, uri: str) -> None:
        key = normalize_uri(uri)
        self._uris.pop(key, None)
        self._sources.pop(key, None)

    def get(self, uri: str) -> SourceFile | None:
        key = normalize_uri(uri)
        editor_uri = self._uris.get(key)
        if editor_uri is None:
            return None
        current = self._text_of(editor_uri)
        if current is None:
            return None
        text, version = current
        cached = self._sources.get(key)
        if cached is not None and cached.version == version and cached.text is text:
            return cached
        source = SourceFile(uri=editor_uri, text=text, version=version)
        self._sources[key] = source
        return source

    def uris(self) -> list[str]:
        return list(self._uris.values())


class Analyzer:
    """Turns a document into the manuscript it belongs to. Thread-safe: large files are parsed off the loop."""

    def __init__(self, documents: DocumentIndex, max_bytes: int) -> None:
        self.documents = documents
        self.provider = SourceProvider(open_documents=documents.get, max_bytes=max_bytes)
        self._loaders = {False: ManuscriptLoader(self.provider), True: ManuscriptLoader(self.provider)}
        self._locks = {False: threading.Lock(), True: threading.Lock()}
        self._state_lock = threading.Lock()
        self._generation = 0
        self._latest: dict[str, tuple[int, Manuscript]] = {}

    @property
    def max_bytes(self) -> int:
        return self.provider.max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self.provider.max_bytes = value

    def changed(self) -> None:
        """Any document changed: manuscripts computed before are stale."""
        with self._state_lock:
            self._generation += 1

    @staticmethod
    def check(source: SourceFile, max_bytes: int) -> None:
        if len(source.text) > max_bytes:
            size = len(source.text.encode("utf-8", errors="replace"))
            if size > max_bytes:
                raise NotAnalysable(
                    f"{source.display_name} is {size / 2**20:.2f} MB; margin analyses files up to "
                    f"{max_bytes / 2**20:.3g} MB (setting margin.maxFileSizeMB)"
                )
        if "\x00" in source.text[:_BINARY_SNIFF]:
            raise NotAnalysable(f"{source.display_name} looks like a binary file, not a manuscript")

    def manuscript(self, uri: str, max_bytes: int) -> Manuscript:
        """The manuscript of an open document, at the documents' current versions. Raises NotAnalysable."""
        source = self.documents.get(uri)
        if source is None:
            raise NotAnalysable(f"{uri} is not open")
        self.check(source, max_bytes)
        key = normalize_uri(uri)
        with self._state_lock:
            generation = self._generation
            cached = self._latest.get(key)
        if cached is not None and cached[0] == generation:
            return cached[1]
        large = len(source.text) > LARGE_DOCUMENT
        with self._locks[large]:
            manuscript = self._loaders[large].load(source, manuscript_format(source.display_name))
        with self._state_lock:
            self._latest[key] = (generation, manuscript)
        return manuscript

    def forget(self, uri: str) -> None:
        with self._state_lock:
            self._latest.pop(normalize_uri(uri), None)

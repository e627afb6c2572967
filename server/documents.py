"""Maps the editor's open documents to manuscripts, re-using the parsers' caches across keystrokes."""

from __future__ import annotations

import threading
from collections.abc import Callable

from margin.workflows.manuscript.loader import ManuscriptLoader, manuscript_format
from margin.workflows.manuscript.model import Manuscript
from margin.workflows.manuscript.source import SourceFile, UnreadableFile, check_not_binary, normalize_uri
from margin.workflows.manuscript.sources import SourceProvider


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
    """Turns a document into the manuscript it belongs to. Thread-safe: the server parses in worker threads.

    Each open document has a parser (and lock) of its own, so a slow parse of one document never holds up
    another's. A manuscript stays valid until one of its files changes: a keystroke in one paper does not make
    the server parse another again.
    """

    def __init__(self, documents: DocumentIndex, max_bytes: int) -> None:
        self.documents = documents
        self.provider = SourceProvider(open_documents=documents.get, max_bytes=max_bytes)
        self._parsers: dict[str, tuple[threading.Lock, ManuscriptLoader]] = {}
        self._state_lock = threading.Lock()
        self._generation = 0
        self._everything_changed = 0  # generation of the last change that may touch any manuscript
        self._changed_at: dict[str, int] = {}  # file -> generation of its last change
        self._latest: dict[str, tuple[int, Manuscript, tuple[str, ...]]] = {}

    @property
    def max_bytes(self) -> int:
        return self.provider.max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self.provider.max_bytes = value

    def changed(self, uri: str | None = None) -> None:
        """A document changed; None: anything may have (a save, new folders or settings)."""
        with self._state_lock:
            self._generation += 1
            if uri is None:
                self._everything_changed = self._generation
            else:
                self._changed_at[normalize_uri(uri)] = self._generation

    def _fresh(self, key: str) -> Manuscript | None:
        cached = self._latest.get(key)
        if cached is None:
            return None
        generation, manuscript, files = cached
        if self._everything_changed > generation:
            return None
        if any(self._changed_at.get(file, 0) > generation for file in files):
            return None
        return manuscript

    @staticmethod
    def check(source: SourceFile, max_bytes: int) -> None:
        if len(source.text) > max_bytes:
            size = len(source.text.encode("utf-8", errors="replace"))
            if size > max_bytes:
                raise NotAnalysable(
                    f"{source.display_name} is {size / 2**20:.2f} MB; margin analyses files up to "
                    f"{max_bytes / 2**20:.3g} MB (setting margin.maxFileSizeMB)"
                )
        try:
            check_not_binary(source.text, source.display_name)
        except UnreadableFile as error:
            raise NotAnalysable(str(error)) from None

    def cached(self, uri: str) -> Manuscript | None:
        """The manuscript of a document if nothing it is made of changed since it was parsed (no parsing)."""
        with self._state_lock:
            return self._fresh(normalize_uri(uri))

    def manuscript(self, uri: str, max_bytes: int) -> Manuscript:
        """The manuscript of an open document, at the documents' current versions. Raises NotAnalysable."""
        source = self.documents.get(uri)
        if source is None:
            raise NotAnalysable(f"{uri} is not open")
        self.check(source, max_bytes)
        key = normalize_uri(uri)
        with self._state_lock:
            cached = self._fresh(key)
            if cached is not None:
                return cached
            lock, loader = self._parsers.setdefault(key, (threading.Lock(), ManuscriptLoader(self.provider)))
        with lock:
            with self._state_lock:
                cached = self._fresh(key)  # parsed by another request while this one waited
                if cached is not None:
                    return cached
                generation = self._generation
            source = self.documents.get(uri) or source
            manuscript = loader.load(source, manuscript_format(source.display_name))
            files = tuple(normalize_uri(file.uri) for file in manuscript.files) or (key,)
            with self._state_lock:
                self._latest[key] = (generation, manuscript, (*files, key))
        return manuscript

    def forget(self, uri: str) -> None:
        key = normalize_uri(uri)
        with self._state_lock:
            self._latest.pop(key, None)
            self._parsers.pop(key, None)

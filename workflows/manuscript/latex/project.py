"""A LaTeX manuscript across its files: root detection, \\input/\\include/\\subfile, and the chunk cache."""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from pathlib import Path, PurePosixPath

from ..assemble import ManuscriptAssembler
from ..model import Manuscript, Severity
from ..source import SourceFile, UnreadableFile
from ..sources import SourceProvider
from .chunks import (
    Event,
    HeadingEvent,
    IncludeEvent,
    ParagraphEvent,
    ProblemEvent,
    Region,
    ScanState,
    TitleEvent,
    parse_chunk,
)
from .macros import MacroTable, collect_user_macros, is_commented

_BLANK_LINES = re.compile(r"(?:\r\n|\r(?!\n)|\n)[ \t]*(?:(?:\r\n|\r(?!\n)|\n)[ \t]*)+")
_DOCUMENTCLASS = re.compile(r"^[ \t]*\\documentclass", re.M)
_MAGIC_ROOT = re.compile(r"^[ \t]*%[ \t]*!TEX[ \t]+root[ \t]*=[ \t]*(\S.*?)[ \t]*$", re.M | re.I)
_SUBFILES_ROOT = re.compile(r"\\documentclass[ \t]*\[([^\]]+)\][ \t]*\{subfiles\}")
# A quick look for included files, before parsing, so their macro definitions are known. Commented-out
# includes are filtered afterwards: a per-line "no % before" pattern would be far slower. A name stops at a
# backslash (no file name has one, _resolve refuses it): else every \input{ of a line with no } rescans the line.
_INCLUDE_HINT = re.compile(
    r"\\(?:input|include|subfile)[ \t]*\{([^}\n\\]+)\}"
    r"|\\(?:sub)?import\*?[ \t]*\{([^}\n\\]*)\}[ \t]*\{([^}\n\\]+)\}"
)
_MAX_INCLUDE_DEPTH = 16
_CHUNK_CACHE_ENTRIES = 50_000

Chunk = tuple[list[Event], ScanState]


class ChunkCache:
    """Least-recently-used cache of parsed chunks, keyed by chunk text, entry state and the user macros."""

    def __init__(self, capacity: int = _CHUNK_CACHE_ENTRIES) -> None:
        self._entries: OrderedDict[tuple[str, ScanState, MacroTable], Chunk] = OrderedDict()
        self.capacity = capacity
        self.hits = 0
        self.misses = 0

    def parse(self, text: str, state: ScanState, macros: MacroTable) -> Chunk:
        key = (text, state, macros)
        cached = self._entries.get(key)
        if cached is not None:
            self._entries.move_to_end(key)
            self.hits += 1
            return cached
        self.misses += 1
        result = parse_chunk(text, state, macros)
        self._entries[key] = result
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return result

    def clear(self) -> None:
        self._entries.clear()


def split_chunks(text: str) -> list[tuple[int, str]]:
    """The text between runs of blank lines, with each chunk's offset."""
    chunks: list[tuple[int, str]] = []
    position = 0
    for match in _BLANK_LINES.finditer(text):
        if match.start() > position:
            chunks.append((position, text[position : match.start()]))
        position = match.end()
    if position < len(text):
        chunks.append((position, text[position:]))
    return chunks


def root_declaration(source: SourceFile) -> tuple[int, int]:
    """Where a sub-file names its root (the magic comment or the subfiles class), for messages about it."""
    head = source.text[:4000]
    match = _MAGIC_ROOT.search(head) or _SUBFILES_ROOT.search(head)
    return match.span() if match else (0, 0)


def find_root(source: SourceFile, provider: SourceProvider) -> Path | None:
    """The root file a sub-file names (`% !TEX root = ...` or the subfiles class), if it exists."""
    path = source.path
    if path is None:
        return None
    head = source.text[:4000]
    match = _MAGIC_ROOT.search(head)
    candidate = match.group(1) if match else None
    if candidate is None:
        subfiles = _SUBFILES_ROOT.search(head)
        candidate = subfiles.group(1).strip() if subfiles else None
    if not candidate:
        return None
    root = (path.parent / candidate).resolve()
    if not root.name:  # "/" or a path that resolves to it: not a file
        return None
    for option in (root, root.with_name(root.name + ".tex")):
        if option != path.resolve() and provider.exists(option):
            return option
    return None


class LatexProject:
    """Parses LaTeX manuscripts; keep one per process so its chunk cache serves every keystroke."""

    def __init__(self, provider: SourceProvider | None = None, cache: ChunkCache | None = None) -> None:
        self.provider = provider or SourceProvider()
        self.cache = cache or ChunkCache()
        self._macro_cache: dict[str, tuple[str, MacroTable]] = {}
        self._manuscript_tables: dict[str, MacroTable] = {}
        # Per parse: where each include spelling led, and the files read so far (each is read once, so that
        # thousands of \input of one file cost no more than the \input commands themselves).
        self._resolved: dict[tuple[str, str, str, str | None, bool], Path | None] = {}
        self._expanded: set[str] = set()

    def parse(self, root: SourceFile) -> Manuscript:
        self._resolved, self._expanded = {}, set()
        assembler = ManuscriptAssembler(root.uri)
        macros = self._manuscript_macros(root)
        self._parse_file(root, root, macros, assembler, depth=0, active=set())
        return assembler.finish()

    # -- macros ------------------------------------------------------------------------------------------------

    def _file_macros(self, source: SourceFile) -> MacroTable:
        cached = self._macro_cache.get(source.uri)
        if cached is not None and cached[0] == source.text:
            return cached[1]
        table = collect_user_macros(source.text)
        self._macro_cache[source.uri] = (source.text, table)
        return table

    def _manuscript_macros(self, root: SourceFile) -> MacroTable:
        """User macros from the root and the files it includes (found by a quick scan, before parsing)."""
        table = MacroTable()
        pending = [(root, 0)]
        seen = {root.uri}
        while pending:
            source, depth = pending.pop()
            table = table.merged(self._file_macros(source))
            if depth >= _MAX_INCLUDE_DEPTH or source.path is None:
                continue
            for match in _INCLUDE_HINT.finditer(source.text):
                if is_commented(source.text, match.start()):
                    continue
                target = match.group(1) or match.group(3)
                directory = match.group(2)
                subimport = match.group(0).lstrip().startswith("\\subimport")
                path = self._resolve(root, source, target, directory, subimport)
                if path is None:
                    continue
                try:
                    included, _ = self.provider.load(path)
                except UnreadableFile:
                    continue
                if included.uri not in seen:
                    seen.add(included.uri)
                    pending.append((included, depth + 1))
        # The same table object as last time when nothing changed: the chunk cache's keys then compare it by
        # identity, not macro by macro for every chunk of every keystroke.
        previous = self._manuscript_tables.get(root.uri)
        if previous is not None and previous == table:
            return previous
        self._manuscript_tables[root.uri] = table
        return table

    # -- files -------------------------------------------------------------------------------------------------

    def _resolve(
        self,
        root: SourceFile,
        current: SourceFile,
        target: str,
        directory: str | None,
        relative_to_current: bool = False,
    ) -> Path | None:
        """_locate, worked out once per parse for each spelling (its file-system checks are slow)."""
        key = (root.uri, current.uri, target, directory, relative_to_current)
        if key not in self._resolved:
            self._resolved[key] = self._locate(root, current, target, directory, relative_to_current)
        return self._resolved[key]

    def _locate(
        self,
        root: SourceFile,
        current: SourceFile,
        target: str,
        directory: str | None,
        relative_to_current: bool = False,
    ) -> Path | None:
        """Where an included file is. \\input and \\include resolve against the root's folder (then, leniently,
        the including file's), \\import{dir}{file} against the root's, \\subimport{dir}{file} against the
        including file's."""
        target = target.strip()
        if not target or "\\" in target or "#" in target:
            return None
        folders: list[Path] = []
        for source in (current, root) if relative_to_current else (root, current):
            if source.path is not None and source.path.parent not in folders:
                folders.append(source.path.parent)
        if directory is not None:
            folders = [folder / directory.strip() for folder in folders]
        relative = PurePosixPath(target)
        for folder in folders:
            candidate = Path(os.path.normpath(folder / relative))  # one spelling per file: no "a/../b"
            if not candidate.name:  # \\input{/} or "../.." up to the root: a folder, never a file
                continue
            for option in (candidate, candidate.with_name(candidate.name + ".tex")):
                if option.suffix and self.provider.exists(option):
                    return option
        return None

    def _parse_file(
        self,
        source: SourceFile,
        root: SourceFile,
        macros: MacroTable,
        assembler: ManuscriptAssembler,
        depth: int,
        active: set[str],
    ) -> None:
        assembler.add_file(source)
        active.add(source.uri)
        self._expanded.add(source.uri)
        region = Region.PREAMBLE if _DOCUMENTCLASS.search(source.text) else Region.BODY
        state = ScanState(region=region)
        for offset, text in split_chunks(source.text):
            events, state = self.cache.parse(text, state, macros)
            for event in events:
                self._apply(event, offset, source, root, macros, assembler, depth, active)
        if state.skipping is not None:
            assembler.problem(
                source,
                len(source.text),
                len(source.text),
                f"\\begin{{{state.skipping}}} is never closed; margin skipped to the end of the file",
                Severity.INFORMATION,
            )
        active.discard(source.uri)

    def _apply(
        self,
        event: Event,
        offset: int,
        source: SourceFile,
        root: SourceFile,
        macros: MacroTable,
        assembler: ManuscriptAssembler,
        depth: int,
        active: set[str],
    ) -> None:
        if isinstance(event, ParagraphEvent):
            assembler.paragraph(
                event.kind, event.text, event.offsets.rebased(offset), source, event.abstract, event.id
            )
        elif isinstance(event, HeadingEvent):
            assembler.heading(event.level, event.title, source, offset + event.start, offset + event.end)
        elif isinstance(event, TitleEvent):
            assembler.title(event.title)
        elif isinstance(event, ProblemEvent):
            assembler.problem(source, offset + event.start, offset + event.end, event.message)
        elif isinstance(event, IncludeEvent):
            start, end = offset + event.start, offset + event.end
            self._include(event, start, end, source, root, macros, assembler, depth, active)

    def _include(
        self,
        event: IncludeEvent,
        start: int,
        end: int,
        source: SourceFile,
        root: SourceFile,
        macros: MacroTable,
        assembler: ManuscriptAssembler,
        depth: int,
        active: set[str],
    ) -> None:
        path = self._resolve(root, source, event.target, event.directory, event.relative_to_current)
        if path is None:
            assembler.problem(source, start, end, f"Included file not found: {event.target}")
            return
        if depth >= _MAX_INCLUDE_DEPTH:
            assembler.problem(
                source, start, end, f"Includes nest deeper than {_MAX_INCLUDE_DEPTH}; not followed"
            )
            return
        try:
            included, warning = self.provider.load(path)
        except UnreadableFile as error:
            assembler.problem(source, start, end, str(error))
            return
        if included.uri in active:
            assembler.problem(source, start, end, f"{event.target} includes itself; not followed again")
            return
        if included.uri in self._expanded:
            message = f"{event.target} is included earlier as well; margin reads each file once"
            assembler.problem(source, start, end, message, Severity.INFORMATION)
            return
        if warning:
            assembler.problem(source, start, end, warning)
        self._parse_file(included, root, macros, assembler, depth + 1, active)

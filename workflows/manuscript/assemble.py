"""Builds a Manuscript from the headings and paragraphs a format parser finds, in reading order."""

from __future__ import annotations

from .model import Manuscript, Paragraph, ParagraphKind, Problem, Section, Severity, paragraph_id
from .offsets import OffsetMap
from .source import SourceFile

ABSTRACT = "Abstract"


class ManuscriptAssembler:
    def __init__(self, root_uri: str) -> None:
        self.manuscript = Manuscript(root_uri=root_uri)
        self._open: list[Section] = []
        self._seen_files: set[str] = set()

    def add_file(self, source: SourceFile) -> None:
        if source.uri not in self._seen_files:
            self._seen_files.add(source.uri)
            self.manuscript.files.append(source)

    def title(self, title: str) -> None:
        if title and self.manuscript.title is None:
            self.manuscript.title = title

    def heading(self, level: int, title: str, source: SourceFile, start: int, end: int) -> None:
        section = Section(title=title, level=level, source=source, start=start, end=end)
        while self._open and self._open[-1].level >= level:
            self._open.pop()
        if self._open:
            self._open[-1].children.append(section)
        else:
            self.manuscript.sections.append(section)
        self._open.append(section)

    def section_path(self) -> tuple[str, ...]:
        return tuple(section.title for section in self._open)

    def paragraph(
        self,
        kind: ParagraphKind,
        text: str,
        offsets: OffsetMap,
        source: SourceFile,
        abstract: bool = False,
        identifier: str | None = None,
    ) -> Paragraph:
        """Add a paragraph; `identifier` is its id when the parser already computed it (cached with a chunk)."""
        section = (ABSTRACT,) if abstract else self.section_path()
        paragraph = Paragraph(
            id=identifier or paragraph_id(text),
            kind=kind,
            section=section,
            source=source,
            text=text,
            offsets=offsets,
        )
        self.manuscript.paragraphs.append(paragraph)
        if abstract:
            self.manuscript.abstract.append(paragraph)
        elif self._open:
            self._open[-1].paragraphs.append(paragraph)
        return paragraph

    def problem(
        self, source: SourceFile, start: int, end: int, message: str, severity: Severity = Severity.WARNING
    ) -> None:
        self.manuscript.problems.append(Problem(source.uri, source.range(start, end), message, severity))

    def finish(self) -> Manuscript:
        return self.manuscript

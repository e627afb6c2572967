"""Shared test helpers: paths to fixtures, the command that starts margin's server, and parse helpers."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from margin.workflows.manuscript.latex.project import LatexProject
from margin.workflows.manuscript.markdown.parse import MarkdownProject
from margin.workflows.manuscript.model import Manuscript, Paragraph
from margin.workflows.manuscript.source import SourceFile

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
SERVER_COMMAND = [sys.executable, "-m", "margin.server"]

LATEX_URI = "file:///tmp/margin-tests/snippet.tex"
MARKDOWN_URI = "file:///tmp/margin-tests/snippet.md"
_PLACEHOLDER = re.compile(r"\[(?:math|citation|reference|url|code)\]")
_ASCII_WORD = re.compile(r"[A-Za-z]{3,}")


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


def parse_latex(text: str, uri: str = LATEX_URI, project: LatexProject | None = None) -> Manuscript:
    """A manuscript from one LaTeX snippet (a fresh parser unless `project` is given)."""
    return (project or LatexProject()).parse(SourceFile(uri, text))


def parse_markdown(text: str, uri: str = MARKDOWN_URI, project: MarkdownProject | None = None) -> Manuscript:
    """A manuscript from one Markdown snippet (a fresh parser unless `project` is given)."""
    return (project or MarkdownProject()).parse([SourceFile(uri, text)])


def texts(manuscript: Manuscript) -> list[str]:
    return [paragraph.text for paragraph in manuscript.paragraphs]


def only(manuscript: Manuscript) -> Paragraph:
    """The manuscript's single paragraph (fails with the texts if there is not exactly one)."""
    assert len(manuscript.paragraphs) == 1, texts(manuscript)
    return manuscript.paragraphs[0]


def source_of(paragraph: Paragraph, phrase: str, occurrence: int = 0) -> str:
    """The source text that the `occurrence`-th `phrase` in the paragraph's plain text maps to."""
    start = -1
    for _ in range(occurrence + 1):
        start = paragraph.text.index(phrase, start + 1)
    begin, end = paragraph.offsets.source_span(start, start + len(phrase))
    return paragraph.source.text[begin:end]


def paragraph_signature(paragraph: Paragraph) -> tuple[object, ...]:
    """Everything observable about a paragraph, for comparing two parses."""
    return (
        paragraph.id,
        paragraph.kind,
        paragraph.section,
        paragraph.uri,
        paragraph.text,
        tuple(paragraph.offsets.segments()),
        paragraph.range,
    )


def manuscript_signature(manuscript: Manuscript) -> tuple[object, ...]:
    return (
        manuscript.title,
        tuple(paragraph_signature(paragraph) for paragraph in manuscript.paragraphs),
        tuple((problem.uri, problem.range, problem.message) for problem in manuscript.problems),
        tuple(source.uri for source in manuscript.files),
    )


def offset_violations(manuscript: Manuscript, check_words: bool = True) -> list[str]:
    """Every way the manuscript's offset maps break their contract (empty when they are sound).

    * exact segments copy the source character for character;
    * segments tile the plain text and lie within the file;
    * per-character source spans are monotone and lie within the paragraph's span;
    * the paragraph's range has valid positions (line < line count);
    * (check_words) an ASCII word of the plain text outside placeholders maps to itself in the source, or
      to a construct (a macro, an entity or an escape) that produced it.
    """
    problems: list[str] = []
    for paragraph in manuscript.paragraphs:
        source = paragraph.source.text
        text = paragraph.text
        label = f"{text[:60]!r}"
        segments = list(paragraph.offsets.segments())
        if text and not segments:
            problems.append(f"{label}: no segments")
        expected_start = 0
        for segment in segments:
            if segment.plain_start != expected_start or segment.plain_end <= segment.plain_start:
                problems.append(f"{label}: segments do not tile the text at {segment}")
            expected_start = segment.plain_end
            if not 0 <= segment.source_start <= segment.source_end <= len(source):
                problems.append(f"{label}: segment outside the file {segment}")
            if segment.exact:
                copied = source[segment.source_start : segment.source_end]
                plain = text[segment.plain_start : segment.plain_end]
                if copied != plain:
                    problems.append(f"{label}: exact segment {segment} has {plain!r} but source {copied!r}")
        if segments and expected_start != len(text):
            problems.append(f"{label}: segments end at {expected_start}, text at {len(text)}")
        span_start, span_end = paragraph.source_span
        if not 0 <= span_start <= span_end <= len(source):
            problems.append(f"{label}: paragraph span {span_start, span_end} outside the file")
        previous = -1
        for index in range(len(text)):
            begin, end = paragraph.offsets.source_span(index, index + 1)
            if begin < previous:
                problems.append(f"{label}: source spans go backwards at plain offset {index}")
                break
            previous = begin
            if not span_start <= begin <= end <= span_end:
                problems.append(f"{label}: character {index} maps outside the paragraph span")
                break
        line_count = paragraph.source.lines.line_count
        for position in (paragraph.range.start, paragraph.range.end):
            if not (0 <= position.line < line_count and position.character >= 0):
                problems.append(f"{label}: invalid position {position}")
        if check_words:
            for match in _ASCII_WORD.finditer(_PLACEHOLDER.sub(lambda m: " " * len(m.group()), text)):
                begin, end = paragraph.offsets.source_span(match.start(), match.end())
                mapped = source[begin:end]
                if mapped != match.group() and not any(mark in mapped for mark in "\\&{%"):
                    problems.append(f"{label}: word {match.group()!r} maps to {mapped!r}")
    return problems

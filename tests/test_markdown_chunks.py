"""Chunked Markdown parsing (what makes keystrokes cheap) must agree with parsing the whole body at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from margin.workflows.manuscript.markdown.parse import MarkdownProject, front_matter, split_chunks
from margin.workflows.manuscript.source import SourceFile, read_source

from conftest import FIXTURES

MARKDOWN_FIXTURES = sorted(FIXTURES.rglob("*.md"))


def _whole_body_texts(project: MarkdownProject, text: str) -> list[str]:
    start, _ = front_matter(text)
    events, _ = project._parse_chunk(text[start:], False)
    # Parsed whole, a footnote definition keeps its "[^1]:" marker (the reference is dropped, ": " stays);
    # chunked parsing recognises the definition itself. Compare the prose.
    return [event.text.removeprefix(": ") for event in events if hasattr(event, "kind")]


@pytest.mark.parametrize("path", MARKDOWN_FIXTURES, ids=lambda path: str(path.relative_to(FIXTURES)))
def test_chunked_parse_equals_whole_parse(path: Path) -> None:
    source, _ = read_source(path)
    project = MarkdownProject()
    chunked = [paragraph.text for paragraph in project.parse([source]).paragraphs]
    assert chunked == _whole_body_texts(project, source.text)


def test_display_math_with_pandoc_label_does_not_swallow_the_rest() -> None:
    text = "Intro words here.\n\n$$\nx = y\n$$ {#eq:one}\n\nwhere the prose continues after the equation.\n"
    chunks = split_chunks(text, 0)
    assert len(chunks) == 3
    project = MarkdownProject()
    source = SourceFile(uri="file:///tmp/eq.md", text=text)
    texts = [paragraph.text for paragraph in project.parse([source]).paragraphs]
    assert texts == ["Intro words here.", "where the prose continues after the equation."]


def test_fenced_code_with_blank_lines_stays_one_chunk() -> None:
    text = "Before the code.\n\n```python\nx = 1\n\ny = 2\n```\n\nAfter the code.\n"
    bodies = [chunk for _, chunk in split_chunks(text, 0)]
    assert any("x = 1" in body and "y = 2" in body for body in bodies)

"""Real public papers (fixtures/real, each with its source and licence) read as a user's would be: every
paragraph anchored in its source, no markup left in the text, nothing from a preamble or front matter, every
included file read. bench/corpus_bench.py prints the same audit as rates."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import corpus_bench  # a top-level module of the bench folder, as the scripts import each other

ENTRIES = corpus_bench.entries()


def test_the_corpus_has_latex_and_markdown_papers_with_their_licences() -> None:
    folders = sorted(path for path in corpus_bench.CORPUS.iterdir() if path.is_dir())
    assert len(ENTRIES) >= 12
    assert any(entry.suffix == ".tex" for entry in ENTRIES)
    assert any(entry.suffix == ".md" or entry.is_dir() for entry in ENTRIES)
    for folder in folders:
        assert (folder / "SOURCE.md").is_file(), f"{folder.name} says nowhere where it comes from"
    readme = (corpus_bench.CORPUS / "README.md").read_text(encoding="utf-8")
    assert all(folder.name in readme for folder in folders)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: str(entry.relative_to(corpus_bench.CORPUS)))
def test_a_real_paper_is_read_as_its_prose(entry: Path) -> None:
    audit = corpus_bench.audit(entry)
    assert audit.paragraphs > 0
    assert audit.unanchored == [], "paragraphs whose first or last word is not in their source"
    assert audit.with_markup == [], "paragraphs that carry LaTeX or Markdown markup"
    assert audit.from_front_matter == [], "paragraphs from a preamble or front matter"
    assert audit.unread_includes == [], "included files that were not read"

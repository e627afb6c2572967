"""Offset maps and positions: plain text maps back to exact source spans, and LSP positions count UTF-16."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from margin.workflows.manuscript.loader import ManuscriptLoader
from margin.workflows.manuscript.model import Manuscript, Paragraph
from margin.workflows.manuscript.offsets import OffsetMap, Segment, TextBuilder
from margin.workflows.manuscript.source import LineIndex, Position, Range, SourceFile

from conftest import FIXTURES, offset_violations, only, parse_latex, parse_markdown, source_of

# -- TextBuilder and OffsetMap ----------------------------------------------------------------------------------


def test_contiguous_copies_merge_into_one_exact_segment() -> None:
    builder = TextBuilder()
    builder.copy("Hello", 10)
    builder.copy(" world", 15)
    text, offsets = builder.build()
    assert text == "Hello world"
    assert list(offsets.segments()) == [Segment(0, 11, 10, 21, True)]


def test_replacement_segments_stand_for_their_whole_span() -> None:
    builder = TextBuilder()
    builder.copy("Na", 0)
    builder.replace("ï", 2, 5)  # \"i
    builder.copy("ve", 5)
    text, offsets = builder.build()
    assert text == "Naïve"
    assert offsets.source_span(0, 2) == (0, 2)
    assert offsets.source_span(2, 3) == (2, 5)
    assert offsets.source_span(1, 4) == (1, 6)
    assert offsets.source_span(0, 5) == (0, 7)


def test_space_collapses_runs_and_build_trims() -> None:
    builder = TextBuilder()
    builder.space(0, 3)  # leading white space is dropped
    builder.copy("a", 3)
    builder.space(4, 6)
    builder.space(6, 8)  # a second run right after the first adds nothing
    builder.copy("b", 8)
    builder.space(9, 12)
    text, offsets = builder.build()
    assert text == "a b"
    assert offsets.source_span(1, 2) == (4, 6)
    assert offsets.source_span(0, 3) == (3, 9)
    assert offsets.length == 3


def test_trimming_cuts_into_an_exact_segment() -> None:
    builder = TextBuilder()
    builder.copy("  padded  ", 100)
    text, offsets = builder.build()
    assert text == "padded"
    assert list(offsets.segments()) == [Segment(0, 6, 102, 108, True)]


def test_empty_and_inverted_spans_are_points_and_ends_clamp() -> None:
    builder = TextBuilder()
    builder.copy("abcdef", 20)
    _, offsets = builder.build()
    assert offsets.source_span(2, 2) == (22, 22)
    assert offsets.source_span(4, 1) == (24, 24)
    assert offsets.source_span(0, 99) == (20, 26)
    assert offsets.source_span(-5, 2) == (20, 22)


def test_empty_map() -> None:
    _, offsets = TextBuilder().build()
    assert offsets.length == 0
    assert list(offsets.segments()) == []
    assert offsets.source_span(0, 5) == (0, 0)
    assert offsets.rebased(7).source_span(0, 5) == (7, 7)


def test_rebased_and_shifted_maps_move_every_segment() -> None:
    offsets = OffsetMap([0, 3], [0, 5], [3, 9], [True, False], 6)
    assert offsets.rebased(100).source_span(0, 6) == (100, 109)
    assert offsets.shifted(10).source_span(0, 6) == (10, 19)
    assert offsets.shifted(10).rebased(100).source_span(1, 2) == (111, 112)
    assert [segment.source_start for segment in offsets.rebased(100).segments()] == [100, 105]


# -- LineIndex ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "one line",
        "a\nb\n",
        "a\r\nb\r\nc",
        "a\rb\rc",
        "mixed\n\r\nends\r",
        "𝛼 astral 𝛽\nnext 𝛾 line\n",
        "é accents ü\n中文\n",
        "\n\n\n",
    ],
)
def test_line_index_position_offset_round_trip(text: str) -> None:
    index = LineIndex(text)
    for offset in range(len(text) + 1):
        if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n":
            continue  # the middle of a CRLF is not a position a client can name
        position = index.position(offset)
        assert 0 <= position.line < index.line_count
        assert index.offset(position) == offset


def test_line_index_counts_utf16_code_units() -> None:
    text = "a𝛼b\né𝛽c"
    index = LineIndex(text)
    assert index.line_count == 2
    assert index.position(text.index("b")) == Position(0, 3)  # "a" + a surrogate pair
    assert index.position(text.index("c")) == Position(1, 3)
    assert index.offset(Position(0, 3)) == text.index("b")
    assert index.offset(Position(0, 2)) == text.index("b")  # inside the pair: the next character


def test_line_index_clamps_out_of_range_positions() -> None:
    text = "short\nlonger line\n"
    index = LineIndex(text)
    assert index.offset(Position(0, 99)) == len("short")
    assert index.offset(Position(-1, 0)) == 0
    assert index.offset(Position(99, 0)) == len(text)
    assert index.position(-5) == Position(0, 0)
    assert index.position(10_000) == Position(2, 0)


def test_line_index_line_separators_are_only_lsp_ones() -> None:
    # LSP counts \n, \r\n and \r only; U+2028 and form feeds are ordinary characters.
    index = LineIndex("a\u2028b\x0cc\nd")
    assert index.line_count == 2
    assert index.position(5) == Position(0, 5)
    assert index.position(6) == Position(1, 0)


def test_range_contains_is_inclusive() -> None:
    span = Range(Position(1, 2), Position(3, 4))
    assert span.contains(Position(1, 2)) and span.contains(Position(3, 4)) and span.contains(Position(2, 0))
    assert not span.contains(Position(1, 1)) and not span.contains(Position(3, 5))
    assert span.to_json() == {"start": {"line": 1, "character": 2}, "end": {"line": 3, "character": 4}}


# -- paragraphs: words map to words -------------------------------------------------------------------------------

_LATEX = r"""\documentclass{article}
\newcommand{\method}{\textsc{SpaRe}}
\begin{document}
\section{Results}
The accuracy of \method{} improved
across runs, as Na\"ive baselines show \citep[see][p.~3]{smith2020}; the gain
is $\Delta = 3$ points (Table~\ref{tab:main}).
\end{document}
"""


@pytest.fixture
def latex_paragraph() -> Paragraph:
    return only(parse_latex(_LATEX))


def test_latex_word_maps_to_exactly_that_word(latex_paragraph: Paragraph) -> None:
    assert latex_paragraph.text == (
        "The accuracy of SpaRe improved across runs, as Naïve baselines show [citation]; the gain is [math] "
        "points (Table [reference])."
    )
    assert source_of(latex_paragraph, "accuracy") == "accuracy"
    assert source_of(latex_paragraph, "baselines show") == "baselines show"


def test_latex_span_across_a_line_break_covers_the_newline(latex_paragraph: Paragraph) -> None:
    assert source_of(latex_paragraph, "improved across") == "improved\nacross"


def test_latex_accent_user_macro_citation_and_math_map_to_the_whole_construct(
    latex_paragraph: Paragraph,
) -> None:
    assert source_of(latex_paragraph, "Naïve") == 'Na\\"ive'
    assert source_of(latex_paragraph, "ï") == '\\"i'
    assert source_of(latex_paragraph, "SpaRe").startswith("\\method")
    assert source_of(latex_paragraph, "pa") == "\\method"  # any part of a replacement maps to all of it
    assert source_of(latex_paragraph, "[citation]") == "\\citep[see][p.~3]{smith2020}"
    assert source_of(latex_paragraph, "cit") == "\\citep[see][p.~3]{smith2020}"
    assert source_of(latex_paragraph, "[math]") == "$\\Delta = 3$"
    assert source_of(latex_paragraph, "Table [reference]") == "Table~\\ref{tab:main}"


def test_latex_paragraph_range_and_range_of(latex_paragraph: Paragraph) -> None:
    last_line = "is $\\Delta = 3$ points (Table~\\ref{tab:main})."
    assert latex_paragraph.range == Range(Position(4, 0), Position(6, len(last_line)))
    start = latex_paragraph.text.index("accuracy")
    assert latex_paragraph.range_of(start, start + len("accuracy")) == Range(Position(4, 4), Position(4, 12))
    assert latex_paragraph.contains(Position(5, 0))
    assert not latex_paragraph.contains(Position(3, 0))


def test_latex_ranges_are_utf16(tmp_path: Path) -> None:
    paragraph = only(parse_latex("Symbol 𝛼 and 中 then accuracy here.\n"))
    start = paragraph.text.index("accuracy")
    # "Symbol " (7) + 𝛼 (2 units) + " and " (5) + 中 (1) + " then " (6) = 21
    assert paragraph.range_of(start, start + len("accuracy")) == Range(Position(0, 21), Position(0, 29))


def test_markdown_word_and_span_mapping() -> None:
    text = "# Results\n\nThe *accuracy* of the\nmodel improved [@smith2020, p. 3] with $x$ and &amp; here 𝛼 done.\n"
    paragraph = only(parse_markdown(text))
    assert paragraph.text == "The accuracy of the model improved [citation] with [math] and & here 𝛼 done."
    assert source_of(paragraph, "accuracy") == "accuracy"
    assert source_of(paragraph, "the model") == "the\nmodel"
    assert source_of(paragraph, "[citation]") == "[@smith2020, p. 3]"
    assert source_of(paragraph, "[math]") == "$x$"
    start = paragraph.text.index("done")
    line = "model improved [@smith2020, p. 3] with $x$ and &amp; here 𝛼 "
    assert paragraph.range_of(start, start + 4) == Range(
        Position(3, len(line) + 1), Position(3, len(line) + 5)
    )


def test_paragraph_at_finds_the_paragraph_under_the_cursor() -> None:
    manuscript = parse_latex("First paragraph words.\n\nSecond paragraph\nwords here.\n")
    second = manuscript.paragraphs[1]
    assert manuscript.paragraph_at(second.uri, Position(3, 2)) is second
    assert manuscript.paragraph_at(second.uri, Position(1, 0)) is None
    assert manuscript.paragraph_at("file:///elsewhere.tex", Position(3, 2)) is None
    assert manuscript.paragraphs_in(second.uri) == manuscript.paragraphs


# -- the contract over whole manuscripts -------------------------------------------------------------------------

_FIXTURE_PATHS = [
    FIXTURES / "latex" / "paper" / "main.tex",
    FIXTURES / "markdown" / "paper.md",
    FIXTURES / "markdown" / "manubot" / "content",
    FIXTURES / "large" / "large.tex",
    FIXTURES / "large" / "large.md",
    FIXTURES / "broken" / "latin1.tex",
]


def _load(path: Path) -> Manuscript:
    return ManuscriptLoader().load_path(path)[0]


@pytest.mark.parametrize("path", _FIXTURE_PATHS, ids=lambda path: str(path.relative_to(FIXTURES)))
def test_fixture_offsets_satisfy_the_contract(path: Path) -> None:
    manuscript = _load(path)
    assert manuscript.paragraphs
    assert offset_violations(manuscript) == []


@pytest.mark.parametrize("path", _FIXTURE_PATHS[:5], ids=lambda path: str(path.relative_to(FIXTURES)))
def test_fixture_paragraph_ranges_are_in_reading_order_and_do_not_overlap_within_a_file(path: Path) -> None:
    manuscript = _load(path)
    by_file: dict[str, list[tuple[int, int]]] = {}
    for paragraph in manuscript.paragraphs:
        if paragraph.kind.value != "footnote":  # LaTeX footnotes sit inside their host paragraph
            by_file.setdefault(paragraph.uri, []).append(paragraph.source_span)
    for spans in by_file.values():
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start


def test_large_fixtures_word_mapping_samples() -> None:
    for path in (FIXTURES / "large" / "large.tex", FIXTURES / "large" / "large.md"):
        manuscript = _load(path)
        checked = 0
        for paragraph in manuscript.paragraphs[::25]:
            for word in paragraph.text.split():
                if word.isalpha() and word.isascii() and len(word) > 4:
                    assert source_of(paragraph, word) == word
                    checked += 1
                    break
        assert checked > 10


def test_source_file_range_and_display_name() -> None:
    source = SourceFile("file:///tmp/a%20b/paper.tex", "x\ny")
    assert source.display_name == "/tmp/a b/paper.tex"
    assert source.range(0, 3) == Range(Position(0, 0), Position(1, 1))
    assert SourceFile("untitled:Untitled-1", "").display_name == "untitled:Untitled-1"

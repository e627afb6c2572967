"""What the LaTeX and the Markdown parser both promise, each checked in its own syntax: broken input never raises,
citation and cross-reference markup become one placeholder that maps back to the markup, markup around words and
links keeps their text, `margin: off` without `margin: on` hides the rest of the file, and a cached parse equals a
fresh one after any edit.

What only one of them does is in test_latex_parser.py and test_markdown_parser.py."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from test_latex_parser import INCREMENTAL as LATEX_INCREMENTAL
from test_markdown_parser import INCREMENTAL as MARKDOWN_INCREMENTAL

from margin.workflows.manuscript.latex.project import LatexProject
from margin.workflows.manuscript.markdown.parse import MarkdownProject
from margin.workflows.manuscript.model import Manuscript

from conftest import (
    manuscript_signature,
    offset_violations,
    only,
    parse_latex,
    parse_markdown,
    source_of,
    texts,
)

Parse = Callable[..., Manuscript]
LANGUAGE = {parse_latex: "latex", parse_markdown: "markdown"}


def cases(parse: Parse, *values: Any, markups: Sequence[str]) -> list[Any]:
    """One case per markup: (parse, *values, markup), named by the language and the markup."""
    return [pytest.param(parse, *values, markup, id=f"{LANGUAGE[parse]}-{markup}") for markup in markups]


def one_case(parse: Parse, *values: Any) -> Any:
    return pytest.param(parse, *values, id=LANGUAGE[parse])


# -- broken input ---------------------------------------------------------------------------------------------

LATEX_BROKEN_INPUTS = [
    "",
    "\n\n\n",
    "{{{{",
    "}}}} closing braces words",
    "Unbalanced {group with words.\n\nNext paragraph} words.",
    "\\begin{itemize}\n\\item Never closed item words.\n",
    "\\end{itemize} without begin words",
    "\\end{document} early\nLater words.",
    "Unterminated $ math with words\n\nNext paragraph words.",
    "Unterminated \\( math words",
    "Unterminated \\[ math words",
    "\\begin{equation}\nx = 1\n\nNext words.",
    "\\begin{figure}\n\\caption{Never closed float words}\n",
    "\\verb",
    "\\verb|unterminated verb words",
    "\\",
    "\\\\",
    "%",
    "% margin: on\nWords.",
    "\\newcommand",
    "\\newcommand{\\x}[9]{#1#2#3#4#5#6#7#8#9}\\x",
    "\\def\\x#1#2{#2#1}\\x{a}",
    "\\item[unclosed optional words",
    "\\footnote{unclosed footnote words",
    "\\emph{unclosed emphasis words",
    "\\caption",
    "\\begin",
    "\\end",
    "\\input",
    "\\input{}",
    "\\title",
    "\\documentclass",
    "\\documentclass{article}\n\\begin{document}",
    "\\section",
    "\\section[",
    '\\"',
    "\\'",
    "\\c",
    "$$",
    "$",
    "~~~---``''",
    "\x00\x01\x02 control characters words",
    "\ufffd\ufffd replacement characters words",
    "𝛼𝛽𝛾 astral words",
    "\r\n\r\n\r",
]

MARKDOWN_BROKEN_INPUTS = [
    "",
    "\n\n\n",
    "---\n",
    "---\ntitle: unterminated front matter\n",
    "```\nunclosed fence words\n\nmore",
    "<!-- unclosed comment words\n\nmore words",
    "$$\nunclosed display math\n\nwords",
    "$unclosed inline math words",
    "[^1]:",
    "[^1]: ",
    "![](",
    "![alt words",
    "[@",
    "[@unclosed citation words",
    "@",
    "{{",
    "{%",
    "#",
    "# ",
    "> ",
    "- ",
    "1.",
    "|a|\n|-|",
    "Table: ",
    "\\",
    "&",
    "&#;",
    "&#x110000; words",
    "<",
    "`",
    "``unclosed code words",
    "\t\tx",
    "\r",
    "a\rb words",
    "\x00 nul words",
    "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",
    "*a **b* c** words",
    "[link](<unclosed",
    "<div>\nunclosed html words\n\nmore",
    "𝛼𝛽 astral words 𝛾",
]


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        *((parse_latex, text) for text in LATEX_BROKEN_INPUTS),
        *((parse_markdown, text) for text in MARKDOWN_BROKEN_INPUTS),
    ],
    ids=lambda value: LANGUAGE.get(value) if callable(value) else None,
)
def test_broken_input_never_raises_and_keeps_offsets_sound(parse: Parse, text: str) -> None:
    started = time.perf_counter()
    manuscript = parse(text)
    assert time.perf_counter() - started < 5
    assert offset_violations(manuscript) == []


# -- citations and cross-references -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parse", "sentence", "expected", "citation"),
    [
        *cases(
            parse_latex,
            "As shown {} before.",
            "As shown [citation] before.",
            markups=[
                "\\cite{key}",
                "\\cite{a,b}",
                "\\citep{key}",
                "\\citep[see][p.~3]{key}",
                "\\citep[p.~3]{key}",
                "\\citet{key}",
                "\\citet*{key}",
                "\\parencite{key}",
                "\\textcite{key}",
                "\\autocite[12]{key}",
                "\\citeauthor{key}",
            ],
        ),
        # pandoc citations
        *cases(
            parse_markdown,
            "As shown {} earlier.\n",
            "As shown [citation] earlier.",
            markups=[
                "[@doe99]",
                "[@doe99; @smith04, p. 4]",
                "[-@doe99]",
                "[@doe99, pp. 33-35]",
                "@doe99",
                "[@doi:10.1000/xyz]",
            ],
        ),
        # raw TeX in Markdown (pandoc's raw_tex)
        *cases(
            parse_markdown,
            "As shown by {} the model converges.\n",
            "As shown by [citation] the model converges.",
            markups=["\\cite{doe99}", "\\citep[p.~4]{doe99}", "\\citet{doe99,smith04}"],
        ),
    ],
)
def test_citations_become_one_citation_placeholder(
    parse: Parse, sentence: str, expected: str, citation: str
) -> None:
    paragraph = only(parse(sentence.format(citation)))
    assert paragraph.text == expected
    assert source_of(paragraph, "[citation]") == citation


@pytest.mark.parametrize(
    ("parse", "sentence", "expected", "reference"),
    [
        *cases(
            parse_latex,
            "See Figure~{} for details.",
            "See Figure [reference] for details.",
            markups=["\\ref{a}", "\\eqref{eq:a}", "\\cref{a,b}", "\\Cref{a}", "\\autoref{a}"],
        ),
        # pandoc-crossref
        *cases(
            parse_markdown,
            "See {} for details.\n",
            "See [reference] for details.",
            markups=["@fig:overview", "[@fig:overview]", "@tbl:main", "@eq:mp", "@sec:intro"],
        ),
        # raw TeX in Markdown (pandoc's raw_tex)
        *cases(
            parse_markdown,
            "As shown in {} the model converges.\n",
            "As shown in [reference] the model converges.",
            markups=[
                "\\ref{fig:a}",
                "\\eqref{eq:x}",
                "\\autoref{fig:a}",
                "\\cref{sec:b}",
                "\\Cref{sec:b}",
                "\\pageref{x}",
            ],
        ),
    ],
)
def test_references_become_one_reference_placeholder(
    parse: Parse, sentence: str, expected: str, reference: str
) -> None:
    paragraph = only(parse(sentence.format(reference)))
    assert paragraph.text == expected
    assert source_of(paragraph, "[reference]") == reference


# -- markup around words, links ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parse", "text", "expected", "word"),
    [
        one_case(
            parse_latex,
            "Some \\emph{nested \\textbf{bold \\textit{deep}} text} here.",
            "Some nested bold deep text here.",
            "deep",
        ),
        one_case(
            parse_markdown,
            "Some *emph*, **bold**, _under_ and ~~struck~~ words.\n",
            "Some emph, bold, under and struck words.",
            "bold",
        ),
    ],
)
def test_markup_around_words_keeps_their_text(parse: Parse, text: str, expected: str, word: str) -> None:
    paragraph = only(parse(text))
    assert paragraph.text == expected
    assert source_of(paragraph, word) == word


@pytest.mark.parametrize(
    ("parse", "text", "expected"),
    [
        one_case(
            parse_latex,
            "Code is at \\url{https://x.org/a_b} and \\href{https://x.org}{our site}.",
            "Code is at [url] and our site.",
        ),
        one_case(
            parse_markdown,
            "See [the project page](https://x.org) or <https://x.org/a>.\n",
            "See the project page or [url].",
        ),
    ],
)
def test_links_keep_their_text_and_bare_urls_become_url_placeholders(
    parse: Parse, text: str, expected: str
) -> None:
    assert only(parse(text)).text == expected


# -- ignored regions ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parse", "text", "expected"),
    [
        one_case(parse_latex, "Kept words.\n\n%margin:off\nGone words.\n\nStill gone.\n", ["Kept words."]),
        one_case(
            parse_markdown, "Visible words.\n\n<!-- margin: off -->\n\nHidden words.\n", ["Visible words."]
        ),
    ],
)
def test_margin_off_without_on_skips_to_the_end(parse: Parse, text: str, expected: list[str]) -> None:
    assert texts(parse(text)) == expected


# -- the chunk cache ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parse", "new_project", "text", "seed", "edits", "insertions"),
    [
        one_case(
            parse_latex, LatexProject, LATEX_INCREMENTAL, 3, 40, ["x", "{", "}", "$", "%", "\\emph{", "\n\n"]
        ),
        one_case(
            parse_markdown,
            MarkdownProject,
            MARKDOWN_INCREMENTAL,
            5,
            60,
            ["x", "*", "`", "$", "$$\n", "```\n", "<!--", "-->", "[^1]: ", "> ", "\n\n"],
        ),
    ],
)
def test_cached_parse_equals_fresh_parse_over_a_sequence_of_edits(
    parse: Parse,
    new_project: Callable[[], LatexProject | MarkdownProject],
    text: str,
    seed: int,
    edits: int,
    insertions: list[str],
) -> None:
    project = new_project()
    generator = random.Random(seed)
    for _ in range(edits):
        position = generator.randrange(len(text))
        action = generator.choice(["insert", "delete", "newline"])
        if action == "insert":
            text = text[:position] + generator.choice(insertions) + text[position:]
        elif action == "delete":
            text = text[:position] + text[position + generator.randint(1, 5) :]
        else:
            text = text[:position] + "\n" + text[position:]
        cached = parse(text, project=project)
        assert manuscript_signature(cached) == manuscript_signature(parse(text))

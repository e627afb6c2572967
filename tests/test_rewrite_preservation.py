"""What a rewrite must keep (preservation.py), how comments and edits are carried over (edits.py), the last safety
step of every rewrite (safety.finalize), and the files margin writes (output.py, Transcript.save).

Unit tests pin the tricky inputs (escaped \\$ and \\%, comments, \\cite with optional arguments and several keys,
display math, emails next to @citations, URLs with trailing punctuation); property tests build paragraphs from
well-formed fragments and check that shuffling keeps everything, dropping one fragment loses exactly it, and
comments never count.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from random import Random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule, ScriptedEndpoint
from margin.workflows.llm.client import LLMClient
from margin.workflows.rewrite.edits import apply_rewrites, carry_comments, targets_in
from margin.workflows.rewrite.output import create_beside, write_output
from margin.workflows.rewrite.preservation import (
    CITATION,
    CODE,
    FOOTNOTE,
    LABEL,
    LINK,
    MACRO,
    MATH,
    REFERENCE,
    describe,
    missing_elements,
    protected_elements,
)
from margin.workflows.rewrite.safety import finalize
from margin.workflows.rewrite.team import Team
from margin.workflows.rewrite.transcript import Transcript, Turn
from margin.workflows.rewrite.types import Language, RewriteStatus

from conftest import (
    LATEX_URI,
    ClientFactory,
    ScriptedFactory,
    chat_requests_in_order,
    feedback_llm_config,
    parse_latex,
)

LATEX, MARKDOWN = Language.LATEX, Language.MARKDOWN
PROPERTY_SETTINGS = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def kinds_and_keys(source: str, language: Language) -> list[tuple[str, str]]:
    return [(element.kind, element.key) for element in protected_elements(source, language)]


def lost(
    original: str, rewrite: str, language: Language, explained: dict[str, str] | None = None
) -> list[str]:
    return [str(element) for element in missing_elements(original, rewrite, language, explained)]


# -- LaTeX: what is protected --------------------------------------------------------------------------------------


def test_latex_escaped_dollar_and_percent_are_neither_math_nor_comments() -> None:
    source = r"It costs \$5 or \$6, and 10\% more people came \cite{smith20}."
    assert kinds_and_keys(source, LATEX) == [(CITATION, "smith20")]


def test_latex_escaped_dollar_inside_math_does_not_end_the_math() -> None:
    assert kinds_and_keys(r"Pay $a \$ b$ now.", LATEX) == [(MATH, r"$a\$b$")]


def test_latex_comment_contents_are_not_protected() -> None:
    source = "Plain words \\ref{fig:a} % TODO \\cite{hidden} $x$ \\url{http://hidden.org}\nmore words."
    assert kinds_and_keys(source, LATEX) == [(REFERENCE, "fig:a")]


def test_latex_cite_with_optional_arguments_and_several_keys_gives_one_citation_per_key() -> None:
    source = r"See \cite[p.~3]{smith20, jones21} and \citep[see][ch.~2]{doe99}."
    elements = protected_elements(source, LATEX)
    assert [(element.kind, element.key) for element in elements] == [
        (CITATION, "smith20"),
        (CITATION, "jones21"),
        (CITATION, "doe99"),
    ]
    assert [element.text for element in elements] == [r"\cite{smith20}", r"\cite{jones21}", r"\citep{doe99}"]


def test_latex_citet_and_citep_are_named_as_written_in_messages() -> None:
    elements = protected_elements(r"As \citet{smith20} show \citep{jones21}.", LATEX)
    assert [element.text for element in elements] == [r"\citet{smith20}", r"\citep{jones21}"]
    assert describe(elements) == r"2 citations (\citet{smith20}, \citep{jones21})"


@pytest.mark.parametrize(
    "command",
    [r"\textcite", r"\parencite*", r"\autocite", r"\citeauthor", r"\citeyear", r"\nocite"],
)
def test_latex_citation_command_variants_are_citations(command: str) -> None:
    assert kinds_and_keys(f"Words {command}{{key1}} words.", LATEX) == [(CITATION, "key1")]


def test_latex_capitalised_citation_commands_protect_every_key() -> None:
    assert lost(r"\Citet{smith20,jones21} showed it.", r"\Citet{smith20} showed it.", LATEX) == [
        r"citation \Citet{jones21}"
    ]


def test_latex_math_delimiters_are_all_math() -> None:
    source = r"Display $$x^2$$, inline \(y\), bracket \[z = 1\] and dollar $a$."
    assert [element.text for element in protected_elements(source, LATEX)] == [
        "$$x^2$$",
        r"\(y\)",
        r"\[z = 1\]",
        "$a$",
    ]


def test_latex_macros_inside_math_are_part_of_the_math_not_macros() -> None:
    assert kinds_and_keys(r"The norm $\alpha + \beta$ grows.", LATEX) == [(MATH, r"$\alpha+\beta$")]


def test_latex_nested_braces_keep_the_outer_macro() -> None:
    source = r"A \textbf{bold {nested} phrase} and \emph{x}."
    assert kinds_and_keys(source, LATEX) == [(MACRO, r"\textbf"), (MACRO, r"\emph")]


def test_latex_references_labels_urls_and_environments() -> None:
    source = (
        r"\label{sec:intro} See \cref{fig:a,tab:b}, \eqref{eq:1} and \url{https://x.org/a_b} or "
        r"\href{https://y.org}{the site}. \begin{itemize}\item one\end{itemize}"
    )
    assert kinds_and_keys(source, LATEX) == [
        (REFERENCE, "fig:a"),
        (REFERENCE, "tab:b"),
        (REFERENCE, "eq:1"),
        (LABEL, "sec:intro"),
        (LINK, "https://x.org/a_b"),
        (LINK, "https://y.org"),
        (MACRO, r"\begin{itemize}"),
        (MACRO, r"\end{itemize}"),
        (MACRO, r"\item"),
    ]


# -- LaTeX: what counts as lost ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("original", "rewrite", "expected"),
    [
        (r"See \cite{a,b}.", r"See \cite{b,a}.", []),
        (r"See \cite{a} and again \cite{a}.", r"See \cite{a}.", []),
        (r"See \cite{a,b}.", r"See \cite{a}.", [r"citation \cite{b}"]),
        (r"See \citet{a}.", r"Smith and colleagues \citep{a} saw it.", []),
        (r"Text \ref{a}.", r"Text \ref{b}.", [r"reference \ref{a}"]),
        (r"\label{sec:a}Words.", "Words.", [r"label \label{sec:a}"]),
        (r"Go to \url{http://a.org}.", "Go to the site.", [r"link \url{http://a.org}"]),
        ("We use $x + y$ here.", "Here we use $x+y$.", []),
        ("We use $$x^2$$ here.", "We use $x^2$ here.", ["math $$x^2$$"]),
        (r"We use \(x\) here.", "We use $x$ here.", [r"math \(x\)"]),
        (r"An \emph{important} point.", "An important point.", [r"macro \emph"]),
        (r"Words % \cite{gone}", "Simpler words", []),
        (r"It is 10\% more \cite{k}.", r"It is 10\% higher \cite{k}.", []),
    ],
)
def test_latex_missing_elements(original: str, rewrite: str, expected: list[str]) -> None:
    assert lost(original, rewrite, LATEX) == expected


def test_latex_a_cite_commented_out_by_the_rewrite_is_lost() -> None:
    assert lost(r"Shown \cite{k}.", r"Shown. % \cite{k}", LATEX) == [
        r"citation \cite{k}",
        r"hidden % \cite{k}",
    ]


def test_latex_math_and_macros_may_be_explained_in_words_that_the_rewrite_contains() -> None:
    original = r"The rate $\lambda$ is \emph{high}."
    rewrite = "The decay rate is very high."
    explained = {r"$\lambda$": "decay rate", r"\emph": "very high"}
    assert lost(original, rewrite, LATEX, explained) == []


def test_latex_explanation_words_missing_from_the_rewrite_do_not_count() -> None:
    assert lost("The rate $\\lambda$ is high.", "The rate is high.", LATEX, {"$\\lambda$": "decay rate"}) == [
        "math $\\lambda$"
    ]
    assert lost("The rate $\\lambda$ is high.", "The rate is high.", LATEX, {"$\\lambda$": "  "}) == [
        "math $\\lambda$"
    ]


@pytest.mark.parametrize(
    ("original", "element_text"),
    [
        (r"See \cite{a}.", r"\cite{a}"),
        (r"See \ref{fig:a}.", r"\ref{fig:a}"),
        (r"\label{x}See.", r"\label{x}"),
        (r"See \url{http://a.org}.", r"\url{http://a.org}"),
    ],
)
def test_latex_citations_references_labels_and_links_can_never_be_explained_away(
    original: str, element_text: str
) -> None:
    assert len(missing_elements(original, "See it.", LATEX, {element_text: "it"})) == 1


def test_latex_a_line_break_before_a_word_is_not_a_macro() -> None:
    assert lost(r"First line\\second line.", "First line, second line.", LATEX) == []


def test_latex_a_comment_right_after_a_line_break_is_a_comment() -> None:
    original = "Row one\\\\% note \\cite{hidden}\nrow two."
    assert kinds_and_keys(original, LATEX) == []
    assert carry_comments(original, "Rows one and two.", LATEX).endswith("\n% note \\cite{hidden}")


def test_latex_a_url_with_percent_encoding_is_protected_and_not_a_comment() -> None:
    original = r"Data at \url{https://x.org/a%20b} and \href{https://y.org/c%2Fd}{here}."
    assert lost(original, "Data online.", LATEX) == [
        r"link \url{https://x.org/a%20b}",
        r"link \href{https://y.org/c%2Fd}",
    ]
    kept = r"Data at \url{https://x.org/a%20b}, \href{https://y.org/c%2Fd}{here}."
    assert carry_comments(original, kept, LATEX) == kept


# -- Markdown: what is protected -----------------------------------------------------------------------------------


def test_markdown_emails_are_not_citations_but_at_keys_are() -> None:
    source = "Write to john@example.com or a.b@c.org; see @smith2020, [@doe99; @roe, p. 3] and -@lee."
    assert kinds_and_keys(source, MARKDOWN) == [
        (CITATION, "smith2020"),
        (CITATION, "doe99"),
        (CITATION, "roe"),
        (CITATION, "lee"),
    ]


def test_markdown_citation_keys_stop_before_trailing_punctuation_and_possessives() -> None:
    assert kinds_and_keys("As @smith2020's study and @doe99. Also @{odd.key}.", MARKDOWN) == [
        (CITATION, "smith2020"),
        (CITATION, "doe99"),
        (CITATION, "odd.key"),
    ]


def test_markdown_crossref_keys_are_references() -> None:
    assert kinds_and_keys("See @fig:one and @tbl:two but @smith.", MARKDOWN) == [
        (REFERENCE, "fig:one"),
        (REFERENCE, "tbl:two"),
        (CITATION, "smith"),
    ]


def test_markdown_bare_urls_drop_trailing_punctuation() -> None:
    source = "See https://example.org/path. Also https://x.org/b?q=1, and https://y.org/c;"
    assert [key for _, key in kinds_and_keys(source, MARKDOWN)] == [
        "https://example.org/path",
        "https://x.org/b?q=1",
        "https://y.org/c",
    ]


def test_markdown_inline_image_reference_and_autolinks() -> None:
    source = (
        'A [link](http://a.b/c "title"), ![img](pic.png), a [ref link][ref], <https://auto.org> and '
        "<mailto:x@y.z>."
    )
    assert kinds_and_keys(source, MARKDOWN) == [
        (LINK, "http://a.b/c"),
        (LINK, "pic.png"),
        (LINK, "[ref]"),
        (LINK, "https://auto.org"),
        (LINK, "mailto:x@y.z"),
    ]


def test_markdown_footnotes_math_and_code() -> None:
    source = "Inline `code $x$` and ``a ` b``, math $y$ and $$z$$, a note[^1], costs $5 and $6."
    assert kinds_and_keys(source, MARKDOWN) == [
        (CODE, "`code$x$`"),
        (CODE, "``a`b``"),
        (MATH, "$y$"),
        (MATH, "$$z$$"),
        (FOOTNOTE, "[^1]"),
    ]


def test_markdown_escaped_dollars_are_not_math() -> None:
    assert kinds_and_keys(r"Prices \$5 and \$x\$ here.", MARKDOWN) == []


@pytest.mark.parametrize(
    ("original", "rewrite", "expected"),
    [
        ("See [@a; @b].", "See [@b; @a].", []),
        ("@smith says so.", "Smith says so.", ["citation @smith"]),
        ("See @fig:one.", "See the figure.", ["reference @fig:one"]),
        ("Go to https://x.org/a.", "Go to https://x.org/a", []),
        ("See [a][ref] here.", "See [another text][ref] here.", []),
        ("See [a][ref] here.", "See here.", ["link [ref]"]),
        ("See [the site](http://a.org/x).", "See http://a.org/x.", []),
        ("A note[^1].", "A note.", ["footnote [^1]"]),
        ("Run `make all` now.", "Run the build now.", ["code `make all`"]),
        ("Mail john@example.com now.", "Mail John now.", []),
    ],
)
def test_markdown_missing_elements(original: str, rewrite: str, expected: list[str]) -> None:
    assert lost(original, rewrite, MARKDOWN) == expected


def test_markdown_code_may_be_explained_but_links_may_not() -> None:
    original = "Run `make all` from [the site](http://a.org)."
    assert lost(original, "Run the build from the site.", MARKDOWN, {"`make all`": "the build"}) == [
        "link http://a.org"
    ]


def test_markdown_a_bare_url_in_parentheses_is_protected() -> None:
    assert lost("The data are public (https://data.org/x).", "The data are public.", MARKDOWN) == [
        "link https://data.org/x"
    ]


def test_markdown_html_comment_contents_are_not_protected_like_latex_comments() -> None:
    assert protected_elements("Words <!-- TODO @smith $x$ https://a.org --> more.", MARKDOWN) == []


# -- describe ------------------------------------------------------------------------------------------------------


def test_describe_groups_by_kind_with_plurals_and_an_oxford_free_and() -> None:
    elements = protected_elements(r"\cite{a}\cite{b} $x$ \ref{r} \url{http://u.org}", LATEX)
    assert describe(elements) == (
        r"2 citations (\cite{a}, \cite{b}), 1 reference (\ref{r}), 1 link (\url{http://u.org}) and "
        r"1 math span ($x$)"
    )
    assert (
        describe(protected_elements(r"\cite{a} $x$", LATEX)) == r"1 citation (\cite{a}) and 1 math span ($x$)"
    )
    assert describe(protected_elements("`a` and `b`", MARKDOWN)) == "2 code spans (`a`, `b`)"


def test_describe_shows_four_examples_then_an_ellipsis_but_counts_all() -> None:
    elements = protected_elements(r"\cite{a,b,c,d,e,f}", LATEX)
    assert describe(elements) == r"6 citations (\cite{a}, \cite{b}, \cite{c}, \cite{d}, ...)"


def test_describe_of_nothing_is_empty() -> None:
    assert describe([]) == ""


# -- properties: paragraphs built from well-formed fragments --------------------------------------------------------

_KEYS = st.builds("{}{}".format, st.text(alphabet="abcdefghk", min_size=2, max_size=5), st.integers(10, 99))
_LATEX_FRAGMENTS = {
    CITATION: ["\\cite{%s}", "\\citet{%s}", "\\citep[p.~3]{%s}", "\\parencite{%s}"],
    REFERENCE: ["\\ref{fig:%s}", "\\eqref{eq:%s}", "\\cref{sec:%s}"],
    LABEL: ["\\label{%s}"],
    LINK: ["\\url{https://example.org/%s}"],
    MATH: ["$x_{%s}$", "\\(y_{%s}\\)", "$$z_{%s}$$"],
}
_MARKDOWN_FRAGMENTS = {
    CITATION: ["@%s", "[@%s]", "[see @%s, p. 3]"],
    LINK: ["[the text](https://example.org/%s)", "https://example.org/%s", "<https://example.org/%s>"],
    FOOTNOTE: ["[^%s]"],
    MATH: ["$x_%s$"],
    CODE: ["`run %s`"],
}
_PLAIN_WORDS = st.lists(
    st.sampled_from(
        [
            "the",
            "results",
            "show",
            "that",
            "we",
            "use",
            "data,",
            "10\\%",
            "\\$5",
            "however",
            "(see",
            "below).",
        ]
    ),
    min_size=0,
    max_size=4,
).map(" ".join)
_MARKDOWN_WORDS = st.lists(
    st.sampled_from(
        ["the", "results", "show", "that", "we", "use", "data,", "john@example.com", "\\$5", "(see"]
    ),
    min_size=0,
    max_size=4,
).map(" ".join)


@st.composite
def fragments(draw: st.DrawFn, table: dict[str, list[str]]) -> list[tuple[str, str]]:
    """Distinct-keyed (kind, fragment) pairs, one protected element each."""
    keys = draw(st.lists(_KEYS, min_size=1, max_size=6, unique=True))
    chosen = []
    for key in keys:
        kind = draw(st.sampled_from(sorted(table)))
        template = draw(st.sampled_from(table[kind]))
        chosen.append((kind, template % key))
    return chosen


def interleave(pieces: list[str], words: list[str]) -> str:
    parts: list[str] = []
    for index, piece in enumerate(pieces):
        parts += [words[index % len(words)] if words else "", piece]
    return " ".join(part for part in parts if part) + " end."


@PROPERTY_SETTINGS
@given(fragments(_LATEX_FRAGMENTS), st.lists(_PLAIN_WORDS, min_size=1, max_size=3), st.randoms())
def test_property_latex_shuffled_fragments_lose_nothing_and_dropping_one_loses_exactly_it(
    pieces: list[tuple[str, str]], words: list[str], rng: Random
) -> None:
    texts = [text for _, text in pieces]
    original = interleave(texts, words)
    assert [kind for kind, _ in kinds_and_keys(original, LATEX)] == sorted(
        (kind for kind, _ in pieces), key=[CITATION, REFERENCE, LABEL, LINK, MATH].index
    )
    shuffled = list(texts)
    rng.shuffle(shuffled)
    assert lost(original, interleave(shuffled, list(reversed(words))), LATEX) == []
    assert lost(original, original, LATEX) == []
    for index in range(len(texts)):
        rewrite = interleave(texts[:index] + texts[index + 1 :], words)
        assert [element.kind for element in missing_elements(original, rewrite, LATEX)] == [pieces[index][0]]


@PROPERTY_SETTINGS
@given(fragments(_MARKDOWN_FRAGMENTS), st.lists(_MARKDOWN_WORDS, min_size=1, max_size=3), st.randoms())
def test_property_markdown_shuffled_fragments_lose_nothing_and_dropping_one_loses_exactly_it(
    pieces: list[tuple[str, str]], words: list[str], rng: Random
) -> None:
    texts = [text for _, text in pieces]
    original = interleave(texts, words)
    assert sorted(kind for kind, _ in kinds_and_keys(original, MARKDOWN)) == sorted(
        kind for kind, _ in pieces
    )
    shuffled = list(texts)
    rng.shuffle(shuffled)
    assert lost(original, interleave(shuffled, list(reversed(words))), MARKDOWN) == []
    for index in range(len(texts)):
        rewrite = interleave(texts[:index] + texts[index + 1 :], words)
        assert [element.kind for element in missing_elements(original, rewrite, MARKDOWN)] == [
            pieces[index][0]
        ]


@PROPERTY_SETTINGS
@given(fragments(_LATEX_FRAGMENTS), fragments(_LATEX_FRAGMENTS), _PLAIN_WORDS)
def test_property_latex_comments_never_add_protected_elements(
    kept: list[tuple[str, str]], commented: list[tuple[str, str]], words: str
) -> None:
    body = interleave([text for _, text in kept], [words])
    with_comments = f"{body} % {' '.join(text for _, text in commented)}\nmore words % and {words}\n"
    assert protected_elements(with_comments, LATEX) == protected_elements(body + "\nmore words\n", LATEX)


@PROPERTY_SETTINGS
@given(fragments(_LATEX_FRAGMENTS))
def test_property_describe_counts_every_lost_element(pieces: list[tuple[str, str]]) -> None:
    elements = protected_elements(" ".join(text for _, text in pieces), LATEX)
    text = describe(elements)
    counts = [int(number) for number in re.findall(r"(?:^|, | and )(\d+) ", text)]
    assert sum(counts) == len(elements)


# -- edits: comments carried over and spans replaced ----------------------------------------------------------------


def test_carry_comments_appends_each_dropped_latex_comment_on_its_own_line() -> None:
    original = "Formal words % first note\nmore formal words % second note\n"
    assert carry_comments(original, "Plain words.\n", LATEX) == "Plain words.\n% first note\n% second note\n"


def test_carry_comments_keeps_comments_the_rewrite_kept_once() -> None:
    original = "Words % note\nmore."
    rewrite = "Simpler % note\nmore."
    assert carry_comments(original, rewrite, LATEX) == rewrite


def test_carry_comments_does_not_mistake_an_escaped_percent_for_a_comment() -> None:
    assert carry_comments(r"It grew 10\% a year.", "It grew ten percent a year.", LATEX) == (
        "It grew ten percent a year."
    )


def test_carry_comments_carries_markdown_html_comments() -> None:
    original = "Words <!-- keep\nthis --> more words."
    assert carry_comments(original, "Simple words.", MARKDOWN) == "Simple words.\n<!-- keep\nthis -->"


_COMMENT_TEXT = st.text(alphabet=st.sampled_from(list("abc xyz.,;:{}")), min_size=0, max_size=12)
_REWRITE_TEXT = st.text(alphabet=st.sampled_from(list("abcdefg .,\n")), min_size=0, max_size=40)


@PROPERTY_SETTINGS
@given(st.lists(st.tuples(_REWRITE_TEXT, _COMMENT_TEXT), min_size=1, max_size=4), _REWRITE_TEXT)
def test_property_carry_comments_keeps_every_comment_and_the_whole_rewrite_and_is_idempotent(
    lines: list[tuple[str, str]], rewrite: str
) -> None:
    original = "".join(f"{text.replace(chr(10), ' ')} %{comment}\n" for text, comment in lines)
    carried = carry_comments(original, rewrite, LATEX)
    assert carried.startswith(rewrite.rstrip())
    assert carried.endswith(rewrite[len(rewrite.rstrip()) :])
    for _, comment in lines:
        assert f"%{comment}" in carried
    assert carry_comments(original, carried, LATEX) == carried


def test_apply_rewrites_replaces_spans_given_in_any_order() -> None:
    text = "0123456789"
    assert apply_rewrites(text, [(6, 8, "B"), (0, 2, "A"), (8, 8, "+")]) == "A2345B+89"
    assert apply_rewrites(text, []) == text


def test_apply_rewrites_allows_adjacent_spans_and_refuses_overlapping_ones() -> None:
    assert apply_rewrites("abcdef", [(0, 3, "X"), (3, 6, "Y")]) == "XY"
    with pytest.raises(ValueError, match="overlapping"):
        apply_rewrites("abcdef", [(0, 4, "X"), (3, 6, "Y")])


@st.composite
def disjoint_replacements(draw: st.DrawFn) -> tuple[str, list[tuple[int, int, str]]]:
    text = draw(st.text(alphabet="abcdef \n", min_size=0, max_size=40))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=8, unique=True)))
    pairs = [(cuts[index], cuts[index + 1]) for index in range(0, len(cuts) - 1, 2)]
    replacements = [(start, end, draw(st.text(alphabet="XYZ", max_size=5))) for start, end in pairs]
    return text, draw(st.permutations(replacements))


@PROPERTY_SETTINGS
@given(disjoint_replacements())
def test_property_apply_rewrites_equals_replacing_from_the_end(
    case: tuple[str, list[tuple[int, int, str]]],
) -> None:
    text, replacements = case
    expected = text
    for start, end, new in sorted(replacements, key=lambda item: (item[0], item[1]), reverse=True):
        expected = expected[:start] + new + expected[end:]
    assert apply_rewrites(text, replacements) == expected


def test_targets_and_apply_rewrites_change_only_the_paragraph_spans() -> None:
    source = (
        "\\section{Intro}\nFirst paragraph has words \\cite{a} % a comment\nand continues here.\n\n"
        "Second paragraph with $x$ math.\n"
    )
    manuscript = parse_latex(source)
    targets = targets_in(manuscript, LATEX_URI)
    assert [target.source for target in targets] == [
        "First paragraph has words \\cite{a} % a comment\nand continues here.",
        "Second paragraph with $x$ math.",
    ]
    assert apply_rewrites(source, [(t.start, t.end, t.source) for t in targets]) == source
    changed = apply_rewrites(source, [(t.start, t.end, f"<{n}>") for n, t in enumerate(targets)])
    assert changed == "\\section{Intro}\n<0>\n\n<1>\n"


# -- safety.finalize: the last step of every paragraph rewrite -------------------------------------------------------


TeamFactory = Callable[..., tuple[Team, ScriptedEndpoint]]


@pytest.fixture
def team_factory(scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path) -> TeamFactory:
    """A Team on a scripted endpoint answering with `rules` (cache off, so every call reaches the server)."""

    def make(*rules: Rule) -> tuple[Team, ScriptedEndpoint]:
        endpoint = scripted(*rules)
        client: LLMClient = llm_clients(feedback_llm_config(endpoint, tmp_path, cache_enabled=False))
        return Team(client, Transcript("test")), endpoint

    return make


async def test_finalize_keeps_outer_space_and_carries_dropped_comments(team_factory: TeamFactory) -> None:
    team, endpoint = team_factory()
    original = "  Consequently it works \\cite{k}. % check this\n"
    result = await finalize(team, original, "```latex\nSo it works \\cite{k}.\n```", LATEX, role="simplifier")
    assert result.status is RewriteStatus.REWRITTEN
    assert result.text == "  So it works \\cite{k}.\n% check this\n"
    assert chat_requests_in_order(endpoint) == []


async def test_finalize_of_an_empty_or_identical_candidate_changes_nothing(team_factory: TeamFactory) -> None:
    team, _ = team_factory()
    original = "It works \\cite{k}."
    empty = await finalize(team, original, "  ", LATEX, role="simplifier")
    same = await finalize(team, original, f"\n{original}\n", LATEX, role="simplifier")
    assert (empty.status, empty.text) == (RewriteStatus.FAILED, original)
    assert (same.status, same.text, same.changed) == (RewriteStatus.UNCHANGED, original, False)


async def test_finalize_repairs_once_with_the_repair_prompt_then_applies(team_factory: TeamFactory) -> None:
    def restore(request: RecordedRequest) -> Reply:
        return Reply(json={"text": "So it works \\cite{k} with $x$."})

    team, endpoint = team_factory(Rule(role="simplifier", respond=restore))
    result = await finalize(
        team, "Thus it works \\cite{k} with $x$.", "So it works.", LATEX, role="simplifier"
    )
    requests = chat_requests_in_order(endpoint)
    assert [request.role for request in requests] == ["simplifier"]
    assert requests[0].body["messages"][0]["content"].startswith("You repair a rewritten passage")
    assert "Your rewrite lost 1 citation (\\cite{k}) and 1 math span ($x$)" in requests[0].prompt
    assert (result.status, result.text) == (RewriteStatus.REWRITTEN, "So it works \\cite{k} with $x$.")


async def test_finalize_refuses_when_the_repair_still_loses_and_names_what(team_factory: TeamFactory) -> None:
    team, endpoint = team_factory(Rule(role="simplifier", replies=[Reply(json={"text": "So it works."})]))
    original = "Thus it works \\cite{k}."
    result = await finalize(team, original, "So it works.", LATEX, role="simplifier")
    assert len(chat_requests_in_order(endpoint)) == 1
    assert result.status is RewriteStatus.REFUSED
    assert result.text == original and not result.changed
    assert result.missing == ["citation \\cite{k}"]
    assert "\\cite{k}" in result.message
    assert any("\\cite{k}" in note for note in team.transcript.notes)


async def test_finalize_refuses_when_the_repair_call_fails(team_factory: TeamFactory) -> None:
    team, _ = team_factory(Rule(role="simplifier", replies=[Reply(status=500)]))
    result = await finalize(team, "Thus \\cite{k}.", "So.", LATEX, role="simplifier")
    assert result.status is RewriteStatus.REFUSED
    assert result.failures and "server_error" in result.failures[-1]


async def test_finalize_markdown_comment_dropped_by_the_model_is_carried_not_refused(
    team_factory: TeamFactory,
) -> None:
    team, _ = team_factory(Rule(role="simplifier", replies=[Reply(json={"text": "Simple words."})]))
    original = "Formal words <!-- TODO cite @smith --> here."
    result = await finalize(team, original, "Simple words.", MARKDOWN, role="simplifier")
    assert result.status is RewriteStatus.REWRITTEN
    assert result.text == "Simple words.\n<!-- TODO cite @smith -->"


async def test_finalize_never_applies_a_rewrite_that_comments_out_its_own_words(
    team_factory: TeamFactory,
) -> None:
    team, _ = team_factory(
        Rule(role="simplifier", replies=[Reply(json={"text": "About 10% of patients got better."})])
    )
    result = await finalize(
        team,
        r"Approximately 10\% of patients improved.",
        "About 10% of patients got better.",
        LATEX,
        role="simplifier",
    )
    visible = re.sub(r"(?<!\\)%[^\n]*", "", result.text)
    assert "patients" in visible


# -- output: never overwrite ---------------------------------------------------------------------------------------


def test_create_beside_numbers_new_files_and_never_touches_existing_ones(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "er" / "paper-lay-article.md"
    first = create_beside(target, "one")
    second = create_beside(target, "two")
    (tmp_path / "deep" / "er" / "paper-lay-article-3.md").write_text("taken by the user")
    fourth = create_beside(target, "four")
    assert [first.name, second.name, fourth.name] == [
        "paper-lay-article.md",
        "paper-lay-article-2.md",
        "paper-lay-article-4.md",
    ]
    assert [path.read_text() for path in (first, second, fourth)] == ["one", "two", "four"]
    assert (tmp_path / "deep" / "er" / "paper-lay-article-3.md").read_text() == "taken by the user"


def test_create_beside_without_a_suffix_and_with_exact_newlines(tmp_path: Path) -> None:
    assert create_beside(tmp_path / "notes", "a\r\nb\n").read_bytes() == b"a\r\nb\n"
    assert create_beside(tmp_path / "notes", "c").name == "notes-2"


def test_create_beside_from_many_threads_gives_distinct_files(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    paths: list[Path] = []
    lock = threading.Lock()
    barrier = threading.Barrier(16)

    def write(number: int) -> None:
        barrier.wait()
        path = create_beside(target, f"writer {number}")
        with lock:
            paths.append(path)

    threads = [threading.Thread(target=write, args=(number,)) for number in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(paths)) == 16
    assert sorted(path.read_text() for path in paths) == sorted(f"writer {number}" for number in range(16))
    assert sorted(os.listdir(tmp_path)) == sorted(path.name for path in paths)


def test_write_output_refuses_an_existing_file_without_force(tmp_path: Path) -> None:
    path = tmp_path / "simple.tex"
    path.write_text("the user's file")
    with pytest.raises(FileExistsError, match="--force"):
        write_output(path, "new text")
    assert path.read_text() == "the user's file"


def test_write_output_creates_a_new_file_and_replaces_only_with_force(tmp_path: Path) -> None:
    path = tmp_path / "simple.tex"
    assert write_output(path, "first") == path
    assert write_output(path, "second", force=True) == path
    assert path.read_text() == "second"
    assert sorted(os.listdir(tmp_path)) == ["simple.tex"], "no temporary file is left behind"


def test_forced_write_never_follows_a_link_planted_at_the_old_temporary_name(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    path = tmp_path / "simple.tex"
    path.write_text("old")
    (tmp_path / ".simple.tex.margin-tmp").symlink_to(victim)  # the name the temporary file used to have
    assert write_output(path, "new", force=True) == path
    assert victim.read_text() == "precious"
    assert path.read_text() == "new" and not path.is_symlink()


def test_forced_write_replaces_a_link_itself_not_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    path = tmp_path / "simple.tex"
    path.symlink_to(victim)
    write_output(path, "new", force=True)
    assert victim.read_text() == "precious"
    assert path.read_text() == "new" and not path.is_symlink()


# -- Transcript.save ----------------------------------------------------------------------------------------------


def test_transcript_save_writes_a_new_json_file_each_time(tmp_path: Path) -> None:
    transcript = Transcript("soms", settings={"loop_limit": 2})
    transcript.record(
        Turn("layperson", "Layperson asking", [{"role": "user", "content": "q"}], "out", model="m")
    )
    transcript.record(Turn("expert", "Expert answering", [], "", failure="expert: timeout: slow"))
    transcript.note("a decision")
    first = transcript.save(tmp_path, "paper")
    second = transcript.save(tmp_path, "paper")
    assert first != second and first.parent == second.parent == tmp_path
    assert first.name.startswith("paper-soms-") and first.suffix == ".json"
    assert first.read_text() == second.read_text()
    data = json.loads(first.read_text())
    assert data["method"] == "soms"
    assert data["settings"] == {"loop_limit": 2}
    assert data["models"] == {"layperson": "m"}
    assert data["notes"] == ["a decision"]
    assert [(turn["role"], turn["output"], turn["failure"]) for turn in data["turns"]] == [
        ("layperson", "out", None),
        ("expert", "", "expert: timeout: slow"),
    ]


def test_transcript_save_never_overwrites_a_file_with_its_name(tmp_path: Path) -> None:
    transcript = Transcript("jrel")
    planned = transcript.save(tmp_path, "paper")
    planned.write_text("kept")
    again = transcript.save(tmp_path, "paper")
    assert planned.read_text() == "kept"
    assert again != planned and json.loads(again.read_text())["method"] == "jrel"

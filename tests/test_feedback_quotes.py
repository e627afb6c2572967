"""Reviewer quotes map onto exact source ranges: locate_quote (exact, normalized, fuzzy, None), a property test,
and end to end from a scripted reviewer's finding to the text of the file on disk under its range."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from margin.testing.scripted_endpoint import Rule
from margin.workflows.feedback.pipeline import ReviewOptions, review_manuscript
from margin.workflows.feedback.quotes import FUZZY_THRESHOLD, QuoteMatch, locate_quote
from margin.workflows.feedback.types import Finding, Mode
from margin.workflows.manuscript.model import Paragraph
from margin.workflows.manuscript.source import LineIndex

from conftest import (
    FIXTURES,
    PAPER_MAIN,
    ClientFactory,
    ScriptedFactory,
    feedback_llm_config,
    finding_json,
    load_manuscript,
    review_reply,
    without_nagle,
)

TEXT = (
    "We fine-tune the encoder on the new corpus and observe a 4.1 point gain in F1 over the original "
    "model, which shows that domain adaptation is essential for this task."
)
QUOTE_MARKS = "\"'“”‘’«»`"
MIN_QUOTE = 12  # characters: long enough for any quote to count (short ones are rejected on purpose)


def spanned(match: QuoteMatch | None, text: str = TEXT) -> str | None:
    return None if match is None else text[match.start : match.end]


# -- locate_quote ------------------------------------------------------------------------------------------------


def test_an_exact_quote_is_found_where_it_is() -> None:
    match = locate_quote("observe a 4.1 point gain in F1", TEXT)
    assert match == QuoteMatch(TEXT.index("observe"), TEXT.index(" over the original"), "exact", 100.0)


def test_an_exact_quote_that_occurs_twice_is_its_first_occurrence() -> None:
    text = "The index is small. The index is fast. The index is small."
    match = locate_quote("The index is small", text)
    assert match is not None and (match.start, match.how) == (0, "exact")


@pytest.mark.parametrize(
    "quote",
    [
        '"fine-tune the encoder"',
        "“fine-tune the encoder”",
        "‘fine-tune the encoder’",
        "«fine-tune the encoder»",
        "`fine-tune the encoder`",
        "  'fine-tune the encoder'  ",
        "...fine-tune the encoder",
        "fine-tune the encoder...",
        "…fine-tune the encoder…",
        '"... fine-tune the encoder ..."',
        "“…fine-tune the encoder”",
    ],
)
def test_quote_marks_and_ellipses_around_a_quote_are_ignored(quote: str) -> None:
    match = locate_quote(quote, TEXT)
    assert match is not None and match.how == "exact"
    assert spanned(match) == "fine-tune the encoder"


@pytest.mark.parametrize(
    ("quote", "expected"),
    [
        ("FINE-TUNE THE ENCODER", "fine-tune the encoder"),
        ("fine-tune   the\n encoder", "fine-tune the encoder"),
        ("fine–tune the encoder", "fine-tune the encoder"),  # an en dash for the hyphen
        ("fine—tune the\u00a0encoder", "fine-tune the encoder"),  # an em dash and a no-break space
        ("observe a *4.1 point* gain", "observe a 4.1 point gain"),  # markup the model added
        ("{observe} a 4.1 point gain", "observe a 4.1 point gain"),
    ],
)
def test_case_white_space_dashes_and_markup_are_normalized(quote: str, expected: str) -> None:
    match = locate_quote(quote, TEXT)
    assert match is not None and match.how == "normalized"
    assert spanned(match) == expected


def test_a_normalized_match_maps_back_to_text_with_markup_and_typography() -> None:
    text = "The so-called “gold   standard”\nlabels are *very* noisy — as \\_noted."
    match = locate_quote('so-called "gold standard" labels are very noisy - as', text)
    assert match is not None and match.how == "normalized"
    assert spanned(match, text) == "so-called “gold   standard”\nlabels are *very* noisy — as"


def test_a_close_paraphrase_is_a_fuzzy_match_snapped_to_whole_words() -> None:
    match = locate_quote("bserved a 4.1 pt gain in F1 over", TEXT)
    assert match is not None and match.how == "fuzzy"
    assert FUZZY_THRESHOLD <= match.score < 100
    found = spanned(match)
    assert found is not None
    assert found.startswith("observe") and found.endswith("over")
    assert not TEXT[match.start - 1].isalnum() and not TEXT[match.end].isalnum()


def test_the_fuzzy_threshold_decides() -> None:
    quote = "which shows that domain adaption is essential for this task"  # a typo
    match = locate_quote(quote, TEXT)
    assert match is not None and match.how == "fuzzy"
    assert spanned(match) == "which shows that domain adaptation is essential for this task"
    assert locate_quote(quote, TEXT, threshold=match.score) == match
    assert locate_quote(quote, TEXT, threshold=match.score + 0.5) is None
    loose = "which suggests that domain tuning is vital for the task"
    assert locate_quote(loose, TEXT) is None
    assert (
        spanned(locate_quote(loose, TEXT, threshold=50))
        == "which shows that domain adaptation is essential for this"
    )


@pytest.mark.parametrize(
    "quote",
    [
        "which shows that domain adaptation is not essential for this task",  # a negation added
        "observe a 4.2 point gain in F1",  # another number
        "observe a 4.1 point gain in F2 over",
    ],
)
def test_a_fuzzy_quote_must_agree_on_negations_and_numbers(quote: str) -> None:
    assert locate_quote(quote, TEXT) is None
    assert locate_quote(quote, TEXT, threshold=50) is None


@pytest.mark.parametrize(
    "quote",
    [
        "",
        "   ",
        "F1",  # too short to mean anything
        '"F1"',
        "...",
        "“…”",
        "4.2 pt gai",  # no exact or normalized match, and too short for a fuzzy one
        "the authors never evaluate on a second language at all",  # not in the paragraph
        # the whole paragraph plus more invented text than it has: it covers too little of the quote
        TEXT + " Moreover, our model is provably optimal on every benchmark, dataset and language we know of,"
        " and it never needs any tuning, any labelled data or any hardware beyond a laptop.",
    ],
)
def test_quotes_that_are_not_there_are_none(quote: str) -> None:
    assert locate_quote(quote, TEXT) is None


def test_a_quote_with_an_invented_sentence_beyond_the_paragraph_is_not_a_perfect_fuzzy_match() -> None:
    quote = TEXT + " Moreover, our model is provably optimal on every benchmark."
    match = locate_quote(quote, TEXT)
    assert match is None or match.score < FUZZY_THRESHOLD


def test_nothing_is_found_in_an_empty_paragraph() -> None:
    assert locate_quote("fine-tune the encoder", "") is None


def test_short_quotes_are_rejected_but_a_short_phrase_is_enough() -> None:
    assert locate_quote("F1", TEXT) is None
    assert locate_quote("  F1 ", TEXT) is None
    assert locate_quote('"F1"', TEXT) is None
    assert spanned(locate_quote("gain in F1", TEXT)) == "gain in F1"


def test_a_quote_found_only_by_dropping_all_its_characters_is_none() -> None:
    assert locate_quote("*_{}", TEXT) is None
    assert locate_quote("`*`*`", TEXT) is None


# -- property: every substring is found where it is --------------------------------------------------------------


def _fixture_texts() -> list[str]:
    texts = [paragraph.text for paragraph in load_manuscript(PAPER_MAIN).paragraphs]
    texts += [paragraph.text for paragraph in load_manuscript(FIXTURES / "markdown" / "paper.md").paragraphs]
    return [text for text in texts if len(text) >= MIN_QUOTE]


PARAGRAPH_TEXTS = _fixture_texts()
_ELLIPSIS = re.compile(r"^(?:\.\.\.|…)|(?:\.\.\.|…)$")


def is_clean_quote(quote: str) -> bool:
    """A quote that locate_quote takes as it is: long enough, of two words or more, with no white space or
    quote marks at its ends and no ellipsis."""
    return (
        len(quote) >= MIN_QUOTE
        and len(quote.split()) >= 2
        and quote == quote.strip()
        and quote[0] not in QUOTE_MARKS
        and quote[-1] not in QUOTE_MARKS
        and not _ELLIPSIS.search(quote)
    )


@settings(
    max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)
@given(data=st.data())
def test_any_substring_of_a_paragraph_is_located_at_its_first_occurrence(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(PARAGRAPH_TEXTS), label="paragraph")
    start = data.draw(st.integers(0, len(text) - MIN_QUOTE), label="start")
    end = data.draw(st.integers(start + MIN_QUOTE, min(len(text), start + 160)), label="end")
    quote = text[start:end]
    assume(is_clean_quote(quote))

    match = locate_quote(quote, text)
    assert match is not None
    assert text[match.start : match.end] == quote
    assert match.start <= start
    assert match.start == text.index(quote)
    assert match.how == "exact"


def _normal(text: str) -> str:
    """The comparison locate_quote's normalization promises: case, white space and dropped markup aside."""
    text = text.translate(str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "–": "-", "—": "-"}))
    text = re.sub(r"[*_`\\{}]", "", text)
    return " ".join(text.split()).casefold()


@settings(
    max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)
@given(data=st.data())
def test_a_substring_with_its_case_and_white_space_changed_maps_to_the_same_words(
    data: st.DataObject,
) -> None:
    text = data.draw(st.sampled_from(PARAGRAPH_TEXTS), label="paragraph")
    start = data.draw(st.integers(0, len(text) - MIN_QUOTE), label="start")
    end = data.draw(st.integers(start + MIN_QUOTE, min(len(text), start + 160)), label="end")
    original = text[start:end]
    assume(is_clean_quote(original) and original[0].isalnum() and original[-1].isalnum())
    assume(all(len(char.casefold()) == 1 and len(char.upper()) == 1 for char in original))
    spacing = data.draw(st.sampled_from(["  ", "\n", " \t "]), label="spacing")
    quote = re.sub(r"\s+", spacing, original.upper())
    assume(quote != original)

    match = locate_quote(quote, text)
    assert match is not None, (quote, text)
    assert match.how in ("exact", "normalized")
    assert _normal(text[match.start : match.end]) == _normal(original)
    assert match.start <= start


SYNTHETIC_TEXT = st.lists(
    st.one_of(
        st.text(alphabet="abcdeéxyzABCÉ0123", min_size=1, max_size=8),
        st.sampled_from(
            [" ", "  ", "\n", " \n ", "*", "_", "{", "}", "\\", "`", "“", "”", "—", "-", ".", ","]
        ),
    ),
    min_size=4,
    max_size=40,
).map("".join)


@settings(
    max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)
@given(text=SYNTHETIC_TEXT, data=st.data())
def test_in_text_full_of_markup_a_respaced_upper_case_substring_maps_to_the_same_words(
    text: str, data: st.DataObject
) -> None:
    assume(len(text) >= MIN_QUOTE)
    start = data.draw(st.integers(0, len(text) - MIN_QUOTE), label="start")
    end = data.draw(st.integers(start + MIN_QUOTE, len(text)), label="end")
    original = text[start:end]
    assume(is_clean_quote(original) and len(_normal(original)) >= MIN_QUOTE)
    quote = re.sub(r"\s+", "  ", original.upper())

    match = locate_quote(quote, text)
    assert match is not None, (quote, text)
    assert match.how in ("exact", "normalized")
    assert _normal(text[match.start : match.end]) == _normal(original)
    first_kept = start + len(original) - len(original.lstrip("*_{}`\\ \n"))
    assert match.start <= first_kept  # the first place those words are


# -- end to end: a finding's quote under its source range, read back from the file -------------------------------

LATEX_SOURCE = r"""\documentclass{article}
\newcommand{\method}{\textsc{SpaRe}}
\begin{document}
\section{Method}
Na\"ive pruning keeps the \emph{frequent} terms of each report and drops
the rare clinical vocabulary~\cite{lee2020}, so \method{} assigns each
section a budget $k_s$ of terms, which we tune on the validation split of
Erd\H{o}s and R\'enyi's graphs.
\end{document}
"""
MARKDOWN_SOURCE = """# Method

We *prune* each posting list to a budget, as in [the SPLADE paper](https://example.org/splade),
and keep R&amp;D terms &mdash; drug names and **doses** &ndash; that decide eligibility 😀 in every
review, because `grep` alone misses them.
"""


def source_under(finding: Finding, paragraph: Paragraph, path: Path) -> str:
    """The text of the file on disk under the LSP range the finding maps to."""
    source = path.read_text(encoding="utf-8")
    lines = LineIndex(source)
    found = paragraph.range_of(finding.start, finding.end)
    return source[lines.offset(found.start) : lines.offset(found.end)]


async def review_file(
    path: Path, quotes: list[str], scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> tuple[Paragraph, list[Finding]]:
    manuscript = load_manuscript(path)
    (paragraph,) = manuscript.paragraphs
    reply = review_reply(*(finding_json(quote) for quote in quotes))
    endpoint = without_nagle(scripted(Rule(role="reviewer", replies=[reply])))
    client = llm_clients(feedback_llm_config(endpoint, tmp_path))
    (result,) = await review_manuscript(
        manuscript, client, ReviewOptions(mode=Mode.SINGLE, min_words=1, max_findings=3)
    )
    assert len(endpoint.calls("reviewer")) == 1, result.dropped
    assert result.dropped == [] and result.failures == []
    return paragraph, result.findings


@pytest.mark.parametrize(
    ("quotes", "expected_sources"),
    [
        (
            [
                "Naïve pruning keeps the frequent terms",
                "“drops the rare clinical vocabulary”",
                "SpaRe assigns each section a budget [math] of terms",
            ],
            [
                'Na\\"ive pruning keeps the \\emph{frequent} terms',
                "drops\nthe rare clinical vocabulary",
                "\\method{} assigns each\nsection a budget $k_s$ of terms",
            ],
        ),
        (
            [
                "vocabulary [citation], so",
                "split of Erdős and Rényi's graphs",
                "NAÏVE PRUNING keeps   the frequent terms",
            ],
            [
                "vocabulary~\\cite{lee2020}, so",
                "split of\nErd\\H{o}s and R\\'enyi's graphs",
                'Na\\"ive pruning keeps the \\emph{frequent} terms',
            ],
        ),
        (
            ["naive pruning keeps the frequent terms of each", "which we tune on the validaton split..."],
            [
                'Na\\"ive pruning keeps the \\emph{frequent} terms of each',
                "which we tune on the validation split",
            ],
        ),
    ],
    ids=["exact", "normalized-and-citations", "fuzzy"],
)
async def test_latex_findings_map_to_the_source_of_exactly_the_quoted_words(
    scripted: ScriptedFactory,
    llm_clients: ClientFactory,
    tmp_path: Path,
    quotes: list[str],
    expected_sources: list[str],
) -> None:
    path = tmp_path / "paper.tex"
    path.write_text(LATEX_SOURCE, encoding="utf-8")
    paragraph, findings = await review_file(path, quotes, scripted, llm_clients, tmp_path)

    assert [source_under(finding, paragraph, path) for finding in findings] == expected_sources
    for finding in findings:
        assert paragraph.text[finding.start : finding.end] == finding.quote


async def test_markdown_findings_map_to_the_source_of_exactly_the_quoted_words(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    path = tmp_path / "paper.md"
    path.write_text(MARKDOWN_SOURCE, encoding="utf-8")
    quotes = [
        "We prune each posting list",
        "as in the SPLADE paper, and keep R&D terms",
        "drug names and doses – that decide eligibility 😀 in every review, because [code] alone",
    ]
    paragraph, findings = await review_file(path, quotes, scripted, llm_clients, tmp_path)

    assert [source_under(finding, paragraph, path) for finding in findings] == [
        "We *prune* each posting list",
        "as in [the SPLADE paper](https://example.org/splade),\nand keep R&amp;D terms",
        "drug names and **doses** &ndash; that decide eligibility 😀 in every\nreview, because `grep` alone",
    ]


async def test_a_quote_after_astral_characters_maps_by_utf16_columns(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    path = tmp_path / "paper.md"
    path.write_text(
        "The bound 𝒪(n) 😀 holds 🧪 for the sparse index built per section of every trial report we saw.\n",
        encoding="utf-8",
    )
    paragraph, (finding,) = await review_file(
        path, ["for the sparse index built per section"], scripted, llm_clients, tmp_path
    )
    found = paragraph.range_of(finding.start, finding.end)
    line = path.read_text(encoding="utf-8").splitlines()[0]
    prefix = line[: line.index("for the sparse")]
    assert found.start.character == len(prefix.encode("utf-16-le")) // 2
    assert source_under(finding, paragraph, path) == "for the sparse index built per section"

"""Hostile LaTeX parses in time linear in its size, and keeps the prose around the attack.

Each family of pathological input (deep nesting, runs of one special character, long lines, many paragraphs,
definitions or includes) is parsed at a size n and at 2n: the time may at most about double. The timings are
CPU time of this process, the best of three, with the size raised at run time until a parse takes long enough to
measure on a loaded machine of unknown speed; a ratio over the bound is measured once more at a larger size
before it fails. A generous absolute bound catches a family that is linear but far too slow.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from margin.workflows.manuscript.latex.project import LatexProject
from margin.workflows.manuscript.model import Manuscript, ParagraphKind
from margin.workflows.manuscript.source import SourceFile, path_to_uri

OPENING = "Opening prose stays readable."
CLOSING = "Closing prose stays readable."
INCLUDED = "Included prose stays readable."

MAX_RATIO = 2.5  # time(2n) / time(n); linear is 2
MIN_BASE_SECONDS = 0.03  # a parse shorter than this is too noisy to compare
MEASURABLE_SECONDS = 0.005  # a time to extrapolate the size from
MAX_CHARS = 1 << 22  # calibration stops here (the cheapest families never reach MIN_BASE_SECONDS)
RATIO_FLOOR_SECONDS = 0.01  # below this at MAX_CHARS a family is too cheap to time; the bound below covers it
ABSOLUTE_CHARS = 1 << 17  # at least an eighth of a megabyte
SECONDS_PER_MB = 10.0  # several times what the slowest family takes on a loaded two-core machine


@dataclass(frozen=True)
class Family:
    name: str
    make: Callable[[int], str]
    # False when the attack rightly swallows the prose after it (an unclosed verbatim skips to the end) or
    # before it (a preamble).
    closing_survives: bool = True
    opening_survives: bool = True
    check: Callable[[Manuscript], None] | None = None


def _kind_of(kind: ParagraphKind, words: str) -> Callable[[Manuscript], None]:
    def check(manuscript: Manuscript) -> None:
        found = [paragraph for paragraph in manuscript.paragraphs if words in paragraph.text]
        assert found, f"{words!r} is missing"
        assert found[0].kind == kind

    return check


def _has(words: str) -> Callable[[Manuscript], None]:
    def check(manuscript: Manuscript) -> None:
        assert any(words in paragraph.text for paragraph in manuscript.paragraphs), f"{words!r} is missing"

    return check


def _read_once(manuscript: Manuscript) -> None:
    """An included file is read once however often it is included; the other includes say so."""
    assert [paragraph.text for paragraph in manuscript.paragraphs].count(INCLUDED) == 1
    assert any("included earlier" in problem.message for problem in manuscript.problems)


def _distinct_environments(count: int, separator: str) -> str:
    opening = "".join(f"\\begin{{env{index}}}{separator}" for index in range(count))
    closing = "".join(f"\\end{{env{index}}}{separator}" for index in reversed(range(count)))
    return f"{opening}Inner words here.{separator}{closing}"


def _letters(number: int) -> str:
    """A macro name's letters for a number (macro names have no digits)."""
    letters = ""
    while True:
        number, digit = divmod(number, 26)
        letters += chr(ord("a") + digit)
        if not number:
            return letters


def _run(piece: str) -> Callable[[int], str]:
    return lambda n: piece * n


LONG_BODY = "word " * 390  # a macro body of nearly _MAX_MACRO_BODY characters

FAMILIES = [
    # Nesting, the same name and distinct ones, closed and unclosed, with and without blank lines.
    Family(
        "nested-quote",
        lambda n: "\\begin{quote}\n" * n + "Inner words here.\n" + "\\end{quote}\n" * n,
        check=_kind_of(ParagraphKind.QUOTE, "Inner words here."),
    ),
    Family(
        "nested-quote-blank-lines",
        lambda n: "\\begin{quote}\n\n" * n + "Inner words here.\n\n" + "\\end{quote}\n\n" * n,
        check=_kind_of(ParagraphKind.QUOTE, "Inner words here."),
    ),
    Family(
        "nested-distinct-names", lambda n: _distinct_environments(n, "\n"), check=_has("Inner words here.")
    ),
    Family(
        "nested-distinct-names-blank-lines",
        lambda n: _distinct_environments(n, "\n\n"),
        check=_has("Inner words here."),
    ),
    Family(
        "unclosed-quotes",
        lambda n: "\\begin{quote} Quoted words\n" * n,
        check=_kind_of(ParagraphKind.QUOTE, "Quoted words"),
    ),
    Family(
        "unclosed-quotes-blank-lines",
        lambda n: "\\begin{quote} Quoted words\n\n" * n,
        check=_kind_of(ParagraphKind.QUOTE, "Quoted words"),
    ),
    Family(
        "nested-itemize",
        lambda n: "\\begin{itemize}\\item " * n + "Item words here.",
        check=_kind_of(ParagraphKind.LIST_ITEM, "Item words here."),
    ),
    Family(
        "nested-itemize-blank-lines",
        lambda n: "\\begin{itemize}\\item Item words\n\n" * n,
        check=_kind_of(ParagraphKind.LIST_ITEM, "Item words"),
    ),
    Family(
        "nested-floats",
        lambda n: "\\begin{figure}" * n + "\\caption{Caption words here.}",
        closing_survives=False,  # inside a float only captions are prose
        check=_kind_of(ParagraphKind.CAPTION, "Caption words here."),
    ),
    Family("stray-ends-deep-inside", lambda n: "\\begin{quote}" * 300 + "\\end{nothing} " * n),
    Family("stray-ends", lambda n: "\\end{quote} Stray words " * n, check=_has("Stray words")),
    # Environments skipped by a search for their \end, never closed.
    Family("unclosed-verbatim", lambda n: "\\begin{verbatim}" * n, closing_survives=False),
    Family("unclosed-tabular-in-prose", lambda n: "Words \\begin{tabular} " * n, closing_survives=False),
    Family("unclosed-equation-in-prose", lambda n: "Words \\begin{equation} " * n, closing_survives=False),
    Family("unclosed-math-in-groups", lambda n: "\\emph{\\begin{equation}} Words " * n, check=_has("Words")),
    Family("unclosed-verbatim-in-groups", lambda n: "\\emph{\\begin{verbatim}} Words " * n),
    # Long lines and many paragraphs.
    Family("long-line", lambda n: "word " * n, check=_has("word word word")),
    Family(
        "distinct-paragraphs",
        lambda n: "".join(f"Paragraph {index} has some words.\n\n" for index in range(n)),
        check=_has("Paragraph 1 has some words."),
    ),
    Family("comment-lines", lambda n: "%x\n" * n),
    # Runs of each special character.
    *(
        Family(f"run-of-{label}", _run(char))
        for label, char in [
            ("open-braces", "{"),
            ("close-braces", "}"),
            ("open-brackets", "["),
            ("close-brackets", "]"),
            ("backslashes", "\\"),
            ("tildes", "~"),
            ("backticks", "`"),
            ("apostrophes", "'"),
            ("dashes", "-"),
            ("dollars", "$"),
            ("percents", "%"),
            ("ampersands", "&"),
            ("hashes", "#"),
            ("line-breaks", "a\\\\"),
            ("dollar-x", "$x"),
            ("words-in-braces", "{word "),
            ("accents", "\\'"),
        ]
    ),
    # Searches to the end of a line or chunk.
    Family(
        "verb-with-distinct-delimiters",
        lambda n: "".join(f"\\verb{chr(0x4E00 + index % 20000)}x" for index in range(n)) + " Verb words",
        check=_has("Verb words"),
    ),
    Family("unclosed-lstinline", lambda n: "\\lstinline{x" * n),
    Family("unclosed-lstinline-options", lambda n: "\\lstinline[" * n),
    Family("unclosed-inline-math", lambda n: "\\( x" * n),
    Family("unclosed-optional-arguments", lambda n: "\\item[" * n),
    Family("unclosed-citation-options", lambda n: "\\cite[" * n),
    Family("unknown-macro-options", lambda n: "\\foo[" * n),
    Family("unclosed-section-titles", lambda n: "\\section{Title words\n" * n),
    Family(
        "margin-off-never-on", lambda n: "% margin: off\n" + "word % margin:\n" * n, closing_survives=False
    ),
    # Definitions and macros.
    Family(
        "many-definitions",
        lambda n: (
            "".join(f"\\newcommand{{\\m{_letters(index)}}}{{word {index}}}\n" for index in range(n))
            + "\\ma used"
        ),
        check=_has("word 0 used"),
    ),
    Family("unclosed-definitions", lambda n: "\\newcommand{\\x}{" * n),
    Family(
        "nested-definitions",
        lambda n: (
            ("\\newenvironment{e}{" * 100 + "}" * 100 + "\\newcommand{\\x}{" * 100 + "}" * 100 + "\n") * n
        ),
    ),
    Family("unclosed-tex-definitions", lambda n: "\\def\\x" * n),
    Family("unclosed-parameter-texts", lambda n: "\\def\\x#1" * n),
    Family(
        "unclosed-definitions-in-preamble",
        lambda n: (
            "\\documentclass{article}\n" + "\\def\\x{" * n + "\n\n\\begin{document}\nBody words here.\n"
        ),
        opening_survives=False,  # it is in the preamble
        check=_has("Body words here."),
    ),
    Family(
        "macro-uses",
        lambda n: "\\newcommand{\\foo}[1]{hello #1}\n" + "\\foo{there} " * n,
        check=_has("hello there"),
    ),
    Family(
        "long-macro-in-tiny-chunks",
        lambda n: (
            f"\\newcommand{{\\foo}}{{{LONG_BODY}}}\n\n" + "".join(f"\\foo %{index}\n\n" for index in range(n))
        ),
    ),
    Family(
        "amplifying-macro-arguments",
        lambda n: (
            "\\newcommand{\\foo}[1]{"
            + "#1 " * 600
            + "}\n\n"
            + "".join(f"\\foo{{ab{index}}}\n\n" for index in range(n))
        ),
    ),
    Family(
        "nested-macro-expansion",
        lambda n: (
            f"\\newcommand{{\\b}}{{{LONG_BODY}}}\n\\newcommand{{\\a}}{{"
            + "\\b" * 600
            + "}\n\n"
            + "".join(f"\\a %{index}\n\n" for index in range(n))
        ),
    ),
    # Includes (the included file is written by the test).
    Family("missing-includes", lambda n: "\\input{missing}\n" * n),
    Family(
        "distinct-missing-includes", lambda n: "".join(f"\\input{{missing{index}}}\n" for index in range(n))
    ),
    Family("commented-includes", lambda n: "%" + "\\input{missing}" * n),
    Family("unclosed-include-names", lambda n: "\\input{x" * n + "\n\\import{x" * n),
    Family("repeated-include", lambda n: "\\input{included}\n" * n, check=_read_once),
]


def _document(family: Family, n: int) -> str:
    return f"{OPENING}\n\n{family.make(n)}\n\n{CLOSING}\n"


def _parse(text: str, folder: Path) -> Manuscript:
    return LatexProject().parse(SourceFile(path_to_uri(folder / "main.tex"), text))


def _timed(text: str, folder: Path, repeats: int = 3) -> tuple[float, Manuscript]:
    """CPU time of a fresh parse, the best of `repeats`, and the manuscript. The cyclic collector is held off
    while timing: its pauses depend on everything the test process holds, not only on the parse."""
    best = float("inf")
    for _ in range(repeats):
        gc.disable()
        try:
            start = time.process_time()
            manuscript = _parse(text, folder)
            best = min(best, time.process_time() - start)
        finally:
            gc.enable()
    return best, manuscript


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "included.tex").write_text(f"{INCLUDED}\n", encoding="utf-8")
    return tmp_path


def _check_prose(family: Family, manuscript: Manuscript) -> None:
    texts = [paragraph.text for paragraph in manuscript.paragraphs]
    if family.opening_survives:
        assert OPENING in texts, "the prose before the attack is lost"
    if family.closing_survives:
        assert any(CLOSING in text for text in texts), "the prose after the attack is lost"
    if family.check is not None:
        family.check(manuscript)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.name)
def test_parse_time_grows_linearly(family: Family, folder: Path) -> None:
    n = 16
    while True:
        text = _document(family, n)
        base, manuscript = _timed(text, folder, repeats=1)
        if base >= MIN_BASE_SECONDS or len(text) >= MAX_CHARS:
            break
        # Double while a parse is too quick to time; then go for the target size in one step.
        n = max(2 * n, int(n * 1.2 * MIN_BASE_SECONDS / base)) if base >= MEASURABLE_SECONDS else 2 * n
    _check_prose(family, manuscript)
    base = min(base, _timed(text, folder, repeats=2)[0])
    if base < RATIO_FLOOR_SECONDS:
        return
    failures = []
    for _ in range(2):  # a ratio over the bound is measured once more, at twice the size
        doubled = _timed(_document(family, 2 * n), folder)[0]
        if doubled / base <= MAX_RATIO:
            return
        failures.append(f"time(n={2 * n}) / time(n={n}) = {doubled / base:.2f}")
        n, base = 2 * n, doubled
    pytest.fail("; ".join(failures) + f"; linear is 2, the bound {MAX_RATIO}")


@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.name)
def test_parse_stays_under_ten_seconds_per_megabyte(family: Family, folder: Path) -> None:
    n = 1
    while len(family.make(n)) < ABSOLUTE_CHARS:
        n *= 2
    text = _document(family, n)
    start = time.process_time()
    manuscript = _parse(text, folder)
    elapsed = time.process_time() - start
    megabytes = len(text) / 1e6
    assert elapsed < SECONDS_PER_MB * megabytes, f"{megabytes:.2f} MB took {elapsed:.1f} s"
    _check_prose(family, manuscript)

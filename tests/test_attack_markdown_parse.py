"""Pathological Markdown parses in time linear in its size (a security report: one line holding a long run of
"{" froze the language server, each keystroke re-parsing it in quadratic time inside one regular expression).

Each family of input is parsed at a size n, calibrated so that the parse takes a measurable time on this
machine whatever its speed, and at 2n: the ratio must stay near 2 (a quadratic parse gives 4). Times are this
thread's CPU time, best of three, with the garbage collector off, so that other processes on a loaded machine
and collection pauses do not count; a ratio over the limit is measured once more at twice the size before the
test fails. Every parse must also keep the prose around the pathological run, so that no family passes by the
parser dropping the paragraph. The fast paths through markdown-it must give its tokens unchanged.
"""

from __future__ import annotations

import gc
import string
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it.token import Token

from margin.workflows.manuscript.markdown.parse import MarkdownProject, _make_parser
from margin.workflows.manuscript.model import Manuscript
from margin.workflows.manuscript.source import SourceFile

URI = "file:///tmp/margin-tests/attack.md"
LEAD, CLOSING = "Lead words", "closing words"
BASE_SECONDS = 0.03  # the smaller parse of a pair takes at least this long
PROBE_SIZE = 1 << 11
MAX_SIZE = 1 << 21  # characters: a family this fast is linear enough
MAX_RATIO = 2.5

Build = Callable[[int], str]


def _line(unit: str) -> Build:
    """One paragraph: prose, `unit` repeated to about n characters on the same line, prose."""
    return lambda n: f"{LEAD} {unit * max(1, n // len(unit))} {CLOSING}.\n"


def _after(prefix: str, unit: str) -> Build:
    """As _line, with one `prefix` (an unclosed opener) before the run."""
    return lambda n: f"{LEAD} {prefix}{unit * max(1, n // len(unit))} {CLOSING}.\n"


def _nested(opener: str, closer: str) -> Build:
    """Prose around `opener` nested about n / 2 deep on one line, and as many closers."""

    def build(n: int) -> str:
        depth = max(1, n // (len(opener) + len(closer)))
        return f"{LEAD} {opener * depth}x{closer * depth} {CLOSING}.\n"

    return build


def _lines(line: str) -> Build:
    """`line` (one or more lines) repeated to about n characters, between paragraphs of prose."""
    return lambda n: f"{LEAD}.\n\n{line * max(1, n // len(line))}\n\n{CLOSING}.\n"


def _numbered(template: str) -> Build:
    """`template` with {i} numbered, repeated to about n characters: every block differs, so none is served
    from the parser's chunk cache."""

    def build(n: int) -> str:
        blocks, size = [f"{LEAD}.\n\n"], 0
        index = 0
        while size < n:
            block = template.format(i=index)
            blocks.append(block)
            size += len(block)
            index += 1
        return "".join([*blocks, f"\n\n{CLOSING}.\n"])

    return build


_WIDE_TABLE = "| a{i} |" + " a |" * 255 + "\n|" + "---|" * 256 + "\n" + "x\n" * 256 + "\n"

_UNITS = ["[(", "![", "[@a ", "{a=", "$a ", "\\begin{x}", "[^", "{{", "*a", "x&lt;`c`"]
FAMILIES: dict[str, Build] = {
    **{f"run of {char!r}": _line(char) for char in string.punctuation},
    **{f"repeated {unit!r}": _line(unit) for unit in _UNITS},
    "'[' then '@a ' repeated": _after("[", "@a "),
    "nested []": _nested("[", "]"),
    "nested links": _nested("[", "](u)"),
    "lines of a paragraph": _lines("a b\n"),
    "wide tables over short rows": _numbered(_WIDE_TABLE),
}


def _parse(text: str) -> Manuscript:
    return MarkdownProject().parse([SourceFile(URI, text)])


def _timed(text: str, repeats: int) -> tuple[float, Manuscript]:
    """The best of `repeats` parses by a fresh parser (no chunk cache), in this thread's CPU seconds."""
    best = float("inf")
    manuscript = None
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.thread_time()
            manuscript = _parse(text)
            best = min(best, time.thread_time() - start)
    finally:
        gc.enable()
    assert manuscript is not None
    return best, manuscript


def _calibrated(build: Build) -> int:
    """A size whose parse takes BASE_SECONDS (MAX_SIZE at most), estimated as if the parse were linear and
    grown until it does."""
    size = PROBE_SIZE
    seconds, _ = _timed(build(size), 1)
    while seconds < BASE_SECONDS and size < MAX_SIZE:
        size = min(MAX_SIZE, max(2 * size, int(1.2 * size * BASE_SECONDS / max(seconds, 1e-6))))
        seconds, _ = _timed(build(size), 1)
    return size


def _assert_prose_kept(manuscript: Manuscript, family: str) -> None:
    text = " ".join(paragraph.text for paragraph in manuscript.paragraphs)
    assert LEAD in text and CLOSING in text, f"{family}: the prose around the run was lost: {text[:200]!r}"


def _pair(build: Build, size: int) -> tuple[float, float, Manuscript]:
    small, _ = _timed(build(size), 3)
    large, manuscript = _timed(build(2 * size), 3)
    return small, large, manuscript


@pytest.mark.parametrize("family", list(FAMILIES))
def test_parse_time_is_linear(family: str) -> None:
    build = FAMILIES[family]
    size = _calibrated(build)
    small, large, manuscript = _pair(build, size)
    if large > MAX_RATIO * small:  # noise, or worse than linear: measured once more, at twice the size
        size *= 2
        small, large, manuscript = _pair(build, size)
    assert large <= MAX_RATIO * small, (
        f"{family}: {small:.3f} s for {len(build(size)):,} characters, {large:.3f} s for twice that: "
        f"ratio {large / max(small, 1e-9):.2f} (a quadratic parse gives 4)"
    )
    _assert_prose_kept(manuscript, family)


# The reported families and the worst found since, 128 KiB each: quadratic again, or the wide tables filled in
# cell by cell again, any one of them takes minutes (the run of "{" took 4 s for 32 KB, the tables 48 s).
_MEGABYTE_SECTIONS = ["{", "[", "[@a ", "![", "{a=", "$a ", "[^", "{{"]


def test_a_megabyte_of_pathological_lines_parses_in_seconds() -> None:
    section = 1 << 17
    parts = [f"{LEAD} {unit * (section // len(unit))} {CLOSING}.\n\n" for unit in _MEGABYTE_SECTIONS]
    parts.append(_numbered(_WIDE_TABLE)(section))
    text = "".join(parts)
    assert len(text) >= 1_000_000
    seconds, manuscript = _timed(text, 1)
    assert seconds < 10, f"{len(text):,} characters took {seconds:.1f} s"
    texts = [paragraph.text for paragraph in manuscript.paragraphs]
    assert sum(LEAD in text and CLOSING in text for text in texts) == len(_MEGABYTE_SECTIONS)
    assert sum(LEAD in text for text in texts) == len(_MEGABYTE_SECTIONS) + 1  # and the tables' lead


# -- the fast paths change no token ------------------------------------------------------------------------------

_FAST, _PLAIN = _make_parser(), _make_parser(fast_paths=False)
_ALPHABETS = ["*_~\\ a\n", "[]()!a \\", "<>&;#a $\\", "$`\\a \n*", "[]()!<>a\\`$~* \n&;|-:"]
_PIECES = [
    "a", " ", "\n", "word", "[a](b)", "![i](u)", "[r]", "\n\n[r]: /u\n\n", "\\*", "\\\\", "\\(", "\\[", "\\ ",
    "\\~", "\\emph{x}", "\\cite{k}", "**", "__", "~~", "`", "$", "$$", "&amp;", "&#35;", "&x", "<a>", "<b ",
    "<a@b.c>", "<http://a.b>", "<!-- c -->", "|", "\n|---|---|\n", "\n| x | y |\n", "\n- a\n", "\n> q\n", "  \n",
]  # fmt: skip


def _signature(tokens: list[Token]) -> list[tuple[object, ...]]:
    """Tokens as our parser reads them; a table only as its extent (the fast path does not fill it in)."""
    found: list[tuple[object, ...]] = []
    in_table = False
    for token in tokens:
        if token.type in ("table_open", "table_close"):
            in_table = token.type == "table_open"
            found.append((token.type, token.level, tuple(token.map or ())))
        elif not in_table:
            children = _signature(token.children) if token.children else None
            found.append(
                (token.type, token.nesting, token.level, token.content, tuple(token.map or ()), children)
            )
    return found


@settings(
    max_examples=400, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
@given(
    st.one_of(
        st.sampled_from(_ALPHABETS).flatmap(lambda alphabet: st.text(st.sampled_from(alphabet), max_size=16)),
        st.lists(st.sampled_from(_PIECES + list(string.punctuation)), max_size=30).map("".join),
    )
)
def test_the_fast_paths_give_markdown_its_own_tokens(text: str) -> None:
    assert _signature(_FAST.parse(text)) == _signature(_PLAIN.parse(text))

"""Raw TeX in pandoc Markdown (pandoc's raw_tex extension): a markdown-it plugin.

Inline, a recognised command becomes one `raw_tex` token whose meta["kind"] says what it stands for: math,
a reference, a citation, nothing (labels, layout) or LaTeX to convert with the LaTeX parser's macro handling
(\\emph{x}, accents, symbols). Unknown commands stay text, as before. A block that starts with \\begin{name}
and whose \\end{name} closes it becomes one `raw_tex_block` token: its lines are not Markdown.

Everything is linear in the input: environment ends, brace partners and \\) / \\] closers are found in one
pass per source string (cached), and every other look-ahead is anchored and bounded.
"""

from __future__ import annotations

import bisect
import functools
import re
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import mdTrim
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline

MATH = "math"
REFERENCE = "reference"
CITATION = "citation"
DROP = "drop"
LATEX = "latex"

MATH_ENVIRONMENTS = frozenset(
    "equation equation* align align* alignat alignat* gather gather* multline multline* flalign flalign* "
    "eqnarray eqnarray* math displaymath dmath dmath* subequations".split()
)
# Environments read whole (and converted by the LaTeX parser) when they sit inside a paragraph.
_WHOLE_ENVIRONMENTS = frozenset(
    "figure figure* table table* wrapfigure wraptable algorithm algorithm* tabular tabular* tabularx longtable "
    "verbatim lstlisting minted tikzpicture comment".split()
)
# Environments that make a raw TeX block of their own. Not the ones that live inside math (bmatrix, cases):
# a Markdown paragraph may hold $$ ... $$ with those on lines of their own.
BLOCK_ENVIRONMENTS = (
    MATH_ENVIRONMENTS
    | _WHOLE_ENVIRONMENTS
    | frozenset(
        "sidewaysfigure sidewaystable center flushleft flushright minipage itemize enumerate description quote "
        "quotation abstract landscape multicols".split()
    )
)
_REFERENCES = frozenset("ref eqref autoref cref Cref pageref nameref vref Vref labelcref".split())
_CITATIONS = frozenset(
    "cite citep citet citealp citealt citeauthor citeyear citeyearpar citenum parencite textcite autocite "
    "footcite Cite Citep Citet Parencite Textcite Autocite".split()
)
# Commands that produce nothing, with their argument shapes ('*' star, '[' optional, '{' mandatory).
_DROPPED: dict[str, str] = {
    "label": "{", "vspace": "*{", "hspace": "*{", "newpage": "", "clearpage": "", "cleardoublepage": "",
    "pagebreak": "[", "nopagebreak": "[", "noindent": "", "indent": "", "medskip": "", "bigskip": "",
    "smallskip": "", "centering": "", "raggedright": "", "raggedleft": "", "vfill": "", "hfill": "",
    "par": "", "linebreak": "[", "newline": "", "FloatBarrier": "", "phantomsection": "", "index": "{",
}  # fmt: skip
# Commands handed to the LaTeX parser's macro handling, with their argument shapes.
_CONVERTED: dict[str, str] = {
    "emph": "{", "textbf": "{", "textit": "{", "texttt": "{", "textsc": "{", "textrm": "{", "textsf": "{",
    "textsl": "{", "textup": "{", "textmd": "{", "textnormal": "{", "underline": "{", "mbox": "{",
    "text": "{", "textsuperscript": "{", "textsubscript": "{", "enquote": "{", "footnote": "[{",
    "url": "{", "href": "{{", "hyperref": "[{", "textcolor": "{{", "foreignlanguage": "[{{",
}  # fmt: skip

_NAME = re.compile(r"[A-Za-z]+")
_ENVIRONMENT = re.compile(r"[ \t]*\{([A-Za-z*]{1,40})\}")
_BOUNDARY = re.compile(r"\\(begin|end)[ \t]*\{([A-Za-z*]{1,40})\}")
_BRACE = re.compile(r"\\.|[{}]", re.S)
_PROSE_LIKE = re.compile(r"[\w \t.,;:'\"!?&/-]*")  # \[sic\], \[1\]: escaped brackets, not display math
# What markdown-it's escape rule turns "\\x" into x for (any other x keeps its backslash).
_ESCAPABLE = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_MAX_OPTIONAL = 200
_MAX_PROSE_CHECK = 200


def block_environment_at(text: str, start: int) -> bool:
    """Whether text[start:] opens an environment that may be a raw TeX block."""
    environment = _ENVIRONMENT.match(text, start + 6) if text.startswith("\\begin", start) else None
    return environment is not None and environment.group(1) in BLOCK_ENVIRONMENTS


def environment_ends(text: str, start: int = 0) -> dict[int, int]:
    """Where each \\begin{name} in text[start:] starts -> just past the \\end{name} closing it (lexically)."""
    ends: dict[int, int] = {}
    open_by_name: dict[str, list[int]] = {}
    for match in _BOUNDARY.finditer(text, start):
        stack = open_by_name.setdefault(match.group(2), [])
        if match.group(1) == "begin":
            stack.append(match.start())
        elif stack:
            ends[stack.pop()] = match.end()
    return ends


class _Scan:
    """One source string's environment ends, brace partners and closers, each computed on first use."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._ends: dict[int, int] | None = None
        self._braces: dict[int, int] | None = None
        self._closers: dict[str, list[int]] = {}

    def environment_end(self, start: int) -> int | None:
        if self._ends is None:
            self._ends = environment_ends(self.text)
        return self._ends.get(start)

    def brace_partner(self, start: int) -> int | None:
        if self._braces is None:
            self._braces = {}
            stack: list[int] = []
            for match in _BRACE.finditer(self.text):
                char = match.group()
                if char == "{":
                    stack.append(match.start())
                elif char == "}" and stack:
                    self._braces[stack.pop()] = match.start()
        return self._braces.get(start)

    def closer(self, closer: str, after: int) -> int | None:
        """The first `closer` (\\) or \\]) starting at or after `after`."""
        positions = self._closers.get(closer)
        if positions is None:
            positions = [match.start() for match in re.finditer(re.escape(closer), self.text)]
            self._closers[closer] = positions
        index = bisect.bisect_left(positions, after)
        return positions[index] if index < len(positions) else None


def _scan(env: Any, key: str, text: str) -> _Scan:
    cached = env.get(key) if isinstance(env, dict) else None
    if cached is None or cached.text is not text:
        cached = _Scan(text)
        if isinstance(env, dict):
            env[key] = cached
    return cached


def _arguments(scan: _Scan, position: int, limit: int, spec: str) -> int | None:
    """The end of a command's arguments of shape `spec` from `position`; None if a mandatory one is missing."""
    text = scan.text
    for kind in spec:
        if kind == "*":
            if position < limit and text[position] == "*":
                position += 1
            continue
        probe = position
        while probe < limit and text[probe] in " \t":
            probe += 1
        if kind == "[":
            if probe < limit and text[probe] == "[":
                close = text.find("]", probe, min(limit, probe + _MAX_OPTIONAL))
                if close >= 0:
                    position = close + 1
            continue
        if probe >= limit or text[probe] != "{":
            return None
        partner = scan.brace_partner(probe)
        if partner is None or partner >= limit:
            return None
        position = partner + 1
    return position


@functools.lru_cache(maxsize=1024)  # a name repeated all over a line is looked up once
def _known_to_latex(name: str) -> str | None:
    """The argument shape of a command the LaTeX parser turns into text, or None (then it stays text)."""
    from ..latex import macros  # imported only for Markdown that has raw TeX in it

    if name in macros.CITATION_MACROS or name in macros.REFERENCE_MACROS or name in macros.TEXT_MACROS:
        return macros.argument_spec(name) or "{"
    if name in macros.DROPPED_MACROS or name in macros.NAMED_TEXT or macros.is_known_to_pylatexenc(name):
        return macros.argument_spec(name)
    return None


def _command(scan: _Scan, start: int, limit: int) -> tuple[int, str] | None:
    """The end and kind of the raw TeX command at text[start] (a backslash), or None if it is not one."""
    text = scan.text
    follower = text[start + 1]
    if follower in "([":
        closer = "\\)" if follower == "(" else "\\]"
        close = scan.closer(closer, start + 2)
        if close is None or close + 2 > limit:
            return None
        if (
            follower == "["
            and close - start <= _MAX_PROSE_CHECK
            and _PROSE_LIKE.fullmatch(text, start + 2, close)
        ):
            return None
        return close + 2, MATH
    name_match = _NAME.match(text, start + 1, limit)
    if name_match is None:
        return None
    name, after = name_match.group(), name_match.end()
    if name in ("begin", "end"):
        environment = _ENVIRONMENT.match(text, after, limit)
        if environment is None:
            return None
        if name == "begin":
            end = scan.environment_end(start)
            whole = environment.group(1) in MATH_ENVIRONMENTS or environment.group(1) in _WHOLE_ENVIRONMENTS
            if whole and end is not None and end <= limit:
                return end, MATH if environment.group(1) in MATH_ENVIRONMENTS else LATEX
        return environment.end(), DROP  # the environment's content stays prose
    if name in _REFERENCES or name in _CITATIONS:
        end = _arguments(scan, after, limit, "*[[{")
        return None if end is None else (end, REFERENCE if name in _REFERENCES else CITATION)
    if name in _DROPPED:
        end = _arguments(scan, after, limit, _DROPPED[name])
        return end if end is not None else after, DROP
    spec = _CONVERTED.get(name)
    if spec is None:
        spec = _known_to_latex(name)
        if spec is None:
            return None
    end = _arguments(scan, after, limit, spec)
    end = end if end is not None else after
    if not spec and text.startswith("{}", end) and end + 2 <= limit:
        end += 2  # \LaTeX{}: the empty group only ends the command name
    return end, LATEX


def _raw_tex_inline(state: StateInline, silent: bool) -> bool:
    start = state.pos
    if state.src[start] != "\\" or start + 1 >= state.posMax:
        return False
    follower = state.src[start + 1]
    if not (follower in "([" or ("A" <= follower <= "Z" or "a" <= follower <= "z")):
        return False
    found = _command(_scan(state.env, "raw_tex_inline", state.src), start, state.posMax)
    if found is None:
        return False
    end, kind = found
    if not silent:
        token = state.push("raw_tex", "", 0)
        token.content = state.src[start:end]
        token.meta = {"kind": kind}
    state.pos = end
    return True


def escape_run(state: StateInline, silent: bool) -> bool:
    """Backslash escapes that are not raw TeX, in a row, as text: markdown-it's escape rule pushes a token for
    each (joined with the text around it afterwards), slow for a long run. Hard breaks stay with that rule."""
    src, start, limit = state.src, state.pos, state.posMax
    pieces: list[str] = []
    scan: _Scan | None = None
    end = start
    while end + 1 < limit and src[end] == "\\":
        follower = src[end + 1]
        if follower in "\n ~" or "\ud800" <= follower <= "\udbff":
            # Left to the escape rule: a hard break; "\\ ", whose space would join the pending text the newline
            # rule reads for a hard break; "\\~", which as plain text before "~~" strikethrough's post-processing
            # takes for a marker of its own; half of a surrogate pair (the escape rule takes both halves).
            break
        if end > start and (follower in "([" or ("A" <= follower <= "Z" or "a" <= follower <= "z")):
            # Raw TeX is for _raw_tex_inline, which comes first and so has already declined at `start`.
            scan = scan or _scan(state.env, "raw_tex_inline", src)
            if _command(scan, end, limit) is not None:
                break
        pieces.append(follower if follower in _ESCAPABLE else "\\" + follower)
        end += 2
    if not pieces:
        return False
    if not silent:
        text = "".join(pieces)
        append = getattr(state, "append_pending", None)  # markdown-it-py 4 buffers pending text
        if append is not None:
            append(text)
        else:
            state.pending += text
    state.pos = end
    return True


def _raw_tex_block(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    if state.sCount[start_line] - state.blkIndent >= 4:
        return False
    start = state.bMarks[start_line] + state.tShift[start_line]
    src = state.src
    if not src.startswith("\\begin", start):
        return False
    environment = _ENVIRONMENT.match(src, start + 6)
    if environment is None or environment.group(1) not in BLOCK_ENVIRONMENTS:
        return False
    end = _scan(state.env, "raw_tex_block", src).environment_end(start)
    if end is None:
        return False
    last = bisect.bisect_right(state.bMarks, end - 1, start_line, end_line) - 1
    if last < start_line or end > state.eMarks[last]:
        return False
    if state.blkIndent > 0:  # inside a list item: a less indented line ends the item, and this block with it
        for line in range(start_line + 1, last + 1):
            blank = state.bMarks[line] + state.tShift[line] >= state.eMarks[line]
            if not blank and state.sCount[line] < state.blkIndent:
                return False
    if silent:
        return True
    token = state.push("raw_tex_block", "", 0)
    token.map = [start_line, last + 1]
    token.content = src[start : state.eMarks[last]]
    token.meta = {"start": start, "end": state.eMarks[last], "environment": environment.group(1)}
    state.line = last + 1
    return True


def _paragraph(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """markdown-it's paragraph rule, except that no block interrupts a paragraph inside a raw TeX math
    environment (an align line "- c &= d" is not a list item); a blank line still ends it."""
    next_line = start_line + 1
    terminators = state.md.block.ruler.getRules("paragraph")
    end_line = state.lineMax
    old_parent = state.parentType
    state.parentType = "paragraph"
    protected = _protect(state, start_line, 0)
    while next_line < end_line:
        if state.isEmpty(next_line):
            break
        if state.sCount[next_line] - state.blkIndent > 3 or state.sCount[next_line] < 0:
            next_line += 1
            continue
        if state.bMarks[next_line] >= protected and any(
            rule(state, next_line, end_line, True) for rule in terminators
        ):
            break
        protected = _protect(state, next_line, protected)
        next_line += 1
    content = mdTrim(state.getLines(start_line, next_line, state.blkIndent, False))
    state.line = next_line
    token = state.push("paragraph_open", "p", 1)
    token.map = [start_line, state.line]
    token = state.push("inline", "", 0)
    token.content = content
    token.map = [start_line, state.line]
    token.children = []
    state.push("paragraph_close", "p", -1)
    state.parentType = old_parent
    return True


def _protect(state: StateBlock, line: int, protected: int) -> int:
    """Past the end of any math environment that begins on `line` (and `protected` if that is later)."""
    start, end = state.bMarks[line], state.eMarks[line]
    begin = state.src.find("\\begin", start, end)
    while begin >= 0:
        environment = _ENVIRONMENT.match(state.src, begin + 6, end)
        if environment is not None and environment.group(1) in MATH_ENVIRONMENTS:
            close = _scan(state.env, "raw_tex_block", state.src).environment_end(begin)
            if close is not None:
                protected = max(protected, close)
        begin = state.src.find("\\begin", begin + 6, end)
    return protected


def raw_tex_plugin(md: MarkdownIt) -> None:
    md.inline.ruler.before("escape", "raw_tex", _raw_tex_inline)
    md.block.ruler.before("paragraph", "raw_tex_block", _raw_tex_block)
    md.block.ruler.at("paragraph", _paragraph)

"""LaTeX chunk parser: one blank-line-delimited chunk of source, plus the state it starts in, to events.

A blank line always ends a paragraph, so a chunk's paragraphs depend only on its text and on the state it is
entered with (preamble or body, open environments, a skipped region still open). That makes chunks cacheable by
(text, state): after a keystroke only the edited chunk is parsed again. Brace groups never cross a chunk, which
also confines the damage of an unbalanced brace to one paragraph.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache

# has_words lives in the model so that the Markdown parser need not import this module (and pylatexenc).
from ..model import CITATION, CODE, MATH, REFERENCE, URL, ParagraphKind, has_words, paragraph_id
from ..offsets import OffsetMap, TextBuilder
from . import macros as m

(
    COMMENT,
    MACRO,
    OPEN,
    CLOSE,
    DOLLAR,
    SPACE,
    BRACKET_OPEN,
    BRACKET_CLOSE,
    DASH,
    QUOTE,
    TILDE,
    TEXT,
    VERBATIM,
) = range(1, 14)
# Verbatim-like macros are single tokens, so that a % inside them (a URL's %20) is not read as a comment.
_TOKEN = re.compile(
    r"(?P<comment>%[^\n]*)"
    r"|(?P<verbatim>\\verb\*?(?P<verb_delimiter>[^\sA-Za-z*])(?:(?!(?P=verb_delimiter))[^\n])*(?P=verb_delimiter)"
    r"|\\lstinline(?:\[[^\]\n]*\])?(?:\{[^}\n]*\}|(?P<listing_delimiter>[^\sA-Za-z{\[])"
    r"(?:(?!(?P=listing_delimiter))[^\n])*(?P=listing_delimiter))"
    r"|\\(?:url|href)[ \t]*\{[^{}\n]*\})"
    r"|(?P<macro>\\(?:[A-Za-z@]+\*?|['`^\"~=.](?:\\[ij](?![A-Za-z])|[A-Za-z])?|[^A-Za-z@]|$))"
    r"|(?P<open>\{)|(?P<close>\})"
    r"|(?P<dollar>\$\$|\$)"
    r"|(?P<space>\s+)"
    r"|(?P<bracket_open>\[)|(?P<bracket_close>\])"
    r"|(?P<dash>---|--)"
    r"|(?P<quote>``|'')"
    r"|(?P<tilde>~)"
    r"|(?P<text>[^\\%{}$\s\[\]~`'-]+|.)",
    re.S,
)
_KINDS = {
    "comment": COMMENT,
    "verbatim": VERBATIM,
    "macro": MACRO,
    "open": OPEN,
    "close": CLOSE,
    "dollar": DOLLAR,
    "space": SPACE,
    "bracket_open": BRACKET_OPEN,
    "bracket_close": BRACKET_CLOSE,
    "dash": DASH,
    "quote": QUOTE,
    "tilde": TILDE,
    "text": TEXT,
}
_MARGIN_OFF = re.compile(r"%\s*margin:\s*off\b", re.I)
_MARGIN_ON = re.compile(r"(?<!\\)%\s*margin:\s*on\b", re.I)
_SINGLE_DOLLAR = re.compile(r"(?<!\\)\$")
_DOUBLE_DOLLAR = re.compile(r"(?<!\\)\$\$")
_ACCENT_SYMBOLS = frozenset("'`^\"~=.")
_MAX_EXPANSION_DEPTH = 8
_MAX_EXPANSION_LENGTH = 10_000
_EXPANSION_BUDGET = 20_000  # characters of macro bodies one chunk may expand in all (self-similar macros)
_MAX_NESTING = 64  # nested arguments walked recursively; deeper ones are read flat
_MAX_OPTIONAL_TOKENS = 256  # an optional [argument] longer than this is not one
_MAX_PARAMETER_TOKENS = 64  # \def\name<parameter text>{body}: a parameter text longer than this is not one


class Region(IntEnum):
    PREAMBLE = 0
    BODY = 1
    END = 2


@dataclass(frozen=True, slots=True)
class ScanState:
    region: Region = Region.BODY
    environments: tuple[str, ...] = ()
    skipping: str | None = None
    off: bool = False


@dataclass(frozen=True, slots=True)
class HeadingEvent:
    level: int
    title: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class TitleEvent:
    title: str


@dataclass(frozen=True, slots=True)
class ParagraphEvent:
    kind: ParagraphKind
    text: str
    offsets: OffsetMap
    abstract: bool
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:  # computed once, then cached with the chunk
            object.__setattr__(self, "id", paragraph_id(self.text))


@dataclass(frozen=True, slots=True)
class IncludeEvent:
    target: str
    directory: str | None
    start: int
    end: int
    relative_to_current: bool = False  # \\subimport: the folder is relative to the including file


@dataclass(frozen=True, slots=True)
class ProblemEvent:
    message: str
    start: int
    end: int


Event = HeadingEvent | TitleEvent | ParagraphEvent | IncludeEvent | ProblemEvent


@lru_cache(maxsize=256)
def _environment_boundary(name: str) -> re.Pattern[str]:
    return re.compile(r"\\(begin|end)\s*\{" + re.escape(name) + r"\}")


def find_environment_end(text: str, start: int, name: str) -> int | None:
    """Offset just past the \\end{name} that closes an environment whose body starts at `start`."""
    depth = 1
    for match in _environment_boundary(name).finditer(text, start):
        if m.is_commented(text, match.start()):
            continue
        depth += 1 if match.group(1) == "begin" else -1
        if depth == 0:
            return match.end()
    return None


class ChunkParser:
    """Parses one chunk. Offsets in the events it returns are relative to the chunk's start."""

    def __init__(
        self,
        text: str,
        state: ScanState,
        macros: m.MacroTable,
        depth: int = 0,
        budget: list[int] | None = None,
    ) -> None:
        self.text = text
        self.macros = macros
        self.depth = depth
        self.budget = budget if budget is not None else [_EXPANSION_BUDGET]
        self.nesting = 0
        self.kinds: list[int] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        for match in _TOKEN.finditer(text):
            self.kinds.append(_KINDS[match.lastgroup or "text"])
            self.starts.append(match.start())
            self.ends.append(match.end())
        self.count = len(self.kinds)
        self.partner = self._match_braces()
        self.region = state.region
        self.environments = list(state.environments)
        self.skipping = state.skipping
        self.off = state.off
        self.events: list[Event] = []
        self.builder = TextBuilder()
        self.footnotes: list[ParagraphEvent] = []

    # -- entry points -------------------------------------------------------------------------------------------

    def parse(self) -> tuple[list[Event], ScanState]:
        index = 0
        while index < self.count:
            index = self._step(index)
        self._flush()
        state = ScanState(self.region, tuple(self.environments), self.skipping, self.off)
        return self.events, state

    def convert(self) -> str:
        """Plain text of the whole chunk as inline material (used for macro expansions)."""
        self._walk(0, self.count, self.builder)
        return self.builder.build()[0]

    # -- tokens -------------------------------------------------------------------------------------------------

    def _match_braces(self) -> list[int]:
        partner = [-1] * self.count
        stack: list[int] = []
        for index, kind in enumerate(self.kinds):
            if kind == OPEN:
                stack.append(index)
            elif kind == CLOSE and stack:
                opener = stack.pop()
                partner[opener] = index
        for opener in stack:  # unbalanced: the group runs to the end of the chunk
            partner[opener] = self.count
        self.unclosed = stack  # in increasing order
        return partner

    def _unclosed_group(self, index: int) -> bool:
        return 0 <= index < self.count and self.kinds[index] == OPEN and self.partner[index] >= self.count

    def _token_at(self, offset: int) -> int:
        return bisect.bisect_left(self.starts, offset)

    def _token_text(self, index: int) -> str:
        return self.text[self.starts[index] : self.ends[index]]

    def _skip_space(self, index: int, stop: int) -> int:
        while index < stop and self.kinds[index] in (SPACE, COMMENT):
            if self.kinds[index] == SPACE and self.text.count("\n", self.starts[index], self.ends[index]) > 1:
                break
            index += 1
        return index

    def _read_argument(self, index: int, stop: int, kind: str) -> tuple[tuple[int, int] | None, int]:
        """Read one argument of shape `kind` at `index`: its token range and the index after it."""
        if kind == "*":
            is_star = index < stop and self.kinds[index] == TEXT and self._token_text(index) == "*"
            return ((index, index + 1), index + 1) if is_star else (None, index)
        probe = self._skip_space(index, stop)
        if probe >= stop:
            return None, index
        token = self.kinds[probe]
        if kind == "g" and token != OPEN:  # a brace group only if one follows
            return None, index
        if kind == "[":
            if token != BRACKET_OPEN:
                return None, index
            cursor = probe + 1
            limit = min(stop, probe + _MAX_OPTIONAL_TOKENS)
            while cursor < limit:
                if self.kinds[cursor] == OPEN:
                    cursor = self.partner[cursor] + 1
                    continue
                if self.kinds[cursor] == BRACKET_CLOSE:
                    return (probe + 1, cursor), cursor + 1
                cursor += 1
            return None, index
        if token == OPEN:
            close = min(self.partner[probe], stop)
            return (probe + 1, close), min(close + 1, stop)  # an unclosed group ends with the chunk
        if token == TEXT and self.ends[probe] - self.starts[probe] == 1:
            return (probe, probe + 1), probe + 1
        if token in (MACRO, TILDE, DASH, QUOTE, BRACKET_OPEN, BRACKET_CLOSE):
            return (probe, probe + 1), probe + 1
        return None, index

    def _read_arguments(self, index: int, stop: int, spec: str) -> tuple[list[tuple[int, int] | None], int]:
        arguments: list[tuple[int, int] | None] = []
        for kind in spec:
            argument, index = self._read_argument(index, stop, kind)
            arguments.append(argument)
        return arguments, index

    def _raw(self, argument: tuple[int, int] | None) -> str:
        if argument is None or argument[0] >= argument[1]:
            return ""
        return self.text[self.starts[argument[0]] : self.ends[argument[1] - 1]]

    def _end_offset(self, index: int) -> int:
        """Source offset where token `index` starts, i.e. where the previous token ends."""
        index = min(index, self.count)
        return self.ends[index - 1] if index > 0 else 0

    # -- paragraphs ---------------------------------------------------------------------------------------------

    def _paragraph_kind(self) -> ParagraphKind:
        for name in reversed(self.environments):
            if name in m.LIST_ENVIRONMENTS:
                return ParagraphKind.LIST_ITEM
            if name in m.QUOTE_ENVIRONMENTS:
                return ParagraphKind.QUOTE
        return ParagraphKind.PARAGRAPH

    def _in_abstract(self) -> bool:
        return "abstract" in self.environments

    def _in_float(self) -> bool:
        return any(name in m.FLOAT_ENVIRONMENTS for name in self.environments)

    def _flush(self) -> None:
        text, offsets = self.builder.build()
        self.builder = TextBuilder()
        if has_words(text):
            self.events.append(ParagraphEvent(self._paragraph_kind(), text, offsets, self._in_abstract()))
        self.events.extend(self.footnotes)
        self.footnotes = []

    def _side_paragraph(self, kind: ParagraphKind, argument: tuple[int, int] | None) -> None:
        """A caption or footnote: a paragraph of its own, made from one argument."""
        if argument is None:
            return
        builder = TextBuilder()
        self._walk(argument[0], argument[1], builder)
        text, offsets = builder.build()
        if has_words(text):
            event = ParagraphEvent(kind, text, offsets, self._in_abstract())
            if kind == ParagraphKind.FOOTNOTE:
                self.footnotes.append(event)
            else:
                self.events.append(event)

    def _plain(self, argument: tuple[int, int] | None) -> str:
        if argument is None:
            return ""
        builder = TextBuilder()
        self._walk(argument[0], argument[1], builder)
        return builder.build()[0]

    # -- the structural level -----------------------------------------------------------------------------------

    def _step(self, index: int) -> int:
        """Handle the token at `index` at the chunk's top level; return the next index."""
        if self.skipping is not None:
            end = find_environment_end(self.text, self.starts[index], self.skipping)
            if end is None:
                return self.count
            self.skipping = None
            return self._token_at(end)
        if self.off:
            match = _MARGIN_ON.search(self.text, self.starts[index])
            if match is None:
                return self.count
            self.off = False
            return self._token_at(match.end())
        kind = self.kinds[index]
        if kind == COMMENT:
            if _MARGIN_OFF.match(self.text, self.starts[index]):
                self._flush()
                self.off = True
                return index + 1
            if self.region == Region.BODY and not self._in_float():
                return self._after_comment(index)
            return index + 1
        if self.region == Region.END:
            return self.count
        if kind != MACRO:
            if self.region == Region.PREAMBLE or self._in_float():
                return index + 1
            return self._inline(index, self.count, self.builder)
        name = self._token_text(index)[1:]
        if self.region == Region.PREAMBLE:
            return self._preamble_macro(index, name)
        if name == "begin":
            return self._begin(index)
        if name == "end":
            return self._end(index)
        if self._in_float():
            return self._float_macro(index, name)
        base = name.rstrip("*")
        if base in m.SECTION_LEVELS:
            self._flush()
            arguments, after = self._read_arguments(index + 1, self.count, "[{")
            title_range = arguments[1]
            if title_range is not None and self._unclosed_group(title_range[0] - 1):
                # A title still being typed ends with its line; what follows stays prose.
                line_end = self.text.find("\n", self.ends[title_range[0] - 1])
                if line_end >= 0:
                    after = self._token_at(line_end)
                    title_range = (title_range[0], after)
            title = self._plain(title_range)
            self.events.append(
                HeadingEvent(m.SECTION_LEVELS[base], title, self.starts[index], self._end_offset(after))
            )
            return after
        if base == "item":
            self._flush()
            arguments, after = self._read_arguments(index + 1, self.count, "[")
            if arguments[0] is not None:
                self._walk(arguments[0][0], arguments[0][1], self.builder)
                self.builder.space(self._end_offset(after), self._end_offset(after))
            return after
        if base in m.INCLUDE_MACROS:
            self._flush()
            spec = m.argument_spec(base)
            arguments, after = self._read_arguments(index + 1, self.count, spec.replace("*", ""))
            braced = [argument for argument in arguments if argument is not None]
            if braced:
                directory = self._raw(braced[0]).strip() if len(braced) > 1 else None
                target = self._raw(braced[-1]).strip()
                self.events.append(
                    IncludeEvent(target, directory, self.starts[index], self._end_offset(after))
                )
            return after
        if base == "title":
            arguments, after = self._read_arguments(index + 1, self.count, "[{")
            self.events.append(TitleEvent(self._plain(arguments[1])))
            return after
        if base == "abstract":
            arguments, after = self._read_arguments(index + 1, self.count, "{")
            self.environments.append("abstract")
            self._side_paragraph(ParagraphKind.PARAGRAPH, arguments[0])
            self.environments.pop()
            return after
        return self._inline(index, self.count, self.builder)

    def _after_comment(self, index: int) -> int:
        # TeX drops a comment with its line end and the next line's indentation.
        following = index + 1
        if following < self.count and self.kinds[following] == SPACE:
            return following + 1
        return following

    def _preamble_macro(self, index: int, name: str) -> int:
        if name.rstrip("*") in m.DEFINITION_MACROS:
            # A \title, \abstract or \begin{document} inside a definition is not the real one.
            after = self._skip_definition(index, self.count)
            unclosed = bisect.bisect_left(self.unclosed, index)
            if unclosed < len(self.unclosed) and self.unclosed[unclosed] < after:
                return index + 1  # its body never closes: do not let it swallow \begin{document}
            return after
        if name == "begin":
            arguments, after = self._read_arguments(index + 1, self.count, "{")
            if self._raw(arguments[0]).strip() == "document":
                self.region = Region.BODY
            return after
        if name == "title":
            arguments, after = self._read_arguments(index + 1, self.count, "[{")
            self.events.append(TitleEvent(self._plain(arguments[1])))
            return after
        if name == "abstract":
            arguments, after = self._read_arguments(index + 1, self.count, "{")
            self.environments.append("abstract")
            self._side_paragraph(ParagraphKind.PARAGRAPH, arguments[0])
            self.environments.pop()
            return after
        return index + 1

    def _float_macro(self, index: int, name: str) -> int:
        base = name.rstrip("*")
        if base in ("caption", "captionof", "subcaption"):
            spec = "{[{" if base == "captionof" else "[{"
            arguments, after = self._read_arguments(index + 1, self.count, spec)
            self._side_paragraph(ParagraphKind.CAPTION, arguments[-1])
            return after
        return index + 1

    def _is_math(self, environment: str) -> bool:
        """A math environment: LaTeX's own, or one the manuscript defines to open math."""
        return environment in m.MATH_ENVIRONMENTS or environment in self.macros.math_environments

    def _begin(self, index: int) -> int:
        arguments, after = self._read_arguments(index + 1, self.count, "{")
        name = self._raw(arguments[0]).strip()
        body_start = self._end_offset(after)
        math = self._is_math(name)
        if math and not self._in_float():
            return self._placeholder_until(
                MATH, self.starts[index], find_environment_end(self.text, body_start, name), name
            )
        if name in m.SKIPPED_ENVIRONMENTS or math:
            self._flush()
            end = find_environment_end(self.text, body_start, name)
            if end is None:
                self.skipping = name
                return self.count
            return self._token_at(end)
        self._flush()
        if name == "document":
            return after
        spec = m.ENVIRONMENT_ARGUMENTS.get(name, "")
        _, after = self._read_arguments(after, self.count, spec)
        while True:  # optional arguments such as a theorem's title
            optional, next_index = self._read_argument(after, self.count, "[")
            if optional is None:
                break
            after = next_index
        self.environments.append(name)
        return after

    def _end(self, index: int) -> int:
        arguments, after = self._read_arguments(index + 1, self.count, "{")
        name = self._raw(arguments[0]).strip()
        self._flush()
        if name == "document":
            self.region = Region.END
            return self.count
        if name in self.environments:
            while self.environments:
                if self.environments.pop() == name:
                    break
        return after

    def _placeholder_until(
        self, placeholder: str, start: int, end: int | None, environment: str | None
    ) -> int:
        """Put a placeholder for source from `start` to `end` (or, if unclosed, to the chunk's end)."""
        if end is None:
            self.builder.replace(placeholder, start, len(self.text))
            if environment is not None:
                self.skipping = environment
            return self.count
        self.builder.replace(placeholder, start, end)
        return self._token_at(end)

    # -- inline material ----------------------------------------------------------------------------------------

    def _walk(self, index: int, stop: int, builder: TextBuilder) -> None:
        self.nesting += 1
        try:
            while index < stop:
                if self.kinds[index] == COMMENT:
                    index = self._after_comment(index)
                    continue
                index = self._inline(index, stop, builder)
        finally:
            self.nesting -= 1

    def _inline(self, index: int, stop: int, builder: TextBuilder) -> int:
        kind = self.kinds[index]
        start, end = self.starts[index], self.ends[index]
        if kind in (TEXT, BRACKET_OPEN, BRACKET_CLOSE):
            builder.copy(self.text[start:end], start)
        elif kind == SPACE:
            builder.space(start, end)
        elif kind == MACRO:
            return self._macro(index, stop, builder)
        elif kind == DOLLAR:
            pattern = _DOUBLE_DOLLAR if end - start == 2 else _SINGLE_DOLLAR
            match = pattern.search(self.text, end, self.ends[stop - 1] if stop > 0 else end)
            close = match.end() if match else self.ends[stop - 1]
            builder.replace(MATH, start, close)
            return max(self._token_at(close), index + 1)
        elif kind == TILDE:
            if not builder.ends_with_space():
                builder.replace(" ", start, end)
        elif kind == DASH:
            builder.replace("—" if end - start == 3 else "–", start, end)
        elif kind == QUOTE:
            builder.replace("“" if self.text[start] == "`" else "”", start, end)
        elif kind == COMMENT:
            return self._after_comment(index)
        elif kind == VERBATIM:
            return self._verbatim(index, stop, builder)
        return index + 1

    def _verbatim(self, index: int, stop: int, builder: TextBuilder) -> int:
        start, end = self.starts[index], self.ends[index]
        token = self.text[start:end]
        if token.startswith("\\href"):
            arguments, after = self._read_arguments(index + 1, stop, "{")
            if arguments[0] is not None and self.nesting <= _MAX_NESTING:
                self._walk(arguments[0][0], arguments[0][1], builder)
            return after
        builder.replace(URL if token.startswith("\\url") else CODE, start, end)
        return index + 1

    def _macro(self, index: int, stop: int, builder: TextBuilder) -> int:
        start = self.starts[index]
        name = self._token_text(index)[1:]
        base = name.rstrip("*") or name
        if not name[:1].isalpha() and name[:1] != "@":
            return self._control_symbol(index, stop, name, builder)
        if self.nesting > _MAX_NESTING:
            return index + 1  # too deep to walk arguments recursively: the outer loop reads them flat
        if base in m.CITATION_MACROS or base in m.REFERENCE_MACROS:
            spec = m.argument_spec(base) or ("[[{" if base in m.CITATION_MACROS else "{")
            _, after = self._read_arguments(index + 1, stop, spec.replace("*", ""))
            builder.replace(
                CITATION if base in m.CITATION_MACROS else REFERENCE, start, self._end_offset(after)
            )
            return after
        if base in m.TEXT_MACROS or base == "href":
            spec = m.argument_spec(base) or "{"
            arguments, after = self._read_arguments(index + 1, stop, spec.replace("*", ""))
            braced = [a for a, k in zip(arguments, spec.replace("*", ""), strict=True) if k == "{" and a]
            if braced:
                self._walk(braced[-1][0], braced[-1][1], builder)
            return after
        if base == "url":
            _, after = self._read_arguments(index + 1, stop, "{")
            builder.replace(URL, start, self._end_offset(after))
            return after
        if base in ("verb", "lstinline", "mintinline"):
            return self._inline_code(index, stop, base, builder)
        if base in ("footnote", "footnotetext"):
            arguments, after = self._read_arguments(index + 1, stop, "[{")
            self._side_paragraph(ParagraphKind.FOOTNOTE, arguments[1])
            return after
        if base in ("caption", "captionof"):
            arguments, after = self._read_arguments(index + 1, stop, "{[{" if base == "captionof" else "[{")
            self._side_paragraph(ParagraphKind.CAPTION, arguments[-1])
            return after
        if base == "begin":
            arguments, after = self._read_arguments(index + 1, stop, "{")
            environment = self._raw(arguments[0]).strip()
            math = self._is_math(environment)
            if math or environment in m.SKIPPED_ENVIRONMENTS:
                end = find_environment_end(self.text, self._end_offset(after), environment)
                close = end if end is not None else self.ends[stop - 1]
                if math:
                    builder.replace(MATH, start, close)
                return max(self._token_at(close), after)
            return after
        if base == "end":
            _, after = self._read_arguments(index + 1, stop, "{")
            return after
        if base in m.DEFINITION_MACROS:
            return self._skip_definition(index, stop)
        user = self.macros.get(base)
        if user is not None:
            return self._expand(index, stop, user, builder)
        if base in m.NAMED_TEXT:
            builder.replace(m.NAMED_TEXT[base], start, self.ends[index])
            return index + 1
        if (
            base in m.DROPPED_MACROS
            or base in m.FRONT_MATTER_MACROS
            or base in m.SECTION_LEVELS
            or base in m.INCLUDE_MACROS
        ):
            _, after = self._read_arguments(index + 1, stop, m.argument_spec(base).replace("*", ""))
            return after
        if base in ("item",):
            arguments, after = self._read_arguments(index + 1, stop, "[")
            if arguments[0] is not None:
                self._walk(arguments[0][0], arguments[0][1], builder)
            builder.space(start, start)
            return after
        if m.is_known_to_pylatexenc(base):
            _, after = self._read_arguments(index + 1, stop, m.argument_spec(base))
            end = self._end_offset(after)
            text = m.snippet_text(self.text[start:end])
            if text.strip():
                builder.replace(text.strip(), start, end)
            elif text:
                builder.space(start, end)
            return after
        if index + 1 < stop and self.kinds[index + 1] == BRACKET_OPEN:
            # Options right after an unknown command (\\tcbox[colback=...]) are never prose.
            _, after = self._read_arguments(index + 1, stop, "[")
            return max(after, index + 1)
        return index + 1  # unknown macro: drop its name; a following group is read as prose

    def _control_symbol(self, index: int, stop: int, name: str, builder: TextBuilder) -> int:
        start, end = self.starts[index], self.ends[index]
        if name == "\\":
            _, after = self._read_arguments(index + 1, stop, "*[")
            builder.space(start, self._end_offset(after))
            return after
        if name in ("(", "["):
            closer = "\\)" if name == "(" else "\\]"
            close = self.text.find(closer, end, self.ends[stop - 1])
            return self._inline_placeholder(builder, MATH, start, close + 2 if close >= 0 else None, stop)
        if name[:1] in _ACCENT_SYMBOLS:
            after = index + 1
            if len(name) == 1:  # the accented letter is braced: \'{e}
                _, after = self._read_arguments(index + 1, stop, "{")
            close = self._end_offset(after)
            text = m.snippet_text(self.text[start:close])
            if text:
                builder.replace(text, start, close)
            return after
        text = m.control_symbol_text(name)
        if text == " ":
            builder.space(start, end)
        elif text:
            builder.replace(text, start, end)
        return index + 1

    def _inline_placeholder(
        self, builder: TextBuilder, placeholder: str, start: int, close: int | None, stop: int
    ) -> int:
        if close is None:
            close = self.ends[stop - 1]
        builder.replace(placeholder, start, close)
        return self._token_at(close)

    def _inline_code(self, index: int, stop: int, base: str, builder: TextBuilder) -> int:
        start = self.starts[index]
        position = self.ends[index]
        if base == "mintinline":
            _, after = self._read_arguments(index + 1, stop, "{")
            position = self._end_offset(after)
        if position >= len(self.text):
            return index + 1
        delimiter = self.text[position]
        closer = "}" if delimiter == "{" else delimiter
        close = self.text.find(closer, position + 1)
        line_end = self.text.find("\n", position + 1)
        if close < 0 or (line_end >= 0 and close > line_end):
            return index + 1
        return self._inline_placeholder(builder, CODE, start, close + 1, stop)

    def _skip_definition(self, index: int, stop: int) -> int:
        """Pass over a definition (see m.DEFINITION_MACROS) at `index`; nothing of it is prose."""
        base = self._token_text(index)[1:].rstrip("*")
        if base in m.TEX_DEFINITIONS:
            return self._skip_tex_definition(index, stop)
        if base in m.LET_DEFINITIONS:
            return self._skip_let(index, stop, 2 if base == "futurelet" else 1)
        _, after = self._read_arguments(index + 1, stop, m.argument_spec(base).replace("*", ""))
        return after

    def _skip_tex_definition(self, index: int, stop: int) -> int:
        """Pass over \\def\\name<parameter text>{body}, e.g. \\def\\x#1#2{...} or \\def\\x#1 and #2{...}."""
        cursor = self._skip_space(index + 1, stop)
        if cursor >= stop:
            return stop
        cursor += 1  # the name: a control sequence or an active character
        probe = cursor
        limit = min(stop, cursor + _MAX_PARAMETER_TOKENS)
        while probe < limit and self.kinds[probe] not in (OPEN, CLOSE):
            probe += 1
        if probe < limit and self.kinds[probe] == OPEN:
            return min(self.partner[probe], stop - 1) + 1
        return cursor  # no body: only the name goes

    def _skip_let(self, index: int, stop: int, names: int) -> int:
        """Pass over \\let\\a\\b, \\let\\a=\\b and \\let\\a = b (\\futurelet has two names before its token)."""
        cursor = index + 1
        for _ in range(names):
            cursor = self._skip_space(cursor, stop)
            if cursor >= stop:
                return stop
            cursor += 1
        cursor = self._skip_space(cursor, stop)
        if cursor < stop and self.kinds[cursor] == TEXT and self._token_text(cursor).startswith("="):
            if self.ends[cursor] - self.starts[cursor] > 1:  # \\let\\a=b: the target is in the same token
                return cursor + 1
            cursor = self._skip_space(cursor + 1, stop)
        return min(stop, cursor + 1)

    def _expand(self, index: int, stop: int, user: m.UserMacro, builder: TextBuilder) -> int:
        start = self.starts[index]
        values: list[str] = []
        after = index + 1
        if user.default is not None and user.parameters:
            argument, after = self._read_argument(after, stop, "[")
            values.append(self._raw(argument) if argument is not None else user.default)
        while len(values) < user.parameters:
            argument, after = self._read_argument(after, stop, "{")
            values.append(self._raw(argument))
        end = self._end_offset(after)
        if self.depth >= _MAX_EXPANSION_DEPTH:
            return after
        body = user.body
        for number, value in enumerate(values, start=1):
            body = body.replace(f"#{number}", value)
        if len(body) > _MAX_EXPANSION_LENGTH or self.budget[0] < len(body):
            return after
        self.budget[0] -= max(1, len(body))
        text = ChunkParser(body, ScanState(), self.macros, self.depth + 1, self.budget).convert()
        if text:
            builder.replace(text, start, end)
        return after


def convert_fragment(text: str, macros: m.MacroTable) -> str:
    """Plain text of a fragment of inline LaTeX (no offsets)."""
    return ChunkParser(text, ScanState(), macros).convert()


def parse_chunk(text: str, state: ScanState, macros: m.MacroTable) -> tuple[list[Event], ScanState]:
    return ChunkParser(text, state, macros).parse()

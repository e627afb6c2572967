"""LaTeX chunk parser: one blank-line-delimited chunk of source, plus the state it starts in, to events.

A blank line always ends a paragraph, so a chunk's paragraphs depend only on its text and on the state it is
entered with (preamble or body, open environments, a skipped region still open). That makes chunks cacheable by
(text, state): after a keystroke only the edited chunk is parsed again. Brace groups never cross a chunk, which
also confines the damage of an unbalanced brace to one paragraph.

Parsing takes time linear in the chunk whatever it holds: no search is repeated over the same stretch of text
(every look-ahead is either consumed, bounded, or answered from a table built once per chunk), and questions
about the open environments take the same time at any depth.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from enum import IntEnum

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
    _VERBATIM_START,  # only inside the tokenizer: \verb or \lstinline, whose end is found without a regex scan
) = range(1, 15)
_URL_TOKEN = r"\\(?:url|href)[ \t]*\{[^{}\n]*\}"
_OTHER_TOKENS = (
    r"|(?P<macro>\\(?:[A-Za-z@]+\*?|['`^\"~=.](?:\\[ij](?![A-Za-z])|[A-Za-z])?|[^A-Za-z@]|$))"
    r"|(?P<open>\{)|(?P<close>\})"
    r"|(?P<dollar>\$\$|\$)"
    r"|(?P<bracket_open>\[)|(?P<bracket_close>\])"
    r"|(?P<dash>---|--)"
    r"|(?P<quote>``|'')"
    r"|(?P<tilde>~)"
    r"|(?P<other>.)"
)
# Words and white space come first, being most of the text: no other alternative can start where they do.
# Verbatim-like macros are single tokens, so that a % inside them (a URL's %20) is not read as a comment. A regex
# that scanned for the closing delimiter would rescan the rest of the line for every \verb that never closes, so
# the regex only spots their start and _verbatim_end finds the delimiter; one that does not close is lexed again
# by _PLAIN_TOKEN, which lacks that alternative, and so becomes a macro as before.
_TOKEN = re.compile(
    r"(?P<text>[^\\%{}$\s\[\]~`'-]+)|(?P<space>\s+)|(?P<comment>%[^\n]*)"
    r"|(?P<verbatim>" + _URL_TOKEN + ")"
    r"|(?P<verbatim_start>\\verb\*?(?=[^\sA-Za-z*])|\\lstinline(?=[^\sA-Za-z]))" + _OTHER_TOKENS,
    re.S,
)
_PLAIN_TOKEN = re.compile(
    r"(?P<text>[^\\%{}$\s\[\]~`'-]+)|(?P<space>\s+)|(?P<comment>%[^\n]*)"
    r"|(?P<verbatim>" + _URL_TOKEN + ")" + _OTHER_TOKENS,
    re.S,
)
_KINDS = {
    "comment": COMMENT,
    "verbatim": VERBATIM,
    "verbatim_start": _VERBATIM_START,
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
    "other": TEXT,  # any other single character
}
# Kinds by group number (no group nests in another, so a match's lastindex is its alternative).
_KIND_OF_GROUP = [0] * (_TOKEN.groups + 1)
for _name, _number in _TOKEN.groupindex.items():
    _KIND_OF_GROUP[_number] = _KINDS[_name]
_KIND_OF_PLAIN_GROUP = [0] * (_PLAIN_TOKEN.groups + 1)
for _name, _number in _PLAIN_TOKEN.groupindex.items():
    _KIND_OF_PLAIN_GROUP[_number] = _KINDS[_name]
_BLANK_KINDS = frozenset([SPACE, COMMENT])
_PROSE_KINDS = frozenset([TEXT, SPACE, BRACKET_OPEN, BRACKET_CLOSE, OPEN, CLOSE])  # what _prose takes
_LISTING_DELIMITER = re.compile(r"[^\sA-Za-z{\[]")
_BRACES = re.compile(b"[" + bytes([OPEN, CLOSE]) + b"]")  # over the kinds as bytes
_BOUNDARY = re.compile(r"\\(begin|end)\s*\{([^{}\\]*)\}")
_MARGIN_OFF = re.compile(r"%\s*margin:\s*off\b", re.I)
_MARGIN_ON = re.compile(r"(?<!\\)%\s*margin:\s*on\b", re.I)
_SINGLE_DOLLAR = re.compile(r"(?<!\\)\$")
_DOUBLE_DOLLAR = re.compile(r"(?<!\\)\$\$")
_ACCENT_SYMBOLS = frozenset("'`^\"~=.")
_MAX_EXPANSION_DEPTH = 8
_MAX_EXPANSION_LENGTH = 10_000
# A substitution is abandoned before it is built once it would pass this (\x{<a long argument>} with #1 many
# times in the body would otherwise build a huge string only to drop it for being over _MAX_EXPANSION_LENGTH).
_MAX_SUBSTITUTION_LENGTH = 16 * _MAX_EXPANSION_LENGTH
_MAX_NESTING = 64  # nested arguments walked recursively; deeper ones are read flat
_MAX_OPTIONAL_TOKENS = 256  # an optional [argument] longer than this is not one
_MAX_PARAMETER_TOKENS = 64  # \def\name<parameter text>{body}: a parameter text longer than this is not one
_SHORT_WALK = 8  # tokens walked one by one before a table answers instead
_SHORT_SCAN = 256  # characters searched directly before a per-line table answers instead
# An \end whose name is not the innermost environment's closes the nearest one of that name among this many
# levels (beyond that it is a stray \end, ignored): no real document nests so deep, and a bound keeps a run of
# stray \end tokens inside deep nesting from costing the depth each.
_MAX_END_SEARCH = 32


class Region(IntEnum):
    PREAMBLE = 0
    BODY = 1
    END = 2


class OpenEnvironment:
    """An open environment and, through `parent`, the ones around it: an immutable linked stack.

    What the parser asks of the stack (the paragraph kind, inside a float, inside the abstract) is settled once
    per push and the hash once per node, so no question costs time in proportion to the depth. Stacks built on
    one another share their lower nodes, so comparing two stops where they meet.
    """

    __slots__ = ("_hash", "in_abstract", "in_float", "kind", "name", "parent")

    def __init__(self, name: str, parent: OpenEnvironment | None) -> None:
        self.name = name
        self.parent = parent
        if name in m.LIST_ENVIRONMENTS:
            self.kind = ParagraphKind.LIST_ITEM
        elif name in m.QUOTE_ENVIRONMENTS:
            self.kind = ParagraphKind.QUOTE
        else:
            self.kind = parent.kind if parent is not None else ParagraphKind.PARAGRAPH
        self.in_float = name in m.FLOAT_ENVIRONMENTS or (parent is not None and parent.in_float)
        self.in_abstract = name == "abstract" or (parent is not None and parent.in_abstract)
        self._hash = hash((name, parent._hash if parent is not None else 0))

    def names(self) -> tuple[str, ...]:
        """The open environments, outermost first."""
        names: list[str] = []
        node: OpenEnvironment | None = self
        while node is not None:
            names.append(node.name)
            node = node.parent
        return tuple(reversed(names))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OpenEnvironment):
            return NotImplemented
        mine: OpenEnvironment | None = self
        theirs: OpenEnvironment | None = other
        while mine is not theirs:
            if mine is None or theirs is None or mine._hash != theirs._hash or mine.name != theirs.name:
                return False
            mine, theirs = mine.parent, theirs.parent
        return True

    def __repr__(self) -> str:
        return f"OpenEnvironment({'/'.join(self.names())})"


@dataclass(frozen=True, slots=True)
class ScanState:
    region: Region = Region.BODY
    environments: OpenEnvironment | None = None  # the innermost open environment
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


class _LineFinder:
    """Finds a character further along its line, for searches whose offsets move forward.

    A line's end is found once; an answer is remembered until the search passes it; and a search that would run
    on along a long line is settled by a table of where each character last occurs on it, built once per line.
    Together many searches along one line, for many different characters, stay linear in its length.
    """

    __slots__ = ("_found", "_last", "_last_from", "_line_end", "_line_from", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_from = 0  # _line_end is the end of the line for offsets in [_line_from, _line_end]
        self._line_end = -1
        self._found: dict[str, tuple[int, int, int]] = {}  # char: (searched from, valid up to, answer)
        self._last: dict[str, int] | None = None  # char: its last offset in [_last_from, _line_end)
        self._last_from = 0

    def line_end(self, offset: int) -> int:
        """The offset of the newline that ends the line of `offset` (the text's length on the last line)."""
        if not self._line_from <= offset <= self._line_end:
            end = self.text.find("\n", offset)
            self._line_from = offset
            self._line_end = len(self.text) if end < 0 else end
            self._last = None
        return self._line_end

    def find(self, char: str, offset: int) -> int:
        """The offset of the first `char` at or after `offset` on the same line, or -1."""
        known = self._found.get(char)
        if known is not None and known[0] <= offset <= known[1]:
            return known[2]
        end = self.line_end(offset)
        near = min(end, offset + _SHORT_SCAN)
        found = self.text.find(char, offset, near)
        if found < 0 and near < end:
            if self._last is None or offset < self._last_from:
                self._last = dict(zip(self.text[offset:end], range(offset, end), strict=True))
                self._last_from = offset
            if self._last.get(char, -1) >= near:
                found = self.text.find(char, near, end)
        self._found[char] = (offset, found if found >= 0 else end, found)
        return found


def _verbatim_end(text: str, match: re.Match[str], lines: _LineFinder) -> int | None:
    """Where the \\verb|code| or \\lstinline[options]{code} starting at `match` ends, or None if it does not
    close on its line (as the regex it stands in for: \\verb\\*?(?P<d>[^\\sA-Za-z*])[^\\n]*?(?P=d), and so on)."""
    position = match.end()
    if text.startswith("\\verb", match.start()):
        close = lines.find(text[position], position + 1)
        return close + 1 if close >= 0 else None
    if text[position] == "[":
        close = lines.find("]", position + 1)
        if close < 0:
            return None
        position = close + 1
    if position >= len(text):
        return None
    delimiter = text[position]
    if delimiter == "{":
        close = lines.find("}", position + 1)
    elif _LISTING_DELIMITER.match(delimiter):
        close = lines.find(delimiter, position + 1)
    else:
        return None
    return close + 1 if close >= 0 else None


def _tokenize(text: str) -> tuple[list[int], list[int]]:
    """The kind and start of every token; tokens tile the text (the last alternative takes any character)."""
    kinds: list[int] = []
    starts: list[int] = []
    add_kind, add_start = kinds.append, starts.append
    if "\\verb" not in text and "\\lstinline" not in text:
        for match in _TOKEN.finditer(text):
            add_kind(_KIND_OF_GROUP[match.lastindex or 0])
            add_start(match.start())
        return kinds, starts
    lines = _LineFinder(text)
    position = 0
    while position < len(text):
        for match in _TOKEN.finditer(text, position):
            kind = _KIND_OF_GROUP[match.lastindex or 0]
            start = match.start()
            if kind != _VERBATIM_START:
                add_kind(kind)
                add_start(start)
                continue
            end = _verbatim_end(text, match, lines)
            if end is None:  # not verbatim after all: whatever the other alternatives make of it
                plain = _PLAIN_TOKEN.match(text, start)
                assert plain is not None  # the last alternative matches any character
                add_kind(_KIND_OF_PLAIN_GROUP[plain.lastindex or 0])
                end = plain.end()
            else:
                add_kind(VERBATIM)
            add_start(start)
            position = end
            break  # go on lexing after the token
        else:
            break
    return kinds, starts


def _closers(steps: list[int]) -> list[int]:
    """For each b in 0..len(steps): the first j >= b where the running sum of steps[b..j] reaches -1, or -1.

    With steps +1 for \\begin and -1 for \\end, that is the \\end closing an environment opened just before
    boundary b. The running sums from 0 form a walk; the answer is where the walk first drops below its value
    at b, found for every b at once with a stack of the positions still waiting for a drop.
    """
    result = [-1] * (len(steps) + 1)
    levels = [0] * (len(steps) + 1)
    waiting: list[int] = []
    level = 0
    for position in range(len(steps) + 1):
        if position:
            level += steps[position - 1]
        while waiting and level < levels[waiting[-1]]:
            result[waiting.pop()] = position - 1
        levels[position] = level
        waiting.append(position)
    return result


class _Boundaries:
    """The \\begin{name} and \\end{name} of a chunk outside comments, by name, so that finding the \\end of an
    environment is a bisect rather than a scan (a scan per \\begin made unclosed ones quadratic)."""

    __slots__ = ("_closers", "_entries")

    def __init__(self, text: str) -> None:
        comments = m.CommentFinder(text)
        entries: dict[str, tuple[list[int], list[int], list[int]]] = {}
        for match in _BOUNDARY.finditer(text):
            if comments.is_commented(match.start()):
                continue
            starts, ends, steps = entries.setdefault(match.group(2), ([], [], []))
            starts.append(match.start())
            ends.append(match.end())
            steps.append(1 if match.group(1) == "begin" else -1)
        self._entries = entries
        self._closers: dict[str, list[int]] = {}

    def end(self, start: int, name: str) -> int | None:
        """Offset just past the \\end{name} that closes an environment whose body starts at `start`."""
        entry = self._entries.get(name)
        if entry is None:
            return None
        closers = self._closers.get(name)
        if closers is None:
            closers = self._closers[name] = _closers(entry[2])
        closer = closers[bisect.bisect_left(entry[0], start)]
        return entry[1][closer] if closer >= 0 else None


class ChunkParser:
    """Parses one chunk. Offsets in the events it returns are relative to the chunk's start."""

    __slots__ = (
        "_boundaries",
        "_kind_bytes",
        "_lines",
        "_next_bracket",
        "_partner",
        "_unclosed",
        "allowance",
        "budget",
        "builder",
        "count",
        "depth",
        "ends",
        "events",
        "footnotes",
        "kinds",
        "macros",
        "nesting",
        "off",
        "region",
        "skipping",
        "starts",
        "state",
        "text",
        "top",
    )

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
        # A chunk's own parser draws its expansion budget from the manuscript's (macros.expansion_allowance), so
        # that expansions cannot make many small chunks cost far more than their text; expansions share it.
        self.allowance = macros.expansion_allowance(len(text)) if budget is None else None
        self.budget = budget if budget is not None else [self.allowance or 0]
        self.nesting = 0
        self.kinds, self.starts = _tokenize(text)
        self.count = len(self.kinds)
        self.ends = self.starts[1:]
        if self.count:
            self.ends.append(len(text))
        # Built on first use: many chunks are plain prose and never need them.
        self._partner: list[int] | None = None
        self._unclosed: list[int] = []
        self._kind_bytes: bytes | None = None
        self._next_bracket: list[int] | None = None
        self._boundaries: _Boundaries | None = None
        self._lines: _LineFinder | None = None
        self.state = state
        self.region = state.region
        self.top = state.environments
        self.skipping = state.skipping
        self.off = state.off
        self.events: list[Event] = []
        self.builder = TextBuilder()
        self.footnotes: list[ParagraphEvent] = []

    # -- entry points -------------------------------------------------------------------------------------------

    def parse(self) -> tuple[list[Event], ScanState]:
        index = 0
        count, kinds = self.count, self.kinds
        while index < count:
            if (
                kinds[index] in _PROSE_KINDS
                and self.skipping is None
                and not self.off
                and self.region == Region.BODY
                and (self.top is None or not self.top.in_float)
            ):
                index = self._prose(index, count, self.builder)
            else:
                index = self._step(index)
        self._flush()
        self._settle_budget()
        state = self.state
        if (self.region, self.top, self.skipping, self.off) == (
            state.region,
            state.environments,
            state.skipping,
            state.off,
        ):
            return self.events, state  # the same object: the next chunk's cache key then compares by identity
        return self.events, ScanState(self.region, self.top, self.skipping, self.off)

    def convert(self) -> str:
        """Plain text of the whole chunk as inline material (used for macro expansions)."""
        self._walk(0, self.count, self.builder)
        self._settle_budget()
        return self.builder.build()[0]

    def _settle_budget(self) -> None:
        if self.allowance is not None:
            if self.budget[0] != self.allowance:
                self.macros.spend_expansion(self.allowance - self.budget[0])
            self.allowance = None

    # -- tokens -------------------------------------------------------------------------------------------------

    @property
    def partner(self) -> list[int]:
        """For each `{` token, the index of its `}` (the chunk's token count if it is never closed)."""
        if self._partner is None:
            self._partner = self._match_braces()
        return self._partner

    @property
    def unclosed(self) -> list[int]:
        """The `{` tokens never closed in the chunk, in increasing order."""
        _ = self.partner
        return self._unclosed

    @property
    def kind_bytes(self) -> bytes:
        """The token kinds as bytes, for regex searches over them."""
        if self._kind_bytes is None:
            self._kind_bytes = bytes(self.kinds)
        return self._kind_bytes

    def _match_braces(self) -> list[int]:
        partner = [-1] * self.count
        stack: list[int] = []
        kinds = self.kinds
        for match in _BRACES.finditer(self.kind_bytes):  # only the braces, not every token
            index = match.start()
            if kinds[index] == OPEN:
                stack.append(index)
            elif stack:
                partner[stack.pop()] = index
        for opener in stack:  # unbalanced: the group runs to the end of the chunk
            partner[opener] = self.count
        self._unclosed = stack
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

    def _bracket_close(self, first: int, limit: int) -> int:
        """The `]` ending an optional argument whose content starts at token `first`, if before `limit` (a brace
        group on the way is passed over whole); -1 if there is none."""
        kinds = self.kinds
        cursor = first
        for _ in range(_SHORT_WALK):
            if cursor >= limit:
                return -1
            kind = kinds[cursor]
            if kind == BRACKET_CLOSE:
                return cursor
            cursor = self.partner[cursor] + 1 if kind == OPEN else cursor + 1
        if cursor >= limit:
            return -1
        # A long way to go: the same walk, answered for every start at once (else a run of `\\item[` that never
        # close would walk up to _MAX_OPTIONAL_TOKENS tokens each).
        if self._next_bracket is None:
            self._next_bracket = self._bracket_table()
        found = self._next_bracket[cursor]
        return found if found < limit else -1

    def _bracket_table(self) -> list[int]:
        """For each token index, the first `]` the walk of _bracket_close reaches from it (the count if none)."""
        count = self.count
        table = [count] * (count + 2)
        kinds, partner = self.kinds, self.partner
        for index in range(count - 1, -1, -1):
            kind = kinds[index]
            if kind == BRACKET_CLOSE:
                table[index] = index
            elif kind == OPEN:
                table[index] = table[partner[index] + 1]
            else:
                table[index] = table[index + 1]
        return table

    def _read_argument(self, index: int, stop: int, kind: str) -> tuple[tuple[int, int] | None, int]:
        """Read one argument of shape `kind` at `index`: its token range and the index after it."""
        if kind == "*":
            is_star = index < stop and self.kinds[index] == TEXT and self._token_text(index) == "*"
            return ((index, index + 1), index + 1) if is_star else (None, index)
        kinds = self.kinds
        probe = self._skip_space(index, stop) if index < stop and kinds[index] in _BLANK_KINDS else index
        if probe >= stop:
            return None, index
        token = kinds[probe]
        if kind == "g" and token != OPEN:  # a brace group only if one follows
            return None, index
        if kind == "[":
            if token != BRACKET_OPEN:
                return None, index
            close = self._bracket_close(probe + 1, min(stop, probe + _MAX_OPTIONAL_TOKENS))
            if close < 0:
                return None, index
            return (probe + 1, close), close + 1
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

    def _environment_end(self, start: int, name: str) -> int | None:
        """Offset just past the \\end{name} that closes an environment whose body starts at `start`."""
        if self._boundaries is None:
            self._boundaries = _Boundaries(self.text)
        return self._boundaries.end(start, name)

    def _line_finder(self) -> _LineFinder:
        if self._lines is None:
            self._lines = _LineFinder(self.text)
        return self._lines

    # -- paragraphs ---------------------------------------------------------------------------------------------

    def _paragraph_kind(self) -> ParagraphKind:
        return self.top.kind if self.top is not None else ParagraphKind.PARAGRAPH

    def _in_abstract(self) -> bool:
        return self.top is not None and self.top.in_abstract

    def _in_float(self) -> bool:
        return self.top is not None and self.top.in_float

    def _flush(self) -> None:
        if self.builder.length:
            text, offsets = self.builder.build()
            self.builder = TextBuilder()
            if has_words(text):
                kind = self._paragraph_kind()
                self.events.append(
                    ParagraphEvent(kind, text, offsets, self._in_abstract(), paragraph_id(text))
                )
        if self.footnotes:
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
            end = self._environment_end(self.starts[index], self.skipping)
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
        if not name[:1].isalpha() and name[:1] != "@":  # \\, \%, \' and the like: inline at once
            return self._control_symbol(index, self.count, name, self.builder)
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
            return self._abstract_macro(index)
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
            return self._abstract_macro(index)
        return index + 1

    def _abstract_macro(self, index: int) -> int:
        """\\abstract{...}: its argument is an abstract paragraph."""
        arguments, after = self._read_arguments(index + 1, self.count, "{")
        outside = self.top
        self.top = OpenEnvironment("abstract", outside)
        self._side_paragraph(ParagraphKind.PARAGRAPH, arguments[0])
        self.top = outside
        return after

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
                MATH, self.starts[index], self._environment_end(body_start, name), name
            )
        if name in m.SKIPPED_ENVIRONMENTS or math:
            self._flush()
            end = self._environment_end(body_start, name)
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
        self.top = OpenEnvironment(name, self.top)
        return after

    def _end(self, index: int) -> int:
        arguments, after = self._read_arguments(index + 1, self.count, "{")
        name = self._raw(arguments[0]).strip()
        self._flush()
        if name == "document":
            self.region = Region.END
            return self.count
        node, searched = self.top, 0
        while node is not None and searched < _MAX_END_SEARCH:
            if node.name == name:  # closes it and any left open inside it
                self.top = node.parent
                break
            node, searched = node.parent, searched + 1
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
                index = self._prose(index, stop, builder)
                if index >= stop:
                    break
                if self.kinds[index] == COMMENT:
                    index = self._after_comment(index)
                    continue
                index = self._inline(index, stop, builder)
        finally:
            self.nesting -= 1

    def _prose(self, index: int, stop: int, builder: TextBuilder) -> int:
        """Take the plain tokens from `index` on (words, brackets, white space, braces) as _inline would, up to
        the first other token; return its index. The common case, so done in one loop."""
        kinds, starts, ends, text = self.kinds, self.starts, self.ends, self.text
        while index < stop:
            kind = kinds[index]
            if kind in (TEXT, BRACKET_OPEN, BRACKET_CLOSE):
                first = index
                index += 1
                while index < stop:
                    kind = kinds[index]
                    if kind in (TEXT, BRACKET_OPEN, BRACKET_CLOSE):
                        index += 1
                    elif kind == SPACE and ends[index] - starts[index] == 1 and text[starts[index]] == " ":
                        # After a word a lone space would be appended as " " for itself: copy it with the words.
                        index += 1
                    else:
                        break
                start = starts[first]
                builder.copy(text[start : ends[index - 1]], start)
            elif kind == SPACE:
                builder.space(starts[index], ends[index])
                index += 1
            elif kind in (OPEN, CLOSE):
                index += 1
            else:
                break
        return index

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
                end = self._environment_end(self._end_offset(after), environment)
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
            after = index + 1
            following = self.kinds[after] if after < stop else 0
            if (
                following in _BLANK_KINDS
                or following == BRACKET_OPEN
                or (following == TEXT and self._token_text(after) == "*")
            ):
                _, after = self._read_arguments(after, stop, "*[")  # \\*, \\[2pt]: else nothing to read
            builder.space(start, self.ends[after - 1])
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
        lines = self._line_finder()
        if closer == "\n":  # the line's own end closes it
            close = lines.line_end(position + 1)
            close = close if close < len(self.text) else -1
        else:
            close = lines.find(closer, position + 1)  # on the same line, or it is not inline code
        if close < 0:
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
        brace = _BRACES.search(self.kind_bytes, cursor, min(stop, cursor + _MAX_PARAMETER_TOKENS))
        if brace is not None and self.kinds[brace.start()] == OPEN:
            return min(self.partner[brace.start()], stop - 1) + 1
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
        # A value replaces each two-character #k, so the expansion is at least this long: with less budget left
        # the macro is refused before its substitution is built.
        if self.budget[0] < len(body) - 2 * body.count("#"):
            return after
        for number, value in enumerate(values, start=1):
            marker = f"#{number}"
            if len(body) + body.count(marker) * (len(value) - len(marker)) > _MAX_SUBSTITUTION_LENGTH:
                return after
            body = body.replace(marker, value)
        if len(body) > _MAX_EXPANSION_LENGTH or self.budget[0] < len(body):
            return after
        self.budget[0] -= max(1, len(body))
        text = ChunkParser(body, ScanState(), self.macros, self.depth + 1, self.budget).convert()
        if text:
            builder.replace(text, start, end)
        return after


def parse_chunk(text: str, state: ScanState, macros: m.MacroTable) -> tuple[list[Event], ScanState]:
    return ChunkParser(text, state, macros).parse()

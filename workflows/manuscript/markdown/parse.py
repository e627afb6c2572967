"""Markdown manuscripts (CommonMark, pandoc and Manubot conventions) into the manuscript model.

The file is cut into chunks at blank lines that start a new top-level block (outside fences, HTML comments and
display math), and each chunk is parsed by markdown-it on its own, cached by its text: a keystroke re-parses one
chunk. Link reference definitions elsewhere in the file only decide whether "[x]" is a link; the plain text
is the same either way.
"""

from __future__ import annotations

import bisect
import functools
import importlib
import re
import string
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from markdown_it import MarkdownIt
from markdown_it.common.utils import mdTrim
from markdown_it.rules_block import StateBlock
from markdown_it.rules_block.table import escapedSplit, getLine
from markdown_it.rules_block.table import table as table_rule
from markdown_it.rules_inline import StateInline
from markdown_it.rules_inline import image as image_rule
from markdown_it.rules_inline import link as link_rule
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin

from ..assemble import ManuscriptAssembler
from ..loader import is_markdown
from ..model import Manuscript, ParagraphKind, has_words, paragraph_id
from ..offsets import OffsetMap, TextBuilder
from ..source import SourceFile
from .inline import InlineAligner
from .rawtex import MATH_ENVIRONMENTS, block_environment_at, environment_ends, escape_run, raw_tex_plugin

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?\r?\n)(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_FRONT_TITLE = re.compile(r"^title:[ \t]*(?P<quote>['\"]?)(?P<title>.+?)(?P=quote)[ \t]*$", re.M)
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_FOOTNOTE_DEFINITION = re.compile(r"\A\[\^[^\]\s]+\]:[ \t]*")
_FOOTNOTE_STARTS = re.compile(r"^\[\^[^\]\s]+\]:", re.M)
_FOOTNOTE_MARKER = re.compile(r"\[\^[^\]\s]+\]:[ \t]*")
_BLANK_LINE = re.compile(r"(?:\r\n|\r|\n)[ \t]*(?:\r\n|\r|\n)")
_LINE_END = re.compile(r"\r\n|\r|\n")  # markdown-it's line breaks (and LSP's); not U+2028 or form feed
_TABLE_CAPTION = re.compile(r"^(?:Table)?:\s")
_MARGIN_SWITCH = re.compile(r"<!--\s*margin:\s*(on|off)\s*-->", re.I)
_ATTRIBUTES_ONLY = re.compile(r"^\s*(?:\{[^{}]*\}\s*)?$")
# pandoc labels a display equation on its closing line ($$ {#eq:x}), which markdown-it's math rule does not
# know; the label is blanked out (same length, so offsets hold) before parsing.
_MATH_LABEL = re.compile(r"^([ \t]*\$\$)([ \t]*\{[^}\n]*\})[ \t]*$", re.M)
_CACHE_ENTRIES = 20_000


@dataclass(frozen=True, slots=True)
class _Heading:
    level: int
    title: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class _Paragraph:
    kind: ParagraphKind
    text: str
    offsets: OffsetMap
    id: str


_Event = _Heading | _Paragraph


def _make_parser(fast_paths: bool = True) -> MarkdownIt:
    """The parser; without the fast paths only to check that they change no token (tables aside)."""
    parser = (
        MarkdownIt("commonmark", {"html": True})
        .enable("table")
        .enable("strikethrough")
        .use(dollarmath_plugin, double_inline=True)  # pandoc: $$...$$ inside a paragraph is display math
        .use(raw_tex_plugin)
    )
    return parser.use(_fast_paths_plugin) if fast_paths else parser


# -- fast paths through markdown-it's rules ---------------------------------------------------------------------
# markdown-it tries every inline rule at each character where its text rule stops, and pushes a token per
# emphasis marker or escape: a line of punctuation costs microseconds a character, and a run of "[" far more (each
# one looks ahead for its label's end). These rules give the same tokens, once markdown-it has joined adjacent
# text, in the cases that need no parsing; tables, which are not prose, are only measured.

# Where one of our inline rules may match: a line break, an escape or raw TeX, code, emphasis, strikethrough
# ("~~"), a link, an image ("!["), math, an entity ("&#", "&name;"), an autolink or HTML tag ("<" not before "<"
# or a space).
# markdown-it's own list also stops at {}#%+-:=@^> for other plugins.
_STOPS = r"\n\\`*_"
_ALWAYS_STOP = frozenset("\n\\`*_")
_MAY_START = {
    "~": r"~~",
    "[": r"\[",
    "!": r"!(?=\[)",
    "$": r"\$",
    "&": r"&(?=[#A-Za-z])",
    "<": r"<(?![<\s])",
}
# A look-ahead for the end of a link label (markdown-it's skipToken, silent) must see every "]".
_TEXT_STOP_SILENT = re.compile("|".join([rf"[{_STOPS}\]]", *_MAY_START.values()]))
_TEXT_STOP = re.compile("|".join([rf"[{_STOPS}]", *_MAY_START.values()]))
# markdown-it's cap on the empty cells it fills in per table (newer versions only), which ends a table early.
_MAX_FILLED_CELLS: int | None = getattr(
    importlib.import_module("markdown_it.rules_block.table"), "MAX_AUTOCOMPLETED_CELLS", None
)
_LOOKUPS_KEY = "margin_inline_lookups"
_ASCII_PUNCTUATION = frozenset(string.punctuation)


@functools.cache
def _text_stop(dead: frozenset[str]) -> re.Pattern[str]:
    """Where text stops, leaving out the characters in `dead` (that can start nothing from here on)."""
    live = [pattern for char, pattern in _MAY_START.items() if char not in dead]
    return re.compile("|".join([rf"[{_STOPS}]", *live]))


class _Lookups:
    """Bounds in one inline source past which a link, math, an entity or a tag can no longer start."""

    def __init__(self, text: str) -> None:
        self.text = text
        # Math needs a "$" after its opening run; an entity a ";"; an autolink or tag a ">".
        last_dollar = text.rfind("$")
        run = last_dollar
        while run > 0 and text[run - 1] == "$":
            run -= 1
        self.last_dollar_run = run if last_dollar >= 0 else 0
        self.last_semicolon = text.rfind(";") + 1
        self.last_angle = text.rfind(">") + 1
        self._link_ends: dict[tuple[int, bool], int] = {}
        self._dead: _DeadFrom | None = None
        self._dead_for: tuple[int, bool] | None = None

    def link_end(self, limit: int, references: bool) -> int:
        """No link or image label can open at or after this position (before `limit`). A label needs a "]"
        after it; without reference definitions, a "](" and then a ")". Searched backwards from `limit`, once
        per limit (the paragraph's end, or a link's label)."""
        key = (limit, references)
        end = self._link_ends.get(key)
        if end is None:
            if references:
                end = max(0, self.text.rfind("]", 0, limit))
            else:
                close = self.text.rfind(")", 0, limit)
                end = max(0, self.text.rfind("](", 0, close)) if close > 0 else 0
            self._link_ends[key] = end
        return end

    def dead(self, limit: int, references: bool) -> _DeadFrom:
        if self._dead is None or self._dead_for != (limit, references):
            link_end = self.link_end(limit, references)
            self._dead = _DeadFrom(
                {
                    "[": link_end,
                    "!": link_end,
                    "$": self.last_dollar_run,
                    "&": self.last_semicolon,
                    "<": self.last_angle,
                }
            )
            self._dead_for = (limit, references)
        return self._dead


class _DeadFrom:
    """Which characters of _MAY_START can start nothing at a position: each from its own bound on."""

    def __init__(self, bounds: dict[str, int]) -> None:
        ordered = sorted(bounds.items(), key=lambda item: item[1])
        self._bounds = [bound for _, bound in ordered]
        self._sets = [frozenset(char for char, _ in ordered[:count]) for count in range(len(ordered) + 1)]

    def at(self, position: int) -> frozenset[str]:
        return self._sets[bisect.bisect_right(self._bounds, position)]


def _lookups(state: StateInline) -> _Lookups:
    cached = state.env.get(_LOOKUPS_KEY)
    if cached is None or cached.text is not state.src:
        cached = state.env[_LOOKUPS_KEY] = _Lookups(state.src)
    return cached


def _append_pending(state: StateInline, text: str) -> None:
    append = getattr(state, "append_pending", None)  # markdown-it-py 4 buffers pending text; 3 has a string
    if append is not None:
        append(text)
    else:
        state.pending += text


def _text(state: StateInline, silent: bool) -> bool:
    """markdown-it's text rule, stopping only where a rule of ours may match."""
    src, start, limit = state.src, state.pos, state.posMax
    if src[start] in _ALWAYS_STOP:
        return False
    stop = (_TEXT_STOP_SILENT if silent else _TEXT_STOP).search(src, start, limit)
    end = stop.start() if stop is not None else limit
    if not silent and end < limit and src[end] in _MAY_START:
        # Past its bound a character is text: search on without it. Each search leaves out more characters.
        dead_from = _lookups(state).dead(limit, bool(state.env.get("references")))
        while end < limit and src[end] in _MAY_START:
            dead = dead_from.at(end)
            if src[end] not in dead:
                break
            stop = _text_stop(dead).search(src, end, limit)
            end = stop.start() if stop is not None else limit
    if end == start:
        return False
    if not silent:
        _append_pending(state, src[start:end])
    state.pos = end
    return True


def _table(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    """markdown-it's table rule, but a table is one table_open/table_close pair, not tokens and an inline parse
    per cell: it is not prose here, and a header of many columns over short rows has markdown-it fill in up to
    65,536 empty cells per table (some 370 s per MB of such tables)."""
    if not table_rule(state, start_line, end_line, True):  # the header and delimiter rows, checked
        return False
    if silent:
        return True
    columns = _cell_count(mdTrim(getLine(state, start_line)))
    parent, state.parentType = state.parentType, "table"
    terminators = state.md.block.ruler.getRules("blockquote")
    filled = 0
    line = start_line + 2
    # markdown-it's rows: up to a less indented, terminating, blank or code line, or too many filled cells.
    while line < end_line and state.sCount[line] >= state.blkIndent:
        if any(rule(state, line, end_line, True) for rule in terminators):
            break
        text = mdTrim(getLine(state, line))
        if not text or state.is_code_block(line):
            break
        filled += columns - _cell_count(text)
        if _MAX_FILLED_CELLS is not None and filled > _MAX_FILLED_CELLS:
            break
        line += 1
    token = state.push("table_open", "table", 1)
    token.map = [start_line, line]
    state.push("table_close", "table", -1)
    state.parentType = parent
    state.line = line
    return True


def _cell_count(row: str) -> int:
    cells = escapedSplit(row)
    return len(cells) - (len(cells) > 0 and cells[0] == "") - (len(cells) > 1 and cells[-1] == "")


def _inert_delimiters(state: StateInline, silent: bool) -> bool:
    """A run of "*", "_" or "~" that can neither open nor close (white space on both sides, or "_" inside a
    word), as text: emphasis and strikethrough would push a token and a delimiter per marker, never used."""
    src, start = state.src, state.pos
    marker = src[start]
    if marker not in "*_~":
        return False
    before = src[start - 1] if start > 0 else " "
    if before in _ASCII_PUNCTUATION or (marker != "_" and not before.isspace()):
        return False  # a quick no: such a run can open or close
    scanned = state.scanDelims(start, marker != "_")
    if scanned.can_open or scanned.can_close:
        return False
    if not silent:
        _append_pending(state, src[start : start + scanned.length])
    state.pos = start + scanned.length
    return True


def _link_possible(state: StateInline, label: int) -> bool:
    """Whether the "[" at `label` may open a link's label. Without reference definitions only an inline link
    can follow, so a "](" and then a ")" must; with them, at least a "]"."""
    return label < _lookups(state).link_end(state.posMax, bool(state.env.get("references")))


def _guarded(rule: Callable[[StateInline, bool], bool], offset: int) -> Callable[[StateInline, bool], bool]:
    """`rule` (link, or image at offset 1), skipped at once where no link can follow: each "[" of a run would
    otherwise look ahead through the rest of the line, token by token."""

    def guarded(state: StateInline, silent: bool) -> bool:
        label = state.pos + offset
        if label < state.posMax and state.src[label] == "[" and not _link_possible(state, label):
            return False
        return rule(state, silent)

    return guarded


def _fast_paths_plugin(md: MarkdownIt) -> None:
    # Ruler.at drops the rules a rule may interrupt unless given again: a table still ends a paragraph.
    table_alt = [alt for rule in md.block.ruler.__rules__ if rule.name == "table" for alt in rule.alt]
    md.block.ruler.at("table", _table, {"alt": table_alt})
    md.inline.ruler.at("text", _text)
    md.inline.ruler.before("escape", "escape_run", escape_run)
    md.inline.ruler.before("strikethrough", "inert_delimiters", _inert_delimiters)
    md.inline.ruler.at("link", _guarded(link_rule, 0))
    md.inline.ruler.at("image", _guarded(image_rule, 1))


def split_chunks(text: str, start: int) -> list[tuple[int, str]]:
    """Cut at blank lines followed by an unindented line, unless inside a fence, HTML comment or $$ block."""
    chunks: list[tuple[int, str]] = []
    chunk_start = start
    position = start
    fence: str | None = None
    in_comment = False
    in_math = False
    previous_blank = False
    # A raw TeX block (\begin{x} ... \end{x}) may hold blank lines: no cut before its end.
    tex_ends = environment_ends(text, start) if "\\begin" in text else {}
    tex_until = start
    for line in _lines(text, start):
        stripped = line.strip()
        blank = not stripped
        if (
            previous_blank
            and not blank
            and fence is None
            and not in_comment
            and not in_math
            and line[0] not in " \t"
            and position > chunk_start
            and position >= tex_until
        ):
            chunks.append((chunk_start, text[chunk_start:position]))
            chunk_start = position
        if tex_ends and stripped.startswith("\\begin"):
            begin = position + len(line) - len(line.lstrip())
            if block_environment_at(text, begin):
                tex_until = max(tex_until, tex_ends.get(begin, 0))
        fence_match = _FENCE.match(line)
        if fence is not None:
            if (
                fence_match
                and fence_match.group(1)[0] == fence[0]
                and len(fence_match.group(1)) >= len(fence)
            ):
                fence = None
        elif in_comment:
            in_comment = "-->" not in line
        elif in_math:
            in_math = "$$" not in stripped  # the closing line may carry pandoc attributes: $$ {#eq:x}
        elif fence_match:
            fence = fence_match.group(1)
        elif stripped.startswith("<!--") and "-->" not in stripped[4:]:
            in_comment = True
        elif stripped.startswith("$$") and "$$" not in stripped[2:]:
            in_math = True
        previous_blank = blank
        position += len(line)
    if position > chunk_start:
        chunks.append((chunk_start, text[chunk_start:position]))
    return chunks


def _lines(text: str, start: int) -> list[str]:
    """Lines with their ends, broken where markdown-it breaks them (not at U+2028 or form feeds)."""
    lines: list[str] = []
    position = start
    for match in _LINE_END.finditer(text, start):
        lines.append(text[position : match.end()])
        position = match.end()
    if position < len(text):
        lines.append(text[position:])
    return lines


def front_matter(text: str) -> tuple[int, str | None]:
    """Where the body starts after YAML front matter, and the title it gives."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return 0, None
    try:
        metadata = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        metadata = None
    if isinstance(metadata, dict):
        title = metadata.get("title")
        return match.end(), str(title).strip() if title not in (None, "") else None
    fallback = _FRONT_TITLE.search(match.group(1))  # YAML that does not parse: read the title line as is
    return match.end(), fallback.group("title").strip() if fallback else None


class MarkdownProject:
    """Parses Markdown manuscripts; keep one per process so its chunk cache serves every keystroke."""

    def __init__(self) -> None:
        self._parser = _make_parser()
        self._cache: OrderedDict[tuple[str, bool], tuple[list[_Event], bool]] = OrderedDict()

    def parse(self, sources: list[SourceFile]) -> Manuscript:
        """One manuscript from one file, or from several read in order (a Manubot content/ folder)."""
        assembler = ManuscriptAssembler(sources[0].uri)
        for source in sources:
            self._parse_file(source, assembler)
        return assembler.finish()

    def _parse_file(self, source: SourceFile, assembler: ManuscriptAssembler) -> None:
        assembler.add_file(source)
        body_start, title = front_matter(source.text)
        if title:
            assembler.title(title)
        off = False
        for offset, chunk in split_chunks(source.text, body_start):
            events, off = self._chunk(chunk, off)
            for event in events:
                if isinstance(event, _Heading):
                    assembler.heading(
                        event.level, event.title, source, offset + event.start, offset + event.end
                    )
                else:
                    assembler.paragraph(
                        event.kind, event.text, event.offsets.rebased(offset), source, identifier=event.id
                    )

    def _chunk(self, chunk: str, off: bool) -> tuple[list[_Event], bool]:
        key = (chunk, off)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        result = self._parse_chunk(chunk, off)
        self._cache[key] = result
        if len(self._cache) > _CACHE_ENTRIES:
            self._cache.popitem(last=False)
        return result

    def _parse_chunk(self, chunk: str, off: bool) -> tuple[list[_Event], bool]:
        if _FOOTNOTE_DEFINITION.match(chunk):
            return ([] if off else self._footnote_definitions(chunk)), off
        return self._parse_blocks(chunk, 0, off, footnote=False)

    def _footnote_definitions(self, chunk: str) -> list[_Event]:
        """Footnote definitions ([^1]: ...), one or several, each of one or more (indented) paragraphs."""
        events: list[_Event] = []
        starts = [match.start() for match in _FOOTNOTE_STARTS.finditer(chunk)]
        for number, start in enumerate(starts):
            end = starts[number + 1] if number + 1 < len(starts) else len(chunk)
            marker = _FOOTNOTE_MARKER.match(chunk, start)
            position = marker.end() if marker else start
            for separator in [*_BLANK_LINE.finditer(chunk, position, end), None]:
                block_end = separator.start() if separator else end
                text = chunk[position:block_end]
                lead = len(text) - len(text.lstrip())
                if text.strip():
                    # Parsed from its first character: an indented later paragraph is not a code block here.
                    found, _ = self._parse_blocks(
                        chunk[position + lead : block_end], position + lead, False, True
                    )
                    events.extend(found)
                if separator is None:
                    break
                position = separator.end()
        return events

    def _parse_blocks(self, body: str, shift: int, off: bool, footnote: bool) -> tuple[list[_Event], bool]:
        events: list[_Event] = []
        if "$$" in body:
            body = _MATH_LABEL.sub(lambda match: match.group(1) + " " * len(match.group(2)), body)
        tokens = self._parser.parse(body)
        line_starts = [0, *(match.end() for match in _LINE_END.finditer(body))]
        if line_starts[-1] != len(body):
            line_starts.append(len(body))
        containers: list[str] = []
        index = 0
        while index < len(tokens):
            token = tokens[index]
            kind = token.type
            if kind == "html_block":
                off = self._switch(token.content, off)
            elif off:
                pass
            elif kind in ("bullet_list_open", "ordered_list_open", "blockquote_open"):
                containers.append(kind)
            elif kind in ("bullet_list_close", "ordered_list_close", "blockquote_close") and containers:
                containers.pop()
            elif kind == "raw_tex_block":
                events.extend(self._raw_tex_block(token, body, shift))
            elif kind == "table_open":
                index = self._close_of(tokens, index, "table_close")
            elif kind in ("heading_open", "paragraph_open") and index + 1 < len(tokens):
                inline = tokens[index + 1]
                span = self._span(inline, line_starts, len(body))
                if _TEMPLATE_BLOCK.match(body, span[0], span[1]) or _GRID_TABLE.match(body, span[0], span[1]):
                    index += 1
                    continue  # a template comment or statement ({## ... ##}, {% ... %}), or a pandoc grid table
                if kind == "heading_open":
                    builder = TextBuilder()
                    InlineAligner(body, span[0], span[1], builder).walk(inline.children or [])
                    title = builder.build()[0]
                    events.append(_Heading(int(token.tag[1:]), title, shift + span[0], shift + span[1]))
                else:
                    for text, offsets, paragraph_kind in self._paragraph(
                        inline, body, span, containers, footnote
                    ):
                        events.append(
                            _Paragraph(paragraph_kind, text, offsets.shifted(shift), paragraph_id(text))
                        )
            index += 1
        return events, off

    @staticmethod
    def _raw_tex_block(token: Token, body: str, shift: int) -> list[_Event]:
        """A block of raw TeX is no paragraph; the LaTeX parser finds any prose in it (a float's caption)."""
        meta = token.meta or {}
        if meta.get("environment") in MATH_ENVIRONMENTS:
            return []
        from ..latex.chunks import ParagraphEvent, ScanState, parse_chunk  # only for Markdown with raw TeX
        from ..latex.macros import MacroTable
        from ..latex.project import split_chunks as split_latex

        start, end = meta.get("start", 0), meta.get("end", 0)
        events: list[_Event] = []
        state, macros = ScanState(), MacroTable()
        for offset, piece in split_latex(body[start:end]):
            found, state = parse_chunk(piece, state, macros)
            for event in found:
                if isinstance(event, ParagraphEvent) and has_words(event.text):
                    offsets = event.offsets.shifted(shift + start + offset)
                    events.append(_Paragraph(event.kind, event.text, offsets, paragraph_id(event.text)))
        return events

    @staticmethod
    def _switch(html: str, off: bool) -> bool:
        for match in _MARGIN_SWITCH.finditer(html):
            off = match.group(1).lower() == "off"
        return off

    @staticmethod
    def _close_of(tokens: list[Token], index: int, closing: str) -> int:
        while index < len(tokens) and tokens[index].type != closing:
            index += 1
        return index

    @staticmethod
    def _span(inline: Token, line_starts: list[int], length: int) -> tuple[int, int]:
        first, last = inline.map or (0, len(line_starts) - 1)
        return line_starts[min(first, len(line_starts) - 1)], min(
            line_starts[min(last, len(line_starts) - 1)], length
        )

    @staticmethod
    def _paragraph(
        inline: Token, body: str, span: tuple[int, int], containers: list[str], is_footnote: bool
    ) -> list[tuple[str, OffsetMap, ParagraphKind]]:
        """The paragraph (if it has words) and any inline footnotes it carries."""
        children = inline.children or []
        builder = TextBuilder()
        aligner = InlineAligner(body, span[0], span[1], builder)
        # A paragraph that is one image (with pandoc attributes at most) is a figure; its alt text the caption.
        substantive = [c for c in children if not (c.type == "text" and _ATTRIBUTES_ONLY.match(c.content))]
        if is_footnote:
            kind = ParagraphKind.FOOTNOTE
        elif len(substantive) == 1 and substantive[0].type == "image":
            aligner.walk_image_caption(substantive[0])
            text, offsets = builder.build()
            return [(text, offsets, ParagraphKind.CAPTION)] if has_words(text) else []
        elif _TABLE_CAPTION.match(inline.content):
            kind = ParagraphKind.CAPTION
        elif "bullet_list_open" in containers or "ordered_list_open" in containers:
            kind = ParagraphKind.LIST_ITEM
        elif "blockquote_open" in containers:
            kind = ParagraphKind.QUOTE
        else:
            kind = ParagraphKind.PARAGRAPH
        aligner.walk(children)
        text, offsets = builder.build()
        if kind == ParagraphKind.CAPTION:
            caption = _TABLE_CAPTION.match(text)
            if caption:
                text, offsets = _drop_prefix(text, offsets, caption.end())
        found = [(text, offsets, kind)] if has_words(text) else []
        for side, side_kind in [
            *((note, ParagraphKind.FOOTNOTE) for note in aligner.footnotes),
            *((caption, ParagraphKind.CAPTION) for caption in aligner.captions),
        ]:
            side_text, side_offsets = side.build()
            if has_words(side_text):
                found.append((side_text, side_offsets, side_kind))
        return found


# A block that is wholly one Jinja2 comment or statement, as Manubot's front-matter templates write them.
_TEMPLATE_BLOCK = re.compile(r"\s*(?:\{#(?:(?!#\}).)*#\}|\{%(?:(?!%\}).)*%\})\s*\Z", re.S)


# Pandoc's grid tables (+----+----+ rulings) are not CommonMark, which reads them as a paragraph: not prose.
_GRID_TABLE = re.compile(r"[ \t]*\+[-=:]+(?:\+[-=:]+)*\+[ \t]*(?:\n|\Z)")


def _drop_prefix(text: str, offsets: OffsetMap, length: int) -> tuple[str, OffsetMap]:
    builder = TextBuilder()
    for segment in offsets.segments():
        lo = max(segment.plain_start, length)
        if lo >= segment.plain_end:
            continue
        piece = text[lo : segment.plain_end]
        if segment.exact:
            builder.copy(piece, segment.source_start + lo - segment.plain_start)
        else:
            builder.replace(piece, segment.source_start, segment.source_end)
    return builder.build()


def manubot_files(path: Path) -> list[Path] | None:
    """The files of a Manubot manuscript that `path` belongs to: content/NN.name.md in filename order."""
    folder = path if path.is_dir() else path.parent
    if folder.name != "content":
        return None
    files = sorted(p for p in folder.iterdir() if is_markdown(p.name) and re.match(r"^\d+\.", p.name))
    if not files or (not path.is_dir() and path not in files):
        return None
    return files

"""Plain text of a Markdown paragraph, aligned to its source.

markdown-it gives block tokens line maps but no offsets for inline tokens, so each inline token's text is found
again in the paragraph's source, in order. Markup between matches (emphasis marks, link targets, block-quote
prefixes) falls into the gaps; escapes and entities fall back to a character-by-character alignment.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Sequence

from markdown_it.token import Token

from ..model import CITATION, CODE, MATH, REFERENCE, URL
from ..offsets import OffsetMap, TextBuilder
from . import rawtex

# Pandoc citations ([@key; @other, p. 4] or @key), crossref references (@fig:x), inline notes (^[...]) and
# attributes ({#fig:x}) inside text tokens. A bracketed citation first checks that its bracket closes (a
# look-ahead that stops at the next bracket), else every "@" after an unclosed "[" rescans the rest of the line.
# Every part is bounded (no markup of this kind is longer than _MARKUP_LENGTH characters), so that a search can
# look at one window of a long line at a time: one search over a 2 MB line held the interpreter's lock for a
# quarter of a second, and every request of the editor waited.
_MARKUP_LENGTH = 1000
_TEXT_MARKUP = re.compile(
    r"(?P<crossref>\[?-?@(?i:fig|tbl|eq|sec|lst):[\w:.-]{0,1000}\w\]?)"
    r"|(?P<citation>\[(?=[^\[\]\n]{0,1000}\])[^\[\]\n]{0,1000}?(?<![\w.])-?@[A-Za-z0-9_][^\[\]\n]{0,1000}\]"
    r"|(?<![\w@.])-?@[A-Za-z0-9_][\w:./-]{0,1000}\w)"
    r"|(?P<note>\^\[[^\[\]]{0,1000}\])"
    r"|(?P<drop>\{\s{0,100}[-#.][^{}\n]{0,1000}\}|\{\s{0,100}[\w-]{1,100}=[^{}\n]{0,1000}\})"
)
_SEARCH_WINDOW = 1 << 15


def _search_markup(content: str, position: int) -> re.Match[str] | None:
    """_TEXT_MARKUP.search(content, position), a window at a time: a match starting in a window ends within
    _MARKUP_LENGTH characters of the window's end, which is where each search stops."""
    while position < len(content):
        window_end = position + _SEARCH_WINDOW
        match = _TEXT_MARKUP.search(content, position, window_end + 3 * _MARKUP_LENGTH)
        if match is not None and match.start() < window_end:
            return match
        position = window_end
    return None
# Also dropped, and tried after the above where both start at one place: footnote references ([^1], up to the
# first "]" or space) and templating ({{ x }}, {% if %}, up to the first closer on the line). As regular
# expressions these rescan to the end of the line from every opener in a run ("{{{{..."); _LateMarkup finds
# them in one forward pass.
_FOOTNOTE_OPENER = re.compile(r"\[\^")
_FOOTNOTE_STOP = re.compile(r"[\]\s]")
_TEMPLATES = (("{{", "}}"), ("{%", "%}"))
_LITERALS = {literal: re.compile(re.escape(literal)) for pair in _TEMPLATES for literal in pair}
_NEWLINE = re.compile(r"\n")
_ENTITY = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_ALIGN_WINDOW = 48
_LATEX_CACHE_ENTRIES = 4096
_LATEX_CACHE_LENGTH = 200
_ENTITY_WINDOW = 40  # longer than any entity markdown-it decodes (&#x + 6 digits;, & + 32 letters;)
# Searches that fail scan to the paragraph's end. They may scan this many times the paragraph (plus a constant)
# in all; after that a search looks only this far past the cursor, so many failures stay linear.
_SEARCH_BUDGET = 4
_SEARCH_BUDGET_BASE = 1 << 16
_NEAR = 4096
_RAW_TEX_PLACEHOLDERS = {rawtex.MATH: MATH, rawtex.REFERENCE: REFERENCE, rawtex.CITATION: CITATION}


class InlineAligner:
    """Walks one paragraph's inline tokens, writing plain text mapped onto `source[start:end]`."""

    def __init__(self, source: str, start: int, end: int, builder: TextBuilder) -> None:
        self.source = source
        self.cursor = start
        self.limit = end
        self.builder = builder
        self._autolink = False
        self.footnotes: list[TextBuilder] = []  # pandoc inline notes ^[...], paragraphs of their own
        self.captions: list[TextBuilder] = []  # \caption{...} of a raw TeX float inside a paragraph
        self._budget = _SEARCH_BUDGET * (end - start) + _SEARCH_BUDGET_BASE

    def walk(self, tokens: Sequence[Token]) -> None:
        tokens = _fold_double_dollars(tokens)
        for token in tokens:
            kind = token.type
            if kind == "text":
                if self._autolink:
                    self._atomic(token.content, URL)
                else:
                    self._text(token.content)
            elif kind in ("softbreak", "hardbreak"):
                self._break()
            elif kind == "code_inline":
                self._delimited(token.content, "`", CODE)
            elif kind in ("math_inline", "math_inline_double"):
                self._delimited(token.content, "$", MATH)
            elif kind == "link_open":
                self._autolink = token.markup == "autolink"
            elif kind == "link_close":
                self._autolink = False
            elif kind == "image":
                self._skip_image()
            elif kind == "html_inline":
                self._skip_literal(token.content)
            elif kind == "raw_tex":
                self._raw_tex(token.content, (token.meta or {}).get("kind", rawtex.DROP))

    def walk_image_caption(self, image: Token) -> None:
        """A figure paragraph: its caption is the image's alt text."""
        opener = self._find("![")
        if opener >= 0:
            self.cursor = opener + 2
        self.walk(image.children or [])

    # -- alignment ----------------------------------------------------------------------------------------------

    def _reach(self, start: int, length: int) -> int:
        """How far a search from `start` for `length` characters may look: the paragraph's end while the
        budget lasts, else just past the cursor."""
        return self.limit if self._budget > 0 else min(self.limit, start + length + _NEAR)

    def _find(self, text: str, start: int | None = None) -> int:
        begin = self.cursor if start is None else start
        end = self.limit if self._budget > 0 else self._reach(begin, len(text))
        found = self.source.find(text, begin, end)
        if found < 0:
            self._budget -= max(0, end - begin)
        return found

    def _text(self, content: str) -> None:
        if not content:
            return
        late = _LateMarkup(content) if "[^" in content or "{{" in content or "{%" in content else None
        if late is not None and late.empty:
            late = None
        position = 0
        match = _search_markup(content, 0)
        while True:
            if match is not None and match.start() < position:
                match = _search_markup(content, position)
            span = late.first(position) if late is not None else None
            if match is not None and (span is None or match.start() <= span[0]):
                start, end, kind = match.start(), match.end(), match.lastgroup
            elif span is not None:
                start, end, kind = span[0], span[1], "drop"
            else:
                break
            self._plain(content[position:start])
            piece = content[start:end]
            if kind == "drop":
                self._skip_literal(piece)
            elif kind == "note":
                self._inline_note(piece)
            else:
                self._atomic(piece, REFERENCE if kind == "crossref" else CITATION)
            position = end
        self._plain(content[position:])

    def _plain(self, content: str) -> None:
        if not content:
            return
        found = self._find(content)
        if found >= 0:
            self.cursor = found + len(content)
            if content[0].isspace() and self.builder.ends_with_space():
                # Markup dropped just before (an attribute, a comment): keep one space, not two.
                stripped = content.lstrip()
                found += len(content) - len(stripped)
                content = stripped
            self.builder.copy(content, found)
            return
        # Escapes and entities: the decoded character stands for its whole source form.
        for char in content:
            self._character(char)

    def _character(self, char: str) -> None:
        source, cursor = self.source, self.cursor
        if cursor < self.limit and source[cursor] == "\\" and source[cursor + 1 : cursor + 2] == char:
            self.builder.replace(char, cursor, cursor + 2)
            self.cursor = cursor + 2
            return
        entity = _ENTITY.match(source, cursor, min(self.limit, cursor + _ENTITY_WINDOW))
        if entity is not None and html.unescape(entity.group()) == char:
            self.builder.replace(char, cursor, entity.end())
            self.cursor = entity.end()
            return
        found = source.find(char, cursor, min(self.limit, cursor + _ALIGN_WINDOW))
        if found >= 0:
            self.builder.copy(char, found)
            self.cursor = found + 1
        elif char.isspace():
            self.builder.space(cursor, cursor)
        else:
            self.builder.replace(char, cursor, min(cursor + 1, self.limit))

    def _inline_note(self, piece: str) -> None:
        found = self._find(piece)
        if found < 0:
            return
        note = TextBuilder()
        note.copy(piece[2:-1], found + 2)
        self.footnotes.append(note)
        self.cursor = found + len(piece)

    def _atomic(self, content: str, placeholder: str) -> None:
        found = self._find(content)
        if found < 0:
            self.builder.replace(placeholder, self.cursor, self.cursor)
            return
        self.builder.replace(placeholder, found, found + len(content))
        self.cursor = found + len(content)

    def _raw_tex(self, content: str, kind: str) -> None:
        """A raw TeX command or environment: a placeholder, nothing, or its text by the LaTeX macro handling."""
        found = self._find(content)
        end = found + len(content)
        if found < 0 and "\n" in content:
            # Continuation lines lost their indentation or block-quote markers: find the first and last lines.
            first, last = content.split("\n", 1)[0], content.rsplit("\n", 1)[1].strip()
            found = self._find(first)
            close = self._find(last, found + len(first)) if found >= 0 and last else -1
            end = close + len(last) if close >= 0 else -1
        if found < 0 or end < 0:
            if kind in _RAW_TEX_PLACEHOLDERS:
                self.builder.replace(_RAW_TEX_PLACEHOLDERS[kind], self.cursor, self.cursor)
            return
        self.cursor = end
        if kind in _RAW_TEX_PLACEHOLDERS:
            self.builder.replace(_RAW_TEX_PLACEHOLDERS[kind], found, end)
        elif kind == rawtex.LATEX:
            self._latex(found, end)

    def _latex(self, start: int, end: int) -> None:
        text, offsets, sides = _convert_latex(self.source[start:end])
        _shifted(text, offsets, start, self.builder)
        for is_footnote, side_text, side_offsets in sides:
            side = self.footnotes if is_footnote else self.captions
            side.append(_shifted(side_text, side_offsets, start, TextBuilder()))

    def _skip_literal(self, content: str) -> None:
        found = self._find(content)
        if found >= 0:
            self.cursor = found + len(content)

    def _break(self) -> None:
        end = self._reach(self.cursor, 2)
        line_break = _LINE_BREAK.search(self.source, self.cursor, end)
        if line_break is None:
            self._budget -= end - self.cursor
            return
        self.builder.space(line_break.start(), line_break.end())
        self.cursor = line_break.end()

    def _delimited(self, content: str, delimiter: str, placeholder: str) -> None:
        """Code or math: from the opening run of delimiters to the next run of the same length."""
        opener = self._find(delimiter)
        if opener < 0:
            self.builder.replace(placeholder, self.cursor, self.cursor)
            return
        run = opener
        while run < self.limit and self.source[run] == delimiter:
            run += 1
        fence = self.source[opener:run]
        close = self._find(fence, run)
        end = close + len(fence) if close >= 0 else run
        self.builder.replace(placeholder, opener, end)
        self.cursor = end

    def _skip_image(self) -> None:
        opener = self._find("![")
        if opener < 0:
            return
        middle = self._find("](", opener)
        close = self._find(")", middle if middle >= 0 else opener)
        if close >= 0:
            self.cursor = close + 1


class _Forward:
    """The first match of a pattern at or after a position, asked for positions that never go back: a stretch
    already searched is not searched again."""

    __slots__ = ("_found", "_pattern", "_start", "_text")

    def __init__(self, text: str, pattern: re.Pattern[str]) -> None:
        self._text = text
        self._pattern = pattern
        self._start = 0
        self._found = -1  # no search yet

    def at(self, position: int) -> int:
        """Where the first match at or after `position` starts; the text's length if there is none."""
        if self._start <= position <= self._found:
            return self._found  # nothing matches in [_start, _found), so none in [position, _found) either
        match = self._pattern.search(self._text, position)
        self._start, self._found = position, match.start() if match is not None else len(self._text)
        return self._found


class _Spans:
    """Spans of one kind of late markup in one text, for positions that never go back: each opener is tried
    at most once, and each look-ahead from one (a _Forward) resumes where the previous one stopped."""

    def __init__(self, text: str, opener: re.Pattern[str]) -> None:
        self.text = text
        self._openers = _Forward(text, opener)
        self._found: tuple[int, int] | None = None
        self._none_from = len(text) + 1  # no span starts at or after this

    def end(self, start: int) -> tuple[int | None, int]:
        """The end of the span that starts at `start` (None if none does), and where the next opener that
        may start one can be: every opener before that fails for the same reason."""
        raise NotImplementedError

    def first(self, position: int) -> tuple[int, int] | None:
        if position >= self._none_from:
            return None
        if self._found is not None and self._found[0] >= position:
            return self._found
        start = self._openers.at(position)
        while start < len(self.text):
            end, resume = self.end(start)
            if end is not None:
                self._found = (start, end)
                return self._found
            start = self._openers.at(max(resume, start + 1))
        self._found, self._none_from = None, position
        return None


class _FootnoteReferences(_Spans):
    """[^label]: a label of at least one character up to the first "]", with no white space."""

    def __init__(self, text: str) -> None:
        super().__init__(text, _FOOTNOTE_OPENER)
        self._stops = _Forward(text, _FOOTNOTE_STOP)

    def end(self, start: int) -> tuple[int | None, int]:
        stop = self._stops.at(start + 2)
        if start + 2 < stop < len(self.text) and self.text[stop] == "]":
            return stop + 1, stop + 1
        return None, stop + 1


class _TemplateTags(_Spans):
    """{{ ... }} or {% ... %}: up to the first closer after the opener, on the same line."""

    def __init__(self, text: str, opener: re.Pattern[str], closer: re.Pattern[str]) -> None:
        super().__init__(text, opener)
        self._closers = _Forward(text, closer)
        self._newlines = _Forward(text, _NEWLINE)

    def end(self, start: int) -> tuple[int | None, int]:
        close = self._closers.at(start + 2)
        if close == len(self.text):
            return None, close
        newline = self._newlines.at(start + 2)
        return (close + 2, close + 2) if newline > close else (None, newline + 1)


class _LateMarkup:
    """Footnote references and template tags in a text token: the leftmost span of any of them."""

    def __init__(self, text: str) -> None:
        # Only the kinds whose opener and closer both occur: no span of any other can start.
        self._kinds: list[_Spans] = [_FootnoteReferences(text)] if "[^" in text and "]" in text else []
        self._kinds.extend(
            _TemplateTags(text, _LITERALS[opener], _LITERALS[closer])
            for opener, closer in _TEMPLATES
            if opener in text and closer in text
        )

    @property
    def empty(self) -> bool:
        return not self._kinds

    def first(self, position: int) -> tuple[int, int] | None:
        spans = [span for kind in self._kinds if (span := kind.first(position)) is not None]
        return min(spans) if spans else None


_Converted = tuple[str, OffsetMap, tuple[tuple[bool, str, OffsetMap], ...]]


def _convert_latex(source: str) -> _Converted:
    """A raw TeX command by the LaTeX parser's macro handling: its text and offsets, and its footnotes (True)
    and captions (False). Short commands are cached: one repeated all over a line would convert each time."""
    return _convert_short_latex(source) if len(source) <= _LATEX_CACHE_LENGTH else _convert_latex_now(source)


def _convert_latex_now(source: str) -> _Converted:
    from ..latex.chunks import ChunkParser, ParagraphEvent, ScanState  # only for Markdown with raw TeX
    from ..latex.macros import MacroTable
    from ..model import ParagraphKind

    parser = ChunkParser(source, ScanState(), MacroTable())
    parser.convert()
    text, offsets = parser.builder.build()
    sides = tuple(
        (event.kind == ParagraphKind.FOOTNOTE, event.text, event.offsets)
        for event in [*parser.events, *parser.footnotes]
        if isinstance(event, ParagraphEvent)
    )
    return text, offsets, sides


_convert_short_latex = functools.lru_cache(maxsize=_LATEX_CACHE_ENTRIES)(_convert_latex_now)


def _shifted(text: str, offsets: OffsetMap, shift: int, builder: TextBuilder) -> TextBuilder:
    """Append converted text to `builder`, its offsets moved `shift` characters later."""
    for segment in offsets.segments():
        piece = text[segment.plain_start : segment.plain_end]
        if segment.exact:
            builder.copy(piece, segment.source_start + shift)
        else:
            builder.replace(piece, segment.source_start + shift, segment.source_end + shift)
    return builder


def _fold_double_dollars(tokens: Sequence[Token]) -> Sequence[Token]:
    """markdown-it's math rule reads $$x$$ inside a paragraph as "$", math "x", "$": drop the stray dollars
    (the math placeholder then spans both runs of dollars in the source)."""
    if not any(token.type.startswith("math_inline") for token in tokens):
        return tokens
    folded: list[Token] = []
    for index, token in enumerate(tokens):
        stray = token.type == "text" and token.content == "$"
        before = index > 0 and tokens[index - 1].type == "math_inline"
        after = index + 1 < len(tokens) and tokens[index + 1].type == "math_inline"
        if stray and (before or after):
            continue
        folded.append(token)
    return folded

"""Plain text of a Markdown paragraph, aligned to its source.

markdown-it gives block tokens line maps but no offsets for inline tokens, so each inline token's text is found
again in the paragraph's source, in order. Markup between matches (emphasis marks, link targets, block-quote
prefixes) falls into the gaps; escapes and entities fall back to a character-by-character alignment.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from markdown_it.token import Token

from ..model import CITATION, CODE, MATH, REFERENCE, URL
from ..offsets import OffsetMap, TextBuilder
from . import rawtex

# Pandoc citations ([@key; @other, p. 4] or @key), crossref references (@fig:x), attributes ({#fig:x}),
# footnote references ([^1]) and templating ({{ x }}, {% if %}) inside text tokens.
_TEXT_MARKUP = re.compile(
    r"(?P<crossref>\[?-?@(?i:fig|tbl|eq|sec|lst):[\w:.-]*\w\]?)"
    r"|(?P<citation>\[[^\[\]\n]*?(?<![\w.])-?@[A-Za-z0-9_][^\[\]\n]*\]|(?<![\w@.])-?@[A-Za-z0-9_][\w:./-]*\w)"
    r"|(?P<note>\^\[[^\[\]]*\])"
    r"|(?P<drop>\{\s*[-#.][^{}\n]*\}|\{\s*[\w-]+=[^{}\n]*\}|\[\^[^\]\s]+\]|\{\{.*?\}\}|\{%.*?%\})"
)
_ENTITY = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_ALIGN_WINDOW = 48
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
        opener = self.source.find("![", self.cursor, self.limit)
        if opener >= 0:
            self.cursor = opener + 2
        self.walk(image.children or [])

    # -- alignment ----------------------------------------------------------------------------------------------

    def _find(self, text: str) -> int:
        return self.source.find(text, self.cursor, self.limit)

    def _text(self, content: str) -> None:
        if not content:
            return
        position = 0
        for match in _TEXT_MARKUP.finditer(content):
            self._plain(content[position : match.start()])
            piece = match.group()
            if match.lastgroup == "drop":
                self._skip_literal(piece)
            elif match.lastgroup == "note":
                self._inline_note(piece)
            else:
                self._atomic(piece, REFERENCE if match.lastgroup == "crossref" else CITATION)
            position = match.end()
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
        entity = _ENTITY.match(source, cursor, self.limit)
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
            close = self.source.find(last, found + len(first), self.limit) if found >= 0 and last else -1
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
        from ..latex.chunks import ChunkParser, ParagraphEvent, ScanState  # only for Markdown with raw TeX
        from ..latex.macros import MacroTable
        from ..model import ParagraphKind

        parser = ChunkParser(self.source[start:end], ScanState(), MacroTable())
        parser.convert()
        text, offsets = parser.builder.build()
        _shifted(text, offsets, start, self.builder)
        for event in [*parser.events, *parser.footnotes]:
            if isinstance(event, ParagraphEvent):
                side = self.footnotes if event.kind == ParagraphKind.FOOTNOTE else self.captions
                side.append(_shifted(event.text, event.offsets, start, TextBuilder()))

    def _skip_literal(self, content: str) -> None:
        found = self._find(content)
        if found >= 0:
            self.cursor = found + len(content)

    def _break(self) -> None:
        line_break = _LINE_BREAK.search(self.source, self.cursor, self.limit)
        if line_break is None:
            return
        self.builder.space(line_break.start(), line_break.end())
        self.cursor = line_break.end()

    def _delimited(self, content: str, delimiter: str, placeholder: str) -> None:
        """Code or math: from the opening run of delimiters to the next run of the same length."""
        opener = self.source.find(delimiter, self.cursor, self.limit)
        if opener < 0:
            self.builder.replace(placeholder, self.cursor, self.cursor)
            return
        run = opener
        while run < self.limit and self.source[run] == delimiter:
            run += 1
        fence = self.source[opener:run]
        close = self.source.find(fence, run, self.limit)
        end = close + len(fence) if close >= 0 else run
        self.builder.replace(placeholder, opener, end)
        self.cursor = end

    def _skip_image(self) -> None:
        opener = self.source.find("![", self.cursor, self.limit)
        if opener < 0:
            return
        middle = self.source.find("](", opener, self.limit)
        close = self.source.find(")", middle if middle >= 0 else opener, self.limit)
        if close >= 0:
            self.cursor = close + 1


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

"""Plain text of a Markdown paragraph, aligned to its source.

markdown-it gives block tokens line maps but no offsets for inline tokens, so each inline token's text is found
again in the paragraph's source, in order. Markup between matches (emphasis marks, link targets, block-quote
prefixes) falls into the gaps; escapes and entities fall back to a character-by-character alignment.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from markdown_it.token import Token

from ..model import CITATION, CODE, MATH, REFERENCE, URL
from ..offsets import TextBuilder

# Pandoc citations ([@key; @other, p. 4] or @key), crossref references (@fig:x), attributes ({#fig:x}),
# footnote references ([^1]) and templating ({{ x }}, {% if %}) inside text tokens.
_TEXT_MARKUP = re.compile(
    r"(?P<crossref>\[?-?@(?:fig|tbl|eq|sec|lst):[\w:.-]*\w\]?)"
    r"|(?P<citation>\[-?@[^\[\]\n]*\]|(?<![\w@.])-?@[A-Za-z0-9_][\w:./-]*\w)"
    r"|(?P<drop>\{[#.][^{}\n]*\}|\[\^[^\]\s]+\]|\{\{.*?\}\}|\{%.*?%\})"
)
_ALIGN_WINDOW = 48


class InlineAligner:
    """Walks one paragraph's inline tokens, writing plain text mapped onto `source[start:end]`."""

    def __init__(self, source: str, start: int, end: int, builder: TextBuilder) -> None:
        self.source = source
        self.cursor = start
        self.limit = end
        self.builder = builder
        self._autolink = False

    def walk(self, tokens: Sequence[Token]) -> None:
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
            else:
                self._atomic(piece, REFERENCE if match.lastgroup == "crossref" else CITATION)
            position = match.end()
        self._plain(content[position:])

    def _plain(self, content: str) -> None:
        if not content:
            return
        found = self._find(content)
        if found >= 0:
            self.builder.copy(content, found)
            self.cursor = found + len(content)
            return
        # Escapes and entities: the decoded character stands where its source form starts.
        for char in content:
            found = self.source.find(char, self.cursor, min(self.limit, self.cursor + _ALIGN_WINDOW))
            if found >= 0:
                self.builder.copy(char, found)
                self.cursor = found + 1
            elif char.isspace():
                self.builder.space(self.cursor, self.cursor)
            else:
                self.builder.replace(char, self.cursor, min(self.cursor + 1, self.limit))

    def _atomic(self, content: str, placeholder: str) -> None:
        found = self._find(content)
        if found < 0:
            self.builder.replace(placeholder, self.cursor, self.cursor)
            return
        self.builder.replace(placeholder, found, found + len(content))
        self.cursor = found + len(content)

    def _skip_literal(self, content: str) -> None:
        found = self._find(content)
        if found >= 0:
            self.cursor = found + len(content)

    def _break(self) -> None:
        newline = self.source.find("\n", self.cursor, self.limit)
        if newline < 0:
            return
        self.builder.space(newline, newline + 1)
        self.cursor = newline + 1

    def _delimited(self, content: str, delimiter: str, placeholder: str) -> None:
        opener = self.source.find(delimiter, self.cursor, self.limit)
        if opener < 0:
            self.builder.replace(placeholder, self.cursor, self.cursor)
            return
        inner = self.source.find(content, opener, self.limit) if content else opener
        close = inner + len(content) if inner >= 0 else opener + 1
        while close < self.limit and self.source[close] == delimiter:
            close += 1
        self.builder.replace(placeholder, opener, close)
        self.cursor = close

    def _skip_image(self) -> None:
        opener = self.source.find("![", self.cursor, self.limit)
        if opener < 0:
            return
        middle = self.source.find("](", opener, self.limit)
        close = self.source.find(")", middle if middle >= 0 else opener, self.limit)
        if close >= 0:
            self.cursor = close + 1

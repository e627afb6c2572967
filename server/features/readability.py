"""Instant local signals, no model: the manuscript's problems (unreadable includes, refused roots) and the
readability of each paragraph, as diagnostics and as a hover."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types

from ..diagnostics import document_diagnostics, hover_markdown, lsp_range
from .base import Feature

if TYPE_CHECKING:
    from margin.workflows.manuscript.source import Position

    from ..session import DocumentView


class Readability(Feature):
    async def diagnostics(self, view: DocumentView) -> list[types.Diagnostic]:
        # Milliseconds per paragraph the first time it is scored, so off the event loop.
        return await asyncio.to_thread(
            document_diagnostics, view.manuscript, view.uri, view.settings, self.session.scores
        )

    async def hover(self, view: DocumentView, position: Position) -> types.Hover | None:
        for paragraph in view.paragraphs():
            if paragraph.contains(position):
                return types.Hover(
                    contents=types.MarkupContent(
                        kind=types.MarkupKind.Markdown,
                        value=hover_markdown(paragraph, self.session.scores.score(paragraph.text)),
                    ),
                    range=lsp_range(paragraph.range),
                )
        return None

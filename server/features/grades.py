"""Each paragraph's reading grade as an inlay hint at its end, behind the setting readability.gradeHints: the
number the readability diagnostic is about, for every paragraph long enough to be scored, not only hard ones."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from lsprotocol import types

from margin.workflows.manuscript.source import Position
from margin.workflows.readability import Readability, long_enough

from .base import Feature

if TYPE_CHECKING:
    from ..session import DocumentView


class ParagraphGrades(Feature):
    async def inlay_hints(self, view: DocumentView, within: types.Range) -> list[types.InlayHint]:
        settings = view.settings
        if not settings.readability.grade_hints:
            return []
        paragraphs = [
            paragraph
            for paragraph in view.paragraphs()
            if paragraph.range.end.line >= within.start.line
            and paragraph.range.start.line <= within.end.line
            and long_enough(paragraph.text, settings.readability.min_words)
        ]
        scores = self.session.scores
        # Milliseconds per paragraph the first time it is scored, so off the event loop.
        graded = await asyncio.to_thread(lambda: [(p, scores.score(p.text)) for p in paragraphs])
        lines = view.source.lines
        hints = []
        for paragraph, grade in graded:
            # At the end of the paragraph's last line: after anything the paragraph's text leaves out there (a
            # footnote mark, a label, a comment), never inside the source.
            end = lines.position(lines.offset(Position(paragraph.range.end.line, 2**31)))
            hints.append(
                types.InlayHint(
                    position=types.Position(line=end.line, character=end.character),
                    label=f"grade {grade.fkgl:.1f}",
                    padding_left=True,
                    tooltip=_tooltip(grade),
                )
            )
        return hints

    def settings_changed(self) -> None:
        self.session.refresh_inlay_hints()


def _tooltip(grade: Readability) -> str:
    return (
        f"Flesch-Kincaid grade {grade.fkgl:.1f}, Coleman-Liau {grade.cli:.1f}, Dale-Chall {grade.dcrs:.1f}, "
        f"{grade.mean_sentence_length:.0f} words per sentence."
    )

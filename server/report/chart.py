"""The report's summary chart: the readability grade of each section as an inline SVG bar, with every
paragraph's grade as a dot on the same axis and the threshold as a dashed line. Drawn here, not in the browser,
so it shows without scripts and prints as it looks."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from margin.workflows.feedback.types import shortened

from .grades import tint

ROW_HEIGHT = 26
LABEL_WIDTH = 210
PLOT_WIDTH = 420
VALUE_WIDTH = 90
TOP = 22  # room for the axis labels
MAX_LABEL_CHARS = 30


@dataclass(frozen=True, slots=True)
class SectionGrades:
    name: str
    grade: float  # the section's text scored as one (as the document's score is)
    paragraph_grades: tuple[float, ...]  # the graded paragraphs' own grades
    hard: int  # paragraphs above the threshold


def grade_chart(
    sections: list[SectionGrades], threshold: float, flags_hard: bool, caption: str, title_id: str
) -> str:
    """An SVG bar chart of grades per section; an empty string when no section has a graded paragraph."""
    if not sections:
        return ""
    highest = max(
        [threshold, *(s.grade for s in sections), *(g for s in sections for g in s.paragraph_grades)]
    )
    scale_max = max(5.0, float(int(highest / 5) + 1) * 5)  # a round axis end past every value

    def x(grade: float) -> float:
        return LABEL_WIDTH + max(0.0, min(grade, scale_max)) / scale_max * PLOT_WIDTH

    width = LABEL_WIDTH + PLOT_WIDTH + VALUE_WIDTH
    height = TOP + ROW_HEIGHT * len(sections) + 8
    parts = [
        f'<svg class="grade-chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg" aria-labelledby="{title_id}">',
        f'<title id="{title_id}">{escape(caption)}</title>',
    ]
    tick = 0.0
    while tick <= scale_max:
        parts.append(
            f'<line class="tick" x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{TOP - 4}" y2="{height - 8}"/>'
            f'<text class="axis" x="{x(tick):.1f}" y="{TOP - 8}" text-anchor="middle">{tick:g}</text>'
        )
        tick += 5
    for row, section in enumerate(sections):
        top = TOP + row * ROW_HEIGHT
        middle = top + ROW_HEIGHT / 2
        bar_width = x(section.grade) - LABEL_WIDTH
        hard = f", {section.hard} above the threshold" if section.hard else ""
        parts.append(
            f'<g class="section-row" data-section="{escape(section.name)}">'
            f"<title>{escape(section.name)}: grade {section.grade:.1f} over "
            f"{len(section.paragraph_grades)} paragraph(s){hard}</title>"
            f'<text class="section-name" x="{LABEL_WIDTH - 8}" y="{middle + 4:.1f}" text-anchor="end">'
            f"{escape(shortened(section.name, MAX_LABEL_CHARS))}</text>"
            f'<rect class="bar {tint(section.grade, threshold, flags_hard)}" x="{LABEL_WIDTH}" y="{top + 5}" '
            f'width="{bar_width:.1f}" height="{ROW_HEIGHT - 10}" rx="2"/>'
        )
        for grade in section.paragraph_grades:
            parts.append(f'<circle class="dot" cx="{x(grade):.1f}" cy="{middle:.1f}" r="2.6"/>')
        parts.append(
            f'<text class="value" x="{LABEL_WIDTH + PLOT_WIDTH + 8}" y="{middle + 4:.1f}">'
            f"{section.grade:.1f}{' · ' + str(section.hard) + ' hard' if section.hard else ''}</text></g>"
        )
    parts.append(
        f'<line class="threshold" x1="{x(threshold):.1f}" x2="{x(threshold):.1f}" y1="{TOP - 4}" '
        f'y2="{height - 8}"><title>threshold: grade {threshold:g}</title></line>'
    )
    parts.append("</svg>")
    return "".join(parts)

"""A review or a readability check as one self-contained HTML page, the thing a researcher sends a co-author:
the manuscript paragraph by paragraph, each tinted by its grade, findings as numbered margin notes beside the
words they quote, filters by weakness type and a chart of grades per section.

The page loads nothing: its style and script are inline, and its Content-Security-Policy allows only those two
(by hash), so text from the manuscript or a model can never become markup or script that runs. It is ASCII
(other characters as character references), so it reads the same whatever encoding carries it."""

from __future__ import annotations

import base64
import hashlib
import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from importlib import resources
from typing import TYPE_CHECKING, Any

from margin.workflows.feedback.types import WeaknessType
from margin.workflows.readability import document_score

from ..render import file_of_uri, relative_file
from .chart import SectionGrades, grade_chart
from .grades import OVER, UNGRADED, legend, tint

if TYPE_CHECKING:
    from margin.workflows.manuscript.model import Manuscript

    from ..render import CheckedParagraph

NO_SECTION = "(before the first section)"
OTHER_TYPE = "other"  # a label no WeaknessType parses (a record written by hand, or by an older margin)


@dataclass(frozen=True, slots=True)
class ReportManuscript:
    """One manuscript of the report: its paragraphs with their scores and, for a review, its findings (the CLI's
    records, by paragraph id) and which paragraphs the model reviewed (id -> the reviewer answered)."""

    manuscript: Manuscript
    paragraphs: Sequence[CheckedParagraph]
    findings: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    reviewed: Mapping[str, bool] | None = None  # None: a readability check, no review


@dataclass(frozen=True, slots=True)
class ReportOptions:
    threshold: float  # the grade above which a paragraph is hard to read
    min_words: int  # paragraphs with fewer words are not graded
    flags_hard: bool = True  # readability.enabled: paragraphs above the threshold get the "hard" tint
    details: Sequence[str] = ()  # lines under the title: mode, model, date
    version: str = ""


def _asset(name: str) -> str:
    text = resources.files("margin.server.report").joinpath(name).read_text(encoding="utf-8")
    if not text.isascii():  # its hash must not depend on how the page is encoded
        raise ValueError(f"margin/server/report/{name} must be ASCII (use escapes)")
    return text


def _digest(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("ascii")).digest()).decode("ascii")


def _type_code(label: object) -> str:
    parsed = WeaknessType.parse(str(label or ""))
    return parsed.code if parsed is not None else OTHER_TYPE


@dataclass(frozen=True, slots=True)
class _Note:
    number: int
    record: Mapping[str, Any]
    span: tuple[int, int] | None  # the quote in the paragraph's text; None: not there (noted without a mark)

    @property
    def code(self) -> str:
        return _type_code(self.record.get("label"))


def _span_of(text: str, record: Mapping[str, Any]) -> tuple[int, int] | None:
    """Where the finding's quote is in the paragraph's text: the recorded offsets when they still quote it,
    else its first occurrence (records stored by an older margin have no offsets)."""
    quote = str(record.get("quote") or "")
    if not quote:
        return None
    offsets = record.get("text_offsets")
    if isinstance(offsets, Sequence) and len(offsets) == 2 and all(type(o) is int for o in offsets):
        start, end = offsets
        if 0 <= start < end <= len(text) and text[start:end] == quote:
            return start, end
    found = text.find(quote)
    return (found, found + len(quote)) if found >= 0 else None


def _marked_text(text: str, notes: list[_Note]) -> str:
    """The paragraph's text with each quote in <mark>s (overlapping quotes split into pieces that name every
    note they belong to) and the note's number after its last piece."""
    spans = [(note, *note.span) for note in notes if note.span is not None]
    cuts = sorted({0, len(text), *(start for _, start, _ in spans), *(end for _, _, end in spans)})
    pieces = []
    for begin, end in itertools.pairwise(cuts):
        covering = [note for note, start, stop in spans if start <= begin and end <= stop]
        chunk = escape(text[begin:end])
        if covering:
            ids = " ".join(f"note-{note.number}" for note in covering)
            types = " ".join(sorted({f"t-{note.code}" for note in covering}))
            chunk = f'<mark class="quote {types}" data-notes="{ids}">{chunk}</mark>'
        pieces.append(chunk)
        pieces.extend(
            f'<sup class="ref t-{note.code}" data-notes="note-{note.number}">{note.number}</sup>'
            for note, _, stop in spans
            if stop == end
        )
    return "".join(pieces)


def _note(note: _Note) -> str:
    record = note.record
    label = str(record.get("label") or "")
    parts = [
        f'<div class="note t-{note.code}" id="note-{note.number}" data-type="{note.code}">',
        f'<div class="note-head"><span class="num">{note.number}</span><span class="type">{escape(label)}</span></div>',
        f'<blockquote class="note-quote">\u201c{escape(str(record.get("quote") or ""))}\u201d</blockquote>',
        f'<p class="review">{escape(str(record.get("review") or ""))}</p>',
    ]
    if note.span is None:
        parts.append('<p class="unplaced">The quoted words are not in the paragraph as it reads now.</p>')
    reasoning = str(record.get("reasoning") or "")
    if reasoning:
        parts.append(f'<p class="reasoning"><span class="tag">Reasoning</span> {escape(reasoning)}</p>')
    evidence = [item for item in record.get("evidence") or [] if isinstance(item, Mapping)]
    if evidence:
        items = "".join(
            f'<li><span class="question">{escape(str(item.get("question") or ""))}</span> '
            f"{escape(str(item.get('answer') or ''))} "
            f'<span class="source">{escape(str(item.get("source") or ""))}</span></li>'
            for item in evidence
        )
        parts.append(
            f'<details class="evidence"><summary>Evidence ({len(evidence)})</summary><ul>{items}</ul></details>'
        )
    parts.append("</div>")
    return "".join(parts)


def _graded(item: CheckedParagraph, options: ReportOptions) -> bool:
    return item.scores.words >= options.min_words


def _section_grades(entry: ReportManuscript, options: ReportOptions) -> list[SectionGrades]:
    grouped: dict[str, list[CheckedParagraph]] = {}
    for item in entry.paragraphs:
        name = item.paragraph.section[0] if item.paragraph.section else NO_SECTION
        grouped.setdefault(name, []).append(item)
    sections = []
    for name, items in grouped.items():
        graded = [item for item in items if _graded(item, options)]
        if graded:
            sections.append(
                SectionGrades(
                    name=name,
                    grade=document_score(item.paragraph.text for item in graded).fkgl,
                    paragraph_grades=tuple(item.scores.fkgl for item in graded),
                    hard=sum(item.flagged for item in items),
                )
            )
    return sections


def _headings(previous: tuple[str, ...], current: tuple[str, ...]) -> str:
    """Headings for the section levels that change between two paragraphs."""
    shared = 0
    while shared < min(len(previous), len(current)) and previous[shared] == current[shared]:
        shared += 1
    return "".join(
        f'<h{min(level + 3, 6)} class="section-heading">{escape(current[level])}</h{min(level + 3, 6)}>'
        for level in range(shared, len(current))
    )


def _title_of(manuscript: Manuscript) -> str:
    if manuscript.title:
        return manuscript.title
    return relative_file(manuscript.files[0].display_name) if manuscript.files else manuscript.root_uri


class _Page:
    """What the page's parts share: the notes' numbers, in reading order across manuscripts, and how many notes
    of each type the page shows (for the filters)."""

    def __init__(self, options: ReportOptions) -> None:
        self.options = options
        self.numbers = itertools.count(1)
        self.shown: Counter[str] = Counter()

    def paragraph(self, item: CheckedParagraph, entry: ReportManuscript, html_id: str) -> str:
        paragraph, scores = item.paragraph, item.scores
        graded = _graded(item, self.options)
        # The "hard" tint exactly for what `margin check` flags (at least minWords words, over the threshold).
        if item.flagged:
            band = OVER
        else:
            band = tint(scores.fkgl, self.options.threshold, flags_hard=False) if graded else UNGRADED
        records = entry.findings.get(paragraph.id, [])
        placed = sorted(
            ((_span_of(paragraph.text, record), record) for record in records),
            key=lambda pair: pair[0][0] if pair[0] is not None else len(paragraph.text),
        )
        notes = [_Note(next(self.numbers), record, span) for span, record in placed]
        self.shown.update(note.code for note in notes)
        start = paragraph.range.start
        where = f"{relative_file(paragraph.file)}:{start.line + 1}"
        kind = (
            "" if paragraph.kind.value == "paragraph" else f'<span class="kind">{paragraph.kind.value}</span>'
        )
        grade = (
            f"FKGL {scores.fkgl:.1f} \u00b7 CLI {scores.cli:.1f} \u00b7 DCRS {scores.dcrs:.1f} \u00b7 "
            f"{scores.words} words"
            if graded
            else f"{scores.words} words: too short to grade"
        )
        status = ""
        if entry.reviewed is not None and paragraph.id in entry.reviewed:
            if not entry.reviewed[paragraph.id]:
                status = '<span class="unreviewed">not reviewed: the model calls failed</span>'
            elif not notes:
                status = '<span class="no-findings">reviewed: no weakness found</span>'
        data_grade = f' data-grade="{scores.fkgl:.1f}"' if graded else ""
        return (
            f'<article class="para {band}" id="{html_id}"{data_grade}>'
            f'<div class="body"><div class="meta"><span class="where">{escape(where)}</span>{kind}'
            f'<span class="grade">{grade}</span>{status}</div>'
            f'<p class="text">{_marked_text(paragraph.text, notes)}</p></div>'
            f'<aside class="notes">{"".join(_note(note) for note in notes)}</aside></article>'
        )

    def manuscript(self, number: int, entry: ReportManuscript) -> str:
        manuscript, options = entry.manuscript, self.options
        shown_before = sum(self.shown.values())
        body = []
        previous: tuple[str, ...] = ()
        for index, item in enumerate(entry.paragraphs):
            body.append(_headings(previous, item.paragraph.section))
            previous = item.paragraph.section
            body.append(self.paragraph(item, entry, f"p-{number}-{index + 1}"))
        graded = [item.paragraph.text for item in entry.paragraphs if _graded(item, options)]
        hard = sum(item.flagged for item in entry.paragraphs)
        if graded:
            overall = document_score(graded)
            scores = f"FKGL {overall.fkgl:.1f} \u00b7 CLI {overall.cli:.1f} \u00b7 DCRS {overall.dcrs:.1f} for the whole text"
        else:
            scores = f"no paragraph has the {options.min_words} words needed to grade it"
        files = ", ".join(relative_file(source.display_name) for source in manuscript.files)
        summary = [
            f"{len(entry.paragraphs)} paragraphs in {len(manuscript.files)} file(s): {escape(files)}",
            f"{scores}; {hard} paragraph(s) above grade {options.threshold:g}",
        ]
        if entry.reviewed is not None:
            reviewed = sum(entry.reviewed.values())
            failed = len(entry.reviewed) - reviewed
            line = f"{sum(self.shown.values()) - shown_before} finding(s) in {reviewed} reviewed paragraph(s)"
            if failed:
                line += f'; <span class="unreviewed">{failed} paragraph(s) could not be reviewed</span>'
            summary.append(line)
        problems = "".join(
            f"<li>{escape(file_of_uri(problem.uri))}:{problem.range.start.line + 1}: {escape(problem.message)}</li>"
            for problem in manuscript.problems
        )
        chart = grade_chart(
            _section_grades(entry, options),
            options.threshold,
            options.flags_hard,
            f"Flesch-Kincaid grade per section of {_title_of(manuscript)}",
            f"chart-title-{number}",
        )
        figure = (
            f'<figure class="chart">{chart}<figcaption>Flesch-Kincaid grade per section: the bar is the '
            "section's text as a whole, a dot is one paragraph, the dashed line the threshold.</figcaption></figure>"
            if chart
            else ""
        )
        facts = "".join(f"<li>{line}</li>" for line in summary)
        return (
            f'<section class="manuscript" id="manuscript-{number}"><h2>{escape(_title_of(manuscript))}</h2>'
            f'<div class="summary"><ul class="facts">{facts}</ul>'
            + (f'<ul class="problems">{problems}</ul>' if problems else "")
            + f"{figure}</div>{''.join(body)}</section>"
        )

    def filters(self) -> str:
        names = {label.code: label.value for label in WeaknessType}
        if self.shown[OTHER_TYPE]:
            names[OTHER_TYPE] = "Other"
        boxes = "".join(
            f'<label class="filter t-{code}"><input type="checkbox" checked data-type="{code}"'
            f'{"" if self.shown[code] else " disabled"}><span class="swatch"></span>{escape(name)} '
            f'<span class="count">{self.shown[code]}</span></label>'
            for code, name in names.items()
        )
        return f'<fieldset class="filters"><legend>Show findings of type</legend>{boxes}</fieldset>'


def _legend(options: ReportOptions) -> str:
    items = "".join(
        f'<li class="{name}"><span class="swatch"></span>{escape(words)}</li>'
        for name, words in legend(options.threshold)
        if options.flags_hard or name != OVER
    )
    return f'<ul class="legend" aria-label="Paragraph tint: Flesch-Kincaid grade">{items}</ul>'


def html_report(manuscripts: Sequence[ReportManuscript], options: ReportOptions) -> str:
    """The whole page. A report with no review (no manuscript has `reviewed`) is a readability report."""
    review = any(entry.reviewed is not None for entry in manuscripts)
    heading = "margin review" if review else "margin readability check"
    titles = ", ".join(_title_of(entry.manuscript) for entry in manuscripts) or "no manuscript"
    page = _Page(options)
    sections = "".join(page.manuscript(number, entry) for number, entry in enumerate(manuscripts, start=1))
    style, script = _asset("report.css"), _asset("report.js")
    policy = (
        f"default-src 'none'; style-src '{_digest(style)}'; script-src '{_digest(script)}'; img-src data:"
    )
    details = "".join(f"<li>{escape(line)}</li>" for line in options.details)
    controls = (page.filters() if review else "") + _legend(options)
    html = (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="margin {escape(options.version)}">'
        f"<title>{escape(heading)}: {escape(titles)}</title>"
        f"<style>{style}</style></head>"
        f'<body class="{"review" if review else "check"}">'
        f'<header class="page-head"><h1>{escape(heading)}</h1><ul class="details">{details}</ul>'
        f'<div class="controls">{controls}</div></header>'
        f"<main>{sections}</main>"
        f"<script>{script}</script></body></html>\n"
    )
    return html.encode("ascii", "xmlcharrefreplace").decode("ascii")

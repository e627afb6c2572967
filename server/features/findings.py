"""Focused-feedback findings as they stand in a document now: located again in the current text, without the
dismissed ones, and rendered as diagnostics (with their evidence) and hovers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from lsprotocol import types

from margin.workflows.feedback.dismissals import DismissalStore, dismissal_key
from margin.workflows.feedback.types import RETRIEVED_CONTEXT, Finding, ParagraphReview, Source
from margin.workflows.manuscript.model import Manuscript, Paragraph

from ..diagnostics import SOURCE, lsp_range

SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


@dataclass(frozen=True, slots=True)
class Shown:
    """A finding as it stands in a document now."""

    paragraph: Paragraph
    finding: Finding
    key: str  # its dismissal key

    @property
    def range(self) -> types.Range:
        return lsp_range(self.paragraph.range_of(self.finding.start, self.finding.end))


def shown(
    results: Mapping[str, ParagraphReview], paragraphs: list[Paragraph], store: DismissalStore
) -> list[Shown]:
    """Findings for `paragraphs` (one document's) as they are now, without dismissed ones. Results are kept by
    paragraph id, so a finding shows only while a paragraph with its text exists, wherever it is now."""
    found = []
    for paragraph in paragraphs:
        result = results.get(paragraph.id)
        if result is None:
            continue
        for finding in result.findings:
            current = _relocated(finding, paragraph.text, result.text)
            if current is None:
                continue
            dismissal = dismissal_key(paragraph.text, current.label.value, current.quote)
            if not store.is_dismissed(dismissal):
                found.append(Shown(paragraph, current, dismissal))
    return found


def diagnostic(item: Shown, manuscript: Manuscript, severity: types.DiagnosticSeverity) -> types.Diagnostic:
    finding = item.finding
    return types.Diagnostic(
        range=item.range,
        message=finding.review,
        severity=severity,
        source=SOURCE,
        code=finding.label.value,
        related_information=_evidence_locations(finding, manuscript) or None,
        data={
            "paragraphId": item.paragraph.id,
            "label": finding.label.value,
            "quote": finding.quote,
            "dismissal": item.key,
        },
    )


def _relocated(finding: Finding, text: str, reviewed_text: str) -> Finding | None:
    """The finding in the paragraph's current text. The id ignores white space and case, so the text may differ
    slightly from the reviewed one: then the quote is looked up again (exactly), or the finding is not shown."""
    if text == reviewed_text:
        return finding
    start = text.find(finding.quote)
    if start < 0:
        return None
    return replace(finding, start=start, end=start + len(finding.quote))


def _evidence_locations(finding: Finding, manuscript: Manuscript) -> list[types.DiagnosticRelatedInformation]:
    """Where the evidence is now: passages are found again by their paragraph, so they follow edits."""
    paragraphs = {paragraph.id: paragraph for paragraph in manuscript.paragraphs}
    related = []
    for evidence in finding.evidence:
        if evidence.source is not Source.PAPER:
            continue
        for passage in evidence.passages[:2]:
            paragraph = paragraphs.get(passage.paragraph_id or "")
            if paragraph is None or paragraph.text[passage.plain_start : passage.plain_end] != passage.text:
                continue
            if evidence.question == RETRIEVED_CONTEXT:
                message = "A passage the reviewer was given as context"
            else:
                answer = f": {evidence.answer}" if evidence.answer else ""
                message = f"Evidence for “{evidence.question}”{answer}"
            related.append(
                types.DiagnosticRelatedInformation(
                    location=types.Location(
                        uri=paragraph.uri,
                        range=lsp_range(paragraph.range_of(passage.plain_start, passage.plain_end)),
                    ),
                    message=message[:300],
                )
            )
    return related[:6]


def finding_markdown(finding: Finding) -> str:
    lines = [f"**margin · {finding.label.value}**", "", finding.review]
    if finding.reasoning:
        lines += ["", f"*Reasoning:* {finding.reasoning}"]
    answered = [item for item in finding.evidence if item.answer]
    if answered:
        lines += ["", "*Evidence gathered:*"]
        for item in answered:
            origin = "paper" if item.source is Source.PAPER else "literature"
            lines.append(f"- ({origin}) **{item.question}** {item.answer}")
    return "\n".join(lines)

"""Maps manuscript facts (readability, file problems) to LSP diagnostics and hovers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from margin.workflows.manuscript.model import Severity
from margin.workflows.readability import is_hard_to_read, long_enough  # the rule `margin check` applies too

if TYPE_CHECKING:
    from margin.workflows.manuscript.model import Manuscript, Paragraph, Problem
    from margin.workflows.manuscript.source import Range
    from margin.workflows.readability import Readability, ReadabilityCache

    from .settings import Settings

SOURCE = "margin"
READABILITY_CODE = "readability"

_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFORMATION: types.DiagnosticSeverity.Information,
}


def lsp_range(value: Range) -> types.Range:
    return types.Range(
        start=types.Position(line=value.start.line, character=value.start.character),
        end=types.Position(line=value.end.line, character=value.end.character),
    )


def readability_message(scores: Readability, settings: Settings) -> str:
    return (
        f"Hard to read: Flesch-Kincaid grade {scores.fkgl:.1f} (above {settings.readability_threshold:g}). "
        f"Coleman-Liau {scores.cli:.1f}, Dale-Chall {scores.dcrs:.1f}, "
        f"{scores.mean_sentence_length:.0f} words per sentence."
    )


def readability_diagnostic(paragraph: Paragraph, scores: Readability, settings: Settings) -> types.Diagnostic:
    return types.Diagnostic(
        range=lsp_range(paragraph.range),
        message=readability_message(scores, settings),
        severity=types.DiagnosticSeverity.Information,
        source=SOURCE,
        code=READABILITY_CODE,
        data={"paragraphId": paragraph.id, "fkgl": scores.fkgl, "cli": scores.cli, "dcrs": scores.dcrs},
    )


def problem_diagnostic(problem: Problem) -> types.Diagnostic:
    return types.Diagnostic(
        range=lsp_range(problem.range),
        message=problem.message,
        severity=_SEVERITY[problem.severity],
        source=SOURCE,
        code="manuscript",
    )


def document_diagnostics(
    manuscript: Manuscript, uri: str, settings: Settings, scores: ReadabilityCache
) -> list[types.Diagnostic]:
    """Everything margin says about one file of a manuscript."""
    diagnostics = [problem_diagnostic(problem) for problem in manuscript.problems_in(uri)]
    if settings.readability_enabled:
        threshold, min_words = settings.readability_threshold, settings.readability_min_words
        for paragraph in manuscript.paragraphs_in(uri):
            if not long_enough(paragraph.text, min_words):
                continue  # it could not be flagged: not scored
            paragraph_scores = scores.score(paragraph.text)
            if is_hard_to_read(paragraph_scores, threshold, min_words):
                diagnostics.append(readability_diagnostic(paragraph, paragraph_scores, settings))
    return diagnostics


def hover_markdown(paragraph: Paragraph, scores: Readability) -> str:
    where = " › ".join(paragraph.section) if paragraph.section else "(no section)"
    kind = paragraph.kind.value.replace("_", " ")
    return (
        f"**margin · readability** of this {kind} in *{where}*\n\n"
        "| Flesch-Kincaid grade | Coleman-Liau | Dale-Chall | words / sentence | words |\n"
        "|---:|---:|---:|---:|---:|\n"
        f"| {scores.fkgl:.1f} | {scores.cli:.1f} | {scores.dcrs:.1f} | "
        f"{scores.mean_sentence_length:.1f} | {scores.words} |"
    )

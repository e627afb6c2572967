"""Rendering manuscript checks for a terminal (text) and for tools (JSON)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from margin.workflows.manuscript.source import uri_to_path

# The CLI imports this module for every command: the readability scorer (textstat) is imported where text is
# scored, and the LLM layer's report type (which imports the OpenAI client) is only a type here.
if TYPE_CHECKING:
    from margin.workflows.llm.doctor import DoctorReport
    from margin.workflows.manuscript.model import Manuscript, Paragraph
    from margin.workflows.readability import Readability, ReadabilityCache

    from .settings import Settings


@dataclass(frozen=True, slots=True)
class CheckedParagraph:
    paragraph: Paragraph
    scores: Readability
    flagged: bool


def check(manuscript: Manuscript, settings: Settings, scores: ReadabilityCache) -> list[CheckedParagraph]:
    from margin.workflows.readability import is_hard_to_read  # the editor's diagnostics apply the same rule

    threshold, min_words = settings.readability_threshold, settings.readability_min_words
    checked = []
    for paragraph in manuscript.paragraphs:
        paragraph_scores = scores.score(paragraph.text)
        flagged = settings.readability_enabled and is_hard_to_read(paragraph_scores, threshold, min_words)
        checked.append(CheckedParagraph(paragraph, paragraph_scores, flagged))
    return checked


def file_of_uri(uri: str) -> str:
    path = uri_to_path(uri)
    return relative_file(str(path)) if path is not None else uri


def relative_file(name: str) -> str:
    try:
        return str(Path(name).relative_to(Path.cwd()))
    except ValueError:
        return name


def paragraph_json(item: CheckedParagraph) -> dict[str, object]:
    paragraph = item.paragraph
    return {
        "file": relative_file(paragraph.file),
        "range": paragraph.range.to_json(),
        "section": list(paragraph.section),
        "kind": paragraph.kind.value,
        "id": paragraph.id,
        "text": paragraph.text,
        "readability": {
            "fkgl": item.scores.fkgl,
            "cli": item.scores.cli,
            "dcrs": item.scores.dcrs,
            "mean_sentence_length": item.scores.mean_sentence_length,
            "words": item.scores.words,
        },
        "hard_to_read": item.flagged,
    }


def as_json(results: list[tuple[Manuscript, list[CheckedParagraph]]], errors: list[str]) -> str:
    from margin.workflows.readability import document_score

    paragraphs = [paragraph_json(item) for _, items in results for item in items]
    documents = []
    for manuscript, items in results:
        overall = document_score(item.paragraph.text for item in items)
        documents.append(
            {
                "file": relative_file(manuscript.files[0].display_name)
                if manuscript.files
                else manuscript.root_uri,
                "title": manuscript.title,
                "files": [relative_file(source.display_name) for source in manuscript.files],
                "paragraphs": len(items),
                "readability": {"fkgl": overall.fkgl, "cli": overall.cli, "dcrs": overall.dcrs},
                "problems": [
                    {
                        "file": file_of_uri(problem.uri),
                        "range": problem.range.to_json(),
                        "message": problem.message,
                    }
                    for problem in manuscript.problems
                ],
            }
        )
    return json.dumps(
        {"paragraphs": paragraphs, "documents": documents, "errors": errors}, ensure_ascii=False, indent=2
    )


def _excerpt(text: str, width: int = 72) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def as_text(manuscript: Manuscript, items: list[CheckedParagraph], settings: Settings) -> str:
    from margin.workflows.readability import document_score

    lines: list[str] = []
    title = manuscript.title or (
        manuscript.files[0].display_name if manuscript.files else manuscript.root_uri
    )
    lines.append(f"{title}  ({len(manuscript.files)} file(s), {len(items)} paragraphs)")
    for problem in manuscript.problems:
        lines.append(
            f"  {file_of_uri(problem.uri)}:{problem.range.start.line + 1}: "
            f"{problem.severity.value}: {problem.message}"
        )
    for item in items:
        paragraph, scores = item.paragraph, item.scores
        start = paragraph.range.start
        marker = "!" if item.flagged else " "
        section = " › ".join(paragraph.section) or "-"
        lines.append(
            f"{marker} {relative_file(paragraph.file)}:{start.line + 1}:{start.character + 1} "
            f"[{paragraph.kind.value}] {section}: FKGL {scores.fkgl:.1f}  CLI {scores.cli:.1f}  "
            f"DCRS {scores.dcrs:.1f}  ({scores.words} words)"
        )
        lines.append(f"      {_excerpt(paragraph.text)}")
    overall = document_score(item.paragraph.text for item in items)
    flagged = sum(item.flagged for item in items)
    lines.append(
        f"Document: FKGL {overall.fkgl:.1f}  CLI {overall.cli:.1f}  DCRS {overall.dcrs:.1f}; "
        f"{flagged} paragraph(s) above grade {settings.readability_threshold:g} (marked !)"
    )
    return "\n".join(lines)


def render_doctor(report: DoctorReport) -> str:
    lines = ["margin doctor"]
    for endpoint in report.endpoints:
        who = ", ".join(endpoint.roles)
        where = endpoint.base_url or "(not resolved)"
        kind = " [embedded model]" if endpoint.embedded else ""
        lines.append(f"  {who}: {where}{kind}")
        if endpoint.error:
            lines.append(f"    not usable: {endpoint.error}")
            continue
        if endpoint.silent_replicas:
            lines.append(
                f"    not answering: {', '.join(endpoint.silent_replicas)} (the other replicas take its requests)"
            )
        lines.append(f"    model: {endpoint.model}  (listed: {', '.join(endpoint.models) or '-'})")
        lines.append(f"    structured output: {endpoint.structured_mode or 'not negotiated'}")
        if endpoint.round_trip_seconds is not None:
            lines.append(
                f"    round trip: {endpoint.round_trip_seconds * 1000:.0f} ms for one structured call"
            )
        if endpoint.warning:
            lines.append(f"    warning: {endpoint.warning}")
    if report.cache is None:
        lines.append("  cache: off")
    else:
        cache = report.cache
        lines.append(
            f"  cache: {cache['path']} ({cache['entries']} answers, {cache['bytes'] / 2**20:.1f} of "
            f"{cache['max_bytes'] / 2**20:.0f} MB)"
        )
    lines.append(f"  embedded model installed: {'yes' if report.embedded_installed else 'no'}")
    lines.append(f"  lay articles (JRE-L): {_reader_line(report)}")
    return "\n".join(lines)


def _reader_line(report: DoctorReport) -> str:
    """Which model reads the journalist's drafts: JRE-L's reader is meant to be a smaller model than the
    journalist, which takes a route in margin.llm.roles."""
    routed = next((endpoint for endpoint in report.endpoints if "reader" in endpoint.roles), None)
    if routed is None:
        return (
            "the reader is the same model as the journalist (for the paper's smaller reader, route it: "
            'margin.llm.roles {"reader": {"endpoint": URL, "model": NAME}})'
        )
    where = routed.model or routed.base_url or "(not resolved)"
    return f"the reader is {where}, the journalist the default model"

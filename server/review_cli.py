"""`margin review`: focused feedback for whole manuscripts in a terminal or CI."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from margin.workflows.feedback.literature import Literature
from margin.workflows.feedback.pipeline import review_manuscript
from margin.workflows.feedback.types import Mode, ParagraphReview
from margin.workflows.llm.client import LLMClient
from margin.workflows.manuscript.discovery import load_paths
from margin.workflows.manuscript.model import Manuscript

from . import exit_status
from .reading import command_line_loader
from .render import relative_file
from .rewrite_cli import EXIT_NOT_WRITTEN, print_or_keep
from .sarif import sarif_log
from .settings import Settings


class ProgressBar:
    """A one-line progress bar on stderr, only when stderr is a terminal (never in logs or pipes)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.enabled = sys.stderr.isatty()

    def __call__(self, done: int, total: int, _: ParagraphReview) -> None:
        if not self.enabled or not total:
            return
        width = 30
        filled = width * done // total
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} paragraphs")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def finding_records(manuscript: Manuscript, reviews: list[ParagraphReview]) -> list[dict[str, Any]]:
    paragraphs = {paragraph.id: paragraph for paragraph in manuscript.paragraphs}
    records = []
    for review in reviews:
        paragraph = paragraphs.get(review.paragraph_id)
        if paragraph is None:
            continue
        for finding in review.findings:
            records.append(
                {
                    "file": relative_file(paragraph.file),
                    "range": paragraph.range_of(finding.start, finding.end).to_json(),
                    "label": finding.label.value,
                    "quote": finding.quote,
                    "review": finding.review,
                    "reasoning": finding.reasoning,
                    "paragraph_id": paragraph.id,
                    "section": list(paragraph.section),
                    "evidence": [
                        {"question": item.question, "answer": item.answer, "source": item.source.value}
                        for item in finding.evidence
                        if item.answer
                    ],
                }
            )
    return records


def as_text(
    records: list[dict[str, Any]], reviewed: int, unreviewed: int = 0, seconds: float | None = None
) -> str:
    lines = []
    for record in records:
        start = record["range"]["start"]
        lines.append(
            f"{record['file']}:{start['line'] + 1}:{start['character'] + 1}: {record['label']}: {record['review']}"
        )
        lines.append(f"    “{record['quote']}”")
    summary = f"{len(records)} finding(s) in {reviewed} reviewed paragraph(s)"
    if unreviewed:
        summary += f"; {unreviewed} paragraph(s) could not be reviewed"
    if seconds is not None:
        summary += f" ({seconds:.0f} s)"
    lines.append(summary)
    return "\n".join(lines)


async def run_review(arguments: argparse.Namespace, settings: Settings) -> int:
    loader = command_line_loader(settings, arguments.files)
    llm = LLMClient(settings.llm_config())
    # review.mode "auto": fast on the embedded model, full on a model server
    options = settings.review_options(await llm.pool.kind_of(llm.config.default))
    if arguments.mode:
        options.mode = Mode(arguments.mode)
    records: list[dict[str, Any]] = []
    reviewed = unreviewed = 0
    status = exit_status.OK
    try:
        with llm.measure() as usage:
            loaded = load_paths(loader, arguments.files)
            for message in (*loaded.errors, *loaded.notes):
                print(f"margin: {message}", file=sys.stderr)
            if loaded.errors:
                status = exit_status.UNREADABLE
            for path, manuscript in loaded.manuscripts:
                online = settings.online_searches()
                literature = await Literature.gather(
                    manuscript,
                    [Path(folder) for folder in arguments.literature],
                    online.web,
                    scholarly=online.scholarly,
                )
                reviews = await review_manuscript(
                    manuscript,
                    llm,
                    options,
                    literature=literature,
                    progress=ProgressBar(f"{path.name} ({options.mode})"),
                )
                # Reviewed means the reviewer answered; a paragraph whose calls failed is not reviewed.
                completed = [review for review in reviews if review.completed]
                reviewed += len(completed)
                unreviewed += len(reviews) - len(completed)
                records.extend(finding_records(manuscript, completed))
    finally:
        await llm.close()
    if arguments.format == "json":
        text = json.dumps(
            {
                "findings": records,
                "reviewed_paragraphs": reviewed,
                "unreviewed_paragraphs": unreviewed,
                "usage": usage.to_json(),
            },
            indent=2,
            ensure_ascii=False,
        )
    elif arguments.format == "sarif":
        text = json.dumps(sarif_log(records), indent=2, ensure_ascii=False)
    else:
        text = as_text(records, reviewed, unreviewed, usage.wall_seconds)
    # review writes no file: its output is stdout, which may be a redirection to a full disk. The review the
    # models paid for is then kept in a file (margin's cache folder) rather than lost.
    suffix = "txt" if arguments.format == "text" else arguments.format
    if not print_or_keep(text + "\n", f"review.{suffix}", "the review"):
        status = exit_status.worst(status, EXIT_NOT_WRITTEN)
    if arguments.stats:
        print(f"margin: {usage.summary()}", file=sys.stderr)
    return exit_status.worst(status, exit_status.model_status(usage))

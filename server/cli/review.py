"""`margin review`: focused feedback for whole manuscripts in a terminal or CI, through the application layer the
editor uses (margin.server.application.review): the same literature, the same reviews, progress on stderr."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from margin.workflows.feedback.types import Mode, ParagraphReview
from margin.workflows.llm.client import LLMClient
from margin.workflows.manuscript.boundary import ALLOW_SETTING, ReadBoundary, project_folder
from margin.workflows.manuscript.discovery import load_paths
from margin.workflows.manuscript.model import Manuscript

from ..application.review import Reviews, follow, gather_literature, literature_folders
from ..reading import command_line_boundary, command_line_loader
from ..render import relative_file
from ..sarif import sarif_log
from ..settings import Settings
from . import exit_status
from .output import print_or_keep
from .progress import TerminalProgress
from .shared import settings_for, with_models


def run(arguments: argparse.Namespace) -> int:
    return with_models(review(arguments, settings_for(arguments)))


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


class CommandLineLiterature:
    """The literature folders of each manuscript: those named with --literature, and review.literatureFolders
    (relative ones against the manuscript's project folder) inside the read boundary. A folder outside it is
    said once on stderr and not read."""

    def __init__(self, settings: Settings, boundary: ReadBoundary, named: Sequence[Path]) -> None:
        self.settings = settings
        self.boundary = boundary
        self.named = named
        self.refused: set[Path] = set()

    def of(self, path: Path) -> list[Path]:
        folders = literature_folders(self.settings, project_folder(path), self.boundary, self.named)
        for folder in folders.refused:
            if folder not in self.refused:
                self.refused.add(folder)
                print(
                    f"margin: review.literatureFolders: {folder} is outside the project folder; its PDFs are not "
                    f"read. To allow it, add it to {ALLOW_SETTING} in the file given to --settings",
                    file=sys.stderr,
                )
        return folders.readable


async def review_paragraphs(
    manuscript: Manuscript, reviews: Reviews, progress: TerminalProgress
) -> list[ParagraphReview]:
    """Every reviewable paragraph's review, in paragraph order. A review that raised is a bug: the other reviews
    are cancelled and the error is raised."""
    tasks = [reviews.start(paragraph) for paragraph in reviews.reviewable(manuscript.paragraphs)]
    followed = await follow(tasks, progress, stop_on_error=True)
    if followed.errors:
        raise followed.errors[0]
    return [result for result in followed.results if result is not None]


async def review(arguments: argparse.Namespace, settings: Settings) -> int:
    loader = command_line_loader(settings, arguments.files)
    literature = CommandLineLiterature(
        settings, command_line_boundary(settings, arguments.files), [Path(f) for f in arguments.literature]
    )
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
                gathered = await gather_literature(manuscript, settings, literature.of(path))
                reviews = await Reviews.prepare(manuscript, llm, options, gathered)
                progress = TerminalProgress(f"{path.name} ({options.mode})", unit="paragraphs")
                results = await review_paragraphs(manuscript, reviews, progress)
                # Reviewed means the reviewer answered; a paragraph whose calls failed is not reviewed.
                completed = [result for result in results if result.completed]
                reviewed += len(completed)
                unreviewed += len(results) - len(completed)
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
        status = exit_status.worst(status, exit_status.NOT_WRITTEN)
    if arguments.stats:
        print(f"margin: {usage.summary()}", file=sys.stderr)
    return exit_status.worst(status, exit_status.model_status(usage))

"""`margin review`: focused feedback for whole manuscripts in a terminal or CI, through the application layer the
editor uses (margin.server.application.review): the same literature, the same reviews, progress on stderr."""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from margin.workflows.feedback.options import ReviewOptions
from margin.workflows.feedback.types import Mode, ParagraphReview
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.config import AUTO
from margin.workflows.manuscript.boundary import ALLOW_SETTING, ReadBoundary, project_folder
from margin.workflows.manuscript.discovery import load_paths
from margin.workflows.manuscript.model import Manuscript, Paragraph
from margin.workflows.rewrite.output import OutputProblem, check_folder

from ..application.review import Reviews, ReviewTask, follow, gather_literature, literature_folders
from ..reading import command_line_boundary, command_line_loader
from ..render import relative_file
from ..sarif import sarif_log
from ..settings import Settings
from . import exit_status
from .destination import check_destination, deliver, html_page, refuse_sources, source_paths
from .eval import PREDICTIONS, kept_store
from .output import print_or_keep
from .progress import TerminalProgress
from .shared import settings_for, with_models
from .usage import UsageError

if TYPE_CHECKING:
    from margin.workflows.evaluation.runner import ResultStore

    from ..report import ReportManuscript


def review_run_key(llm: LLMClient, options: ReviewOptions) -> str:
    """What decides a paragraph's findings: a store's paragraphs count as done only under the same key."""
    reviewer = llm.config.endpoint_for("reviewer")
    described = {
        "mode": options.mode.value,
        "model": reviewer.model,
        "endpoint": reviewer.base_url,  # a pool's first replica: its replicas serve the same model
        "temperature": reviewer.temperature,
        "max_findings": options.max_findings,
        "candidates": options.candidates,
        "max_questions": options.max_questions,
        "passages": options.passages,
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]


def reviewer_model(llm: LLMClient) -> str:
    """The reviewer's model and the host that served it, for the HTML report, which goes to co-authors: no
    credentials, path or query of the endpoint's URL. Read before the client closes."""
    configured = llm.config.endpoint_for("reviewer")
    served = next(
        (endpoint for endpoint in llm.pool.endpoints() if configured.base_url in (endpoint.base_url, AUTO)),
        None,
    )
    if served is None:
        return "no model was reached"
    model = configured.model or (served.models or ["the server's first model"])[0]
    kind = "the embedded model" if served.embedded else urlsplit(served.base_url).hostname or "a server"
    return f"model {model} ({kind})"


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
                    "text_offsets": [finding.start, finding.end],
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


@dataclass
class Pile:
    """The manuscripts of one run, reviewed together: what each paragraph's review found, streamed and stored as
    it ends, and how each ended."""

    manuscripts: list[tuple[Path, Manuscript]]
    store: ResultStore | None  # --out: the paragraphs finished, kept across runs
    stream: bool  # --format jsonl: each finding printed as its paragraph's review ends
    findings: dict[tuple[int, str], list[dict[str, Any]]] = field(default_factory=dict)
    completed: dict[tuple[int, str], bool] = field(default_factory=dict)  # the reviewer answered
    resumed: int = 0
    write_error: OSError | None = None

    def record_id(self, paragraph: Paragraph) -> str:
        """A paragraph in the store: its file, its id, and its text (an edited paragraph is reviewed again)."""
        digest = hashlib.sha256(paragraph.text.encode()).hexdigest()[:16]
        return f"{relative_file(paragraph.file)}#{paragraph.id}#{digest}"

    def emit(self, records: list[dict[str, Any]]) -> None:
        if not self.stream or self.write_error is not None:
            return
        try:
            for record in records:
                sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
            sys.stdout.flush()
        except OSError as error:  # a closed pipe or a full disk: everything is kept at the end instead
            self.write_error = error

    def resume(self, number: int, paragraph: Paragraph) -> bool:
        """Take a paragraph's findings from the store when an earlier run reviewed it as it reads now."""
        stored = self.store.records.get(self.record_id(paragraph)) if self.store is not None else None
        if stored is None or stored.get("status") != "reviewed":
            return False  # never reviewed, edited since, or its calls failed: reviewed now
        self.finish(number, paragraph, list(stored.get("findings") or []), True)
        self.resumed += 1
        return True

    def finish(
        self, number: int, paragraph: Paragraph, records: list[dict[str, Any]], completed: bool
    ) -> None:
        self.findings[(number, paragraph.id)] = records
        self.completed[(number, paragraph.id)] = completed
        self.emit(records)

    def ended(self, number: int, paragraph: Paragraph, task: ReviewTask) -> None:
        """A review's end: its findings streamed and stored (a failed review is stored as failed: retried)."""
        if task.cancelled() or task.exception() is not None:
            return  # cancelled with the run, or a bug that follow raises
        review = task.result()
        records = finding_records(self.manuscripts[number][1], [review]) if review.completed else []
        self.finish(number, paragraph, records, review.completed)
        if self.store is not None:
            status = "reviewed" if review.completed else "failed"
            self.store.add({"id": self.record_id(paragraph), "status": status, "findings": records})

    def report(self, prepared: list[Reviews], settings: Settings) -> list[ReportManuscript]:
        """Each manuscript for the HTML report: every paragraph with its scores, and its findings."""
        from margin.workflows.readability import ReadabilityCache

        from ..render import check
        from ..report import ReportManuscript

        scores = ReadabilityCache()
        entries = []
        for number, ((_, manuscript), reviews) in enumerate(zip(self.manuscripts, prepared, strict=True)):
            ids = [paragraph.id for paragraph in reviews.reviewable(manuscript.paragraphs)]
            entries.append(
                ReportManuscript(
                    manuscript,
                    check(manuscript, settings, scores),
                    findings={pid: self.findings.get((number, pid), []) for pid in ids},
                    reviewed={
                        pid: self.completed[(number, pid)] for pid in ids if (number, pid) in self.completed
                    },
                )
            )
        return entries

    def records(self, prepared: list[Reviews]) -> list[dict[str, Any]]:
        """Every finding, by manuscript in the order given, then by paragraph."""
        return [
            record
            for number, ((_, manuscript), reviews) in enumerate(zip(self.manuscripts, prepared, strict=True))
            for paragraph in reviews.reviewable(manuscript.paragraphs)
            for record in self.findings.get((number, paragraph.id), [])
        ]


async def review_pile(pile: Pile, prepared: list[Reviews], progress: TerminalProgress) -> None:
    """Every reviewable paragraph of every manuscript reviewed concurrently (the LLM layer's limits bound the
    requests in flight, across a pool's replicas), except those the store holds. A review that raised is a bug:
    the others are cancelled and the error is raised."""
    tasks: list[ReviewTask] = []
    for number, ((_, manuscript), reviews) in enumerate(zip(pile.manuscripts, prepared, strict=True)):
        for paragraph in reviews.reviewable(manuscript.paragraphs):
            if pile.resume(number, paragraph):
                continue
            task = reviews.start(paragraph)
            task.add_done_callback(functools.partial(pile.ended, number, paragraph))
            tasks.append(task)
    followed = await follow(tasks, progress, stop_on_error=True)
    await asyncio.sleep(0)  # the done callbacks of the last reviews run before the results are read
    if followed.errors:
        raise followed.errors[0]


async def review(arguments: argparse.Namespace, settings: Settings) -> int:
    check_destination(arguments)
    loader = command_line_loader(settings, arguments.files)
    literature = CommandLineLiterature(
        settings, command_line_boundary(settings, arguments.files), [Path(f) for f in arguments.literature]
    )
    llm = LLMClient(settings.llm_config())
    # review.mode "auto": fast on the embedded model, full on a model server
    options = settings.review_options(await llm.pool.kind_of(llm.config.default))
    if arguments.mode:
        options.mode = Mode(arguments.mode)
    status = exit_status.OK
    details: list[str] = []  # how the review was made, for the HTML report
    store = None
    if arguments.out is not None:
        try:
            check_folder(arguments.out, create=True)
            predictions = arguments.out / PREDICTIONS
            if predictions.is_symlink() or (predictions.exists() and not predictions.is_file()):
                raise OutputProblem(f"{predictions} is not a file of margin's; choose another --out")
            store = kept_store(arguments.out, review_run_key(llm, options))
        except (OutputProblem, OSError) as error:
            raise UsageError(f"--out {arguments.out}: {error}") from error
    try:
        with llm.measure() as usage:
            loaded = load_paths(loader, arguments.files)
            for message in (*loaded.errors, *loaded.notes):
                print(f"margin: {message}", file=sys.stderr)
            if loaded.errors:
                status = exit_status.UNREADABLE
            refuse_sources(
                arguments.output, source_paths([manuscript for _, manuscript in loaded.manuscripts])
            )
            pile = Pile(list(loaded.manuscripts), store, arguments.format == "jsonl")

            async def prepare(path: Path, manuscript: Manuscript) -> Reviews:
                gathered = await gather_literature(manuscript, settings, literature.of(path))
                return await Reviews.prepare(manuscript, llm, options, gathered)

            prepared = list(await asyncio.gather(*(prepare(path, m) for path, m in pile.manuscripts)))
            count = len(pile.manuscripts)
            label = pile.manuscripts[0][0].name if count == 1 else f"{count} manuscripts"
            await review_pile(
                pile, prepared, TerminalProgress(f"{label} ({options.mode})", unit="paragraphs")
            )
            details += [f"{options.mode} mode", reviewer_model(llm)]
    finally:
        await llm.close()
    records = pile.records(prepared)
    reviewed = sum(pile.completed.values())
    unreviewed = len(pile.completed) - reviewed
    if pile.resumed:
        print(
            f"margin: {pile.resumed} paragraph(s) were reviewed by an earlier run into {arguments.out}; "
            "they were not asked again",
            file=sys.stderr,
        )
    store_error: OSError | None = getattr(store, "write_error", None)
    if store is not None and store_error is not None:
        print(f"margin: cannot append to {store.path}: {store_error}", file=sys.stderr)
        status = exit_status.worst(status, exit_status.NOT_WRITTEN)
    if arguments.format == "jsonl":
        if pile.write_error is not None:
            lines = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
            print(f"margin: cannot write the findings to stdout: {pile.write_error}", file=sys.stderr)
            print_or_keep(lines, "review.jsonl", "the review")
            status = exit_status.worst(status, exit_status.NOT_WRITTEN)
        print(
            f"margin: {len(records)} finding(s) in {reviewed} reviewed paragraph(s) of {len(pile.manuscripts)} "
            f"manuscript(s); {unreviewed} paragraph(s) could not be reviewed",
            file=sys.stderr,
        )
        if arguments.stats:
            print(f"margin: {usage.summary()}", file=sys.stderr)
        return exit_status.worst(status, exit_status.model_status(usage))
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
    elif arguments.format == "html":
        details.append(f"{usage.answered} model call(s) answered, {usage.failures} failed")
        text = html_page(pile.report(prepared, settings), settings, details).rstrip()
    else:
        text = as_text(records, reviewed, unreviewed, usage.wall_seconds)
    # stdout may be a redirection to a full disk, and -o a folder that went away: the review the models paid
    # for is then kept in a file (beside it, or in margin's cache folder) rather than lost.
    suffix = "txt" if arguments.format == "text" else arguments.format
    if not deliver(text + "\n", arguments, f"review.{suffix}", "the review"):
        status = exit_status.worst(status, exit_status.NOT_WRITTEN)
    if arguments.stats:
        print(f"margin: {usage.summary()}", file=sys.stderr)
    return exit_status.worst(status, exit_status.model_status(usage))

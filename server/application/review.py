"""Focused feedback for both front ends: the literature a review may read, the reviews of chosen paragraphs, and
how their results are followed (progress, completion, failures)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from margin.workflows.feedback.literature import Literature
from margin.workflows.feedback.pipeline import ReviewContext, ReviewOptions, review_paragraph, reviewable
from margin.workflows.manuscript.boundary import ReadBoundary

from .progress import Progress

if TYPE_CHECKING:
    from margin.workflows.feedback.types import ParagraphReview
    from margin.workflows.llm.client import LLMClient
    from margin.workflows.manuscript.model import Manuscript, Paragraph

    from ..settings import Settings

log = logging.getLogger("margin.review")

ReviewTask = asyncio.Task["ParagraphReview"]


@dataclass(frozen=True, slots=True)
class LiteratureFolders:
    """The folders of PDFs a review may read, and those the settings named but may not be read."""

    readable: list[Path]
    refused: list[Path]


def literature_folders(
    settings: Settings, base: Path | None, boundary: ReadBoundary | None, named: Sequence[Path] = ()
) -> LiteratureFolders:
    """review.literatureFolders (relative ones against `base`: the workspace or project folder) inside the read
    boundary, plus folders the user `named` on the command line. A workspace's settings must not send PDFs from
    elsewhere on the disk to the model, so folders outside the boundary are refused, not read."""
    readable = [Path(folder) for folder in named]
    refused = []
    for entry in settings.review.literature_folders:
        folder = Path(entry).expanduser()
        if not folder.is_absolute():
            if base is None:
                continue
            folder = base / folder
        if boundary is not None and not boundary.allows(folder):
            refused.append(folder)
            continue
        readable.append(folder)
    return LiteratureFolders(readable, refused)


async def gather_literature(
    manuscript: Manuscript, settings: Settings, folders: Sequence[Path]
) -> Literature:
    """The literature of a review: the manuscript's bibliography, PDFs in `folders`, and the online searches the
    user opted in to."""
    online = settings.online_searches()
    return await Literature.gather(manuscript, list(folders), online.web, scholarly=online.scholarly)


@dataclass(slots=True)
class Reviews:
    """Reviews of one manuscript's paragraphs, started one task per paragraph so a front end can cancel one
    (the editor does when its paragraph is edited)."""

    context: ReviewContext
    llm: LLMClient
    options: ReviewOptions

    @classmethod
    async def prepare(
        cls, manuscript: Manuscript, llm: LLMClient, options: ReviewOptions, literature: Literature
    ) -> Reviews:
        return cls(await ReviewContext.build(manuscript, literature), llm, options)

    def reviewable(self, paragraphs: Sequence[Paragraph]) -> list[Paragraph]:
        return [paragraph for paragraph in paragraphs if reviewable(paragraph, self.options)]

    def start(self, paragraph: Paragraph) -> ReviewTask:
        return asyncio.ensure_future(review_paragraph(paragraph, self.context, self.llm, self.options))


@dataclass(slots=True)
class Followed:
    """What became of the reviews followed: results in the order of the tasks (None for a review that was
    cancelled or raised), how many completed (the reviewer answered), and unexpected errors (bugs)."""

    results: list[ParagraphReview | None]
    completed: int = 0
    errors: list[BaseException] = field(default_factory=list)


async def follow(
    tasks: Sequence[ReviewTask],
    progress: Progress,
    on_result: Callable[[ParagraphReview], Awaitable[None] | None] | None = None,
    stop_on_error: bool = False,
) -> Followed:
    """Wait for the reviews, reporting progress as each ends and passing each result to `on_result`. A review
    cancelled on its own (its paragraph was edited) does not stop the others, nor does one that raised (it is
    logged) unless `stop_on_error`: then the rest are cancelled and the caller raises the error. Cancelling
    the caller cancels them all, also while the progress is starting."""
    total = len(tasks)
    followed = Followed([None] * total)
    position = {task: index for index, task in enumerate(tasks)}
    done = 0
    pending = set(tasks)
    try:
        await progress.begin(f"Reviewing 0/{total} paragraphs", total)
        while pending and not (stop_on_error and followed.errors):
            # Cancelling the caller raises here, and `finally` stops every review.
            finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(finished, key=position.__getitem__):
                done += 1
                result = _result(task, followed, log_errors=not stop_on_error)
                if result is not None:
                    followed.results[position[task]] = result
                    for failure in result.failures:
                        log.debug("review of %s: %s", result.paragraph_id, failure)
                    if result.completed:  # a review whose reviewer failed is tried again next time
                        followed.completed += 1
                    if on_result is not None:
                        outcome = on_result(result)
                        if outcome is not None:
                            await outcome
                progress.step(f"Reviewing {done}/{total} paragraphs", done)
    finally:
        for task in tasks:
            task.cancel()  # no-op for finished ones; stops the rest if we are leaving early
        progress.end(f"Reviewed {followed.completed}/{total} paragraphs")
    return followed


def _result(task: ReviewTask, followed: Followed, log_errors: bool) -> ParagraphReview | None:
    """A finished review's result; None when it was cancelled on its own (its paragraph was edited) or raised (a
    bug in one review must not stop the others or reach the editor: it is kept in `errors`, and logged unless
    the caller raises it)."""
    if task.cancelled():
        return None
    error = task.exception()
    if error is not None:
        if log_errors:
            log.error("a paragraph review failed", exc_info=error)
        followed.errors.append(error)
        return None
    return task.result()

"""Rewrites for both front ends: simplify chosen paragraphs (either method), write a lay article, and keep the
agents' transcript. Results are domain objects; applying or printing them is the front end's job."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from margin.workflows.registry import AGENTSIMP, JREL
from margin.workflows.rewrite import jrel
from margin.workflows.rewrite.edits import Target, targets_in
from margin.workflows.rewrite.simplify import simplify_targets
from margin.workflows.rewrite.transcript import Transcript
from margin.workflows.rewrite.types import Rewrite, RewriteStatus, StepCallback, no_steps

if TYPE_CHECKING:
    from margin.workflows.llm.client import LLMClient
    from margin.workflows.manuscript.model import Manuscript

    from ..settings import Settings

log = logging.getLogger("margin.rewrites")

DOCUMENT_MIN_WORDS = 8  # shorter paragraphs (headings turned list items, one-liners) are left alone
TRANSCRIPT_FOLDER = Path(".margin") / "transcripts"


def document_targets(manuscript: Manuscript, uri: str) -> list[Target]:
    """The paragraphs of one file that "simplify document" rewrites."""
    return targets_in(manuscript, uri, DOCUMENT_MIN_WORDS)


def simplify_method(settings: Settings, single: bool, chosen: str | None = None) -> str:
    """The method to use: the one chosen, else the setting for one paragraph and AgentSimp for a document."""
    if chosen:
        return chosen
    return str(settings.simplify.paragraph_method) if single else AGENTSIMP


def simplify_transcript(method: str, settings: Settings) -> Transcript:
    return Transcript(method, settings.section("simplify"))


def lay_transcript(settings: Settings, iterations: int | None = None) -> Transcript:
    record = settings.section("lay")
    if iterations is not None:
        record["lay.iterations"] = iterations
    return Transcript(JREL, record)


@dataclass(frozen=True, slots=True)
class Simplified:
    targets: list[Target]
    rewrites: list[Rewrite]
    transcript: Transcript

    @property
    def changed(self) -> list[tuple[Target, Rewrite]]:
        return [
            (target, rewrite)
            for target, rewrite in zip(self.targets, self.rewrites, strict=True)
            if rewrite.changed
        ]

    def with_status(self, status: RewriteStatus) -> list[tuple[Target, Rewrite]]:
        return [
            (target, rewrite)
            for target, rewrite in zip(self.targets, self.rewrites, strict=True)
            if rewrite.status is status
        ]

    @property
    def gave_up(self) -> bool:
        """Nothing changed, and some paragraph was refused or failed (rather than needing nothing)."""
        return not self.changed and any(
            rewrite.status in (RewriteStatus.REFUSED, RewriteStatus.FAILED) for rewrite in self.rewrites
        )


async def simplify(
    manuscript: Manuscript,
    targets: list[Target],
    method: str,
    settings: Settings,
    llm: LLMClient,
    on_step: StepCallback = no_steps,
    transcript: Transcript | None = None,
) -> Simplified:
    """Simplify `targets` of `manuscript` by `method`; one Rewrite per target, and the agents' transcript (pass
    one to keep what was said even if the run is cancelled)."""
    transcript = transcript if transcript is not None else simplify_transcript(method, settings)
    rewrites = await simplify_targets(
        targets,
        method,
        manuscript,
        llm,
        soms_options=settings.soms_options(),
        agentsimp_options=settings.agentsimp_options(),
        transcript=transcript,
        on_step=on_step,
    )
    return Simplified(targets, rewrites, transcript)


@dataclass(frozen=True, slots=True)
class LayRun:
    article: jrel.LayArticle
    transcript: Transcript

    def text(self, manuscript_name: str) -> str:
        return jrel.render_article(self.article, manuscript_name)


async def lay_article(
    manuscript: Manuscript,
    settings: Settings,
    llm: LLMClient,
    on_step: StepCallback = no_steps,
    iterations: int | None = None,
    transcript: Transcript | None = None,
) -> LayRun:
    """A lay article about `manuscript` (JRE-L's journalist, reader and editor), with its transcript."""
    options = settings.lay_options()
    if iterations is not None:
        options.iterations = iterations
    transcript = transcript if transcript is not None else lay_transcript(settings, iterations)
    article = await jrel.write_lay_article(manuscript, llm, options, transcript=transcript, on_step=on_step)
    return LayRun(article, transcript)


def lay_article_path(manuscript_path: Path) -> Path:
    """Where a lay article is written when no file is named: beside the manuscript."""
    return jrel.article_path(manuscript_path)


def save_transcript(transcript: Transcript, folder: Path, stem: str) -> Path | None:
    """Keep a transcript as a new file in `folder` (the editor's .margin/transcripts); None, after logging
    why, when it cannot be written: a transcript is a record, never a reason to lose the rewrite."""
    try:
        saved = transcript.save(folder, stem)
    except OSError as error:
        log.warning("cannot save the transcript in %s: %s", folder, error)
        return None
    log.info("transcript saved to %s", saved)
    return saved

"""Simplify chosen paragraphs of a manuscript by either method: what the editor's actions and the CLI share."""

from __future__ import annotations

import asyncio

from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.types import Priority
from margin.workflows.manuscript.model import Manuscript
from margin.workflows.registry import AGENTSIMP as AGENTSIMP
from margin.workflows.registry import SOMS as SOMS

from . import agentsimp, soms
from .edits import Target
from .transcript import Transcript
from .types import Rewrite, StepCallback, no_steps


def document_text(manuscript: Manuscript) -> str:
    """The manuscript's prose, for the agents that read the whole document (AgentSimp's director and analyst)."""
    return "\n\n".join(paragraph.text for paragraph in manuscript.paragraphs)


async def simplify_targets(
    targets: list[Target],
    method: str,
    manuscript: Manuscript,
    llm: LLMClient,
    *,
    soms_options: soms.SomsOptions | None = None,
    agentsimp_options: agentsimp.AgentSimpOptions | None = None,
    transcript: Transcript | None = None,
    on_step: StepCallback = no_steps,
    priority: Priority = Priority.INTERACTIVE,
) -> list[Rewrite]:
    """One Rewrite per target, in order. AgentSimp treats the targets as one document; the Society of Medical
    Simplifiers works on each paragraph on its own, all of them concurrently."""
    if not targets:
        return []
    language = targets[0].language
    if method == AGENTSIMP:
        return await agentsimp.simplify_document(
            [target.source for target in targets],
            language,
            llm,
            agentsimp_options,
            document=document_text(manuscript),
            transcript=transcript,
            on_step=on_step,
            priority=priority,
        )
    return list(
        await asyncio.gather(
            *(
                soms.simplify_paragraph(
                    target.source,
                    language,
                    llm,
                    soms_options,
                    transcript=transcript,
                    on_step=on_step,
                    priority=priority,
                )
                for target in targets
            )
        )
    )

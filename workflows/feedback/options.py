"""Focused feedback's options.

The settings table (margin.server.settings) takes its defaults for the review knobs from ReviewOptions, so this
module is imported by every command and by the server's start: it imports neither the pipeline nor the plan
scorer nor the fuzzy matcher (rapidfuzz). Those two defaults are made when options are, which is when a review
is about to run. margin.workflows.feedback.pipeline re-exports ReviewOptions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from margin.workflows.llm.types import Priority

from .types import Mode

if TYPE_CHECKING:
    from .plans import PlanScorer


def _fuzzy_threshold() -> float:
    from .quotes import FUZZY_THRESHOLD

    return FUZZY_THRESHOLD


def _heuristic_scorer() -> PlanScorer:
    from .plans import HeuristicPlanScorer

    return HeuristicPlanScorer()


@dataclass
class ReviewOptions:
    mode: Mode = Mode.FULL
    candidates: int = 3  # plans generated; the best by the scorer is run
    max_questions: int = 8
    passages: int = 5  # retrieved per question, as in the paper
    judge: bool = False  # also let a model rate the candidate plans
    min_words: int = 25  # shorter paragraphs are not reviewed
    max_findings: int = 1  # as in the paper, which notes that models invent weaknesses when asked for several
    priority: Priority = Priority.BACKGROUND
    fuzzy_threshold: float = field(default_factory=_fuzzy_threshold)  # quotes.FUZZY_THRESHOLD
    scorer: PlanScorer = field(default_factory=_heuristic_scorer)  # plans.HeuristicPlanScorer()


__all__ = ["ReviewOptions"]

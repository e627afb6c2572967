"""Review plans and how to choose among candidates.

SWIF2T ranks candidate plans with a BERT re-ranker trained for structure, coherence and specificity; its
weights are not public. PlanScorer is the seam where such a model can plug in; HeuristicPlanScorer scores the
same three criteria with transparent checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from .types import MAX_QUESTION_CHARS

PAPER = "paper_question"
LITERATURE = "literature_question"
REVIEW = "review"
SKIP = "skip"
KNOWN_ACTIONS = (PAPER, LITERATURE, REVIEW)
MAX_STEPS = 12
_MAX_ACTION_CHARS = 40  # the known actions are short names; a longer one is unknown whatever it says

PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "steps": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_STEPS,
            "items": {
                "type": "object",
                "properties": {"action": {"type": "string"}, "question": {"type": "string"}},
                "required": ["action"],
            },
        }
    },
    "required": ["steps"],
}

_STOPWORDS = frozenset(
    "a an the of in on for to and or is are was were be been by with as at from that this these those it its "
    "we our their they which what how why when where who whom whose does do did can could should would may "
    "might will there than then into over under about between paper paragraph study work authors method "
    "methods result results used use using".split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]{2,}")


@dataclass(frozen=True, slots=True)
class Step:
    action: str
    question: str = ""


@dataclass(frozen=True, slots=True)
class Plan:
    steps: tuple[Step, ...]

    @classmethod
    def from_json(cls, data: Any) -> Plan:
        """The plan a planner wrote: its first MAX_STEPS steps, read without looking further into the list.
        A step whose question is past MAX_QUESTION_CHARS keeps its action without the question (a runaway
        question is no search query), which leaves it out of the executable plan."""
        steps: list[Step] = []
        listed = data.get("steps") if isinstance(data, dict) else None
        for item in listed if isinstance(listed, list) else []:
            if len(steps) == MAX_STEPS:
                break
            if isinstance(item, dict):
                action = str(item.get("action", ""))[:_MAX_ACTION_CHARS].strip().lower().replace(" ", "_")
                question = str(item.get("question", "") or "").strip()
                steps.append(Step(action, question if len(question) <= MAX_QUESTION_CHARS else ""))
        return cls(tuple(steps))

    def to_json(self) -> list[dict[str, str]]:
        return [{"action": step.action, "question": step.question} for step in self.steps]

    @property
    def questions(self) -> list[Step]:
        return [step for step in self.steps if step.action in (PAPER, LITERATURE)]

    def executable(self) -> Plan:
        """The plan as it will run: known question steps in order, then exactly one review step."""
        return Plan((*(step for step in self.questions if step.question), Step(REVIEW)))


@dataclass(frozen=True, slots=True)
class PlanScore:
    total: float
    checks: dict[str, float] = field(default_factory=dict)


class PlanScorer(Protocol):
    def score(self, paragraph: str, plan: Plan) -> PlanScore: ...


def content_words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text) if word.lower() not in _STOPWORDS}


class HeuristicPlanScorer:
    """Structure (parseable, known actions, a final review, paper before literature), coherence (well-formed,
    self-contained, distinct questions, a sensible number of them) and specificity (questions name concepts
    of the paragraph). Each check is in [0, 1]; the total is their weighted mean."""

    WEIGHTS: ClassVar[dict[str, float]] = {
        "parseable": 2.0,
        "known_actions": 2.0,
        "ends_with_review": 1.0,
        "paper_first": 0.5,
        "well_formed": 1.0,
        "self_contained": 1.0,
        "distinct": 1.0,
        "length": 0.5,
        "specific": 2.0,
    }

    def score(self, paragraph: str, plan: Plan) -> PlanScore:
        steps = plan.steps
        questions = [step for step in steps if step.action in (PAPER, LITERATURE)]
        checks: dict[str, float] = {"parseable": 1.0 if steps else 0.0}
        checks["known_actions"] = (
            sum(step.action in KNOWN_ACTIONS for step in steps) / len(steps) if steps else 0.0
        )
        checks["ends_with_review"] = 1.0 if steps and steps[-1].action == REVIEW else 0.0
        order = [step.action for step in questions]
        first_literature = order.index(LITERATURE) if LITERATURE in order else len(order)
        checks["paper_first"] = 0.0 if PAPER in order[first_literature:] else 1.0
        texts = [step.question for step in questions]
        checks["well_formed"] = _mean(text.endswith("?") and len(text.split()) >= 4 for text in texts)
        checks["self_contained"] = _mean(
            not re.match(r"(?i)(it|this|that|they|these|those)\b", text) for text in texts
        )
        normalized = [" ".join(sorted(content_words(text))) for text in texts]
        checks["distinct"] = len(set(normalized)) / len(normalized) if normalized else 0.0
        checks["length"] = 1.0 if 3 <= len(questions) <= 8 else (0.5 if questions else 0.0)
        concepts = content_words(paragraph)
        checks["specific"] = _mean(bool(content_words(text) & concepts) for text in texts)
        total = sum(self.WEIGHTS[name] * value for name, value in checks.items()) / sum(self.WEIGHTS.values())
        return PlanScore(round(total, 4), checks)


def _mean(values: Any) -> float:
    items = [1.0 if value else 0.0 for value in values]
    return sum(items) / len(items) if items else 0.0


def best_plan(paragraph: str, plans: list[Plan], scorer: PlanScorer) -> tuple[Plan, PlanScore] | None:
    scored = [(plan, scorer.score(paragraph, plan)) for plan in plans]
    scored = [item for item in scored if item[0].questions]
    if not scored:
        return None
    return max(scored, key=lambda item: item[1].total)

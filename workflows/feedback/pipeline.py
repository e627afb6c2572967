"""Focused feedback for paragraphs: SWIF2T's plan, control, investigate, review loop, as plain async functions.

Modes: full (best of k plans, a controller deciding each step, paper and literature questions, the reviewer),
fast (one reviewer call with context retrieved from the paper) and single (the reviewer alone). Every model
failure is typed and handled here: a step that fails is skipped and recorded, never raised.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from rapidfuzz import fuzz

from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.types import LLMError
from margin.workflows.manuscript.model import Manuscript, Paragraph, ParagraphKind
from margin.workflows.prompts import prompt

from . import agents
from .literature import Literature
from .options import ReviewOptions
from .plans import LITERATURE, PAPER, REVIEW, SKIP, Plan, PlanScorer, Step, best_plan
from .quotes import locate_quote
from .retrieval import PassageIndex, manuscript_passages, numbered_context
from .types import (
    MAX_EVIDENCE_CHARS,
    MAX_LABEL_CHARS,
    MAX_QUESTION_CHARS,
    MAX_REASONING_CHARS,
    MAX_REVIEW_CHARS,
    RETRIEVED_CONTEXT,
    Evidence,
    Finding,
    Mode,
    ParagraphReview,
    Source,
    WeaknessType,
    shortened,
)

log = logging.getLogger("margin.feedback")

REVIEWED_KINDS = frozenset({ParagraphKind.PARAGRAPH, ParagraphKind.LIST_ITEM})
# Findings of one answer that are read (review.maxFindings is at most 3; the rest leave room for invalid ones):
# each is matched against the paragraph, so an answer listing thousands must not cost thousands of searches.
FINDINGS_READ = 10
_PROBLEMS_TOLD = 5  # problems quoted back to the model in a repair request, and kept as dropped
# Validating findings against a paragraph longer than this (times the findings) runs in a worker thread.
_OFFLOAD_WORK = 20_000


@dataclass
class ReviewContext:
    """What every paragraph's review of one manuscript version shares: the passage index and the literature."""

    manuscript: Manuscript
    index: PassageIndex
    literature: Literature

    @classmethod
    async def build(cls, manuscript: Manuscript, literature: Literature | None = None) -> ReviewContext:
        index = await asyncio.to_thread(PassageIndex, manuscript_passages(manuscript))
        return cls(manuscript, index, literature or Literature())


def reviewable(paragraph: Paragraph, options: ReviewOptions) -> bool:
    return paragraph.kind in REVIEWED_KINDS and len(paragraph.text.split()) >= options.min_words


async def review_paragraph(
    paragraph: Paragraph,
    context: ReviewContext,
    llm: LLMClient,
    options: ReviewOptions | None = None,
) -> ParagraphReview:
    """Review one paragraph. Cancelling the task cancels its model calls (and closes their requests)."""
    options = options or ReviewOptions()
    result = ParagraphReview(paragraph.id, options.mode, text=paragraph.text)
    with llm.measure() as usage:
        if options.mode is Mode.FULL:
            await _gather_full(paragraph, context, llm, options, result)
            review_context = agents.evidence_context(result.evidence)
        elif options.mode is Mode.FAST:
            passages = context.index.search(paragraph.text, options.passages, exclude_paragraph=paragraph.id)
            result.evidence = [Evidence(RETRIEVED_CONTEXT, "", Source.PAPER, tuple(passages))]
            review_context = numbered_context(passages)
        else:
            review_context = ""
        await _review(paragraph, review_context, llm, options, result)
    result.usage = usage
    return result


async def _gather_full(
    paragraph: Paragraph,
    context: ReviewContext,
    llm: LLMClient,
    options: ReviewOptions,
    result: ParagraphReview,
) -> None:
    plan = await _choose_plan(paragraph, llm, options, result)
    if plan is None:
        return
    result.plan = plan.to_json()
    remaining = [step for step in plan.steps if step.action != REVIEW]
    if not context.literature.available_for(paragraph):
        # No cited entry, library or web search to read: such questions could only be answered "I don't know",
        # so neither the controller nor the investigator is asked about them.
        remaining = [step for step in remaining if step.action != LITERATURE]
    asked = 0
    while remaining and asked < options.max_questions:
        step = remaining[0]
        try:
            decision = await agents.control(llm, paragraph.text, result.evidence, remaining, options.priority)
        except LLMError as failure:
            result.failures.append(str(failure))
            decision = agents.Decision(
                step.action, step.question, "controller unavailable: run the step as planned"
            )
        if decision.action == REVIEW:
            break
        remaining = remaining[1:]
        if decision.action == SKIP:
            continue
        question = decision.question or step.question
        if len(question) > MAX_QUESTION_CHARS:
            question = step.question  # a controller's runaway question is no search query
        if not question:
            continue
        asked += 1
        evidence = await _investigate(paragraph, context, llm, options, decision.action, question, result)
        if evidence is not None:
            result.evidence.append(evidence)


async def _choose_plan(
    paragraph: Paragraph, llm: LLMClient, options: ReviewOptions, result: ParagraphReview
) -> Plan | None:
    try:
        plans, failures = await agents.plans(
            llm, paragraph.text, max(1, options.candidates), options.priority
        )
    except LLMError as failure:
        plans, failures = [], [failure]
    result.failures.extend(str(failure) for failure in failures)
    scorer = options.scorer
    if options.judge and len(plans) > 1:
        try:
            ratings = await agents.judge(llm, paragraph.text, plans, options.priority)
            scorer = _JudgedScorer(options.scorer, dict(zip(map(id, plans), ratings, strict=True)))
        except LLMError as failure:
            result.failures.append(str(failure))
    chosen = best_plan(paragraph.text, plans, scorer)
    if chosen is None:
        result.failures.append("planner: no usable plan; reviewing with the paragraph alone")
        return None
    return chosen[0].executable()


@dataclass
class _JudgedScorer:
    heuristics: PlanScorer
    ratings: dict[int, float]

    def score(self, paragraph: str, plan: Plan):  # type: ignore[no-untyped-def]
        base = self.heuristics.score(paragraph, plan)
        judged = self.ratings.get(id(plan), 0.0)
        return type(base)(round((base.total + judged) / 2, 4), {**base.checks, "judge": judged})


async def _investigate(
    paragraph: Paragraph,
    context: ReviewContext,
    llm: LLMClient,
    options: ReviewOptions,
    action: str,
    question: str,
    result: ParagraphReview,
) -> Evidence | None:
    if action == PAPER:
        passages = context.index.search(question, options.passages, exclude_paragraph=paragraph.id)
        source = Source.PAPER
    elif action == LITERATURE:
        passages = await context.literature.search(question, paragraph, options.passages)
        source = Source.LITERATURE
    else:
        return None
    try:
        evidence = await agents.investigate(llm, question, passages, source, options.priority)
    except LLMError as failure:
        result.failures.append(str(failure))
        return None
    if evidence is None or len(evidence.answer) <= MAX_EVIDENCE_CHARS:
        return evidence
    # The answer goes into the reviewer's prompt and the finding's hover: a runaway one is shortened.
    return replace(evidence, answer=shortened(evidence.answer, MAX_EVIDENCE_CHARS))


async def _review(
    paragraph: Paragraph, review_context: str, llm: LLMClient, options: ReviewOptions, result: ParagraphReview
) -> None:
    messages = agents.review_messages(paragraph.text, review_context, options.max_findings)
    try:
        raw, answer = await agents.review(
            llm, paragraph.text, messages, options.max_findings, options.priority
        )
    except LLMError as failure:
        result.failures.append(str(failure))
        return
    result.completed = True
    findings, problems = await _validated(raw, paragraph, options, result.evidence)
    if problems:
        # One repair request that says exactly what was wrong; what is still wrong after it is dropped.
        repair = [
            *messages,
            {"role": "assistant", "content": answer[:6000]},
            {
                "role": "user",
                "content": "Some findings cannot be used: "
                + _listed(problems)
                + ". Reply again with all your findings. Copy each quote character for character from the "
                "paragraph, and use only the five labels.",
            },
        ]
        try:
            completion = await llm.complete(
                agents.review_request(paragraph.text, repair, options.max_findings, options.priority)
            )
            findings, problems = await _validated(
                list(completion.data.get("findings", [])), paragraph, options, result.evidence
            )
        except LLMError as failure:
            result.failures.append(str(failure))
        result.dropped.extend(problems[:_PROBLEMS_TOLD])
    result.findings = _distinct(findings)[: options.max_findings]
    result.no_weakness = not raw and not problems


@lru_cache(maxsize=1)
def _example_reviews() -> tuple[str, ...]:
    return tuple(re.findall(r'"review": "([^"]+)"', prompt("reviewer_examples")))


def copied_from_examples(review_text: str) -> bool:
    """Small models copy the in-context examples; such a review is about another paragraph."""
    if len(review_text) < 30:
        return False
    return any(fuzz.partial_ratio(review_text, example) >= 90 for example in _example_reviews())


def _listed(problems: list[str]) -> str:
    """The first few problems, and how many more there were."""
    told = "; ".join(problems[:_PROBLEMS_TOLD])
    more = len(problems) - _PROBLEMS_TOLD
    return told + (f"; and {more} more" if more > 0 else "")


async def _validated(
    raw: Sequence[Any], paragraph: Paragraph, options: ReviewOptions, evidence: list[Evidence]
) -> tuple[list[Finding], list[str]]:
    """_validate, in a worker thread when the quote searches may take a while (a long paragraph)."""
    if len(paragraph.text) * min(len(raw), FINDINGS_READ) <= _OFFLOAD_WORK:
        return _validate(raw, paragraph, options, evidence)
    return await asyncio.to_thread(_validate, raw, paragraph, options, evidence)


def _validate(
    raw: Sequence[Any], paragraph: Paragraph, options: ReviewOptions, evidence: list[Evidence]
) -> tuple[list[Finding], list[str]]:
    """The usable findings of an answer, and what is wrong with the others. Reads at most FINDINGS_READ of them,
    and refuses fields past their bounds before searching for anything."""
    findings: list[Finding] = []
    problems: list[str] = []
    for number, item in enumerate(raw[:FINDINGS_READ], start=1):
        if not isinstance(item, dict):
            problems.append(f"finding {number} is not an object")
            continue
        given_label = item.get("label", "")
        label = _label(given_label)
        quote = _text(item.get("quote", ""))
        review_text = _text(item.get("review", "")).strip()
        if label is None:
            problems.append(f"finding {number}: {_preview(given_label)} is not one of the five labels")
            continue
        if not review_text:
            problems.append(f"finding {number} has no review text")
            continue
        if len(review_text) > MAX_REVIEW_CHARS:
            problems.append(
                f"finding {number}: the review is {len(review_text)} characters long; write at most "
                f"{MAX_REVIEW_CHARS}"
            )
            continue
        if copied_from_examples(review_text):
            problems.append(f"finding {number} repeats an example review instead of reviewing this paragraph")
            continue
        match = locate_quote(quote, paragraph.text, options.fuzzy_threshold)
        if match is None:
            problems.append(
                f"finding {number}: the quote {json.dumps(quote[:200], ensure_ascii=False)} is not in the paragraph"
            )
            continue
        findings.append(
            Finding(
                paragraph_id=paragraph.id,
                label=label,
                quote=paragraph.text[match.start : match.end],
                review=review_text,
                reasoning=shortened(_text(item.get("reasoning", "")).strip(), MAX_REASONING_CHARS),
                start=match.start,
                end=match.end,
                evidence=tuple(evidence),
                match=match.how,
            )
        )
    if len(raw) > FINDINGS_READ:
        problems.append(f"the answer lists {len(raw)} findings; only the first {FINDINGS_READ} were read")
    return findings, problems


def _text(value: Any) -> str:
    """A string field as the model gave it; anything else (a number, a nested value) as its short JSON."""
    if isinstance(value, str):
        return value
    return shortened(json.dumps(value, ensure_ascii=False, default=str), MAX_LABEL_CHARS)


def _label(value: Any) -> WeaknessType | None:
    text = _text(value)
    return WeaknessType.parse(text) if len(text) <= MAX_LABEL_CHARS else None


def _preview(value: Any) -> str:
    return repr(shortened(_text(value), 60))


def _distinct(findings: list[Finding]) -> list[Finding]:
    """One finding per place: a model that gives one span (or most of it) several labels has not decided."""
    kept: list[Finding] = []
    for finding in findings:
        if not any(_overlap(finding, other) for other in kept):
            kept.append(finding)
    return kept


def _overlap(one: Finding, other: Finding) -> bool:
    shared = min(one.end, other.end) - max(one.start, other.start)
    return shared > 0 and shared >= 0.5 * min(one.end - one.start, other.end - other.start)


Progress = Callable[[int, int, ParagraphReview], Awaitable[None] | None]


async def review_manuscript(
    manuscript: Manuscript,
    llm: LLMClient,
    options: ReviewOptions | None = None,
    paragraphs: Sequence[Paragraph] | None = None,
    literature: Literature | None = None,
    progress: Progress | None = None,
) -> list[ParagraphReview]:
    """Review paragraphs concurrently (the LLM layer's limiter bounds the requests in flight)."""
    options = options or ReviewOptions()
    chosen = [
        p for p in (paragraphs if paragraphs is not None else manuscript.paragraphs) if reviewable(p, options)
    ]
    context = await ReviewContext.build(manuscript, literature)
    done = 0
    results: list[ParagraphReview | None] = [None] * len(chosen)

    async def one(index: int, paragraph: Paragraph) -> None:
        nonlocal done
        results[index] = await review_paragraph(paragraph, context, llm, options)
        done += 1
        if progress is not None:
            outcome = progress(done, len(chosen), results[index])  # type: ignore[arg-type]
            if asyncio.iscoroutine(outcome):
                await outcome

    async with asyncio.TaskGroup() as group:  # an unexpected error (a bug) cancels the rest, not hangs
        for index, paragraph in enumerate(chosen):
            group.create_task(one(index, paragraph))
    return [result for result in results if result is not None]


__all__ = ["ReviewContext", "ReviewOptions", "Step", "review_manuscript", "review_paragraph", "reviewable"]

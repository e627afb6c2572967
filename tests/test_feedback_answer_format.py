"""What the agents are asked to write, as the endpoint receives it: the reviewer's findings are valid by
construction (quotes among the paragraph's own sentences and clauses, labels among the five), reasoning comes
before the verdict, one finding per paragraph unless the setting asks for more, key order survives into the
prompt, and the planner names the five aspects."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from margin.server.settings import parse_settings
from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule
from margin.workflows.feedback.agents import REVIEW_SCHEMA
from margin.workflows.feedback.literature import Literature
from margin.workflows.feedback.pipeline import ReviewContext, ReviewOptions, review_paragraph, reviewable
from margin.workflows.feedback.quotes import quote_spans
from margin.workflows.feedback.types import Mode, WeaknessType
from margin.workflows.llm.types import StructuredMode
from margin.workflows.manuscript.model import Manuscript, Paragraph
from margin.workflows.prompts import prompt

from conftest import (
    ClientFactory,
    ScriptedFactory,
    feedback_llm_config,
    finding_json,
    paragraph_starting,
    review_reply,
    without_nagle,
)

TARGET = "Second, we add a regularizer that pulls term weights"


@pytest.fixture(scope="module")
def context(paper: Manuscript) -> ReviewContext:
    async def build() -> ReviewContext:
        return await ReviewContext.build(paper, await Literature.gather(paper))

    return asyncio.run(build())


@pytest.fixture
def target(paper: Manuscript) -> Paragraph:
    return paragraph_starting(paper, TARGET)


def sent_schema(request: RecordedRequest) -> dict[str, Any]:
    response_format = request.body["response_format"]
    return dict(response_format["json_schema"]["schema"])


async def review_once(
    scripted: ScriptedFactory,
    llm_clients: ClientFactory,
    tmp_path: Path,
    paragraph: Paragraph,
    context: ReviewContext,
    reply: Reply,
    **options: Any,
) -> tuple[RecordedRequest, Any]:
    endpoint = without_nagle(scripted(Rule(role="reviewer", replies=[reply])))
    client = llm_clients(feedback_llm_config(endpoint, tmp_path))
    result = await review_paragraph(paragraph, context, client, ReviewOptions(mode=Mode.SINGLE, **options))
    (request,) = endpoint.calls("reviewer")
    return request, result


# -- the spans a quote may be -------------------------------------------------------------------------------------


def test_quote_spans_are_the_sentences_then_the_clauses_copied_exactly() -> None:
    text = (
        "We prune each posting list to a fixed budget, e.g. 128 terms, per section; this keeps the index small. "
        "Results improve by 4.2 points [citation] over BM25 (Fig. 3): the baseline is weak. Finally we stop."
    )
    spans = quote_spans(text)
    assert spans[:3] == [
        "We prune each posting list to a fixed budget, e.g. 128 terms, per section; this keeps the index small.",
        "Results improve by 4.2 points [citation] over BM25 (Fig. 3): the baseline is weak.",
        "Finally we stop.",
    ]  # no break after "e.g." or "Fig."
    assert "We prune each posting list to a fixed budget" in spans and "the baseline is weak." in spans
    assert all(span in text for span in spans) and len(spans) == len(set(spans))
    assert all(len(span.split()) >= 2 for span in spans)


def test_every_fixture_paragraph_has_spans_that_are_its_own_text(paper: Manuscript) -> None:
    for paragraph in paper.paragraphs:
        spans = quote_spans(paragraph.text)
        assert all(span in paragraph.text for span in spans)
        if len(paragraph.text.split()) >= 5:
            assert spans, paragraph.text


# -- the reviewer's answer format ---------------------------------------------------------------------------------


async def test_the_reviewer_is_constrained_to_its_paragraphs_spans_and_the_five_labels_reasoning_first(
    scripted: ScriptedFactory,
    llm_clients: ClientFactory,
    tmp_path: Path,
    target: Paragraph,
    context: ReviewContext,
) -> None:
    spans = quote_spans(target.text)
    request, result = await review_once(
        scripted, llm_clients, tmp_path, target, context, review_reply(finding_json(spans[0]))
    )
    schema = sent_schema(request)
    findings = schema["properties"]["findings"]
    finding = findings["items"]
    assert list(finding["properties"]) == ["reasoning", "quote", "label", "review"]
    assert finding["required"] == ["reasoning", "quote", "label", "review"]
    assert finding["properties"]["quote"]["enum"] == spans
    assert finding["properties"]["label"]["enum"] == [member.value for member in WeaknessType]
    assert findings["maxItems"] == 1  # one finding per paragraph by default, as in the paper
    # The prompt shows the same schema in the same order, and asks for one weakness.
    system = request.body["messages"][0]["content"]
    assert system.index('"reasoning"') < system.index('"quote"') < system.index('"label"')
    assert "Report only the most important weakness" in system
    assert result.completed and [finding.quote for finding in result.findings] == [spans[0]]


async def test_more_findings_only_when_the_setting_asks_and_never_more_than_it_allows(
    scripted: ScriptedFactory,
    llm_clients: ClientFactory,
    tmp_path: Path,
    target: Paragraph,
    context: ReviewContext,
) -> None:
    apart: list[str] = []  # spans that do not overlap (a sentence and its own clause would be one place)
    for span in quote_spans(target.text):
        start = target.text.find(span)
        if all(
            start >= other_end or start + len(span) <= other_start
            for other_start, other_end in (
                (target.text.find(other), target.text.find(other) + len(other)) for other in apart
            )
        ):
            apart.append(span)
    assert len(apart) == 2
    two = review_reply(*(finding_json(span) for span in apart))
    request, result = await review_once(scripted, llm_clients, tmp_path, target, context, two)
    assert len(result.findings) == 1  # an endpoint that did not enforce maxItems: the first one only

    settings, problems = parse_settings({"review": {"maxFindings": 3}})
    assert problems == []
    request, result = await review_once(
        scripted,
        llm_clients,
        tmp_path / "three",
        target,
        context,
        two,
        max_findings=settings.review_options().max_findings,
    )
    assert sent_schema(request)["properties"]["findings"]["maxItems"] == 3
    assert "Report at most 3 weaknesses" in request.body["messages"][0]["content"]
    assert [finding.quote for finding in result.findings] == apart
    _, problems = parse_settings({"review": {"maxFindings": 4}})
    assert problems and "maxFindings" in problems[0]


async def test_an_explicit_no_weakness_answer_is_kept(
    scripted: ScriptedFactory,
    llm_clients: ClientFactory,
    tmp_path: Path,
    target: Paragraph,
    context: ReviewContext,
) -> None:
    _, result = await review_once(scripted, llm_clients, tmp_path, target, context, review_reply())
    assert result.completed and result.no_weakness and result.findings == []


async def test_a_text_mode_endpoint_is_shown_the_spans_and_still_gets_the_tolerant_checks(
    scripted: ScriptedFactory,
    llm_clients: ClientFactory,
    tmp_path: Path,
    target: Paragraph,
    context: ReviewContext,
) -> None:
    phrase = " ".join(target.text.split()[2:8])  # a phrase inside a sentence: not a span, still real text
    endpoint = without_nagle(scripted(Rule(role="reviewer", replies=[review_reply(finding_json(phrase))])))
    client = llm_clients(feedback_llm_config(endpoint, tmp_path, structured_mode=StructuredMode.TEXT))
    result = await review_paragraph(target, context, client, ReviewOptions(mode=Mode.SINGLE))
    (request,) = endpoint.calls("reviewer")
    assert "response_format" not in request.body
    assert (
        json.dumps(quote_spans(target.text)[0], ensure_ascii=False) in request.body["messages"][0]["content"]
    )
    assert [finding.quote for finding in result.findings] == [phrase]


# -- the other agents' key order and the planner's aspects --------------------------------------------------------


def test_the_investigator_answers_before_saying_whether_it_could_and_the_controller_explains_first() -> None:
    from margin.workflows.feedback.agents import ANSWER_SCHEMA, CONTROLLER_SCHEMA
    from margin.workflows.llm.structured import schema_instructions

    answer = schema_instructions(ANSWER_SCHEMA)
    assert answer.index('"answer"') < answer.index('"answerable"')
    decision = schema_instructions(CONTROLLER_SCHEMA)
    assert decision.index('"explanation"') < decision.index('"action"')


def test_the_planner_names_the_five_aspects_and_asks_for_the_json_steps() -> None:
    planner = prompt("planner").lower()
    for aspect in ("replicability", "originality", "soundness", "meaningful comparison", "substance"):
        assert aspect in planner
    assert "numbered steps" not in planner and '"steps"' in planner


async def test_the_review_agents_system_prompts_do_not_depend_on_the_paragraph(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, paper: Manuscript
) -> None:
    """vLLM's prefix cache reuses what requests share from their first byte: every agent's system prompt (its
    instructions, examples and answer format) must be the same bytes for every paragraph, with the paragraph
    only in the user message. The reviewer's decoder schema lists the paragraph's clauses: it goes to the
    decoder, not into the prompt."""
    endpoint = without_nagle(scripted(Rule(role="reviewer", replies=[review_reply(finding_json("x"))])))
    client = llm_clients(feedback_llm_config(endpoint, tmp_path, structured_mode=StructuredMode.JSON_SCHEMA))
    options = ReviewOptions(mode=Mode.SINGLE)
    context = await ReviewContext.build(paper)
    first, second = [paragraph for paragraph in paper.paragraphs if reviewable(paragraph, options)][:2]
    for paragraph in (first, second):
        await review_paragraph(paragraph, context, client, options)
    one, two = (request.body["messages"] for request in endpoint.calls("reviewer")[:2])
    assert one[0]["content"] == two[0]["content"]
    assert first.text not in one[0]["content"] and quote_spans(first.text)[0] not in one[0]["content"]
    assert endpoint.calls("reviewer")[0].body["response_format"]["json_schema"]["schema"] != REVIEW_SCHEMA

"""AgentSimp (agentsimp.simplify_document) driven through a real scripted OpenAI-compatible server on loopback with
the real LLMClient: planning, the per-paragraph desk in pipeline or synchronous communication, the article
architect in direct or iterative combination (chunks that overlap by one paragraph), the proofreader last, and
what failures, wrong paragraph counts and dropped citations lead to.

Each paragraph starts with its own marker word (Alpha, Bravo...), so a per-paragraph request tells which paragraph
it is about. The response cache is off: every agent turn is one HTTP request the endpoint records.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from margin.testing.scripted_agents import plainer, rewrite_rules
from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule, ScriptedEndpoint
from margin.workflows.prompts import fence
from margin.workflows.rewrite.agentsimp import AgentSimpOptions, simplify_document
from margin.workflows.rewrite.transcript import Transcript
from margin.workflows.rewrite.types import Language, Rewrite, RewriteStatus

from conftest import (
    ClientFactory,
    ScriptedFactory,
    chat_requests_in_order,
    feedback_llm_config,
    final_user_message,
    llm_config,
)

PARAGRAPHS = [
    r"Alpha: consequently, the index is approximately twice as large \cite{a1}.",
    r"Bravo: we utilize numerous sparse terms in order to keep recall high $r>0.9$.",
    r"Charlie: however, the baseline is substantially weaker \cite{c3}.",
    r"Delta: additionally, the pruning step is noticeably cheaper, see \ref{tab:cost}.",
    r"Echo: therefore, we demonstrate the method on numerous reviews.",
]
MARKERS = [paragraph.split(":")[0] for paragraph in PARAGRAPHS]
PER_PARAGRAPH = ("simplifier", "supervisor", "metaphor_analyst", "terminology_interpreter", "integrator")
BLOCK = re.compile(r"^\[(\d+)\]\n`{3,}\n(.*?)\n`{3,}(?=\n\n\[\d+\]\n|\Z)", re.S | re.M)  # fenced paragraphs


def simplified(paragraph: str) -> str:
    """What the scripted pipeline makes of a paragraph: the simplifier and the terminology interpreter each swap one
    formal word for a plain one; the metaphor analyst finds nothing."""
    return plainer(plainer(paragraph))


class Desk:
    """One AgentSimp run on a scripted endpoint, and what it recorded."""

    def __init__(self, scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path) -> None:
        self.scripted = scripted
        self.llm_clients = llm_clients
        self.tmp_path = tmp_path
        self.endpoint: ScriptedEndpoint | None = None
        self.steps: list[str] = []
        self.transcript = Transcript("agentsimp")
        self.seconds = 0.0

    async def run(
        self,
        *rules: Rule,
        sources: Sequence[str] = PARAGRAPHS,
        latency: float = 0.0,
        base_url: str | None = None,
        context_tokens: int | None = None,
        **options: Any,
    ) -> list[Rewrite]:
        self.endpoint = self.scripted(
            *rules, *rewrite_rules(), latency=latency, context_tokens=context_tokens
        )
        if context_tokens is not None:  # the model is found by listing, with its context length, as on vLLM
            config = llm_config(
                self.endpoint.base_url, self.tmp_path / "cache.sqlite3", retries=0, cache_enabled=False
            )
        elif base_url is None:
            config = feedback_llm_config(self.endpoint, self.tmp_path, cache_enabled=False)
        else:
            config = llm_config(
                base_url,
                self.tmp_path / "cache.sqlite3",
                retries=0,
                cache_enabled=False,
                model="scripted-model",
            )
        client = self.llm_clients(config)
        started = time.monotonic()
        results = await simplify_document(
            list(sources),
            Language.LATEX,
            client,
            AgentSimpOptions(**options),
            transcript=self.transcript,
            on_step=self.steps.append,
        )
        self.seconds = time.monotonic() - started
        return results

    def requests(self, role: str | None = None) -> list[RecordedRequest]:
        assert self.endpoint is not None
        return [r for r in chat_requests_in_order(self.endpoint) if role is None or r.role == role]

    def about(self, marker: str) -> list[RecordedRequest]:
        """The per-paragraph requests about one paragraph, in the order they arrived."""
        return [r for r in self.requests() if r.role in PER_PARAGRAPH and marker in final_user_message(r)]

    def chunks(self, role: str = "architect") -> list[list[str]]:
        """The paragraphs each architect (or proofreader) call got, by their text."""
        return [
            [text for _, text in BLOCK.findall(final_user_message(r).split("paragraphs:\n\n", 1)[1])]
            for r in self.requests(role)
            if not final_user_message(r).startswith("That answer cannot be used")
        ]


@pytest.fixture
def desk(scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path) -> Desk:
    return Desk(scripted, llm_clients, tmp_path)


def markers_of(chunk: list[str]) -> list[str]:
    return [text.split(":")[0] for text in chunk]


def tagging(role: str) -> Rule:
    """An architect (or proofreader) that gives every paragraph back with a tag naming its call."""
    calls = itertools.count(1)

    def respond(request: RecordedRequest) -> Reply:
        number = next(calls)
        texts = [
            text for _, text in BLOCK.findall(final_user_message(request).split("paragraphs:\n\n", 1)[1])
        ]
        return Reply(json={"paragraphs": [f"{text} [{role} {number}]" for text in texts]})

    return Rule(role=role, respond=respond)


# -- the protocol --------------------------------------------------------------------------------------------------


async def test_pipeline_plans_then_chains_the_desk_per_paragraph_then_combines_then_proofreads(
    desk: Desk,
) -> None:
    results = await desk.run()

    requests = desk.requests()
    assert {request.role for request in requests[:2]} == {"director", "analyst"}
    planning_done = max(request.finished for request in requests[:2])
    for marker in MARKERS:
        chain = desk.about(marker)
        assert [request.role for request in chain] == [
            "simplifier",
            "supervisor",
            "metaphor_analyst",
            "terminology_interpreter",
        ], marker
        assert chain[0].started >= planning_done, "every paragraph follows the guideline"
    assert not desk.requests("integrator")
    refining_done = max(r.finished for r in requests if r.role in PER_PARAGRAPH)
    combining = desk.requests("architect")
    assert combining and min(r.started for r in combining) >= refining_done
    proofreading = desk.requests("proofreader")
    assert len(proofreading) == 1 and proofreading[0].started >= max(r.finished for r in combining)
    assert requests[-1].role == "proofreader"

    assert [result.original for result in results] == PARAGRAPHS
    assert [result.status for result in results] == [RewriteStatus.REWRITTEN] * 5
    assert [result.text for result in results] == [simplified(paragraph) for paragraph in PARAGRAPHS]


async def test_pipeline_chains_each_agent_on_the_previous_agents_text(desk: Desk) -> None:
    await desk.run()

    for paragraph, marker in zip(PARAGRAPHS, MARKERS, strict=True):
        simplifier, _, metaphors, terms = desk.about(marker)
        assert f"The paragraph to simplify:\n{fence(paragraph)}" in final_user_message(simplifier)
        basic = plainer(paragraph)
        assert basic != paragraph
        assert f"The paragraph to analyse:\n{fence(basic)}" in final_user_message(metaphors)
        assert f"The paragraph to explain:\n{fence(basic)}" in final_user_message(terms), (
            "no metaphors: the basic text"
        )


async def test_metaphor_explanations_reach_the_terminology_interpreter_in_pipeline_mode(desk: Desk) -> None:
    explaining = Rule(
        role="metaphor_analyst",
        respond=lambda request: (
            Reply(
                json={
                    "analysis": "twice as large: a size",
                    "text": "Alpha: the index is twice as large (bigger).",
                }
            )
            if "Alpha" in final_user_message(request)
            else Reply(json={"analysis": "none", "text": "none"})
        ),
    )
    results = await desk.run(explaining)

    terms = desk.about("Alpha")[-1]
    assert (
        "The paragraph to explain:\n```\nAlpha: the index is twice as large (bigger).\n```"
        in final_user_message(terms)
    )
    repairs = [r for r in desk.requests("proofreader") if "Your rewrite lost" in final_user_message(r)]
    assert len(repairs) == 1 and r"lost 1 citation (\cite{a1})" in final_user_message(repairs[0])
    assert r"\cite{a1}" in results[0].text, "the explanation dropped the citation: repaired or refused"


async def test_synchronous_runs_the_three_agents_on_the_original_side_by_side_then_integrates(
    desk: Desk,
) -> None:
    results = await desk.run(communication="synchronous", latency=0.05, sources=PARAGRAPHS[:2])

    for paragraph, marker in zip(PARAGRAPHS[:2], MARKERS[:2], strict=True):
        chain = desk.about(marker)
        assert sorted(request.role for request in chain) == sorted(
            ["simplifier", "supervisor", "metaphor_analyst", "terminology_interpreter", "integrator"]
        )
        by_role = {request.role: request for request in chain}
        assert f"The paragraph to analyse:\n{fence(paragraph)}" in final_user_message(
            by_role["metaphor_analyst"]
        )
        assert f"The paragraph to explain:\n{fence(paragraph)}" in final_user_message(
            by_role["terminology_interpreter"]
        )
        side_by_side = [
            by_role["simplifier"],
            by_role["metaphor_analyst"],
            by_role["terminology_interpreter"],
        ]
        assert max(r.started for r in side_by_side) < min(r.finished for r in side_by_side)
        integrator = by_role["integrator"]
        assert integrator.started >= max(r.finished for r in chain if r.role != "integrator")
        prompt = final_user_message(integrator)
        assert f"Original paragraph:\n{fence(paragraph)}" in prompt
        assert f"Basic simplification:\n{fence(plainer(paragraph))}" in prompt
        assert f"Metaphors explained:\n{fence(paragraph)}" in prompt
        assert f"Terms explained:\n{fence(plainer(paragraph))}" in prompt
    assert [result.text for result in results] == [simplified(paragraph) for paragraph in PARAGRAPHS[:2]]


async def test_the_director_and_the_analyst_plan_from_the_document_and_guide_every_agent(desk: Desk) -> None:
    await desk.run()

    director = final_user_message(desk.requests("director")[0])
    assert all(paragraph in director for paragraph in PARAGRAPHS)
    for request in desk.requests():
        if request.role in ("director", "analyst"):
            continue
        prompt = final_user_message(request)
        assert prompt.startswith("The guideline:\n```\n1. Summary: the paper's main points."), request.role
        assert "The outline of the simplified article:\n```\nWhat the paper found\n- The problem" in prompt


async def test_supervisor_suggestions_are_sent_back_to_the_simplifier_and_rounds_are_bounded(
    desk: Desk,
) -> None:
    critical = Rule(role="supervisor", replies=[Reply(json={"suggestions": "Split the first sentence."})])
    await desk.run(critical, sources=PARAGRAPHS[:1], supervisor_rounds=2)

    assert [request.role for request in desk.about("Alpha")][:5] == [
        "simplifier",
        "supervisor",
        "simplifier",
        "supervisor",
        "simplifier",
    ]
    revision = final_user_message(desk.about("Alpha")[2])
    assert "The supervisor's suggestions:\n```\nSplit the first sentence.\n```" in revision
    assert len(desk.requests("supervisor")) == 2


# -- combination ---------------------------------------------------------------------------------------------------


async def test_direct_combination_is_one_architect_call_over_every_paragraph(desk: Desk) -> None:
    results = await desk.run(tagging("architect"), combination="direct")

    assert [markers_of(chunk) for chunk in desk.chunks()] == [MARKERS]
    assert desk.chunks()[0] == [simplified(paragraph) for paragraph in PARAGRAPHS]
    assert all(result.text.endswith("[architect 1]") for result in results)
    assert "Article architect combining the whole document" in desk.steps


@pytest.mark.parametrize(
    ("chunk_size", "expected"),
    [
        (2, [["Alpha", "Bravo"], ["Bravo", "Charlie", "Delta"], ["Delta", "Echo"]]),
        (3, [["Alpha", "Bravo", "Charlie"], ["Charlie", "Delta", "Echo"]]),
        (1, [["Alpha"], ["Alpha", "Bravo"], ["Bravo", "Charlie"], ["Charlie", "Delta"], ["Delta", "Echo"]]),
    ],
)
async def test_iterative_combination_chunks_overlap_by_the_previous_answers_last_paragraph(
    desk: Desk, chunk_size: int, expected: list[list[str]]
) -> None:
    results = await desk.run(tagging("architect"), chunk_size=chunk_size)

    chunks = desk.chunks()
    assert [markers_of(chunk) for chunk in chunks] == expected
    for number, (previous, following) in enumerate(itertools.pairwise(chunks), start=1):
        assert following[0] == f"{previous[-1]} [architect {number}]", "the next chunk opens with the answer"
    architects = desk.requests("architect")
    for earlier, later in itertools.pairwise(architects):
        assert earlier.finished <= later.started, "each chunk waits for the previous answer"
    assert all("[architect" in result.text for result in results)
    firsts = [chunk[0] for chunk in expected]
    lasts = [chunk[-1] for chunk in expected]
    steps = [step for step in desk.steps if step.startswith("Article architect")]
    assert steps == [
        f"Article architect combining paragraphs {MARKERS.index(a) + 1}-{MARKERS.index(b) + 1}"
        for a, b in zip(firsts, lasts, strict=True)
    ]


async def test_direct_combination_asks_for_as_many_tokens_as_the_document_needs(desk: Desk) -> None:
    await desk.run(combination="direct", context_tokens=32_768)

    (architect,) = desk.requests("architect")
    budget = architect.body["max_tokens"]
    document = sum(len(paragraph) for paragraph in PARAGRAPHS)
    assert budget >= 512 and budget >= document // 3  # room for the whole document back, as JSON
    assert not desk.transcript.notes or not any("does not fit" in note for note in desk.transcript.notes)


async def test_direct_combination_of_a_document_the_context_cannot_hold_falls_back_to_iterative_and_says_so(
    desk: Desk,
) -> None:
    await desk.run(combination="direct", context_tokens=1_000)

    assert len(desk.requests("architect")) == 3  # iterative chunks instead of one call that would be cut off
    said = [step for step in desk.steps if "does not fit the architect's context" in step]
    assert said and "of 1,000" in said[0]
    assert any("combining it iteratively" in note for note in desk.transcript.notes)


async def test_a_single_paragraph_needs_no_architect(desk: Desk) -> None:
    results = await desk.run(sources=PARAGRAPHS[:1])

    assert not desk.requests("architect")
    assert [request.role for request in desk.requests()][-1] == "proofreader"
    assert results[0].text == simplified(PARAGRAPHS[0])


# -- wrong paragraph counts are ignored -------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["architect", "proofreader"])
async def test_an_answer_with_the_wrong_paragraph_count_is_ignored(desk: Desk, role: str) -> None:
    merging = Rule(role=role, replies=[Reply(json={"paragraphs": ["All of it merged into one paragraph."]})])
    results = await desk.run(merging, combination="direct")

    assert [result.text for result in results] == [simplified(paragraph) for paragraph in PARAGRAPHS]
    assert [result.status for result in results] == [RewriteStatus.REWRITTEN] * 5
    assert any(note.startswith(f"{role} skipped") for note in desk.transcript.notes)
    if role == "architect":
        assert desk.chunks("proofreader") == [[simplified(paragraph) for paragraph in PARAGRAPHS]]


async def test_an_architect_answer_with_an_empty_paragraph_is_ignored(desk: Desk) -> None:
    def one_empty(request: RecordedRequest) -> Reply:
        texts = [
            text for _, text in BLOCK.findall(final_user_message(request).split("paragraphs:\n\n", 1)[1])
        ]
        return Reply(json={"paragraphs": ["Changed.", *([""] * (len(texts) - 1))]})

    results = await desk.run(Rule(role="architect", respond=one_empty), combination="direct")

    assert [result.text for result in results] == [simplified(paragraph) for paragraph in PARAGRAPHS]
    assert any("kept them as they were" in note for note in desk.transcript.notes)


async def test_the_proofreader_reads_windows_of_six_paragraphs_concurrently(desk: Desk) -> None:
    sources = [f"Marker{number}: we utilize approximately {number} terms." for number in range(1, 9)]
    results = await desk.run(sources=sources, latency=0.05, combination="direct")

    windows = desk.chunks("proofreader")
    assert sorted(len(window) for window in windows) == [2, 6]
    first, second = desk.requests("proofreader")
    assert max(first.started, second.started) < min(first.finished, second.finished)
    assert len(results) == 8 and all(result.status is RewriteStatus.REWRITTEN for result in results)


# -- concurrency ---------------------------------------------------------------------------------------------------


async def test_paragraphs_are_simplified_concurrently(desk: Desk) -> None:
    latency = 0.15
    sources = [
        f"Marker{number}: we utilize approximately {number} terms in order to win." for number in range(6)
    ]
    results = await desk.run(sources=sources, latency=latency, combination="direct")

    sequential = len(desk.requests()) * latency
    assert desk.seconds < 0.5 * sequential, (desk.seconds, sequential)
    assert desk.endpoint is not None and desk.endpoint.max_in_flight >= 6
    assert len(results) == 6


# -- failures ------------------------------------------------------------------------------------------------------


async def test_a_paragraph_whose_simplifier_fails_keeps_its_text_and_the_others_go_on(desk: Desk) -> None:
    broken = Rule(role="simplifier", pattern="Bravo", replies=[Reply(status=500, error_message="overloaded")])
    results = await desk.run(broken)

    assert results[1].status is RewriteStatus.FAILED
    assert results[1].text == PARAGRAPHS[1]
    assert "server_error" in results[1].message and "overloaded" in results[1].message
    assert [result.status for index, result in enumerate(results) if index != 1] == [
        RewriteStatus.REWRITTEN
    ] * 4
    for role in ("architect", "proofreader"):
        assert all("Bravo" not in final_user_message(request) for request in desk.requests(role))
    assert [markers_of(chunk) for chunk in desk.chunks()] == [
        ["Alpha", "Charlie"],
        ["Charlie", "Delta", "Echo"],
    ]


async def test_failing_planners_and_refiners_never_stop_the_desk(desk: Desk) -> None:
    failing = [
        Rule(role=role, replies=[Reply(status=500)])
        for role in (
            "director",
            "analyst",
            "metaphor_analyst",
            "terminology_interpreter",
            "architect",
            "proofreader",
        )
    ]
    results = await desk.run(*failing)

    assert [result.status for result in results] == [RewriteStatus.REWRITTEN] * 5
    assert [result.text for result in results] == [plainer(paragraph) for paragraph in PARAGRAPHS]
    simplifier_prompt = final_user_message(desk.requests("simplifier")[0])
    assert "The guideline:" not in simplifier_prompt and "The outline" not in simplifier_prompt
    assert {"no guideline", "no outline"} <= {note.split(":")[0] for note in desk.transcript.notes}


async def test_a_dead_endpoint_gives_one_failed_rewrite_per_paragraph(desk: Desk, dead_url: str) -> None:
    results = await desk.run(base_url=dead_url)

    assert [result.status for result in results] == [RewriteStatus.FAILED] * 5
    assert [result.text for result in results] == PARAGRAPHS
    assert all("unavailable" in result.message for result in results)


async def test_invalid_json_from_the_simplifier_fails_only_that_paragraph(desk: Desk) -> None:
    rambling = Rule(
        role="simplifier", pattern="Charlie", replies=[Reply(content="Here is a simpler version!")]
    )
    results = await desk.run(rambling)

    assert results[2].status is RewriteStatus.FAILED and results[2].text == PARAGRAPHS[2]
    assert "invalid_output" in results[2].message
    assert sum(result.status is RewriteStatus.REWRITTEN for result in results) == 4


async def test_a_failure_in_one_paragraph_is_not_reported_on_the_others(desk: Desk) -> None:
    broken = Rule(role="metaphor_analyst", pattern="Alpha", replies=[Reply(status=500)])
    results = await desk.run(broken)

    assert results[0].failures and "server_error" in results[0].failures[0]
    assert [result.failures for result in results[1:]] == [[]] * 4


async def test_no_agent_keeps_working_after_the_run_returns(desk: Desk) -> None:
    slow = [
        Rule(role=role, replies=[Reply(json={"analysis": "a", "terms": [], "text": "Slow text."}, delay=0.4)])
        for role in ("metaphor_analyst", "terminology_interpreter")
    ]
    broken = Rule(role="simplifier", replies=[Reply(status=500)])
    results = await desk.run(broken, *slow, communication="synchronous", sources=PARAGRAPHS[:2])

    assert [result.status for result in results] == [RewriteStatus.FAILED] * 2
    turns_at_return = len(desk.transcript.turns)
    # The slow agents would have answered by now: none of them may add to the run's transcript. (Counting the
    # endpoint's requests instead races with the server thread recording requests sent just before the return.)
    await asyncio.sleep(0.6)
    assert len(desk.transcript.turns) == turns_at_return


# -- safety: citations survive or the rewrite is refused ------------------------------------------------------------


def proofreader_dropping_c3(put_back: bool) -> Rule:
    def respond(request: RecordedRequest) -> Reply:
        prompt = final_user_message(request)
        if "Your rewrite lost" in prompt:
            found = re.search(r"Your rewrite:\n```\n(.*?)\n```\n", prompt, re.S)
            assert found is not None
            text = found.group(1)
            return Reply(json={"text": text.replace("weaker", r"weaker \cite{c3}") if put_back else text})
        texts = [text for _, text in BLOCK.findall(prompt.split("paragraphs:\n\n", 1)[1])]
        return Reply(json={"paragraphs": [text.replace(r" \cite{c3}", "") for text in texts]})

    return Rule(role="proofreader", respond=respond)


async def test_a_proofreader_that_drops_a_cite_is_asked_to_repair_it_once(desk: Desk) -> None:
    results = await desk.run(proofreader_dropping_c3(put_back=True))

    repairs = [r for r in desk.requests("proofreader") if "Your rewrite lost" in final_user_message(r)]
    assert len(repairs) == 1
    assert repairs[0].body["messages"][0]["content"].startswith("You repair a rewritten passage")
    assert r"Your rewrite lost 1 citation (\cite{c3})" in final_user_message(repairs[0])
    assert results[2].status is RewriteStatus.REWRITTEN
    assert results[2].text == simplified(PARAGRAPHS[2])


async def test_a_cite_still_missing_after_the_repair_refuses_that_paragraph_only(desk: Desk) -> None:
    results = await desk.run(proofreader_dropping_c3(put_back=False))

    assert results[2].status is RewriteStatus.REFUSED
    assert results[2].text == PARAGRAPHS[2]
    assert results[2].missing == [r"citation \cite{c3}"]
    assert r"\cite{c3}" in results[2].message
    assert [result.status for index, result in enumerate(results) if index != 2] == [
        RewriteStatus.REWRITTEN
    ] * 4


# -- progress and transcript ----------------------------------------------------------------------------------------


async def test_progress_steps_name_the_agent_and_the_paragraph(desk: Desk) -> None:
    await desk.run()

    steps = desk.steps
    assert set(steps[:2]) == {
        "Project director writing the simplification guideline",
        "Article logic analyst outlining the article",
    }
    for number in range(1, 6):
        assert [step for step in steps if step.startswith(f"Paragraph {number}/5:")] == [
            f"Paragraph {number}/5: content simplifier",
            f"Paragraph {number}/5: simplify supervisor, round 1",
            f"Paragraph {number}/5: metaphor analyst",
            f"Paragraph {number}/5: terminology interpreter",
        ]
    assert steps[-4:] == [
        "Article architect combining paragraphs 1-2",
        "Article architect combining paragraphs 2-4",
        "Article architect combining paragraphs 4-5",
        "Proofreader checking paragraphs 1-5",
    ]


async def test_the_transcript_records_every_turn(desk: Desk) -> None:
    await desk.run(Rule(role="analyst", replies=[Reply(status=500)]))

    requests = desk.requests()
    turns = desk.transcript.turns
    assert sorted(turn.role for turn in turns) == sorted(str(request.role) for request in requests)
    assert len(desk.steps) == len(turns)
    tasks_sent = {request.body["messages"][-1]["content"] for request in requests}
    assert all(turn.messages[-1]["content"] in tasks_sent for turn in turns)
    failed = [turn for turn in turns if turn.failure]
    assert [turn.role for turn in failed] == ["analyst"] and "server_error" in str(failed[0].failure)

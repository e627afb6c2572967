"""The Society of Medical Simplifiers (soms.simplify_paragraph) driven through a real scripted OpenAI-compatible
server on loopback with the real LLMClient: who is asked what, in which order, with which memory; how the agent
selector, the loop limits, the clarifier rounds, the redundancy quotes and the expert's veto shape the run; and
what a failing model or a rewrite that drops a citation leads to.

The scripted agents (margin.testing.scripted_agents.rewrite_rules) answer every role; a test puts its own rules
first. The response cache is off, so every agent turn is one HTTP request the endpoint records.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from margin.testing.scripted_agents import rewrite_rules, text_in
from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule, ScriptedEndpoint
from margin.workflows.prompts import fence
from margin.workflows.rewrite.soms import SomsOptions, simplify_paragraph
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

PARAGRAPH = (
    r"Consequently, the treatment is very effective \cite{smith20} and we utilize approximately $n=42$ "
    r"patients in order to demonstrate numerous benefits."
)
CONVERSATION = "The conversation so far:\n"
LOOP_OF_LEADER = {"layperson": "layperson", "clarifier": "clarifier", "redundancy_checker": "redundancy"}
AVAILABLE = re.compile(r"Loops that may still run: ([^.]+)\.")


class Society:
    """One SoMS run on a scripted endpoint, and what it recorded."""

    def __init__(self, scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path) -> None:
        self.scripted = scripted
        self.llm_clients = llm_clients
        self.tmp_path = tmp_path
        self.endpoint: ScriptedEndpoint | None = None
        self.steps: list[str] = []
        self.transcript = Transcript("soms")

    async def run(
        self,
        *rules: Rule,
        source: str = PARAGRAPH,
        language: Language = Language.LATEX,
        base_url: str | None = None,
        **options: Any,
    ) -> Rewrite:
        self.endpoint = self.scripted(*rules, *rewrite_rules())
        if base_url is None:
            config = feedback_llm_config(self.endpoint, self.tmp_path, cache_enabled=False)
        else:
            config = llm_config(
                base_url,
                self.tmp_path / "cache.sqlite3",
                retries=0,
                cache_enabled=False,
                model="scripted-model",
            )
        return await simplify_paragraph(
            source,
            language,
            self.llm_clients(config),
            SomsOptions(**options),
            transcript=self.transcript,
            on_step=self.steps.append,
        )

    def requests(self, role: str | None = None) -> list[RecordedRequest]:
        assert self.endpoint is not None
        return [r for r in chat_requests_in_order(self.endpoint) if role is None or r.role == role]

    def roles(self) -> list[str | None]:
        return [request.role for request in self.requests()]

    def loops(self) -> list[str]:
        """The interaction loops in the order they were entered, from their lead agents' first requests."""
        entered = []
        for request in self.requests():
            if final_user_message(request).startswith("That answer cannot be used"):
                continue  # the LLM layer's repair of an invalid answer, not a new turn
            if request.role == "clarifier" and "List your suggestions" not in final_user_message(request):
                continue  # a revision inside the clarifier loop, not a new loop
            if request.role in LOOP_OF_LEADER:
                entered.append(LOOP_OF_LEADER[request.role])
        return entered


@pytest.fixture
def society(scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path) -> Society:
    return Society(scripted, llm_clients, tmp_path)


def offered_loops(request: RecordedRequest) -> str:
    """The loops the selector was told may still run ("layperson, redundancy")."""
    found = AVAILABLE.search(final_user_message(request))
    assert found is not None, final_user_message(request)
    return found.group(1)


def selector_choosing(plan: Sequence[str]) -> Rule:
    """A selector that answers the planned loops in order (then the first open loop)."""
    choices = iter(plan)

    def respond(request: RecordedRequest) -> Reply:
        choice = next(choices, offered_loops(request).split(", ")[0])
        return Reply(json={"next": choice, "reason": "planned"})

    return Rule(role="selector", respond=respond)


def current_text(request: RecordedRequest) -> str:
    return text_in(final_user_message(request))


def counting(respond: Callable[[RecordedRequest, int], Reply]) -> Callable[[RecordedRequest], Reply]:
    """A responder that also gets the number of the call (1, 2, ...)."""
    counter = itertools.count(1)
    return lambda request: respond(request, next(counter))


# -- the protocol --------------------------------------------------------------------------------------------------


async def test_default_run_follows_the_three_loops_with_the_selector_before_each_choice(
    society: Society,
) -> None:
    result = await society.run()

    assert society.roles() == [
        "selector",
        *["layperson", "expert", "simplifier", "expert"],
        "selector",
        *["layperson", "expert", "simplifier", "expert"],
        "selector",
        *["clarifier", "simplifier"],
        "selector",
        *["clarifier", "simplifier"],
        *["redundancy_checker", "expert", "simplifier"],
        "redundancy_checker",
    ]
    assert result.status is RewriteStatus.REWRITTEN
    assert r"\cite{smith20}" in result.text and "$n=42$" in result.text
    assert "approximately" not in result.text and "very" not in result.text
    assert result.failures == []
    ordered = society.requests()
    for earlier, later in itertools.pairwise(ordered):
        assert earlier.finished <= later.started, "the society talks one agent at a time"


@pytest.mark.parametrize("loop_limit", [1, 2, 3])
async def test_each_loop_runs_loop_limit_times_and_no_selector_call_when_one_loop_is_left(
    society: Society, loop_limit: int
) -> None:
    await society.run(loop_limit=loop_limit)

    loops = society.loops()
    assert len(loops) == 3 * loop_limit
    assert {loop: loops.count(loop) for loop in set(loops)} == dict.fromkeys(
        ("layperson", "clarifier", "redundancy"), loop_limit
    )
    # The scripted selector takes the first open loop: layperson, then clarifier; the redundancy loops need no choice.
    assert len(society.requests("selector")) == 2 * loop_limit
    turns = 3 * loop_limit
    assert [step for step in society.steps if step.startswith("Agent selector")] == [
        f"Agent selector choosing the next loop ({turn}/{turns})" for turn in range(1, 2 * loop_limit + 1)
    ]


async def test_the_selectors_choices_are_honoured(society: Society) -> None:
    plan = ["redundancy", "clarifier", "layperson", "redundancy", "clarifier"]
    await society.run(selector_choosing(plan))

    assert society.loops() == [*plan, "layperson"]
    assert len(society.requests("selector")) == 5


async def test_the_selector_is_offered_only_open_loops_and_sees_the_conversation(society: Society) -> None:
    await society.run(selector_choosing(["clarifier", "clarifier", "layperson"]))

    offered = [offered_loops(request) for request in society.requests("selector")]
    assert offered == [
        "layperson, clarifier, redundancy",
        "layperson, clarifier, redundancy",
        "layperson, redundancy",
        "layperson, redundancy",
    ]
    third = society.requests("selector")[2]
    assert third.body["response_format"]["json_schema"]["schema"]["properties"]["next"]["enum"] == [
        "layperson",
        "redundancy",
    ]
    assert third.body["messages"][1]["content"].startswith(CONVERSATION)
    assert "Language clarifier (suggested substitutions):\n```\n1. " in third.body["messages"][1]["content"]


async def test_a_selector_insisting_on_a_used_up_loop_falls_back_and_never_exceeds_the_limit(
    society: Society,
) -> None:
    always_layperson = Rule(role="selector", replies=[Reply(json={"next": "layperson"})])
    result = await society.run(always_layperson)

    assert society.loops() == ["layperson", "layperson", "clarifier", "clarifier", "redundancy", "redundancy"]
    assert any("selector gave no usable choice" in note for note in society.transcript.notes)
    assert result.status is RewriteStatus.REWRITTEN


async def test_an_invalid_selector_choice_is_repaired_once_then_falls_back_to_an_open_loop(
    society: Society,
) -> None:
    result = await society.run(Rule(role="selector", replies=[Reply(json={"next": "poetry"})]), loop_limit=1)

    assert society.loops() == ["layperson", "clarifier", "redundancy"]
    assert len(society.requests("selector")) == 4, "two choices, each asked once and repaired once"
    assert sum("selector gave no usable choice" in note for note in society.transcript.notes) == 2
    assert result.status is RewriteStatus.REWRITTEN
    assert any(failure.startswith("selector: invalid_output") for failure in result.failures)


async def test_a_failing_selector_does_not_stop_the_society(society: Society) -> None:
    result = await society.run(Rule(role="selector", replies=[Reply(status=500)]), loop_limit=1)

    assert society.loops() == ["layperson", "clarifier", "redundancy"]
    assert result.status is RewriteStatus.REWRITTEN
    assert any("selector: server_error" in failure for failure in result.failures)


# -- memory --------------------------------------------------------------------------------------------------------


async def test_the_layperson_has_no_memory_and_every_other_agent_does(society: Society) -> None:
    await society.run()

    laypeople = society.requests("layperson")
    assert len(laypeople) == 2
    for request in laypeople:
        assert [message["role"] for message in request.body["messages"]] == ["system", "user"]
        assert CONVERSATION not in request.prompt
    others = [request for request in society.requests() if request.role != "layperson"]
    assert {request.role for request in others} == {
        "selector",
        "expert",
        "simplifier",
        "clarifier",
        "redundancy_checker",
    }
    for request in others:
        memory = request.body["messages"][1]["content"]
        assert memory.startswith(CONVERSATION), request.role
        assert f"Original text:\n{fence(PARAGRAPH)}" in memory
        assert request.body["messages"][2] == {"role": "assistant", "content": "Understood."}


async def test_the_layperson_reads_the_current_version_not_the_original(society: Society) -> None:
    await society.run()

    first, second = society.requests("layperson")
    assert "approximately $n=42$" in final_user_message(first)
    assert "about $n=42$" in final_user_message(second)
    assert "approximately" not in final_user_message(second)


async def test_later_agents_remember_the_questions_and_answers(society: Society) -> None:
    await society.run(loop_limit=1)

    clarifier_memory = society.requests("clarifier")[0].body["messages"][1]["content"]
    assert "Layperson (my questions):\n```\n1. What does the main term mean?" in clarifier_memory
    assert "Expert (answers):\n```\n- What does the main term mean?: It means" in clarifier_memory
    assert "Simplifier (latest simplification):\n```\n" in clarifier_memory


# -- the layperson loop and the expert -----------------------------------------------------------------------------


@pytest.mark.parametrize("min_questions", [4, 6])
async def test_the_layperson_is_asked_for_at_least_min_questions(
    society: Society, min_questions: int
) -> None:
    await society.run(loop_limit=1, min_questions=min_questions)

    assert f"Ask at least {min_questions} questions" in final_user_message(society.requests("layperson")[0])
    too_few = any("fewer than asked for" in note for note in society.transcript.notes)
    assert too_few is (min_questions > 4), "the scripted layperson asks four"


async def test_the_expert_answers_the_questions_then_checks_the_rewrite_against_the_original(
    society: Society,
) -> None:
    await society.run(selector_choosing(["layperson"]), loop_limit=1)

    answering, checking = society.requests("expert")[:2]
    assert "1. What does the main term mean?\n2. What did the authors find?" in final_user_message(answering)
    check = final_user_message(checking)
    assert f"Original text:\n{fence(PARAGRAPH)}\n" in check
    assert (
        "Rewritten text:\n```\nConsequently, the treatment is very effective \\cite{smith20} and we utilize about"
        in check
    )
    simplifier = final_user_message(society.requests("simplifier")[0])
    assert "It means what the text says, in plain words." in simplifier


async def test_an_inaccurate_rewrite_goes_back_to_the_simplifier_with_the_experts_comments(
    society: Society,
) -> None:
    accuracy = Rule(
        role="expert",
        pattern=r"Is the rewrite accurate\?",
        replies=[
            Reply(json={"accurate": False, "comments": ["The sample size changed."]}),
            Reply(json={"accurate": True}),
        ],
    )
    await society.run(accuracy, selector_choosing(["layperson"]), loop_limit=1)

    assert society.roles()[:7] == [
        "selector",
        "layperson",
        "expert",
        "simplifier",
        "expert",
        "simplifier",
        "expert",
    ]
    correction = final_user_message(society.requests("simplifier")[1])
    assert "The expert found these inaccuracies:\n```\n- The sample size changed.\n```" in correction


async def test_accuracy_rounds_bound_the_corrections(society: Society) -> None:
    never_accurate = Rule(
        role="expert",
        pattern=r"Is the rewrite accurate\?",
        replies=[Reply(json={"accurate": False, "comments": ["Still wrong."]})],
    )
    await society.run(never_accurate, selector_choosing(["layperson"]), loop_limit=1, accuracy_rounds=2)

    checks = [r for r in society.requests("expert") if "Is the rewrite accurate" in final_user_message(r)]
    corrections = [
        r for r in society.requests("simplifier") if "found these inaccuracies" in final_user_message(r)
    ]
    assert (len(checks), len(corrections)) == (2, 2)


# -- the clarifier loop --------------------------------------------------------------------------------------------


def reviewing(accept_from_call: int) -> Rule:
    """A simplifier that rejects every substitution until its `accept_from_call`-th review, then accepts."""

    def respond(request: RecordedRequest, number: int) -> Reply:
        listing = re.findall(r'^(\d+)\. \[\w+\] "(.*?)" -> "(.*?)"$', final_user_message(request), re.M)
        accept = number >= accept_from_call
        text = current_text(request)
        if accept:
            for _, original, replacement in listing:
                text = text.replace(original, replacement, 1)
        decisions = [
            {"index": int(n), "accept": accept, "reason": "it changes the meaning"} for n, _, _ in listing
        ]
        return Reply(json={"decisions": decisions, "text": text})

    return Rule(role="simplifier", pattern="Accept or reject each suggestion", respond=counting(respond))


async def test_rejected_substitutions_are_revised_until_the_simplifier_accepts(society: Society) -> None:
    result = await society.run(reviewing(accept_from_call=2), selector_choosing(["clarifier"]), loop_limit=1)

    clarifier_loop = society.roles()[1:5]
    assert clarifier_loop == ["clarifier", "simplifier", "clarifier", "simplifier"]
    revision = final_user_message(society.requests("clarifier")[1])
    assert (
        'The simplifier rejected these substitutions:\n```\n- "approximately" -> "about": rejected because it changes the meaning'
        in revision
    )
    assert len(society.requests("clarifier")) == 2
    assert "about $n=42$" in result.text


async def test_only_the_rejected_substitutions_are_revised_and_reviewed_again(society: Society) -> None:
    def suggest(request: RecordedRequest) -> Reply:
        if "rejected these substitutions" in final_user_message(request):
            return Reply(
                json={"suggestions": [{"original": "numerous", "replacement": "lots of", "kind": "word"}]}
            )
        pairs = [("approximately", "about"), ("numerous", "many")]
        return Reply(
            json={"suggestions": [{"original": o, "replacement": r, "kind": "word"} for o, r in pairs]}
        )

    def review(request: RecordedRequest, number: int) -> Reply:
        listing = re.findall(r'^(\d+)\. \[\w+\] "(.*?)" -> "(.*?)"$', final_user_message(request), re.M)
        text = current_text(request)
        decisions = []
        for index, original, replacement in listing:
            accept = number > 1 or original != "numerous"
            if accept:
                text = text.replace(original, replacement, 1)
            decisions.append({"index": int(index), "accept": accept, "reason": "too vague"})
        return Reply(json={"decisions": decisions, "text": text})

    result = await society.run(
        Rule(role="clarifier", respond=suggest),
        Rule(role="simplifier", pattern="Accept or reject each suggestion", respond=counting(review)),
        selector_choosing(["clarifier"]),
        loop_limit=1,
    )

    first_review, second_review = [
        final_user_message(r)
        for r in society.requests("simplifier")
        if "Accept or reject" in final_user_message(r)
    ]
    assert '1. [word] "approximately" -> "about"\n2. [word] "numerous" -> "many"' in first_review
    revision = final_user_message(society.requests("clarifier")[1])
    assert '- "numerous" -> "many": rejected because too vague' in revision
    assert "approximately" not in revision.split("rejected these substitutions")[1]
    assert (
        '1. [word] "numerous" -> "lots of"' in second_review
        and "approximately"
        not in second_review.split("The language clarifier suggests:")[1].split("Accept or reject")[0]
    )
    assert "about $n=42$" in result.text and "lots of benefits" in result.text


async def test_clarifier_rounds_bound_the_revisions(society: Society) -> None:
    await society.run(
        reviewing(accept_from_call=99), selector_choosing(["clarifier"]), loop_limit=1, clarifier_rounds=3
    )

    reviews = [r for r in society.requests("simplifier") if "Accept or reject" in final_user_message(r)]
    assert len(reviews) == 3
    assert len(society.requests("clarifier")) == 3, "one suggestion and two revisions"
    assert any("still rejected after 3 rounds" in note for note in society.transcript.notes)
    assert "approximately" in society.requests("layperson")[0].prompt


async def test_no_suggestions_means_no_review(society: Society) -> None:
    quiet = Rule(role="clarifier", replies=[Reply(json={"suggestions": []})])
    await society.run(quiet, selector_choosing(["clarifier"]), loop_limit=1)

    assert society.roles()[1:3] == ["clarifier", "selector"]
    assert not any("Accept or reject" in final_user_message(r) for r in society.requests("simplifier"))


# -- the redundancy loop and the expert's veto ----------------------------------------------------------------------

FIVE_WORDS = "in order to demonstrate numerous"
SIX_WORDS = "we utilize approximately $n=42$ patients in"


def proposing(*quotes: str) -> Rule:
    return Rule(
        role="redundancy_checker",
        replies=[Reply(json={"removals": [{"quote": quote, "reason": "filler"} for quote in quotes]})],
    )


async def test_redundancy_quotes_longer_than_five_words_or_not_in_the_text_are_dropped(
    society: Society,
) -> None:
    await society.run(
        proposing("very", SIX_WORDS, FIVE_WORDS, "words that are not there"),
        selector_choosing(["redundancy"]),
        loop_limit=1,
    )

    verdict = final_user_message(society.requests("expert")[0])
    assert (
        f'The redundancy checker proposes removing:\n```\n1. "very" (filler)\n2. "{FIVE_WORDS}" (filler)\n```\n\n'
        in verdict
    )
    assert SIX_WORDS not in verdict.split("proposes removing:")[1]
    dropped = [note for note in society.transcript.notes if note.startswith("dropped a removal")]
    assert len(dropped) == 2


async def test_the_expert_vetoes_removing_essential_content(society: Society) -> None:
    veto_first = Rule(
        role="expert",
        pattern="proposes removing",
        replies=[
            Reply(
                json={
                    "verdicts": [
                        {"index": 1, "remove": False, "justification": "essential"},
                        {"index": 2, "remove": True, "justification": "filler"},
                    ]
                }
            )
        ],
    )
    result = await society.run(
        veto_first, proposing("very effective", FIVE_WORDS), selector_choosing(["redundancy"]), loop_limit=1
    )

    removal = [
        r for r in society.requests("simplifier") if "Remove exactly these parts" in final_user_message(r)
    ]
    assert len(removal) == 1
    assert f'- "{FIVE_WORDS}"' in final_user_message(removal[0])
    assert "very effective" not in final_user_message(removal[0]).split("Remove exactly these parts")[1]
    assert "very effective" in result.text


async def test_when_the_expert_vetoes_every_removal_the_simplifier_is_not_asked(society: Society) -> None:
    veto_all = Rule(role="expert", pattern="proposes removing", replies=[Reply(json={"verdicts": []})])
    await society.run(veto_all, proposing("very"), selector_choosing(["redundancy"]), loop_limit=1)

    assert society.roles()[1:4] == ["redundancy_checker", "expert", "selector"]


# -- domain words ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("domain", "present", "absent"),
    [
        ("medical", ["medical text", "medical expert"], ["scientific text"]),
        ("science", ["scientific text", "expert in the paper's field"], ["medical"]),
    ],
)
async def test_the_domain_changes_the_words_of_every_system_prompt(
    society: Society, domain: str, present: list[str], absent: list[str]
) -> None:
    await society.run(loop_limit=1, domain=domain)

    systems = {request.role: request.body["messages"][0]["content"] for request in society.requests()}
    assert set(systems) == {
        "selector",
        "layperson",
        "expert",
        "simplifier",
        "clarifier",
        "redundancy_checker",
    }
    for role, system in systems.items():
        assert "$" not in system.split("Answer with one JSON value")[0], role
        assert any(word in system for word in present), role
        assert not any(word in system for word in absent), role


# -- safety: citations survive or the rewrite is refused ------------------------------------------------------------


def dropping_the_citation() -> Rule:
    def respond(request: RecordedRequest) -> Reply:
        text = current_text(request).replace(r" \cite{smith20}", "").replace("approximately", "about")
        return Reply(json={"reasoning": "shorter", "text": text})

    return Rule(role="simplifier", pattern="rewrite the whole text in a simpler form", respond=respond)


def repairing(put_back: bool) -> Rule:
    def respond(request: RecordedRequest) -> Reply:
        found = re.search(r"Your rewrite:\n(.*?)\n\n", final_user_message(request), re.S)
        assert found is not None
        text = found.group(1)
        return Reply(
            json={"text": text.replace("effective", r"effective \cite{smith20}") if put_back else text}
        )

    return Rule(role="simplifier", pattern="Your rewrite lost", respond=respond)


async def test_a_rewrite_that_drops_a_cite_is_repaired_once(society: Society) -> None:
    result = await society.run(repairing(put_back=True), dropping_the_citation(), loop_limit=1)

    repairs = [r for r in society.requests() if "Your rewrite lost" in r.prompt]
    assert len(repairs) == 1
    assert repairs[0].role == "simplifier"
    assert repairs[0].body["messages"][0]["content"].startswith("You repair a rewritten passage")
    assert r"Your rewrite lost 1 citation (\cite{smith20})" in final_user_message(repairs[0])
    assert result.status is RewriteStatus.REWRITTEN
    assert r"effective \cite{smith20}" in result.text and "about $n=42$" in result.text


async def test_a_rewrite_whose_repair_still_drops_the_cite_is_refused(society: Society) -> None:
    result = await society.run(repairing(put_back=False), dropping_the_citation(), loop_limit=1)

    assert len([r for r in society.requests() if "Your rewrite lost" in r.prompt]) == 1
    assert result.status is RewriteStatus.REFUSED
    assert result.text == PARAGRAPH and not result.changed
    assert result.missing == [r"citation \cite{smith20}"]
    assert r"\cite{smith20}" in result.message


async def test_markdown_paragraphs_get_markdown_rules_and_keep_citations(society: Society) -> None:
    source = "Consequently, the drug is very effective [@smith2020] and we utilize approximately `n = 42` patients."
    result = await society.run(source=source, language=Language.MARKDOWN, loop_limit=1)

    assert "The text is Markdown." in final_user_message(society.requests("expert")[0])
    assert result.status is RewriteStatus.REWRITTEN
    assert "[@smith2020]" in result.text and "`n = 42`" in result.text


async def test_a_text_the_agents_cannot_simplify_is_unchanged(society: Society) -> None:
    source = r"The cat sat on the mat \cite{k}."
    result = await society.run(source=source, loop_limit=1)

    assert (result.status, result.text, result.changed) == (RewriteStatus.UNCHANGED, source, False)


# -- failures ------------------------------------------------------------------------------------------------------


async def test_http_500_everywhere_gives_failed_without_raising(society: Society) -> None:
    result = await society.run(Rule(replies=[Reply(status=500, error_message="overloaded")]))

    assert result.status is RewriteStatus.FAILED
    assert result.text == PARAGRAPH
    assert "server_error" in result.message and "overloaded" in result.message
    assert result.failures
    assert len(society.loops()) == 6, "a server error is per call: every loop is still tried"


async def test_a_dead_endpoint_fails_fast_after_the_first_loop(society: Society, dead_url: str) -> None:
    result = await society.run(base_url=dead_url)

    assert result.status is RewriteStatus.FAILED
    assert "unavailable" in result.message
    assert [turn.role for turn in society.transcript.turns] == ["selector", "layperson"]
    assert all(turn.failure for turn in society.transcript.turns)


async def test_invalid_json_from_the_layperson_skips_its_loops_and_the_others_still_rewrite(
    society: Society,
) -> None:
    confused = Rule(role="layperson", replies=[Reply(content="I do not understand any of it, sorry.")])
    result = await society.run(confused, loop_limit=1)

    assert len(society.requests("layperson")) == 2, "asked once and repaired once"
    assert society.loops() == ["layperson", "clarifier", "redundancy"]
    assert result.status is RewriteStatus.REWRITTEN
    assert any(failure.startswith("layperson: invalid_output") for failure in result.failures)
    assert any(note.startswith("the layperson loop stopped") for note in society.transcript.notes)


# -- progress and transcript ----------------------------------------------------------------------------------------


async def test_progress_steps_name_the_agent_the_loop_and_the_round(society: Society) -> None:
    await society.run()

    assert society.steps == [
        "Agent selector choosing the next loop (1/6)",
        "Layperson asking questions, loop 1/2",
        "Expert answering the layperson, loop 1/2",
        "Simplifier rewriting with the clarifications, loop 1/2",
        "Expert checking accuracy, loop 1/2",
        "Agent selector choosing the next loop (2/6)",
        "Layperson asking questions, loop 2/2",
        "Expert answering the layperson, loop 2/2",
        "Simplifier rewriting with the clarifications, loop 2/2",
        "Expert checking accuracy, loop 2/2",
        "Agent selector choosing the next loop (3/6)",
        "Language clarifier suggesting substitutions, loop 1/2",
        "Simplifier reviewing substitutions, loop 1/2, round 1",
        "Agent selector choosing the next loop (4/6)",
        "Language clarifier suggesting substitutions, loop 2/2",
        "Simplifier reviewing substitutions, loop 2/2, round 1",
        "Redundancy checker looking for non-essential words, loop 1/2",
        "Expert vetoing removals of essential content, loop 1/2",
        "Simplifier removing redundant words, loop 1/2",
        "Redundancy checker looking for non-essential words, loop 2/2",
    ]


async def test_the_transcript_records_every_turn_with_its_prompt_and_answer(society: Society) -> None:
    await society.run(Rule(role="selector", replies=[Reply(status=500)]), loop_limit=1)

    requests = society.requests()
    turns = society.transcript.turns
    assert [turn.role for turn in turns] == [request.role for request in requests]
    for turn, request in zip(turns, requests, strict=True):
        assert turn.messages[0]["content"] in request.body["messages"][0]["content"]
        assert turn.messages[-1] == request.body["messages"][-1]
        if turn.role == "selector":
            assert turn.failure and "server_error" in turn.failure and turn.output == ""
        else:
            assert turn.failure is None and turn.output and turn.model == "scripted-model"
    assert len(society.steps) == len(turns)
    assert society.transcript.models() == dict.fromkeys(
        ("layperson", "expert", "simplifier", "clarifier", "redundancy_checker"), "scripted-model"
    )

"""The focused-feedback pipeline (SWIF2T) driven end to end by a scripted OpenAI-compatible server on loopback.

Each agent role arrives in the X-Margin-Role header, so the scripted rules answer per role and the recorded
requests show the protocol: who was asked what, in which order, with which context. Nothing is mocked: the
real openai client, the real LLM layer (validation, one repair, cache under tmp_path) and the real pipeline.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule, ScriptedEndpoint
from margin.workflows.feedback.dismissals import DismissalStore, dismissal_key
from margin.workflows.feedback.literature import Literature, WebSearch
from margin.workflows.feedback.pipeline import (
    ReviewContext,
    ReviewOptions,
    review_manuscript,
    review_paragraph,
)
from margin.workflows.feedback.plans import LITERATURE, PAPER, REVIEW, HeuristicPlanScorer, Plan, PlanScore
from margin.workflows.feedback.retrieval import manuscript_passages
from margin.workflows.feedback.types import Mode, ParagraphReview, Source, WeaknessType
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.types import StructuredMode
from margin.workflows.manuscript.model import Manuscript, Paragraph
from margin.workflows.prompts import fence

from conftest import (
    ClientFactory,
    ScriptedFactory,
    SearchServer,
    chat_requests_in_order,
    feedback_llm_config,
    final_user_message,
    finding_json,
    llm_config,
    load_manuscript,
    paragraph_starting,
    review_reply,
    without_nagle,
)

TARGET_PREFIX = "Ranking models offer a natural framing"
GOOD_QUOTE = "a carefully tuned BM25 ranking already beats several early classifiers"
CONTEXT_HEADING = "Context gathered from the rest of the paper and the literature:"

# Candidate 2 is clearly the best: specific, self-contained questions about the paragraph's concepts, paper
# questions first. Candidate 1 is generic; candidate 3 uses actions nobody knows.
GOOD_PLAN: list[dict[str, str]] = [
    {"action": PAPER, "question": "How is the BM25 ranking tuned in the experiments of this study?"},
    {"action": PAPER, "question": "Which dense bi-encoders are compared with the learned sparse retrievers?"},
    {"action": LITERATURE, "question": "How expensive is the nearest-neighbour index of dense encoders?"},
    {"action": REVIEW, "question": ""},
]
GENERIC_PLAN: list[dict[str, str]] = [
    {"action": LITERATURE, "question": "Is it good?"},
    {"action": PAPER, "question": "What about this?"},
    {"action": PAPER, "question": "What about this?"},
    {"action": REVIEW, "question": ""},
]
UNKNOWN_ACTIONS_PLAN: list[dict[str, str]] = [
    {"action": "search_the_web", "question": "How is the BM25 ranking tuned in the experiments?"},
    {"action": "ponder", "question": "Which dense bi-encoders are compared with sparse retrievers?"},
    {"action": REVIEW, "question": ""},
]
STEP_ONE = re.compile(r"Remaining planned steps:\n1\. \[(?P<action>[^\]]*)\] (?P<question>[^\n]*)")
QUESTION = re.compile(r"\nQuestion: (?P<question>.*)\Z", re.S)


# -- scripted agents ---------------------------------------------------------------------------------------------


def in_order(*replies: Reply) -> Callable[[RecordedRequest], Reply]:
    """A planner whose answers (one per choice: a request with `n` asks for several) are these, in the order
    it writes them, the last repeating."""
    written = itertools.count()

    def respond(request: RecordedRequest) -> Reply:
        return replies[min(next(written), len(replies) - 1)]

    return respond


def plans_in_order(*plans: list[dict[str, str]]) -> Callable[[RecordedRequest], Reply]:
    return in_order(*(Reply(json={"steps": plan}) for plan in plans))


def three_candidates() -> Callable[[RecordedRequest], Reply]:
    """The good plan first (a lone candidate is the good plan), then two poor ones."""
    return plans_in_order(GOOD_PLAN, GENERIC_PLAN, UNKNOWN_ACTIONS_PLAN)


def step_one(request: RecordedRequest) -> tuple[str, str]:
    found = STEP_ONE.search(final_user_message(request))
    assert found is not None, final_user_message(request)
    return found.group("action"), found.group("question")


def as_planned(request: RecordedRequest) -> Reply:
    action, question = step_one(request)
    return Reply(json={"explanation": "run the planned step", "action": action, "question": question})


def question_of(request: RecordedRequest) -> str:
    found = QUESTION.search(final_user_message(request))
    assert found is not None, final_user_message(request)
    return found.group("question")


def answer_of(question: str) -> str:
    return f"ANSWER<{question}>"


def answering(request: RecordedRequest) -> Reply:
    question = question_of(request)
    return Reply(json={"answerable": True, "answer": answer_of(question), "passages": [1]})


def agents(
    planner: Callable[[RecordedRequest], Reply] | None = None,
    controller: Callable[[RecordedRequest], Reply] = as_planned,
    investigator: Callable[[RecordedRequest], Reply] = answering,
    reviewer: Reply | Callable[[RecordedRequest], Reply] | None = None,
) -> list[Rule]:
    reviewer_rule = (
        Rule(role="reviewer", respond=reviewer)
        if callable(reviewer)
        else Rule(role="reviewer", replies=[reviewer or review_reply(finding_json(GOOD_QUOTE))])
    )
    return [
        Rule(role="planner", respond=planner or three_candidates()),
        Rule(role="controller", respond=controller),
        Rule(role="investigator", respond=investigator),
        reviewer_rule,
    ]


# -- fixtures ----------------------------------------------------------------------------------------------------


@pytest.fixture
def target(paper: Manuscript) -> Paragraph:
    return paragraph_starting(paper, TARGET_PREFIX)


async def build_context(manuscript: Manuscript) -> ReviewContext:
    return await ReviewContext.build(manuscript, await Literature.gather(manuscript))


@pytest.fixture(scope="module")
def paper_context(paper: Manuscript) -> ReviewContext:
    """The passage index and literature of the fixture paper (loop-independent: built once per module)."""
    return asyncio.run(build_context(paper))


class Harness:
    """A scripted endpoint and a client for it, for one paragraph review."""

    def __init__(self, scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path) -> None:
        self.scripted = scripted
        self.llm_clients = llm_clients
        self.tmp_path = tmp_path
        self.endpoint: ScriptedEndpoint | None = None

    async def review(
        self,
        rules: list[Rule],
        paragraph: Paragraph,
        context: ReviewContext,
        structured_mode: StructuredMode = StructuredMode.AUTO,
        **options: Any,
    ) -> ParagraphReview:
        client = await self.client(rules, structured_mode=structured_mode)
        return await self.review_with(client, paragraph, context, **options)

    async def client(
        self,
        rules: list[Rule],
        structured_mode: StructuredMode = StructuredMode.AUTO,
        cache_enabled: bool = True,
        **endpoint: Any,
    ) -> LLMClient:
        """A client for a new scripted endpoint (`endpoint`: its options, e.g. accepts_n)."""
        self.endpoint = without_nagle(self.scripted(*rules, **endpoint))
        config = feedback_llm_config(
            self.endpoint, self.tmp_path, structured_mode=structured_mode, cache_enabled=cache_enabled
        )
        return self.llm_clients(config)

    async def review_with(
        self, client: LLMClient, paragraph: Paragraph, context: ReviewContext, **options: Any
    ) -> ParagraphReview:
        return await review_paragraph(paragraph, context, client, ReviewOptions(**options))

    def requests(self, role: str | None = None) -> list[RecordedRequest]:
        """The chat requests in the order they arrived, of one role or all."""
        assert self.endpoint is not None
        return [r for r in chat_requests_in_order(self.endpoint) if role is None or r.role == role]

    def roles(self) -> list[str | None]:
        return [request.role for request in self.requests()]

    def asked(self) -> list[str]:
        """The questions the investigator was asked, in order."""
        return [question_of(request) for request in self.requests("investigator")]


@pytest.fixture
def harness(scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path) -> Harness:
    return Harness(scripted, llm_clients, tmp_path)


def reviewer_prompt(harness: Harness, index: int = 0) -> str:
    return harness.requests("reviewer")[index].prompt


# -- the protocol of full mode -----------------------------------------------------------------------------------


async def test_full_mode_role_order_planners_then_controller_before_each_investigation_then_reviewer(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    result = await harness.review(agents(), target, paper_context, mode=Mode.FULL, candidates=3)

    # The first plan settles the structured-output mode; the other two come in one request with n=2.
    assert harness.roles() == [
        "planner",
        "planner",
        "controller",
        "investigator",
        "controller",
        "investigator",
        "controller",
        "investigator",
        "reviewer",
    ]
    assert [request.n for request in harness.requests("planner")] == [1, 2]
    ordered = harness.requests()
    for earlier, later in itertools.pairwise(ordered[2:]):
        assert earlier.started < later.started, "after planning, the steps run one after another"
    assert result.failures == []
    assert [finding.quote for finding in result.findings] == [GOOD_QUOTE]


async def test_once_the_mode_is_known_the_candidate_plans_are_one_request_with_n(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    await harness.review(
        agents(), target, paper_context, candidates=3, structured_mode=StructuredMode.JSON_SCHEMA
    )
    (planner,) = harness.requests("planner")
    assert planner.n == 3 and planner.body.get("temperature") == 0.7  # samples that differ
    first_controller = harness.requests("controller")[0]
    assert first_controller.started >= planner.finished - 0.01, "the controller comes after the plans"


async def test_an_endpoint_that_refuses_n_is_asked_once_per_plan_and_that_is_remembered(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    client = await harness.client(
        agents(), accepts_n=False, structured_mode=StructuredMode.JSON_SCHEMA, cache_enabled=False
    )
    await harness.review_with(client, target, paper_context, candidates=3)
    assert [request.n for request in harness.requests("planner")] == [3, 1, 1, 1]  # refused, then one each
    await harness.review_with(client, target, paper_context, candidates=3)
    assert [request.n for request in harness.requests("planner")][4:] == [1, 1, 1]  # not tried again


async def test_an_endpoint_that_ignores_n_gets_the_missing_plans_asked_for(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    client = await harness.client(
        agents(), accepts_n=None, structured_mode=StructuredMode.JSON_SCHEMA, cache_enabled=False
    )
    result = await harness.review_with(client, target, paper_context, candidates=3)
    # One choice came back for n=3: the two missing plans are asked for one by one, and n is not sent again.
    assert [request.n for request in harness.requests("planner")] == [3, 1, 1]
    expected = [step["question"] for step in GOOD_PLAN if step["action"] != REVIEW]
    assert harness.asked() == expected and result.failures == []


@pytest.mark.parametrize("candidates", [1, 5])
async def test_the_planner_writes_exactly_candidates_plans(
    harness: Harness, target: Paragraph, paper_context: ReviewContext, candidates: int
) -> None:
    scored: list[int] = []

    class CountingScorer(HeuristicPlanScorer):
        def score(self, paragraph: str, plan: Plan) -> PlanScore:
            scored.append(1)
            return super().score(paragraph, plan)

    await harness.review(
        agents(planner=lambda request: Reply(json={"steps": GOOD_PLAN})),
        target,
        paper_context,
        candidates=candidates,
        scorer=CountingScorer(),
    )
    planners = harness.requests("planner")
    assert sum(request.n for request in planners) == candidates == len(scored)
    assert len(planners) == min(candidates, 2)  # one to settle the mode, then one request for the rest


async def test_the_best_scoring_candidate_plan_is_the_one_executed(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    result = await harness.review(
        agents(planner=plans_in_order(GENERIC_PLAN, GOOD_PLAN, UNKNOWN_ACTIONS_PLAN)),
        target,
        paper_context,
        candidates=3,
    )

    expected = [step["question"] for step in GOOD_PLAN if step["action"] != REVIEW]
    assert harness.asked() == expected
    assert result.plan == Plan.from_json({"steps": GOOD_PLAN}).executable().to_json()
    assert [item.question for item in result.evidence] == expected
    assert [item.source for item in result.evidence] == [Source.PAPER, Source.PAPER, Source.LITERATURE]


async def test_the_best_plan_wins_whichever_candidate_number_it_has(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    good_last = plans_in_order(UNKNOWN_ACTIONS_PLAN, GENERIC_PLAN, GOOD_PLAN)
    await harness.review(agents(planner=good_last), target, paper_context, candidates=3)
    expected = [step["question"] for step in GOOD_PLAN if step["action"] != REVIEW]
    assert harness.asked() == expected


async def test_a_plan_judge_is_asked_after_the_planners_and_its_ratings_count(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    # Two executable candidates; the judge strongly prefers the generic one, which then wins (heuristics and
    # judge weigh equally), proving the ratings are used.
    rules = [
        Rule(role="judge", replies=[Reply(json={"ratings": [0, 10]})]),
        *agents(planner=plans_in_order(GOOD_PLAN, GENERIC_PLAN)),
    ]
    await harness.review(rules, target, paper_context, candidates=2, judge=True)

    assert harness.roles()[:3] == ["planner", "planner", "judge"]
    assert "Plan 1:" in final_user_message(harness.requests("judge")[0])
    assert harness.asked()[0] == GENERIC_PLAN[0]["question"]


async def test_a_failing_judge_is_recorded_and_the_heuristics_choose(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    rules = [Rule(role="judge", replies=[Reply(content="ten out of ten")]), *agents()]
    result = await harness.review(rules, target, paper_context, candidates=3, judge=True)

    assert any(failure.startswith("judge: invalid_output") for failure in result.failures), result.failures
    expected = [step["question"] for step in GOOD_PLAN if step["action"] != REVIEW]
    assert harness.asked() == expected


async def test_controller_skip_skips_the_step(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    def skip_dense(request: RecordedRequest) -> Reply:
        action, question = step_one(request)
        if "dense bi-encoders" in question:
            return Reply(json={"explanation": "already known", "action": "skip"})
        return Reply(json={"explanation": "as planned", "action": action, "question": question})

    result = await harness.review(agents(controller=skip_dense), target, paper_context, candidates=1)

    assert harness.roles() == [
        "planner",
        "controller",
        "investigator",
        "controller",
        "controller",
        "investigator",
        "reviewer",
    ]
    assert harness.asked() == [GOOD_PLAN[0]["question"], GOOD_PLAN[2]["question"]]
    assert all("dense bi-encoders" not in item.question for item in result.evidence)


async def test_controller_review_stops_early(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    def stop_after_first(request: RecordedRequest) -> Reply:
        if "(nothing yet)" in final_user_message(request):
            return as_planned(request)
        return Reply(json={"explanation": "enough context", "action": "review"})

    result = await harness.review(agents(controller=stop_after_first), target, paper_context, candidates=1)

    assert harness.roles() == [
        "planner",
        "controller",
        "investigator",
        "controller",
        "reviewer",
    ]
    assert [item.question for item in result.evidence] == [GOOD_PLAN[0]["question"]]
    assert answer_of(GOOD_PLAN[0]["question"]) in reviewer_prompt(harness)


async def test_controller_review_at_once_leaves_the_reviewer_without_context(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    result = await harness.review(
        agents(controller=lambda request: Reply(json={"explanation": "obvious", "action": "review"})),
        target,
        paper_context,
        candidates=1,
    )
    assert harness.roles() == ["planner", "controller", "reviewer"]
    assert result.evidence == []
    assert CONTEXT_HEADING not in reviewer_prompt(harness)


async def test_a_replaced_question_is_the_one_asked(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    replacement = "Which BM25 parameters k1 and b are used for the lexical baseline?"

    def replace_first(request: RecordedRequest) -> Reply:
        action, question = step_one(request)
        if question == GOOD_PLAN[0]["question"]:
            return Reply(json={"explanation": "sharper", "action": PAPER, "question": replacement})
        return Reply(json={"explanation": "as planned", "action": action, "question": question})

    result = await harness.review(agents(controller=replace_first), target, paper_context, candidates=1)

    asked = harness.asked()
    assert asked[0] == replacement
    assert GOOD_PLAN[0]["question"] not in asked
    assert result.evidence[0].question == replacement
    assert answer_of(replacement) in reviewer_prompt(harness)


async def test_the_controller_sees_what_was_learned_and_what_remains(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    await harness.review(agents(), target, paper_context, candidates=1)
    controllers = harness.requests("controller")
    assert len(controllers) == 3
    second = final_user_message(controllers[1])
    assert answer_of(GOOD_PLAN[0]["question"]) in second
    assert f"1. [{PAPER}] {GOOD_PLAN[1]['question']}" in second
    assert GOOD_PLAN[0]["question"] not in second.split("Remaining planned steps:")[1]
    assert target.text in second


async def test_max_questions_bounds_the_investigation(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    await harness.review(agents(), target, paper_context, candidates=1, max_questions=2)
    assert len(harness.requests("investigator")) == 2
    assert len(harness.requests("reviewer")) == 1


# -- what the investigator reads ---------------------------------------------------------------------------------


def paragraphs_quoted_in(prompt: str, manuscript: Manuscript) -> set[str]:
    """Ids of the manuscript paragraphs whose passages appear word for word in the prompt."""
    return {
        passage.paragraph_id or ""
        for passage in manuscript_passages(manuscript)
        if len(passage.text) > 40 and passage.text in prompt
    }


async def test_paper_questions_read_passages_of_other_paragraphs_never_the_paragraph_itself(
    harness: Harness, target: Paragraph, paper: Manuscript, paper_context: ReviewContext
) -> None:
    # Questions made of the paragraph's own words: BM25 would rank the paragraph itself first.
    own_words = [
        "How do learned sparse retrievers map each document to a weighted bag of terms?",
        "How does a carefully tuned BM25 ranking compare with dense bi-encoders?",
    ]
    plan = [{"action": PAPER, "question": question} for question in own_words] + [{"action": REVIEW}]
    result = await harness.review(
        agents(planner=lambda request: Reply(json={"steps": plan})), target, paper_context, candidates=1
    )

    investigations = harness.requests("investigator")
    assert [question_of(request) for request in investigations] == own_words
    for request in investigations:
        prompt = final_user_message(request)
        assert target.text not in prompt
        quoted = paragraphs_quoted_in(prompt, paper)
        assert quoted, "the investigator reads passages retrieved from the manuscript"
        assert target.id not in quoted
        assert 1 <= len(re.findall(r"^\[\d+\]", prompt, re.M)) <= 5
        assert "this manuscript" in request.prompt  # the system prompt names the source
    assert {passage.paragraph_id for item in result.evidence for passage in item.passages} <= {
        p.id for p in paper.paragraphs if p.id != target.id
    }


async def test_literature_questions_read_the_bib_entries_the_paragraph_cites(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    plan = [{"action": LITERATURE, "question": GOOD_PLAN[2]["question"]}, {"action": REVIEW}]
    result = await harness.review(
        agents(planner=lambda request: Reply(json={"steps": plan})), target, paper_context, candidates=1
    )

    (request,) = harness.requests("investigator")
    prompt = final_user_message(request)
    for cited_title in (
        "Strong Lexical Baselines for Technology-Assisted Review",  # lindqvist2019bm25
        "Dense Passage Encoders for Biomedical Screening",  # haddad2022dense
        "Lexical Matching Still Matters: An Analysis of Learned Term Weights",  # chen2021lexical
        "Learned Sparse Representations at the Cost of BM25",  # okafor2021sparse
    ):
        assert cited_title in prompt
    assert "Lindqvist, Erik and Nwosu, Chidera" in prompt
    for uncited_title in (
        "How Long Does Screening Take?",
        "Distilling Cross-Encoders into Sparse Retrievers",
    ):
        assert uncited_title not in prompt
    assert "the literature" in request.prompt
    assert result.evidence[0].source is Source.LITERATURE


async def test_literature_questions_of_a_tmp_manuscript_read_its_own_bib(
    harness: Harness, tmp_path: Path
) -> None:
    (tmp_path / "refs.bib").write_text(
        "@article{zhou2021prune,\n  title = {Pruning Posting Lists by Section},\n"
        "  author = {Zhou, Li},\n  year = {2021},\n  abstract = {Section budgets keep rare dosage terms.},\n}\n"
        "@article{other2020,\n  title = {An Uncited Survey},\n  year = {2020},\n}\n",
        encoding="utf-8",
    )
    body = (
        "We prune each posting list to a fixed budget per section, following the section-wise pruning "
        "of \\citet{zhou2021prune}, and we keep the budget constant across all reviews in the collection "
        "so that index size stays predictable for every screening project."
    )
    main = tmp_path / "main.tex"
    main.write_text(
        "\\documentclass{article}\n\\begin{document}\n\\section{Method}\n"
        + body
        + "\n\n\\bibliography{refs}\n\\end{document}\n",
        encoding="utf-8",
    )
    manuscript = load_manuscript(main)
    paragraph = paragraph_starting(manuscript, "We prune each posting list")
    context = await ReviewContext.build(manuscript, await Literature.gather(manuscript))
    plan = [
        {"action": LITERATURE, "question": "How does section-wise pruning treat rare terms?"},
        {"action": REVIEW},
    ]

    await harness.review(
        agents(planner=lambda request: Reply(json={"steps": plan}), reviewer=review_reply()),
        paragraph,
        context,
        candidates=1,
    )
    prompt = final_user_message(harness.requests("investigator")[0])
    assert "Pruning Posting Lists by Section" in prompt
    assert "Section budgets keep rare dosage terms." in prompt
    assert "An Uncited Survey" not in prompt


async def test_a_literature_question_with_nothing_to_read_is_not_asked(
    harness: Harness, paper: Manuscript, paper_context: ReviewContext
) -> None:
    uncited = paragraph_starting(paper, "Trial reports, however, are not open-domain passages.")
    plan = [{"action": LITERATURE, "question": "What do trial reports usually contain?"}, {"action": REVIEW}]
    result = await harness.review(
        agents(planner=lambda request: Reply(json={"steps": plan}), reviewer=review_reply()),
        uncited,
        paper_context,
        candidates=1,
    )
    # no cited entry, no library, no web search: neither the controller nor the investigator is asked
    assert harness.roles() == ["planner", "reviewer"]
    assert result.evidence == []
    assert result.failures == []


async def test_a_paper_question_with_no_matching_passage_is_not_sent_to_the_investigator(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    plan = [{"action": PAPER, "question": "Xylophone quokka zeppelin?"}, {"action": REVIEW}]
    result = await harness.review(
        agents(planner=lambda request: Reply(json={"steps": plan})), target, paper_context, candidates=1
    )
    assert harness.roles() == ["planner", "controller", "reviewer"]
    assert result.evidence == [] and result.failures == []


async def test_answers_that_do_not_know_never_reach_the_reviewer(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    questions = [
        "How is the BM25 ranking tuned in the experiments of this study?",
        "Which dense bi-encoders are compared with the learned sparse retrievers?",
        "How large is the sparse index of the learned sparse retrievers?",
        "How is the inverted index of the learned sparse retrievers built?",
    ]
    replies = {
        questions[0]: {"answerable": False, "answer": "I don't know"},
        questions[1]: {"answerable": True, "answer": "I don't know."},
        questions[2]: {"answerable": False, "answer": "Probably about five gigabytes"},
        questions[3]: {
            "answerable": True,
            "answer": "KNOWN-ANSWER: one posting list per term",
            "passages": [2],
        },
    }
    plan = [{"action": PAPER, "question": question} for question in questions] + [{"action": REVIEW}]
    result = await harness.review(
        agents(
            planner=lambda request: Reply(json={"steps": plan}),
            investigator=lambda request: Reply(json=replies[question_of(request)]),
        ),
        target,
        paper_context,
        candidates=1,
    )

    assert len(harness.requests("investigator")) == 4
    assert [item.question for item in result.evidence] == [questions[3]]
    prompt = final_user_message(harness.requests("reviewer")[0])
    assert "KNOWN-ANSWER: one posting list per term" in prompt
    for dropped in questions[:3]:
        assert dropped not in prompt
    assert "don't know" not in prompt.split(CONTEXT_HEADING)[1]
    assert "five gigabytes" not in prompt


async def test_a_typographic_i_dont_know_is_dropped_too(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    plan = [{"action": PAPER, "question": GOOD_PLAN[0]["question"]}, {"action": REVIEW}]
    result = await harness.review(
        agents(
            planner=lambda request: Reply(json={"steps": plan}),
            investigator=lambda request: Reply(json={"answerable": True, "answer": "I don’t know."}),
        ),
        target,
        paper_context,
        candidates=1,
    )
    assert result.evidence == []


async def test_literature_questions_use_the_web_search_without_peer_review_sites(
    harness: Harness, paper: Manuscript
) -> None:
    server = SearchServer()
    server.payload = {
        "results": [
            {"url": "https://openreview.net/forum?id=x", "title": "Reviews", "content": "REVIEWER-SECRET"},
            {
                "url": "https://example.org/trials",
                "title": "Trial reports",
                "content": "WEB-PASSAGE about trials",
            },
        ]
    }
    try:
        context = await ReviewContext.build(paper, await Literature.gather(paper, web=WebSearch(server.url)))
        uncited = paragraph_starting(paper, "Trial reports, however, are not open-domain passages.")
        plan = [
            {"action": LITERATURE, "question": "What do trial reports usually contain?"},
            {"action": REVIEW},
        ]
        result = await harness.review(
            agents(planner=lambda request: Reply(json={"steps": plan}), reviewer=review_reply()),
            uncited,
            context,
            candidates=1,
        )
    finally:
        server.stop()
    (request,) = harness.requests("investigator")
    assert "WEB-PASSAGE about trials" in final_user_message(request)
    assert "REVIEWER-SECRET" not in request.prompt
    assert server.queries == [{"q": ["What do trial reports usually contain?"], "format": ["json"]}]
    assert result.evidence[0].source is Source.LITERATURE


async def test_a_broken_web_search_never_raises_out_of_the_review(
    harness: Harness, paper: Manuscript
) -> None:
    server = SearchServer()
    server.raw = b'{"results": null}'
    try:
        context = await ReviewContext.build(paper, await Literature.gather(paper, web=WebSearch(server.url)))
        uncited = paragraph_starting(paper, "Trial reports, however, are not open-domain passages.")
        plan = [
            {"action": LITERATURE, "question": "What do trial reports usually contain?"},
            {"action": REVIEW},
        ]
        result = await harness.review(
            agents(planner=lambda request: Reply(json={"steps": plan}), reviewer=review_reply()),
            uncited,
            context,
            candidates=1,
        )
    finally:
        server.stop()
    assert result.no_weakness


# -- fast and single modes ---------------------------------------------------------------------------------------


async def test_fast_mode_is_one_reviewer_call_with_context_retrieved_from_the_rest_of_the_paper(
    harness: Harness, target: Paragraph, paper: Manuscript, paper_context: ReviewContext
) -> None:
    result = await harness.review(agents(), target, paper_context, mode=Mode.FAST)

    assert harness.roles() == ["reviewer"]
    prompt = final_user_message(harness.requests("reviewer")[0])
    assert CONTEXT_HEADING in prompt
    context_part = prompt.split(CONTEXT_HEADING)[1]
    quoted = paragraphs_quoted_in(context_part, paper)
    assert quoted and target.id not in quoted
    assert 1 <= len(re.findall(r"^\[\d+\]", context_part, re.M)) <= 5
    assert prompt.count(target.text) == 1  # the paragraph itself, never again as context
    assert [finding.quote for finding in result.findings] == [GOOD_QUOTE]
    assert result.mode is Mode.FAST


async def test_fast_mode_repairs_with_a_second_reviewer_call_only(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    replies = [
        review_reply(finding_json("a quote the paragraph never had")),
        review_reply(finding_json(GOOD_QUOTE)),
    ]
    result = await harness.review(
        [Rule(role="reviewer", replies=replies)], target, paper_context, mode=Mode.FAST
    )
    assert harness.roles() == ["reviewer", "reviewer"]
    assert [finding.quote for finding in result.findings] == [GOOD_QUOTE]


async def test_single_mode_is_the_reviewer_alone_without_a_context_section(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    result = await harness.review(agents(), target, paper_context, mode=Mode.SINGLE)

    assert harness.roles() == ["reviewer"]
    request = harness.requests("reviewer")[0]
    assert CONTEXT_HEADING not in request.prompt
    assert "Context gathered" not in request.prompt
    assert final_user_message(request) == f"Paragraph:\n{fence(target.text)}"
    assert "Examples of findings" in request.prompt  # the in-context examples are in the system prompt
    assert result.evidence == []
    assert [finding.quote for finding in result.findings] == [GOOD_QUOTE]


# -- malformed output at every role ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "planner_reply",
    [
        Reply(content="Step one: read the paper. Step two: review."),
        Reply(json={"steps": []}),
        Reply(json={"plan": GOOD_PLAN}),
        Reply(json={"steps": UNKNOWN_ACTIONS_PLAN}),
        Reply(json={"steps": [{"action": REVIEW}]}),
        Reply(status=500, error_message="planner crashed"),
    ],
    ids=["prose", "empty-plan", "wrong-key", "unknown-actions", "review-only", "http-500"],
)
async def test_an_unusable_planner_still_gets_the_paragraph_reviewed(
    harness: Harness, target: Paragraph, paper_context: ReviewContext, planner_reply: Reply
) -> None:
    result = await harness.review(
        agents(planner=lambda request: planner_reply), target, paper_context, candidates=2
    )

    assert set(harness.roles()) == {"planner", "reviewer"}
    assert harness.roles()[-1] == "reviewer"
    assert "planner: no usable plan; reviewing with the paragraph alone" in result.failures
    assert [finding.quote for finding in result.findings] == [GOOD_QUOTE]
    assert result.plan == []
    assert CONTEXT_HEADING not in reviewer_prompt(harness)


async def test_invalid_planner_json_is_a_typed_failure_after_one_repair_per_candidate(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    result = await harness.review(
        agents(planner=lambda request: Reply(content="{not json")), target, paper_context, candidates=3
    )
    # The first plan and its repair; then one request with n=2 and a repair for each of its two plans.
    assert [request.n for request in harness.requests("planner")] == [1, 1, 2, 1, 1]
    planner_failures = [f for f in result.failures if f.startswith("planner: invalid_output")]
    assert len(planner_failures) == 3
    assert len(result.findings) == 1


async def test_one_failing_candidate_does_not_stop_the_others(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    first_fails = in_order(Reply(status=503, error_message="overloaded"), Reply(json={"steps": GOOD_PLAN}))
    result = await harness.review(agents(planner=first_fails), target, paper_context, candidates=3)
    assert [f.split(":")[:2] for f in result.failures] == [["planner", " server_error"]]
    assert len(harness.requests("investigator")) == 3


@pytest.mark.parametrize(
    "controller_reply",
    [
        Reply(content="I think we should run it."),
        Reply(json={"explanation": "dance!", "action": "dance"}),
        Reply(json={"action": PAPER}),
        Reply(status=500, error_message="controller crashed"),
        Reply(status=400, error_message="bad request"),
    ],
    ids=["prose", "unknown-action", "no-explanation", "http-500", "http-400"],
)
async def test_a_failing_controller_runs_each_step_as_planned(
    harness: Harness, target: Paragraph, paper_context: ReviewContext, controller_reply: Reply
) -> None:
    result = await harness.review(
        agents(controller=lambda request: controller_reply), target, paper_context, candidates=1
    )

    expected = [step["question"] for step in GOOD_PLAN if step["action"] != REVIEW]
    assert harness.asked() == expected
    controller_failures = [f for f in result.failures if f.startswith("controller: ")]
    assert len(controller_failures) == 3
    assert [item.source for item in result.evidence] == [Source.PAPER, Source.PAPER, Source.LITERATURE]
    assert len(result.findings) == 1


@pytest.mark.parametrize(
    "bad_reply",
    [
        Reply(content="The passages say it is tuned."),
        Reply(json={"answer": "no answerable flag"}),
        Reply(status=500, error_message="investigator crashed"),
        Reply(drop=True),
    ],
    ids=["prose", "schema", "http-500", "dropped-connection"],
)
async def test_a_failing_investigator_skips_only_that_question(
    harness: Harness, target: Paragraph, paper_context: ReviewContext, bad_reply: Reply
) -> None:
    failing_question = GOOD_PLAN[1]["question"]

    def second_fails(request: RecordedRequest) -> Reply:
        return bad_reply if question_of(request) == failing_question else answering(request)

    result = await harness.review(agents(investigator=second_fails), target, paper_context, candidates=1)

    asked = [step["question"] for step in GOOD_PLAN if step["action"] != REVIEW]
    assert [item.question for item in result.evidence] == [asked[0], asked[2]]
    assert len([f for f in result.failures if f.startswith("investigator: ")]) == 1
    assert harness.roles()[-1] == "reviewer"
    assert failing_question not in final_user_message(harness.requests("reviewer")[0])


@pytest.mark.parametrize(
    ("reviewer_reply", "kind"),
    [
        (Reply(content="This paragraph overclaims."), "invalid_output"),
        (Reply(json={"findings": [{"quote": "x"}]}), "invalid_output"),
        (Reply(json={"findings": "none"}), "invalid_output"),
        (Reply(content=""), "invalid_output"),
        (Reply(status=500, error_message="reviewer crashed"), "server_error"),
        (Reply(status=429, retry_after=0), "rate_limited"),
        (Reply(json={"findings": []}, finish_reason="length"), "truncated"),
    ],
    ids=["prose", "missing-fields", "findings-not-a-list", "empty", "http-500", "http-429", "truncated"],
)
async def test_a_failing_reviewer_is_a_typed_failure_with_no_findings(
    harness: Harness, target: Paragraph, paper_context: ReviewContext, reviewer_reply: Reply, kind: str
) -> None:
    result = await harness.review(
        [Rule(role="reviewer", replies=[reviewer_reply])], target, paper_context, mode=Mode.SINGLE
    )
    assert result.findings == []
    assert result.no_weakness is False
    assert len(result.failures) == 1
    assert result.failures[0].startswith(f"reviewer: {kind}: "), result.failures


async def test_a_dead_endpoint_in_full_mode_is_recorded_never_raised(
    llm_clients: ClientFactory, dead_url: str, tmp_path: Path, target: Paragraph, paper_context: ReviewContext
) -> None:
    client = llm_clients(llm_config(dead_url, tmp_path / "cache.sqlite3", retries=0, model="m"))
    result = await review_paragraph(target, paper_context, client, ReviewOptions(candidates=2))
    assert result.findings == []
    # The candidate plans are one call: nothing answers, so it fails once, not once per candidate.
    assert result.failures[0].startswith("planner: unavailable") and len(result.failures) == 3
    assert "planner: no usable plan; reviewing with the paragraph alone" in result.failures
    assert result.failures[-1].startswith("reviewer: unavailable")


# -- the reviewer's findings: quotes, labels, repair -------------------------------------------------------------


async def test_a_hallucinated_quote_gets_exactly_one_repair_request_that_names_it(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    invented = "our sparse model is provably optimal for every screening task"
    replies = [review_reply(finding_json(invented)), review_reply(finding_json(GOOD_QUOTE))]
    result = await harness.review(
        [Rule(role="reviewer", replies=replies)], target, paper_context, mode=Mode.SINGLE
    )

    first, repair = harness.requests("reviewer")
    last = final_user_message(repair)
    assert invented in last
    assert "not in the paragraph" in last
    assert message_roles(repair)[-3:] == ["user", "assistant", "user"]
    assert repair.body["messages"][: len(first.body["messages"])] == first.body["messages"]
    assert [finding.quote for finding in result.findings] == [GOOD_QUOTE]
    assert result.dropped == []
    assert result.failures == []


def message_roles(request: RecordedRequest) -> list[str]:
    return [str(message["role"]) for message in request.body["messages"]]


async def test_a_quote_still_invented_after_the_repair_is_dropped(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    invented = "our sparse model is provably optimal for every screening task"
    result = await harness.review(
        [Rule(role="reviewer", replies=[review_reply(finding_json(invented))])],
        target,
        paper_context,
        mode=Mode.SINGLE,
    )
    assert len(harness.requests("reviewer")) == 2
    assert result.findings == []
    assert len(result.dropped) == 1 and invented in result.dropped[0]
    assert result.no_weakness is False
    assert result.failures == []


async def test_only_the_bad_finding_is_dropped_and_the_good_one_kept(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    invented = "our sparse model is provably optimal for every screening task"
    reply = review_reply(finding_json(GOOD_QUOTE, "Soundness"), finding_json(invented))
    result = await harness.review(
        [Rule(role="reviewer", replies=[reply])], target, paper_context, mode=Mode.SINGLE
    )
    assert len(harness.requests("reviewer")) == 2
    assert [(f.quote, f.label) for f in result.findings] == [(GOOD_QUOTE, WeaknessType.SOUNDNESS)]
    assert len(result.dropped) == 1


async def test_a_failed_repair_request_keeps_the_valid_findings_and_records_the_failure(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    invented = "our sparse model is provably optimal for every screening task"
    replies = [
        review_reply(finding_json(GOOD_QUOTE), finding_json(invented)),
        Reply(status=500, error_message="gone"),
    ]
    result = await harness.review(
        [Rule(role="reviewer", replies=replies)], target, paper_context, mode=Mode.SINGLE
    )
    assert [f.quote for f in result.findings] == [GOOD_QUOTE]
    assert len(result.dropped) == 1 and invented in result.dropped[0]
    assert len(result.failures) == 1 and result.failures[0].startswith("reviewer: server_error")


async def test_the_repair_request_names_a_non_ascii_quote_as_written(
    harness: Harness, paper: Manuscript, paper_context: ReviewContext
) -> None:
    paragraph = paragraph_starting(paper, "This observation has a tidy combinatorial reading.")
    invented = "in the spirit of Erdős and Rényi, pruning is optimal"
    replies = [review_reply(finding_json(invented)), review_reply()]
    await harness.review([Rule(role="reviewer", replies=replies)], paragraph, paper_context, mode=Mode.SINGLE)
    assert invented in final_user_message(harness.requests("reviewer")[1])


async def test_an_unknown_label_gets_a_repair_request(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    replies = [
        review_reply(finding_json(GOOD_QUOTE, "Clarity")),
        review_reply(finding_json(GOOD_QUOTE, "Meaningful Comparison")),
    ]
    result = await harness.review(
        [Rule(role="reviewer", replies=replies)], target, paper_context, mode=Mode.SINGLE
    )
    assert len(harness.requests("reviewer")) == 2
    assert "'Clarity' is not one of the five labels" in final_user_message(harness.requests("reviewer")[1])
    assert [f.label for f in result.findings] == [WeaknessType.COMPARISON]


async def test_an_unknown_label_after_the_repair_is_dropped(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    result = await harness.review(
        [Rule(role="reviewer", replies=[review_reply(finding_json(GOOD_QUOTE, "Clarity"))])],
        target,
        paper_context,
        mode=Mode.SINGLE,
    )
    assert result.findings == []
    assert result.dropped and "Clarity" in result.dropped[0]


async def test_an_empty_review_text_is_repaired_or_dropped(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    result = await harness.review(
        [Rule(role="reviewer", replies=[review_reply(finding_json(GOOD_QUOTE, review="  "))])],
        target,
        paper_context,
        mode=Mode.SINGLE,
    )
    assert len(harness.requests("reviewer")) == 2
    assert result.findings == [] and len(result.dropped) == 1


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("soundness", WeaknessType.SOUNDNESS),
        ("meaningful-comparison", WeaknessType.COMPARISON),
        ("Meaningful_Comparison", WeaknessType.COMPARISON),
        ("REPLICABILITY", WeaknessType.REPLICABILITY),
        ("  originality ", WeaknessType.ORIGINALITY),
        ("empirical and theoretical   soundness", WeaknessType.SOUNDNESS),
        ("Substance", WeaknessType.SUBSTANCE),
    ],
)
async def test_loosely_spelled_labels_map_to_their_type_without_a_repair(
    harness: Harness, target: Paragraph, paper_context: ReviewContext, label: str, expected: WeaknessType
) -> None:
    result = await harness.review(
        [Rule(role="reviewer", replies=[review_reply(finding_json(GOOD_QUOTE, label))])],
        target,
        paper_context,
        mode=Mode.SINGLE,
    )
    assert len(harness.requests("reviewer")) == 1
    assert [finding.label for finding in result.findings] == [expected]


def test_empirical_soundness_is_soundness() -> None:
    assert WeaknessType.parse("Empirical Soundness") is WeaknessType.SOUNDNESS
    assert WeaknessType.parse("Empirical/Theoretical Soundness") is WeaknessType.SOUNDNESS


def test_label_fragments_are_unknown_labels() -> None:
    assert [WeaknessType.parse(fragment) for fragment in ("a", "ty", "al", "e")] == [None] * 4


def test_unknown_labels_are_unknown() -> None:
    for label in ("Clarity", "", "   ", "-", "Presentation", "Reproducibility of code"):
        assert WeaknessType.parse(label) is None, label


def test_common_synonyms_map_to_their_type() -> None:
    assert WeaknessType.parse("Novelty") is WeaknessType.ORIGINALITY
    assert WeaknessType.parse("reproducibility") is WeaknessType.REPLICABILITY


OTHER_QUOTE = "at the price of an expensive nearest-neighbour index"


@pytest.mark.parametrize(
    "duplicate", [f"“{GOOD_QUOTE}”", GOOD_QUOTE.upper()], ids=["quote-marks", "capitals"]
)
async def test_duplicate_findings_are_removed(
    harness: Harness, target: Paragraph, paper_context: ReviewContext, duplicate: str
) -> None:
    # At most three findings per answer (the review schema allows no more).
    reply = review_reply(
        finding_json(GOOD_QUOTE, "Soundness"),
        finding_json(duplicate, "Empirical and Theoretical Soundness", review="The same point again."),
        finding_json(OTHER_QUOTE, "Soundness"),
    )
    result = await harness.review(
        [Rule(role="reviewer", replies=[reply])], target, paper_context, mode=Mode.SINGLE, max_findings=3
    )
    assert len(harness.requests("reviewer")) == 1
    assert [(f.label, f.quote) for f in result.findings] == [
        (WeaknessType.SOUNDNESS, GOOD_QUOTE),
        (WeaknessType.SOUNDNESS, OTHER_QUOTE),
    ]
    assert result.findings[0].review == finding_json(GOOD_QUOTE)["review"]  # the first one is kept


async def test_no_two_findings_share_a_label_and_a_span(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    reply = review_reply(
        finding_json(GOOD_QUOTE, "Soundness"),
        finding_json(GOOD_QUOTE, "Substance"),
        finding_json(GOOD_QUOTE, "soundness"),
    )
    result = await harness.review(
        [Rule(role="reviewer", replies=[reply])], target, paper_context, mode=Mode.SINGLE
    )
    keys = [(f.label, f.start, f.end) for f in result.findings]
    assert len(keys) == len(set(keys)) and keys
    assert result.findings[0].label is WeaknessType.SOUNDNESS


async def test_an_empty_findings_list_means_no_weakness(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    result = await harness.review(
        [Rule(role="reviewer", replies=[review_reply()])], target, paper_context, mode=Mode.SINGLE
    )
    assert result.findings == [] and result.dropped == [] and result.failures == []
    assert result.no_weakness is True
    assert len(harness.requests("reviewer")) == 1


async def test_findings_are_valid_spans_of_the_paragraph_with_their_evidence(
    harness: Harness, target: Paragraph, paper_context: ReviewContext
) -> None:
    loosely = "LEARNED SPARSE   retrievers\nsit between these two extremes"
    paraphrase = "at the price of an expensive nearest neighbor index"
    reply = review_reply(
        finding_json(GOOD_QUOTE), finding_json(loosely, "Soundness"), finding_json(paraphrase, "Comparison")
    )
    result = await harness.review(agents(reviewer=reply), target, paper_context, candidates=1, max_findings=3)

    assert [f.match for f in result.findings] == ["exact", "normalized", "fuzzy"]
    for finding in result.findings:
        assert target.text[finding.start : finding.end] == finding.quote
        assert finding.paragraph_id == target.id
        assert isinstance(finding.label, WeaknessType)
        assert [item.question for item in finding.evidence] == [item.question for item in result.evidence]
    assert result.findings[1].quote == "Learned sparse retrievers sit between these two extremes"
    assert result.findings[2].quote == "at the price of an expensive nearest-neighbour index"


# -- whole manuscripts -------------------------------------------------------------------------------------------


async def test_review_manuscript_reviews_only_long_prose_paragraphs_and_reports_progress(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, paper: Manuscript
) -> None:
    endpoint = without_nagle(scripted(Rule(role="reviewer", replies=[review_reply()])))
    client = llm_clients(feedback_llm_config(endpoint, tmp_path))
    seen: list[tuple[int, int]] = []

    async def progress(done: int, total: int, review: ParagraphReview) -> None:
        seen.append((done, total))

    chosen = paper.paragraphs[:12]
    results = await review_manuscript(
        paper, client, ReviewOptions(mode=Mode.SINGLE, min_words=25), paragraphs=chosen, progress=progress
    )
    expected = [
        p.id for p in chosen if p.kind.value in ("paragraph", "list_item") and len(p.text.split()) >= 25
    ]
    assert [result.paragraph_id for result in results] == expected
    assert len(endpoint.calls("reviewer")) == len(expected)
    assert sorted(seen) == [(n, len(expected)) for n in range(1, len(expected) + 1)]
    assert all(result.no_weakness for result in results)


# -- dismissed findings ------------------------------------------------------------------------------------------

PARAGRAPH_TEXT = (
    "We prune each posting list to a fixed budget per section.\nThe budget is tuned on validation data."
)


def dismiss(
    store: DismissalStore, key: str, label: str = "Substance", quote: str = "fixed budget per section"
) -> None:
    store.dismiss(key, label, quote, PARAGRAPH_TEXT)


def test_a_dismissal_persists_across_new_stores_in_valid_json(tmp_path: Path) -> None:
    key = dismissal_key(PARAGRAPH_TEXT, "Substance", "fixed budget per section")
    store = DismissalStore(tmp_path)
    assert not store.is_dismissed(key)
    dismiss(store, key)
    assert store.is_dismissed(key)

    path = tmp_path / ".margin" / "dismissed.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    (entry,) = data["dismissed"]
    assert (
        entry["key"] == key and entry["label"] == "Substance" and entry["quote"] == "fixed budget per section"
    )
    assert entry["paragraph"] == PARAGRAPH_TEXT[:160]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", entry["dismissed"])
    assert DismissalStore(tmp_path).is_dismissed(key)
    assert not DismissalStore(tmp_path).is_dismissed(
        dismissal_key(PARAGRAPH_TEXT, "Substance", "other words")
    )
    assert sorted(p.name for p in path.parent.iterdir()) == ["dismissed.json"]  # no temporary files left


def test_many_dismissals_accumulate_and_long_paragraphs_are_cut(tmp_path: Path) -> None:
    store = DismissalStore(tmp_path)
    keys = [dismissal_key(PARAGRAPH_TEXT, "Substance", f"quote number {n}") for n in range(5)]
    for key in keys:
        store.dismiss(key, "Substance", "q", "x" * 500)
    fresh = DismissalStore(tmp_path)
    assert all(fresh.is_dismissed(key) for key in keys)
    entries = json.loads((tmp_path / ".margin" / "dismissed.json").read_text(encoding="utf-8"))["dismissed"]
    assert len(entries) == 5 and all(len(entry["paragraph"]) == 160 for entry in entries)


def test_concurrent_dismissals_in_one_store_are_all_kept(tmp_path: Path) -> None:
    store = DismissalStore(tmp_path)
    keys = [dismissal_key(PARAGRAPH_TEXT, "Substance", f"quote {n}") for n in range(24)]
    threads = [threading.Thread(target=dismiss, args=(store, key)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    fresh = DismissalStore(tmp_path)
    assert all(fresh.is_dismissed(key) for key in keys)


def test_the_key_ignores_white_space_but_not_the_label_quote_or_text() -> None:
    key = dismissal_key(PARAGRAPH_TEXT, "Substance", "fixed budget per section")
    respaced = "  We prune each posting   list to a fixed budget per section. The budget\n\tis tuned on validation data. "
    assert dismissal_key(respaced, "Substance", "fixed budget per section") == key
    assert dismissal_key(PARAGRAPH_TEXT, "Substance", " fixed  budget\nper section ") == key
    assert dismissal_key(PARAGRAPH_TEXT, "Replicability", "fixed budget per section") != key
    assert dismissal_key(PARAGRAPH_TEXT, "Substance", "fixed budget") != key
    assert (
        dismissal_key(PARAGRAPH_TEXT.replace("validation", "test"), "Substance", "fixed budget per section")
        != key
    )
    assert re.fullmatch(r"[0-9a-f]{32}", key)


@pytest.mark.parametrize("content", ["{not json", '["a list"]', '"a string"', "\x00\x01 binary"])
def test_an_unreadable_file_is_moved_aside_and_a_new_one_written(tmp_path: Path, content: str) -> None:
    folder = tmp_path / ".margin"
    folder.mkdir()
    (folder / "dismissed.json").write_text(content, encoding="utf-8")
    store = DismissalStore(tmp_path)
    key = dismissal_key(PARAGRAPH_TEXT, "Substance", "fixed budget per section")

    assert not store.is_dismissed(key)
    (aside,) = [path for path in folder.iterdir() if path.name.startswith("dismissed.json.unreadable-")]
    assert aside.read_text(encoding="utf-8") == content  # kept for the user, not overwritten
    dismiss(store, key)
    assert json.loads((folder / "dismissed.json").read_text(encoding="utf-8"))["dismissed"][0]["key"] == key
    assert aside.read_text(encoding="utf-8") == content
    assert DismissalStore(tmp_path).is_dismissed(key)


@pytest.mark.parametrize("content", ['{"dismissed": null}', '{"dismissed": 5}'])
def test_a_file_with_dismissed_not_a_list_is_unreadable_not_an_error(tmp_path: Path, content: str) -> None:
    (tmp_path / ".margin").mkdir()
    (tmp_path / ".margin" / "dismissed.json").write_text(content, encoding="utf-8")
    assert not DismissalStore(tmp_path).is_dismissed("k")


def test_two_stores_on_one_workspace_do_not_lose_each_others_dismissals(tmp_path: Path) -> None:
    first, second = DismissalStore(tmp_path), DismissalStore(tmp_path)
    assert not first.is_dismissed("k1")  # loaded
    dismiss(second, "k1")
    dismiss(first, "k2")
    fresh = DismissalStore(tmp_path)
    assert fresh.is_dismissed("k2")
    assert fresh.is_dismissed("k1")

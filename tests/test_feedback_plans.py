"""Review plans: parsing junk, the executable form, the transparent plan scorer and choosing the best plan."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from margin.workflows.feedback.plans import (
    LITERATURE,
    MAX_STEPS,
    PAPER,
    REVIEW,
    HeuristicPlanScorer,
    Plan,
    PlanScore,
    Step,
    best_plan,
)

PARAGRAPH = (
    "We prune each posting list of the sparse index to a fixed budget per section, and the regularizer pulls "
    "term weights toward a prior estimated from eligibility criteria; on both screening benchmarks recall at "
    "95% improves over BM25."
)
GOOD_STEPS = (
    Step(PAPER, "How large is the fixed budget per section of the sparse index?"),
    Step(PAPER, "How is the prior estimated from the eligibility criteria?"),
    Step(PAPER, "Which screening benchmarks are used to measure recall?"),
    Step(LITERATURE, "How does BM25 usually perform on screening benchmarks?"),
    Step(REVIEW),
)
SCORER = HeuristicPlanScorer()
CHECKS = (
    "parseable",
    "known_actions",
    "ends_with_review",
    "paper_first",
    "well_formed",
    "self_contained",
    "distinct",
    "length",
    "specific",
)


def score(*steps: Step) -> PlanScore:
    return SCORER.score(PARAGRAPH, Plan(tuple(steps)))


def replaced(index: int, step: Step) -> tuple[Step, ...]:
    steps = list(GOOD_STEPS)
    steps[index] = step
    return tuple(steps)


# -- the scorer --------------------------------------------------------------------------------------------------


def test_a_good_plan_passes_every_check() -> None:
    result = score(*GOOD_STEPS)
    assert result.checks == dict.fromkeys(CHECKS, 1.0)
    assert result.total == 1.0


def test_the_weights_cover_exactly_the_checks() -> None:
    assert set(HeuristicPlanScorer.WEIGHTS) == set(CHECKS)
    assert set(score(*GOOD_STEPS).checks) == set(CHECKS)


@dataclass(frozen=True)
class Flaw:
    name: str
    steps: tuple[Step, ...]
    check: str
    value: float


FLAWS = [
    Flaw(
        "unknown action",
        replaced(1, Step("search_the_web", "How is the prior estimated?")),
        "known_actions",
        4 / 5,
    ),
    Flaw("no final review", GOOD_STEPS[:-1], "ends_with_review", 0.0),
    Flaw(
        "literature before paper",
        (GOOD_STEPS[3], *GOOD_STEPS[:3], GOOD_STEPS[4]),
        "paper_first",
        0.0,
    ),
    Flaw(
        "no question mark",
        replaced(0, Step(PAPER, "Give the fixed budget per section of the index.")),
        "well_formed",
        3 / 4,
    ),
    Flaw("too short", replaced(0, Step(PAPER, "Budget per section?")), "well_formed", 3 / 4),
    Flaw(
        "depends on the paragraph",
        replaced(0, Step(PAPER, "This fixed budget per section: how large is it?")),
        "self_contained",
        3 / 4,
    ),
    Flaw(
        "pronoun at the start",
        replaced(2, Step(PAPER, "They measure recall on which screening benchmarks?")),
        "self_contained",
        3 / 4,
    ),
    Flaw("duplicate question", replaced(1, GOOD_STEPS[0]), "distinct", 3 / 4),
    Flaw(
        "generic question",
        replaced(0, Step(PAPER, "What is the main novelty of the approach?")),
        "specific",
        3 / 4,
    ),
    Flaw("too few questions", (GOOD_STEPS[0], GOOD_STEPS[4]), "length", 0.5),
    Flaw(
        "too many questions",
        (
            *GOOD_STEPS[:3],
            Step(PAPER, "How many sections does each trial report have in the sparse index?"),
            Step(PAPER, "Which regularizer strength pulls the term weights toward the prior?"),
            Step(PAPER, "How is recall at 95% computed on the screening benchmarks?"),
            Step(PAPER, "Which eligibility criteria were used to estimate the prior?"),
            Step(PAPER, "How many posting lists are pruned per section?"),
            GOOD_STEPS[3],
            GOOD_STEPS[4],
        ),
        "length",
        0.5,
    ),
]


@pytest.mark.parametrize("flaw", FLAWS, ids=[flaw.name for flaw in FLAWS])
def test_each_flaw_lowers_its_own_check_and_the_total(flaw: Flaw) -> None:
    good = score(*GOOD_STEPS)
    flawed = score(*flaw.steps)
    assert flawed.checks[flaw.check] == pytest.approx(flaw.value)
    unchanged = {name for name in CHECKS if name != flaw.check}
    assert {name: flawed.checks[name] for name in unchanged} == {
        name: good.checks[name] for name in unchanged
    }
    weight = HeuristicPlanScorer.WEIGHTS[flaw.check]
    expected_total = 1 - weight * (1 - flaw.value) / sum(HeuristicPlanScorer.WEIGHTS.values())
    assert flawed.total == pytest.approx(expected_total, abs=1e-4)
    assert flawed.total < good.total


def test_an_empty_plan_fails_every_check_but_the_vacuous_order() -> None:
    result = score()
    assert result.checks == {**dict.fromkeys(CHECKS, 0.0), "paper_first": 1.0}
    assert result.total < 0.05


def test_a_plan_of_unknown_actions_scores_low() -> None:
    result = score(Step("search", "How large is the fixed budget per section?"), Step("think"), Step("write"))
    assert result.checks["known_actions"] == 0.0
    assert result.checks["specific"] == 0.0 and result.checks["well_formed"] == 0.0
    assert result.total < 0.5


def test_specificity_counts_questions_that_name_a_concept_of_the_paragraph() -> None:
    generic = Step(PAPER, "What is the main novelty of the approach?")
    half = score(GOOD_STEPS[0], generic, Step(REVIEW))
    assert half.checks["specific"] == 0.5
    assert score(generic, Step(REVIEW)).checks["specific"] == 0.0


# Forty content words: by the pigeonhole principle many pairs share a slot of a small set's hash table, and
# then the set's order follows insertion order, whatever PYTHONHASHSEED is (50+ of the 780 pairs, always).
FORTY_WORDS = (
    "pruning budget recall sparse retriever clinical vocabulary eligibility dosage comparator index encoder "
    "posting section regularizer prior criteria benchmark screening report trial weight threshold schedule "
    "bigram corpus annotator baseline ablation variance seed latency memory decoder tokenizer lexicon "
    "inclusion exclusion reviewer protocol"
).split()


def test_questions_with_the_same_words_in_another_order_are_duplicates() -> None:
    assert len(set(FORTY_WORDS)) == 40
    counted_distinct = [
        (first, second)
        for first, second in itertools.combinations(FORTY_WORDS, 2)
        if score(Step(PAPER, f"{first} {second}?"), Step(PAPER, f"{second} {first}?")).checks["distinct"]
        != 0.5
    ]
    assert counted_distinct == []


# -- choosing the best plan --------------------------------------------------------------------------------------


def test_best_plan_picks_the_higher_total() -> None:
    good = Plan(GOOD_STEPS)
    generic = Plan((Step(PAPER, "What is it?"), Step(PAPER, "What is it?"), Step(REVIEW)))
    chosen = best_plan(PARAGRAPH, [generic, good], SCORER)
    assert chosen is not None and chosen[0] is good
    assert chosen[1] == SCORER.score(PARAGRAPH, good)
    chosen = best_plan(PARAGRAPH, [good, generic], SCORER)
    assert chosen is not None and chosen[0] is good


def test_best_plan_ignores_plans_without_questions() -> None:
    no_questions = Plan((Step(REVIEW),))
    unknown = Plan((Step("search", "How large is the budget per section?"), Step(REVIEW)))
    assert best_plan(PARAGRAPH, [no_questions, unknown], SCORER) is None
    assert best_plan(PARAGRAPH, [], SCORER) is None
    poor = Plan((Step(LITERATURE, "Is it good?"),))
    chosen = best_plan(PARAGRAPH, [no_questions, poor, unknown], SCORER)
    assert chosen is not None and chosen[0] is poor


def test_best_plan_keeps_the_first_of_equal_plans() -> None:
    first, second = Plan(GOOD_STEPS), Plan(GOOD_STEPS)
    chosen = best_plan(PARAGRAPH, [first, second], SCORER)
    assert chosen is not None and chosen[0] is first


class ReversedLength:
    """A scorer that prefers short plans: best_plan must follow whatever scorer it is given."""

    def score(self, paragraph: str, plan: Plan) -> PlanScore:
        return PlanScore(1.0 / len(plan.steps), {})


def test_best_plan_uses_the_scorer_it_is_given() -> None:
    short = Plan((Step(PAPER, "What is it?"), Step(REVIEW)))
    chosen = best_plan(PARAGRAPH, [Plan(GOOD_STEPS), short], ReversedLength())
    assert chosen is not None and chosen[0] is short


# -- the executable plan -----------------------------------------------------------------------------------------


def test_executable_puts_exactly_one_review_last_and_drops_empty_and_unknown_steps() -> None:
    plan = Plan(
        (
            Step(REVIEW),
            Step(PAPER, "How large is the fixed budget per section?"),
            Step(PAPER, ""),
            Step("search_the_web", "What does the web say about budgets?"),
            Step(REVIEW),
            Step(LITERATURE, "How does BM25 perform on screening benchmarks?"),
            Step("skip"),
        )
    )
    assert plan.executable().steps == (
        Step(PAPER, "How large is the fixed budget per section?"),
        Step(LITERATURE, "How does BM25 perform on screening benchmarks?"),
        Step(REVIEW),
    )


def test_executable_of_a_plan_without_questions_is_the_review_alone() -> None:
    assert Plan(()).executable().steps == (Step(REVIEW),)
    assert Plan((Step(REVIEW), Step(REVIEW))).executable().steps == (Step(REVIEW),)


def test_executable_is_idempotent_and_keeps_the_order_of_questions() -> None:
    once = Plan(GOOD_STEPS).executable()
    assert once.executable() == once
    assert once == Plan(GOOD_STEPS)


# -- parsing -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "junk",
    [
        None,
        5,
        "steps",
        [],
        [{"action": PAPER}],
        {},
        {"plan": []},
        {"steps": []},
        {"steps": "abc"},
        {"steps": {}},
    ],
)
def test_from_json_of_junk_is_an_empty_plan(junk: object) -> None:
    assert Plan.from_json(junk) == Plan(())


def test_from_json_keeps_the_usable_steps_and_normalizes_actions() -> None:
    plan = Plan.from_json(
        {
            "steps": [
                None,
                3,
                "paper_question",
                {"action": " Paper Question ", "question": "  How large is the budget?  "},
                {"action": "LITERATURE_QUESTION", "question": None},
                {"question": "Where is the action?"},
                {"action": "review", "question": 7},
            ]
        }
    )
    assert plan.steps == (
        Step(PAPER, "How large is the budget?"),
        Step(LITERATURE, ""),
        Step("", "Where is the action?"),
        Step(REVIEW, "7"),
    )


def test_from_json_keeps_at_most_max_steps() -> None:
    steps = [{"action": PAPER, "question": f"Question {n}?"} for n in range(MAX_STEPS + 5)]
    assert len(Plan.from_json({"steps": steps}).steps) == MAX_STEPS


def test_to_json_round_trips() -> None:
    plan = Plan(GOOD_STEPS)
    assert Plan.from_json({"steps": plan.to_json()}) == plan


@pytest.mark.parametrize("junk", [{"steps": None}, {"steps": 5}])
def test_from_json_of_steps_that_are_not_a_list_is_an_empty_plan(junk: object) -> None:
    assert Plan.from_json(junk) == Plan(())

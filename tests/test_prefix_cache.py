"""The prefix-cache measure the benchmarks report (margin.testing.prefix_cache): block-chained like vLLM's."""

from __future__ import annotations

from margin.testing.prefix_cache import prefix_reuse, prompt_tokens


def messages(system: str, user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


SHARED = " ".join(f"rule{i}" for i in range(47))  # with its role marker: 48 tokens, three full blocks


def test_a_shared_system_prompt_is_reused_from_the_second_request_on() -> None:
    first = messages(SHARED, "paragraph one " * 10)
    second = messages(SHARED, "paragraph two " * 10)
    result = prefix_reuse([("planner", first), ("planner", second)], block_tokens=16)
    assert result.overall.total == len(prompt_tokens(first)) + len(prompt_tokens(second))
    assert result.overall.reused == 48  # the second request's three blocks of instructions
    assert result.by_role["planner"].reused == 48


def test_only_a_leading_prefix_counts_and_a_different_first_message_reuses_nothing() -> None:
    first = messages(SHARED, "a " * 40)
    moved = messages("changed " + SHARED, "a " * 40)  # the same words one token later: no block matches
    assert prefix_reuse([("r", first), ("r", moved)]).overall.reused == 0
    # A block equal to an earlier one, but after a block that differs, is not reused (chained hashes).
    tail_only = messages("other " * 47, "a " * 40)
    result = prefix_reuse([("r", first), ("r", tail_only)])
    assert result.overall.reused == 0


def test_shares_per_role() -> None:
    reviewer = messages(SHARED, "x " * 16)
    result = prefix_reuse([("reviewer", reviewer), ("reviewer", reviewer), ("planner", messages("p", "q"))])
    # The identical second request: its 4 full blocks of 65 tokens reused, the partial last one not.
    assert result.by_role["reviewer"].reused == 64 and result.by_role["reviewer"].total == 130
    assert result.by_role["planner"].reused == 0

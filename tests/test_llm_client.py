"""LLMClient against a real OpenAI-compatible HTTP server on loopback: faults, structured-output negotiation,
per-role routing, cancellation, accounting and keeping the API key out of logs and the cache.

Every test talks to a ScriptedEndpoint over a socket with the real openai client; nothing is mocked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.config import RoleRoute
from margin.workflows.llm.types import (
    FailureKind,
    LLMError,
    Request,
    StructuredMode,
)

from conftest import BusyServer, ClientFactory, ScriptedFactory, llm_config

REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["accept", "minor", "major"]},
        "comments": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["verdict", "comments"],
    "additionalProperties": False,
}
GOOD_REVIEW = {"verdict": "minor", "comments": ["Define FKGL on first use."]}


def ask(role: str = "journalist", prompt: str = "Explain the result.", **options: Any) -> Request:
    return Request(
        role=role,
        messages=({"role": "system", "content": f"You are the {role}."}, {"role": "user", "content": prompt}),
        **options,
    )


def review(role: str = "reviewer", prompt: str = "Review this paragraph.", **options: Any) -> Request:
    return ask(role, prompt, schema=REVIEW_SCHEMA, schema_name="review", **options)


def formats(requests: list[RecordedRequest]) -> list[str | None]:
    return [request.response_format for request in requests]


def last_user_message(request: RecordedRequest) -> str:
    return next(m["content"] for m in reversed(request.body["messages"]) if m["role"] == "user")


async def failure_of(client: LLMClient, request: Request) -> LLMError:
    with pytest.raises(LLMError) as caught:
        await client.complete(request)
    return caught.value


async def eventually(predicate: Any, within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return bool(predicate())


# -- HTTP faults ---------------------------------------------------------------------------------------------


async def test_server_error_is_retried_with_backoff_then_fails_as_server_error(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(status=500, error_message="GPU fell off the bus")]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=2))
    started = time.monotonic()
    failure = await failure_of(client, ask())
    elapsed = time.monotonic() - started
    assert failure.kind is FailureKind.SERVER_ERROR
    assert failure.attempts == 3 and len(endpoint.calls()) == 3
    assert "500" in str(failure) and "GPU fell off the bus" in str(failure) and failure.role == "journalist"
    # Exponential backoff between attempts: 0.5 s then 1 s, each with +-10 % jitter.
    assert elapsed >= 1.3
    gaps = [b.started - a.started for a, b in zip(endpoint.calls(), endpoint.calls()[1:], strict=False)]
    assert gaps[0] >= 0.4 and gaps[1] >= 0.85 and gaps[1] > gaps[0]


async def test_server_error_then_success_returns_the_answer(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, fast_backoff: None
) -> None:
    endpoint = scripted(Rule(replies=[Reply(status=503), Reply(status=502), Reply(content="Recovered.")]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=3))
    with client.measure() as usage:
        completion = await client.complete(ask())
    assert completion.text == "Recovered." and not completion.cached
    assert len(endpoint.calls()) == 3
    assert (usage.calls, usage.requests, usage.retries, usage.failures) == (1, 3, 2, 0)


async def test_rate_limit_waits_for_retry_after_then_succeeds(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(status=429, retry_after=1.0), Reply(content="Now it fits.")]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=1))
    started = time.monotonic()
    completion = await client.complete(ask())
    elapsed = time.monotonic() - started
    assert completion.text == "Now it fits."
    first, second = endpoint.calls()
    assert 0.85 <= second.started - first.started <= 1.5  # Retry-After: 1, +-10 % jitter
    assert 0.85 <= elapsed <= 2.5


async def test_rate_limit_that_never_lifts_fails_as_rate_limited(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(status=429, retry_after=0.1)]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=2))
    failure = await failure_of(client, ask())
    assert failure.kind is FailureKind.RATE_LIMITED and failure.attempts == 3
    assert len(endpoint.calls()) == 3


async def test_hang_times_out_and_the_hung_request_is_closed(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(hang=True)]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=0, timeout=0.5))
    started = time.monotonic()
    failure = await failure_of(client, ask())
    assert failure.kind is FailureKind.TIMEOUT and "0.5" in str(failure)
    assert 0.45 <= time.monotonic() - started < 3.0
    (hung,) = endpoint.calls()
    assert await eventually(lambda: hung.disconnected), "the server never saw the hung request closed"


async def test_hang_is_retried_per_request_then_succeeds(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, fast_backoff: None
) -> None:
    endpoint = scripted(Rule(replies=[Reply(hang=True), Reply(content="Second try.")]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=1, timeout=0.4))
    completion = await client.complete(ask())
    assert completion.text == "Second try."
    assert len(endpoint.calls()) == 2


async def test_dropped_connection_is_retried_then_a_server_error_of_that_call_only(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, fast_backoff: None
) -> None:
    endpoint = scripted(Rule(replies=[Reply(drop=True)]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=2))
    failure = await failure_of(client, ask())
    assert failure.kind is FailureKind.SERVER_ERROR and failure.attempts == 3
    assert len(endpoint.calls()) == 3
    assert endpoint.base_url in str(failure) and "closed the connection" in str(failure)
    # It answered the connection, so it is alive: the next call goes to it again.
    await failure_of(client, ask())
    assert len(endpoint.calls()) == 6


async def test_an_endpoint_nothing_answers_at_is_asked_once_then_left_alone_until_retry_now(
    llm_clients: ClientFactory, tmp_path: Path, dead_url: str, fast_backoff: None
) -> None:
    client = llm_clients(llm_config(dead_url, tmp_path / "cache.sqlite3", retries=1, model="m"))
    first = await failure_of(client, ask())
    assert first.kind is FailureKind.UNAVAILABLE and first.attempts == 2 and not first.repeated
    second = await failure_of(client, ask())
    assert second.kind is FailureKind.UNAVAILABLE and second.repeated and str(second) == str(first)
    assert client.usage.requests == 2  # the second call sent nothing
    client.retry_now()
    third = await failure_of(client, ask())
    assert not third.repeated and client.usage.requests == 4


async def test_dropped_connection_then_answer_succeeds(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, fast_backoff: None
) -> None:
    endpoint = scripted(Rule(replies=[Reply(drop=True), Reply(content="Back again.")]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=1))
    assert (await client.complete(ask())).text == "Back again."
    assert len(endpoint.calls()) == 2


async def test_trickled_body_longer_than_the_timeout_is_a_timeout(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    # ~40 chunks of 16 bytes, 0.1 s apart: every read is quick, the whole answer takes ~4 s.
    endpoint = scripted(Rule(replies=[Reply(content="slow " * 60, trickle=0.1)]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=0, timeout=0.6))
    started = time.monotonic()
    failure = await failure_of(client, ask())
    assert failure.kind is FailureKind.TIMEOUT
    assert time.monotonic() - started < 2.5


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_client_errors_are_rejected_without_retries(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, status: int
) -> None:
    endpoint = scripted(Rule(replies=[Reply(status=status, error_message="prompt too long")]))
    client = llm_clients(
        llm_config(
            endpoint.base_url,
            tmp_path / "cache.sqlite3",
            retries=3,
            structured_mode=StructuredMode.JSON_SCHEMA,
        )
    )
    for request in (ask(), review()):
        failure = await failure_of(client, request)
        assert failure.kind is FailureKind.REJECTED and failure.attempts == 1
        assert str(status) in str(failure) and "prompt too long" in str(failure)
    assert len(endpoint.calls()) == 2  # one each, no retries


async def test_client_error_on_an_endpoint_whose_mode_is_known_is_rejected_at_once(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(pattern="too long", replies=[Reply(status=400)]), Rule(replies=[Reply(json=GOOD_REVIEW)])
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=3))
    await client.complete(review())  # negotiates json_schema
    failure = await failure_of(client, review(prompt="This one is too long."))
    assert failure.kind is FailureKind.REJECTED
    assert formats(endpoint.calls()) == ["json_schema", "json_schema"]


# -- invalid structured output: one repair, then a typed failure ---------------------------------------------


async def test_invalid_json_gets_one_repair_that_quotes_the_error(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(replies=[Reply(content='{"verdict": "minor", "comments": ['), Reply(json=GOOD_REVIEW)])
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    with client.measure() as usage:
        completion = await client.complete(review())
    assert completion.data == GOOD_REVIEW
    first, repair = endpoint.calls()
    assert "no parseable JSON" in last_user_message(repair)
    assert "corrected JSON" in last_user_message(repair)
    assert repair.body["messages"][-2] == {
        "role": "assistant",
        "content": '{"verdict": "minor", "comments": [',
    }
    assert repair.body["messages"][: len(first.body["messages"])] == first.body["messages"]
    assert repair.response_format == first.response_format == "json_schema"
    assert (usage.calls, usage.requests, usage.repairs) == (1, 2, 1)


async def test_invalid_json_twice_is_invalid_output_after_exactly_one_repair(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(content="I think the paper is fine.")]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=3))
    failure = await failure_of(client, review())
    assert failure.kind is FailureKind.INVALID_OUTPUT and "after one repair" in str(failure)
    assert len(endpoint.calls()) == 2
    # A failure is not cached: asking again goes back to the endpoint.
    await failure_of(client, review())
    assert len(endpoint.calls()) == 4


async def test_json_that_breaks_the_schema_is_repaired_with_the_schema_error(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(replies=[Reply(json={"verdict": "reject", "comments": []}), Reply(json=GOOD_REVIEW)])
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    assert (await client.complete(review())).data == GOOD_REVIEW
    repair = endpoint.calls()[1]
    assert "verdict" in last_user_message(repair) and "'reject' is not one of" in last_user_message(repair)


async def test_json_that_breaks_the_schema_twice_is_invalid_output(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(replies=[Reply(json={"verdict": "minor"}), Reply(json={"verdict": "minor", "x": 1})])
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    failure = await failure_of(client, review())
    assert failure.kind is FailureKind.INVALID_OUTPUT
    assert "does not match the schema" in str(failure)
    assert len(endpoint.calls()) == 2


async def test_empty_text_answer_is_empty_without_retries(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(content="  \n")]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=3))
    with client.measure() as usage:
        failure = await failure_of(client, ask())
    assert failure.kind is FailureKind.EMPTY and failure.role == "journalist"
    assert len(endpoint.calls()) == 1
    assert (usage.calls, usage.failures, usage.by_role["journalist"]["failures"]) == (0, 1, 1)


async def test_empty_schema_answer_is_repaired(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(content=""), Reply(json=GOOD_REVIEW)]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    assert (await client.complete(review())).data == GOOD_REVIEW
    assert "empty" in last_user_message(endpoint.calls()[1])


async def test_empty_schema_answer_twice_is_invalid_output(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(content="")]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    assert (await failure_of(client, review())).kind is FailureKind.INVALID_OUTPUT
    assert len(endpoint.calls()) == 2


# -- finish_reason "length" ----------------------------------------------------------------------------------


async def test_truncated_schema_answer_is_retried_once_with_doubled_max_tokens(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(
            replies=[
                Reply(content='{"verdict": "minor", "comm', finish_reason="length"),
                Reply(json=GOOD_REVIEW),
            ]
        )
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", max_tokens=300))
    completion = await client.complete(review())
    assert completion.data == GOOD_REVIEW and completion.finish_reason == "stop"
    first, second = endpoint.calls()
    assert (first.body["max_tokens"], second.body["max_tokens"]) == (300, 600)
    assert second.body["messages"] == first.body["messages"]


async def test_truncated_schema_answer_twice_is_truncated(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(content='{"verdict": ', finish_reason="length")]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=3))
    failure = await failure_of(client, review(max_tokens=50))
    assert failure.kind is FailureKind.TRUNCATED and "100" in str(failure)
    assert [call.body["max_tokens"] for call in endpoint.calls()] == [50, 100]


async def test_repair_after_a_doubled_max_tokens_retry_keeps_the_doubled_budget(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(
            replies=[
                Reply(content='{"verdict": "minor", "comm', finish_reason="length"),
                Reply(content='{"verdict": "minor", "comments": ["a long answer" ]'),
                Reply(json=GOOD_REVIEW),
            ]
        )
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", max_tokens=300))
    assert (await client.complete(review())).data == GOOD_REVIEW
    assert [call.body["max_tokens"] for call in endpoint.calls()] == [300, 600, 600]


async def test_truncated_text_answer_is_continued_twice_and_concatenated(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(
            replies=[
                Reply(content="Sea ice melts ", finish_reason="length"),
                Reply(content="faster in spring ", finish_reason="length"),
                Reply(content="than models predicted."),
            ]
        )
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    with client.measure() as usage:
        completion = await client.complete(ask())
    assert completion.text == "Sea ice melts faster in spring than models predicted."
    first, second, third = endpoint.calls()
    original = first.body["messages"]
    assert second.body["messages"][: len(original)] == original
    assert second.body["messages"][len(original)] == {"role": "assistant", "content": "Sea ice melts "}
    assert third.body["messages"][len(original)] == {
        "role": "assistant",
        "content": "Sea ice melts faster in spring ",
    }
    assert "Continue" in last_user_message(third)
    expected_completion_tokens = 3 + 3 + 3
    assert usage.completion_tokens == completion.completion_tokens == expected_completion_tokens
    assert usage.calls == 1 and usage.requests == 3


async def test_text_answer_still_truncated_after_two_continuations_is_truncated(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(content="and so on ", finish_reason="length")]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    assert (await failure_of(client, ask())).kind is FailureKind.TRUNCATED
    assert len(endpoint.calls()) == 3


# -- structured-output negotiation ---------------------------------------------------------------------------


@pytest.mark.parametrize("rejected_status", [400, 500])
async def test_negotiation_falls_back_to_json_object_and_remembers_it(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, rejected_status: int
) -> None:
    endpoint = scripted(
        Rule(replies=[Reply(json=GOOD_REVIEW)]),
        accepted_formats=("json_object", "text"),
        rejected_format_status=rejected_status,
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=3))
    with client.measure() as usage:
        first = await client.complete(review())
        second = await client.complete(review(prompt="Another paragraph."))
    assert first.data == second.data == GOOD_REVIEW
    assert first.mode is second.mode is StructuredMode.JSON_OBJECT
    assert formats(endpoint.calls()) == ["json_schema", "json_object", "json_object"]
    json_object = endpoint.calls()[1].body["response_format"]
    assert json_object["schema"] == REVIEW_SCHEMA
    assert (usage.calls, usage.requests, usage.retries, usage.failures) == (2, 3, 0, 0)


@pytest.mark.parametrize("rejected_status", [400, 500])
async def test_negotiation_falls_back_to_text_with_tolerant_extraction(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, rejected_status: int
) -> None:
    wrapped = (
        "Sure! Here is my review of the paragraph.\n\n```json\n"
        '{"verdict": "major", "comments": ["The {braces} in prose are fine."]}\n```\n'
        "Let me know if you need anything else."
    )
    endpoint = scripted(
        Rule(replies=[Reply(content=wrapped)]),
        accepted_formats=("text",),
        rejected_format_status=rejected_status,
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=3))
    first = await client.complete(review())
    await client.complete(review(prompt="Another paragraph."))
    assert first.data == {"verdict": "major", "comments": ["The {braces} in prose are fine."]}
    assert first.mode is StructuredMode.TEXT
    assert formats(endpoint.calls()) == ["json_schema", "json_object", None, None]
    # In text mode the schema travels in the system prompt.
    assert '"verdict"' in endpoint.calls()[-1].body["messages"][0]["content"]


async def test_prose_around_unfenced_json_still_parses_in_text_mode(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    wrapped = 'My answer: {"verdict": "accept", "comments": ["Clear."]} I hope this helps.'
    endpoint = scripted(Rule(replies=[Reply(content=wrapped)]))
    config = llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", structured_mode=StructuredMode.TEXT)
    completion = await llm_clients(config).complete(review())
    assert completion.data == {"verdict": "accept", "comments": ["Clear."]}
    assert len(endpoint.calls()) == 1


async def test_citation_brackets_in_prose_are_not_taken_for_the_answer(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    wrapped = 'As Smith et al. [3] report, the effect holds. {"verdict": "accept", "comments": ["Cite [3]."]}'
    endpoint = scripted(Rule(replies=[Reply(content=wrapped)]))
    config = llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", structured_mode=StructuredMode.TEXT)
    client = llm_clients(config)
    try:
        completion = await client.complete(review())
    finally:
        assert len(endpoint.calls()) == 1, "the first answer held valid JSON but a repair was requested"
    assert completion.data == {"verdict": "accept", "comments": ["Cite [3]."]}


@pytest.mark.parametrize(
    ("mode", "sent"),
    [
        (StructuredMode.JSON_SCHEMA, "json_schema"),
        (StructuredMode.JSON_OBJECT, "json_object"),
        (StructuredMode.TEXT, None),
    ],
)
async def test_forced_mode_sends_only_that_mode(
    scripted: ScriptedFactory,
    llm_clients: ClientFactory,
    tmp_path: Path,
    mode: StructuredMode,
    sent: str | None,
) -> None:
    endpoint = scripted(Rule(replies=[Reply(json=GOOD_REVIEW)]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", structured_mode=mode))
    completion = await client.complete(review())
    await client.complete(review(prompt="Second."))
    assert completion.mode is mode and completion.data == GOOD_REVIEW
    assert formats(endpoint.calls()) == [sent, sent]


async def test_forced_mode_the_endpoint_refuses_is_rejected_without_fallback(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(json=GOOD_REVIEW)]), accepted_formats=("json_object", "text"))
    config = llm_config(
        endpoint.base_url, tmp_path / "cache.sqlite3", retries=3, structured_mode=StructuredMode.JSON_SCHEMA
    )
    failure = await failure_of(llm_clients(config), review())
    assert failure.kind is FailureKind.REJECTED and "json_schema" in str(failure)
    assert formats(endpoint.calls()) == ["json_schema"]


async def test_plain_text_requests_send_no_response_format(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(accepted_formats=("text",))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    assert (await client.complete(ask())).mode is None
    assert formats(endpoint.calls()) == [None]


async def test_transient_server_error_during_negotiation_does_not_downgrade_the_mode(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, fast_backoff: None
) -> None:
    endpoint = scripted(
        Rule(replies=[Reply(status=500, error_message="CUDA out of memory"), Reply(json=GOOD_REVIEW)])
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=3))
    await client.complete(review())
    await client.complete(review(prompt="Next."))
    assert formats(endpoint.calls())[-1] == "json_schema"


async def test_concurrent_first_calls_on_a_text_only_endpoint_all_succeed(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(json=GOOD_REVIEW)]), accepted_formats=("text",), latency=0.3)
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", max_concurrency=1))
    first = asyncio.create_task(client.complete(review(prompt="First.")))
    # Wait until the first call has negotiated down to its text-mode request, which holds the only slot.
    assert await eventually(lambda: len(endpoint.calls()) == 3)
    second = asyncio.create_task(client.complete(review(prompt="Second.")))
    results = await asyncio.gather(first, second, return_exceptions=True)
    assert [getattr(result, "data", result) for result in results] == [GOOD_REVIEW, GOOD_REVIEW]


# -- per-role routing ----------------------------------------------------------------------------------------


async def test_role_route_sends_reader_to_its_own_endpoint_and_model(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    main = scripted(default=Reply(content="from main"), models=("big-model", "other"))
    second = scripted(default=Reply(content="from second"), models=("second-listed",))
    config = llm_config(
        main.base_url,
        tmp_path / "cache.sqlite3",
        roles={"reader": RoleRoute(base_url=second.base_url, model="small")},
    )
    client = llm_clients(config)
    reader = await client.complete(ask("reader"))
    journalist = await client.complete(ask("journalist"))
    assert (reader.text, reader.model) == ("from second", "small")
    assert (journalist.text, journalist.model) == ("from main", "big-model")
    assert [(c.role, c.body["model"]) for c in second.calls()] == [("reader", "small")]
    assert [(c.role, c.body["model"]) for c in main.calls()] == [("journalist", "big-model")]


async def test_role_route_with_only_an_endpoint_uses_that_servers_first_model(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    main = scripted(models=("big-model",))
    second = scripted(models=("second-listed", "another"))
    config = llm_config(
        main.base_url,
        tmp_path / "cache.sqlite3",
        model="big-model",
        roles={"reader": RoleRoute(second.base_url)},
    )
    client = llm_clients(config)
    assert (await client.complete(ask("reader"))).model == "second-listed"
    assert [c.body["model"] for c in second.calls()] == ["second-listed"] and not main.calls()


async def test_role_route_with_only_a_model_keeps_the_default_endpoint(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    main = scripted(models=("big-model", "small"))
    config = llm_config(main.base_url, tmp_path / "cache.sqlite3", roles={"reader": RoleRoute(model="small")})
    client = llm_clients(config)
    await client.complete(ask("reader"))
    await client.complete(ask("journalist"))
    assert [(c.role, c.body["model"]) for c in main.calls()] == [
        ("reader", "small"),
        ("journalist", "big-model"),
    ]
    assert len(client.pool.endpoints()) == 1  # one server, one client, one limiter


async def test_every_request_carries_the_role_header(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(role="judge", replies=[Reply(json={"verdict": "accept", "comments": []})]),
        Rule(role="editor", replies=[Reply(content="Edited.")]),
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    assert (await client.complete(review("judge"))).data["verdict"] == "accept"
    assert (await client.complete(ask("editor"))).text == "Edited."
    assert [call.headers.get("x-margin-role") for call in endpoint.calls()] == ["judge", "editor"]


async def test_unreachable_endpoint_is_unavailable_with_both_ways_out(
    llm_clients: ClientFactory, tmp_path: Path, dead_url: str
) -> None:
    client = llm_clients(llm_config(dead_url, tmp_path / "cache.sqlite3"))
    failure = await failure_of(client, ask())
    assert failure.kind is FailureKind.UNAVAILABLE
    assert dead_url in str(failure) and "vllm serve" in str(failure) and "margin[local]" in str(failure)


@pytest.mark.parametrize("model", [None, "named-model"])
async def test_endpoint_url_with_an_impossible_port_is_a_typed_failure(
    llm_clients: ClientFactory, tmp_path: Path, model: str | None
) -> None:
    url = "http://127.0.0.1:80000/v1"
    client = llm_clients(llm_config(url, tmp_path / "cache.sqlite3", retries=0, model=model))
    failure = await failure_of(client, ask())
    assert failure.kind is FailureKind.UNAVAILABLE and url in str(failure)


async def test_busy_server_that_lists_its_models_slowly_is_not_unavailable(
    llm_clients: ClientFactory, tmp_path: Path
) -> None:
    busy = BusyServer(models_delay=2.5)
    try:
        client = llm_clients(llm_config(busy.base_url, tmp_path / "cache.sqlite3", retries=0, timeout=10))
        completion = await client.complete(ask())
    finally:
        busy.stop()
    assert (completion.text, completion.model) == ("ok", "busy-model")


# -- cancellation --------------------------------------------------------------------------------------------


async def test_cancelling_a_call_propagates_and_closes_the_connection(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(pattern="hang", replies=[Reply(hang=True)]), default=Reply(content="fine"))
    client = llm_clients(
        llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", timeout=30.0, max_concurrency=1)
    )
    task = asyncio.create_task(client.complete(ask(prompt="please hang")))
    assert await eventually(lambda: len(endpoint.calls()) == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    (hung,) = endpoint.calls()
    assert await eventually(lambda: hung.disconnected), "the server never saw the cancelled request closed"
    # The limiter slot came back: with max_concurrency=1 the next call would otherwise wait forever.
    assert (await asyncio.wait_for(client.complete(ask(prompt="next")), 5)).text == "fine"
    assert client.usage.failures == 0


async def test_cancelling_during_retry_backoff_propagates(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(status=503, retry_after=10)]))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=3))
    task = asyncio.create_task(client.complete(ask()))
    assert await eventually(lambda: len(endpoint.calls()) == 1)
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.2)
    assert len(endpoint.calls()) == 1


# -- accounting ----------------------------------------------------------------------------------------------


def _tokens(request: RecordedRequest) -> int:
    return max(1, len(request.prompt.split()))  # what the scripted endpoint reports as prompt_tokens


async def test_measure_counts_calls_requests_hits_tokens_failures_by_role(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, fast_backoff: None
) -> None:
    endpoint = scripted(
        Rule(role="reviewer", replies=[Reply(content="not json"), Reply(json=GOOD_REVIEW)]),
        Rule(role="judge", replies=[Reply(status=500), Reply(content="two words")]),
        Rule(role="editor", replies=[Reply(content="")]),
        default=Reply(content="one two three"),
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", retries=1))
    with client.measure() as usage:
        await client.complete(review())  # 2 requests (repair)
        await client.complete(ask("judge"))  # 2 requests (retry)
        await client.complete(ask("journalist"))  # 1 request
        await client.complete(ask("journalist"))  # cache hit
        with pytest.raises(LLMError):
            await client.complete(ask("editor"))  # 1 request, EMPTY
    calls = endpoint.calls()
    assert len(calls) == 6
    assert usage.calls == 3 and usage.requests == 6 and usage.cache_hits == 1 and usage.failures == 1
    assert usage.repairs == 1 and usage.retries == 1
    successful_prompts = [calls[0], calls[1], calls[3], calls[4]]  # the 500 and the empty answer report none
    assert usage.prompt_tokens == sum(_tokens(call) for call in successful_prompts)
    review_words = len(json.dumps(GOOD_REVIEW).split())
    assert usage.completion_tokens == 2 + review_words + 2 + 3
    assert usage.by_role["reviewer"]["calls"] == 1
    assert usage.by_role["journalist"] == {
        "calls": 1,
        "cache_hits": 1,
        "tokens": _tokens(calls[4]) + 3,
        "failures": 0,
    }
    assert usage.by_role["editor"]["failures"] == 1
    assert usage.wall_seconds > 0
    assert client.usage.to_json()["requests"] == 6
    assert "3 model calls (6 HTTP requests), 1 cache hits" in usage.summary()


async def test_nested_and_concurrent_measure_blocks_count_their_own_calls(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(latency=0.05)
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", cache_enabled=False))

    async def run(name: str, count: int) -> int:
        with client.measure() as usage:
            await asyncio.gather(*(client.complete(ask(prompt=f"{name} {index}")) for index in range(count)))
        return usage.calls

    with client.measure() as outer:
        await client.complete(ask(prompt="outer"))
        with client.measure() as inner:
            await client.complete(ask(prompt="inner 1"))
            await asyncio.create_task(client.complete(ask(prompt="inner 2 in a task")))
        counts = await asyncio.gather(run("a", 2), run("b", 5))
    assert inner.calls == inner.requests == 2
    assert counts == [2, 5]
    assert outer.calls == 1 + 2 + 7
    assert client.usage.calls == 10


async def test_truncated_then_retried_answer_counts_both_requests_tokens(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(
            replies=[
                Reply(content='{"verdict": "minor", "comm', finish_reason="length"),
                Reply(json=GOOD_REVIEW),
            ]
        )
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    with client.measure() as usage:
        await client.complete(review())
    first, second = endpoint.calls()
    assert usage.prompt_tokens == _tokens(first) + _tokens(second)


# -- secrets -------------------------------------------------------------------------------------------------


async def test_api_key_goes_only_to_the_authorization_header(
    scripted: ScriptedFactory,
    llm_clients: ClientFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fast_backoff: None,
) -> None:
    secret = "sk-margin-test-5e3f9a1c7b2d"
    monkeypatch.setenv("MARGIN_TEST_SECRET_KEY", secret)
    endpoint = scripted(
        Rule(pattern="fail", replies=[Reply(status=500)]),
        Rule(pattern="refuse", replies=[Reply(status=401, error_message="bad key")]),
        Rule(pattern="garbage", replies=[Reply(content="no json here")]),
        Rule(replies=[Reply(json=GOOD_REVIEW)]),
    )
    cache_path = tmp_path / "cache.sqlite3"
    client = llm_clients(
        llm_config(endpoint.base_url, cache_path, retries=1, api_key_env="MARGIN_TEST_SECRET_KEY")
    )
    caplog.set_level(logging.DEBUG)
    for name in ("margin", "openai", "httpx", "httpcore"):
        caplog.set_level(logging.DEBUG, logger=name)
    await client.complete(review())
    await client.complete(ask())
    for prompt in ("please fail", "refuse this", "garbage please"):
        with pytest.raises(LLMError):
            await client.complete(review(prompt=prompt))
    await client.close()

    assert caplog.records, "nothing was logged at DEBUG: the check below would prove nothing"
    assert any(record.name.startswith("openai") for record in caplog.records)
    for record in caplog.records:
        assert secret not in record.getMessage(), f"{record.name} logged the API key"
        assert secret not in repr(record.args) and secret not in str(record.__dict__)
    assert secret not in caplog.text
    rows = sqlite3.connect(cache_path).execute("SELECT key, value FROM responses").fetchall()
    assert len(rows) == 2 and all(secret not in key + value for key, value in rows)
    assert secret.encode() not in cache_path.read_bytes()
    assert {call.headers["authorization"] for call in endpoint.calls()} == {f"Bearer {secret}"}


async def test_default_api_key_is_not_sent_to_another_server_of_a_role_route(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-provider-only-1f2e3d"
    monkeypatch.setenv("MARGIN_TEST_PROVIDER_KEY", secret)
    main = scripted()
    local = scripted()
    config = llm_config(
        main.base_url,
        tmp_path / "cache.sqlite3",
        api_key_env="MARGIN_TEST_PROVIDER_KEY",
        roles={"reader": RoleRoute(base_url=local.base_url, model="small")},
    )
    client = llm_clients(config)
    await client.complete(ask("journalist"))
    await client.complete(ask("reader"))
    assert main.calls()[0].headers["authorization"] == f"Bearer {secret}"
    assert secret not in local.calls()[0].headers.get("authorization", "")

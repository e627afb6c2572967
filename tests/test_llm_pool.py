"""Endpoint pools: margin.llm.endpoint (or a role's route) listing replicas of one model, each a real scripted
server on loopback. Requests go to the least-loaded healthy replica, a failed replica rests while the others
answer, and the response cache does not care which replica answered."""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import replace
from pathlib import Path

import pytest

from margin.server.settings import parse_settings
from margin.testing.scripted_endpoint import Reply, Rule
from margin.workflows.llm.config import LLMConfig, RoleRoute
from margin.workflows.llm.types import FailureKind, LLMError, Priority, Request, StructuredMode

from conftest import ClientFactory, ScriptedFactory, llm_config


def nothing_listening() -> str:
    """A base URL on a loopback port that nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def ask(text: str, role: str = "journalist", priority: Priority = Priority.BACKGROUND) -> Request:
    return Request(role=role, messages=({"role": "user", "content": text},), priority=priority)


def pool_config(urls: list[str], tmp_path: Path, **options: object) -> LLMConfig:
    config = llm_config(urls[0], tmp_path / "cache.sqlite3", **options)  # type: ignore[arg-type]
    return replace(config, default=replace(config.default, replicas=tuple(urls[1:])))


async def test_requests_spread_over_the_replicas_and_each_keeps_its_limit(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    one, two = scripted(latency=0.15), scripted(latency=0.15)
    client = llm_clients(
        pool_config([one.base_url, two.base_url], tmp_path, cache_enabled=False, max_concurrency=3)
    )
    started = time.monotonic()
    answers = await asyncio.gather(*(client.complete(ask(f"call {i}")) for i in range(24)))
    elapsed = time.monotonic() - started
    assert [answer.text for answer in answers] == ["ok"] * 24
    assert len(one.calls()) == len(two.calls()) == 12  # equal replicas, equal shares
    assert one.max_in_flight == two.max_in_flight == 3  # the per-endpoint limit holds on each replica
    # 24 calls at 6 in flight: 4 waves; one replica alone would need 8.
    assert 4 * 0.15 * 0.95 <= elapsed < 8 * 0.15


async def test_the_least_loaded_replica_takes_more_of_the_work(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    slow, fast = scripted(latency=0.6), scripted(latency=0.05)
    client = llm_clients(
        pool_config([slow.base_url, fast.base_url], tmp_path, cache_enabled=False, max_concurrency=2)
    )

    async def steady(worker: int) -> None:  # callers that each wait for their answer, as reviews do
        for turn in range(6):
            await client.complete(ask(f"worker {worker} turn {turn}"))

    await asyncio.gather(*(steady(worker) for worker in range(4)))
    assert len(slow.calls()) + len(fast.calls()) == 24
    assert len(fast.calls()) >= 3 * len(slow.calls()), (len(fast.calls()), len(slow.calls()))


async def test_a_dead_replica_rests_and_the_others_answer_every_call(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    alive = scripted(latency=0.05)
    client = llm_clients(
        pool_config(
            [nothing_listening(), alive.base_url], tmp_path, cache_enabled=False, max_concurrency=4, retries=0
        )
    )
    started = time.monotonic()
    answers = await asyncio.gather(*(client.complete(ask(f"call {i}")) for i in range(16)))
    assert [answer.text for answer in answers] == ["ok"] * 16  # retries 0: the other replica is not a retry
    assert len(alive.calls()) == 16
    assert time.monotonic() - started < 2.0  # no backoff: the next replica is asked at once
    (pool,) = client.pool.endpoints()
    dead, live = pool.members
    assert pool.resting(dead) and not pool.resting(live)
    assert client.usage.failures == 0
    # Resting, the dead replica is not asked again: a second burst goes straight to the live one.
    requests_before = client.usage.requests
    await asyncio.gather(*(client.complete(ask(f"again {i}")) for i in range(8)))
    assert client.usage.requests - requests_before == 8


async def test_a_replica_that_errors_is_retried_elsewhere_at_once(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    failing = scripted(Rule(replies=[Reply(status=503, error_message="overloaded")]))
    healthy = scripted()
    client = llm_clients(
        pool_config([failing.base_url, healthy.base_url], tmp_path, cache_enabled=False, retries=1)
    )
    started = time.monotonic()
    answers = [await client.complete(ask(f"call {i}")) for i in range(6)]
    assert [answer.text for answer in answers] == ["ok"] * 6
    assert len(failing.calls()) == 1  # it failed once, then rested
    assert len(healthy.calls()) == 6
    assert time.monotonic() - started < 1.5  # without the 0.5 s backoff of a single endpoint
    assert client.usage.retries == 1


async def test_when_every_replica_is_dead_the_call_fails_with_a_message_naming_them(
    llm_clients: ClientFactory, tmp_path: Path
) -> None:
    first, second = nothing_listening(), nothing_listening()
    client = llm_clients(pool_config([first, second], tmp_path, cache_enabled=False, retries=0))
    with pytest.raises(LLMError) as raised:
        await client.complete(ask("anyone?"))
    assert raised.value.kind is FailureKind.UNAVAILABLE
    assert first in raised.value.message or second in raised.value.message
    assert client.pool.outage(client.config.default.urls) is not None
    with pytest.raises(LLMError) as again:  # the outage answers at once, without knocking again
        await client.complete(ask("anyone now?"))
    assert again.value.repeated


async def test_the_cache_key_does_not_depend_on_the_replica_that_answered(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    one, two = scripted(), scripted()
    first = llm_clients(pool_config([one.base_url, two.base_url], tmp_path))
    answers = await asyncio.gather(*(first.complete(ask(f"question {i}")) for i in range(4)))
    assert {answer.cached for answer in answers} == {False}
    assert one.calls() and two.calls()
    # Another process with the replicas listed the other way round (and one with a single replica) finds
    # every answer in the cache, whichever replica gave it.
    for urls in ([two.base_url, one.base_url], [two.base_url]):
        again = llm_clients(pool_config(urls, tmp_path))
        repeated = await asyncio.gather(*(again.complete(ask(f"question {i}")) for i in range(4)))
        assert {answer.cached for answer in repeated} == {True}
    assert len(one.calls()) + len(two.calls()) == 4


async def test_a_role_route_may_list_replicas(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    default, reader_a, reader_b = scripted(), scripted(), scripted()
    config = llm_config(
        default.base_url,
        None,
        cache_enabled=False,
        roles={"reader": RoleRoute(reader_a.base_url, replicas=(reader_b.base_url,))},
    )
    client = llm_clients(config)
    await asyncio.gather(*(client.complete(ask(f"read {i}", role="reader")) for i in range(6)))
    await client.complete(ask("write", role="journalist"))
    assert len(reader_a.calls()) == len(reader_b.calls()) == 3
    assert [request.role for request in default.calls()] == ["journalist"]


def test_the_endpoint_setting_takes_a_list_of_replicas() -> None:
    urls = ["http://gpu-a:8000/v1", "http://gpu-b:8000/v1"]
    settings, problems = parse_settings(
        {"margin": {"llm": {"endpoint": urls, "roles": {"reader": {"endpoint": urls[::-1]}}}}}
    )
    assert problems == []
    config = settings.llm_config()
    assert config.default.urls == tuple(urls)
    assert config.endpoint_for("reader").urls == tuple(urls[::-1])
    for bad in ([], ["auto", urls[0]], [urls[0], 8000]):
        settings, problems = parse_settings({"margin": {"llm": {"endpoint": bad}}})
        assert len(problems) == 1 and "margin.llm.endpoint" in problems[0]
        assert settings.llm_config().default.urls == ("auto",)


# -- what margin asks of vLLM: priority and n ---------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


async def test_background_requests_carry_vllm_priority_and_interactive_ones_none(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted()
    client = llm_clients(llm_config(endpoint.base_url, None, cache_enabled=False))
    await client.complete(ask("background", priority=Priority.BACKGROUND))
    await client.complete(ask("now", priority=Priority.INTERACTIVE))
    assert [request.priority for request in endpoint.calls()] == [1, None]


async def test_a_server_without_priority_scheduling_gets_the_request_again_without_it_once_and_for_all(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(replies=[Reply(json={"ok": True})]), accepts_priority=False)
    client = llm_clients(llm_config(endpoint.base_url, None, cache_enabled=False, retries=0))
    structured = Request(
        role="judge", messages=({"role": "user", "content": "ok?"},), schema=SCHEMA, schema_name="ok"
    )
    first = await client.complete(structured)
    assert first.data == {"ok": True}
    # Refused for its priority (HTTP 400), then the same request without it: the 400 was not taken for a
    # refusal of json_schema, and retries 0 did not turn it into a failure.
    assert [(request.priority, request.response_format) for request in endpoint.calls()] == [
        (1, "json_schema"),
        (None, "json_schema"),
    ]
    await asyncio.gather(*(client.complete(ask(f"more {i}")) for i in range(3)))
    assert [request.priority for request in endpoint.calls()[2:]] == [None] * 3  # not sent again
    assert client.usage.failures == 0 and client.usage.retries == 0
    (pool,) = client.pool.endpoints()
    assert pool.mode is StructuredMode.JSON_SCHEMA and pool.accepts_priority is False


async def test_n_answers_arrive_in_one_request_once_the_mode_is_known(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    answers = iter(range(100))
    endpoint = scripted(Rule(respond=lambda request: Reply(json={"ok": next(answers) % 2 == 0})))
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    structured = Request(
        role="planner", messages=({"role": "user", "content": "plan"},), schema=SCHEMA, temperature=0.7
    )
    completions, failures = await client.complete_choices(structured, 4)
    assert failures == [] and [completion.data for completion in completions] == [
        {"ok": True},
        {"ok": False},
        {"ok": True},
        {"ok": False},
    ]
    assert [request.n for request in endpoint.calls()] == [1, 3]  # the mode settled by one, then n=3
    assert client.usage.calls == 4 and client.usage.requests == 2
    # The prompt is counted once per request, not once per answer.
    assert client.usage.prompt_tokens == sum(len(request.prompt.split()) for request in endpoint.calls())
    again, _ = await client.complete_choices(structured, 4)  # the whole set comes from the cache
    assert [completion.cached for completion in again] == [True] * 4
    assert [completion.data for completion in again] == [completion.data for completion in completions]
    assert len(endpoint.calls()) == 2

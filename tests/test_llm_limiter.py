"""PriorityLimiter on its own (order of service, cancellation) and as used by LLMClient: one limiter per
endpoint, shared by every caller and role, with interactive requests served before queued background ones."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from margin.testing.scripted_endpoint import Reply, Rule
from margin.workflows.llm.config import RoleRoute
from margin.workflows.llm.limiter import PriorityLimiter
from margin.workflows.llm.types import Priority, Request

from conftest import ClientFactory, ScriptedFactory, llm_config


async def settle() -> None:
    """Let every ready task run until they all wait again."""
    for _ in range(5):
        await asyncio.sleep(0)


async def hold(limiter: PriorityLimiter, priority: Priority, name: str, served: list[str]) -> None:
    async with limiter.slot(priority):
        served.append(name)
        assert limiter.active == 1
        await asyncio.sleep(0.001)


# -- the limiter on its own ----------------------------------------------------------------------------------


async def test_free_slots_are_taken_at_once_and_the_rest_wait() -> None:
    limiter = PriorityLimiter(2)
    await limiter.acquire()
    await limiter.acquire()
    assert limiter.active == 2
    waiter = asyncio.create_task(limiter.acquire())
    await settle()
    assert not waiter.done() and limiter.queued == 1
    limiter.release()
    await settle()
    assert waiter.done() and limiter.active == 2 and limiter.queued == 0
    limiter.release()
    limiter.release()
    assert limiter.active == 0


async def test_capacity_below_one_still_allows_one() -> None:
    limiter = PriorityLimiter(0)
    assert limiter.capacity == 1
    await asyncio.wait_for(limiter.acquire(), 1)
    limiter.release()


async def test_interactive_waiters_are_served_before_background_then_in_arrival_order() -> None:
    limiter = PriorityLimiter(1)
    served: list[str] = []
    await limiter.acquire()  # the slot is busy while everyone queues
    arrivals = [
        ("b1", Priority.BACKGROUND),
        ("b2", Priority.BACKGROUND),
        ("i1", Priority.INTERACTIVE),
        ("b3", Priority.BACKGROUND),
        ("i2", Priority.INTERACTIVE),
    ]
    tasks = []
    for name, priority in arrivals:
        tasks.append(asyncio.create_task(hold(limiter, priority, name, served)))
        await settle()
    assert limiter.queued == 5 and not served
    limiter.release()
    await asyncio.wait_for(asyncio.gather(*tasks), 2)
    assert served == ["i1", "i2", "b1", "b2", "b3"]
    assert limiter.active == 0 and limiter.queued == 0


async def test_cancelled_waiter_does_not_leak_a_slot() -> None:
    limiter = PriorityLimiter(1)
    await limiter.acquire()
    waiter = asyncio.create_task(limiter.acquire())
    await settle()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert limiter.queued == 0
    limiter.release()
    assert limiter.active == 0
    await asyncio.wait_for(limiter.acquire(), 1)  # the slot is free again, not owed to the cancelled waiter
    assert limiter.active == 1


async def test_slot_granted_to_a_waiter_cancelled_before_it_ran_is_passed_on() -> None:
    limiter = PriorityLimiter(1)
    await limiter.acquire()
    first = asyncio.create_task(limiter.acquire(Priority.INTERACTIVE))
    second = asyncio.create_task(limiter.acquire())
    await settle()
    limiter.release()  # hands the slot to `first`...
    first.cancel()  # ...which is cancelled before it gets to run
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, 1)  # the slot moved on
    assert limiter.active == 1 and limiter.queued == 0
    limiter.release()
    assert limiter.active == 0


async def test_newcomer_does_not_jump_a_waiter_that_was_just_granted_the_slot() -> None:
    limiter = PriorityLimiter(1)
    await limiter.acquire()
    granted = asyncio.create_task(limiter.acquire())
    await settle()
    limiter.release()  # granted, but has not run yet
    newcomer = asyncio.create_task(limiter.acquire(Priority.INTERACTIVE))
    await settle()
    assert granted.done() and not newcomer.done()
    assert limiter.active == 1
    limiter.release()
    await settle()
    assert newcomer.done() and limiter.active == 1
    limiter.release()
    assert limiter.active == 0


async def test_random_holders_and_cancellations_never_exceed_capacity_nor_leak() -> None:
    limiter = PriorityLimiter(3)
    rng = random.Random(7)
    holding = 0
    peak = 0

    async def worker() -> None:
        nonlocal holding, peak
        async with limiter.slot(rng.choice(list(Priority))):
            holding += 1
            try:
                peak = max(peak, holding)
                await asyncio.sleep(rng.uniform(0, 0.005))
            finally:
                holding -= 1  # also when cancelled while holding the slot

    tasks = [asyncio.create_task(worker()) for _ in range(200)]
    for _ in range(60):
        await asyncio.sleep(rng.uniform(0, 0.002))
        rng.choice(tasks).cancel()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(outcome is None or isinstance(outcome, asyncio.CancelledError) for outcome in outcomes)
    assert peak == 3
    assert limiter.active == 0 and limiter.queued == 0
    assert holding == 0


# -- the limiter in LLMClient --------------------------------------------------------------------------------


def ask(role: str, prompt: str, priority: Priority = Priority.BACKGROUND) -> Request:
    return Request(role=role, messages=({"role": "user", "content": prompt},), priority=priority)


async def test_one_limiter_per_endpoint_caps_requests_in_flight(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(latency=0.2)
    client = llm_clients(
        llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", cache_enabled=False, max_concurrency=3)
    )
    started = time.monotonic()
    answers = await asyncio.gather(*(client.complete(ask("journalist", f"call {i}")) for i in range(12)))
    elapsed = time.monotonic() - started
    assert len(answers) == 12 and all(answer.text == "ok" for answer in answers)
    assert endpoint.max_in_flight == 3
    assert len(endpoint.calls()) == 12
    assert elapsed >= 4 * 0.2 * 0.95  # four waves of three
    (pooled,) = client.pool.endpoints()
    (server,) = pooled.members
    assert server.limiter.active == 0 and server.limiter.queued == 0


async def test_roles_routed_to_the_same_endpoint_share_its_limiter(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(latency=0.15, models=("big", "small"))
    config = llm_config(
        endpoint.base_url,
        tmp_path / "cache.sqlite3",
        cache_enabled=False,
        max_concurrency=3,
        roles={"reader": RoleRoute(model="small"), "editor": RoleRoute(base_url=endpoint.base_url + "/")},
    )
    client = llm_clients(config)
    calls = [
        client.complete(ask(role, f"{role} {i}"))
        for i in range(4)
        for role in ("journalist", "reader", "editor")
    ]
    await asyncio.gather(*calls)
    assert endpoint.max_in_flight == 3
    assert len(client.pool.endpoints()) == 1
    assert {call.body["model"] for call in endpoint.calls()} == {"big", "small"}


async def test_interactive_call_overtakes_queued_background_calls(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(latency=0.15)
    client = llm_clients(
        llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", cache_enabled=False, max_concurrency=1)
    )
    # After one call the model list is known, so the calls below reach the limiter in creation order.
    await client.complete(ask("reviewer", "warm up"))
    background = []
    for index in range(4):
        background.append(asyncio.create_task(client.complete(ask("reviewer", f"background {index}"))))
        await asyncio.sleep(0.01)
    assert len(endpoint.calls()) == 2  # background 0 in flight, the others queued
    interactive = asyncio.create_task(client.complete(ask("editor", "interactive", Priority.INTERACTIVE)))
    await asyncio.gather(*background, interactive)
    order = [call.prompt for call in endpoint.calls()][1:]
    assert order[0] == "background 0"  # already in flight: not pre-empted
    assert order[1] == "interactive"
    assert order[2:] == ["background 1", "background 2", "background 3"]
    assert endpoint.max_in_flight == 1


async def test_limiter_slot_is_not_held_while_waiting_to_retry(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(pattern="busy", replies=[Reply(status=503, retry_after=1.0), Reply(content="done")]),
        default=Reply(content="quick"),
    )
    client = llm_clients(
        llm_config(endpoint.base_url, tmp_path / "cache.sqlite3", cache_enabled=False, max_concurrency=1)
    )
    retrying = asyncio.create_task(client.complete(ask("reviewer", "busy")))
    while not endpoint.calls():
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    started = time.monotonic()
    quick = await client.complete(ask("editor", "quick one"))
    assert quick.text == "quick" and time.monotonic() - started < 0.7  # not after the 1 s retry wait
    assert (await retrying).text == "done"

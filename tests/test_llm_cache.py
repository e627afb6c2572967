"""The persistent response cache: hits and misses through LLMClient against a real scripted endpoint, LRU
eviction, corrupt files, file mode, several processes at once, and reopening costing zero model calls."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from margin.testing.scripted_endpoint import Reply, Rule, ScriptedEndpoint
from margin.workflows.llm import cache as cache_module
from margin.workflows.llm.cache import ResponseCache, cache_key
from margin.workflows.llm.client import _with_schema
from margin.workflows.llm.types import FailureKind, LLMError, Request

from conftest import ClientFactory, ScriptedFactory, llm_config

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"enum": ["accept", "minor", "major"]}},
    "required": ["verdict"],
}
STRICTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"enum": ["accept", "minor", "major"]}, "reason": {"type": "string"}},
    "required": ["verdict", "reason"],
}


def ask(
    prompt: str = "Summarise the abstract.",
    role: str = "journalist",
    schema: dict[str, Any] | None = None,
    temperature: float | None = None,
) -> Request:
    return Request(
        role=role,
        messages=(
            {"role": "system", "content": "You write for the public."},
            {"role": "user", "content": prompt},
        ),
        schema=schema,
        temperature=temperature,
    )


def counting_endpoint(scripted: ScriptedFactory, **options: Any) -> ScriptedEndpoint:
    """Answers with the request number, so a served answer tells which request produced it."""
    counter = {"n": 0}

    def respond(request: Any) -> Reply:
        counter["n"] += 1
        if request.body.get("response_format") or "JSON Schema" in request.prompt:
            wants_reason = '"reason"' in request.prompt
            answer: dict[str, Any] = {"verdict": "minor"}
            if wants_reason:
                answer["reason"] = f"answer {counter['n']}"
            return Reply(json=answer)
        return Reply(content=f"answer {counter['n']}")

    return scripted(Rule(respond=respond), **options)


# -- hits and misses -----------------------------------------------------------------------------------------


async def test_second_identical_call_is_a_hit_without_any_request(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = counting_endpoint(scripted)
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    with client.measure() as usage:
        first = await client.complete(ask())
        second = await client.complete(ask())
        structured = await client.complete(ask(schema=SCHEMA))
        structured_again = await client.complete(ask(schema=SCHEMA))
    assert len(endpoint.calls()) == 2
    assert (first.text, first.cached) == ("answer 1", False)
    assert (second.text, second.cached, second.model, second.role) == (
        "answer 1",
        True,
        "scripted-model",
        "journalist",
    )
    assert structured_again.cached and structured_again.data == structured.data == {"verdict": "minor"}
    assert (usage.calls, usage.cache_hits, usage.requests) == (2, 2, 2)
    assert usage.by_role["journalist"]["cache_hits"] == 2


@pytest.mark.parametrize(
    "variant",
    ["temperature", "messages", "schema", "role", "max_tokens"],
)
async def test_any_change_to_what_is_asked_is_a_miss(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path, variant: str
) -> None:
    endpoint = counting_endpoint(scripted)
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    base = Request(
        role="journalist",
        messages=({"role": "user", "content": "Explain the figure."},),
        schema=SCHEMA,
        temperature=0.2,
    )
    await client.complete(base)
    changed = {
        "temperature": Request(base.role, base.messages, SCHEMA, temperature=0.7),
        "messages": Request(
            base.role, ({"role": "user", "content": "Explain the figure!"},), SCHEMA, temperature=0.2
        ),
        "schema": Request(base.role, base.messages, STRICTER_SCHEMA, temperature=0.2),
        "role": Request("editor", base.messages, SCHEMA, temperature=0.2),
        "max_tokens": Request(base.role, base.messages, SCHEMA, temperature=0.2, max_tokens=77),
    }[variant]
    completion = await client.complete(changed)
    assert not completion.cached
    assert len(endpoint.calls()) == 2
    # ...and the original is still a hit.
    assert (await client.complete(base)).cached
    assert len(endpoint.calls()) == 2


async def test_same_request_for_another_model_is_a_miss(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = counting_endpoint(scripted)
    cache_path = tmp_path / "cache.sqlite3"
    await llm_clients(llm_config(endpoint.base_url, cache_path, model="model-a")).complete(ask())
    second = await llm_clients(llm_config(endpoint.base_url, cache_path, model="model-b")).complete(ask())
    assert not second.cached and second.model == "model-b"
    assert [call.body["model"] for call in endpoint.calls()] == ["model-a", "model-b"]


async def test_answer_that_breaks_a_changed_schema_is_not_served(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = counting_endpoint(scripted)
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    assert (await client.complete(ask(schema=SCHEMA))).data == {"verdict": "minor"}
    stricter = await client.complete(ask(schema=STRICTER_SCHEMA))
    assert not stricter.cached and stricter.data == {"verdict": "minor", "reason": "answer 2"}
    assert len(endpoint.calls()) == 2


async def test_stored_row_that_no_longer_validates_is_not_served_and_is_replaced(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    """A row under the very key of the request that fails its schema (an older margin wrote it, or the
    schema's meaning changed under a $ref) is asked again rather than served."""
    endpoint = counting_endpoint(scripted)
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    request = ask(schema=STRICTER_SCHEMA)
    config = client.config.default
    parameters = {"temperature": config.temperature, "top_p": config.top_p, "max_tokens": config.max_tokens}
    key = cache_key("scripted-model", request.role, _with_schema(request, None), parameters, request.schema)
    assert client.cache is not None
    client.cache.put(
        key, {"text": '{"verdict": "minor"}', "finish_reason": "stop", "model": "scripted-model"}
    )
    fresh = await client.complete(request)
    assert not fresh.cached and fresh.data == {"verdict": "minor", "reason": "answer 1"}
    again = await client.complete(request)
    assert again.cached and again.data == fresh.data
    assert len(endpoint.calls()) == 1


async def test_failures_are_not_cached(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(
        Rule(
            replies=[Reply(content="no json"), Reply(content="still none"), Reply(json={"verdict": "accept"})]
        )
    )
    client = llm_clients(llm_config(endpoint.base_url, tmp_path / "cache.sqlite3"))
    with pytest.raises(LLMError) as caught:
        await client.complete(ask(schema=SCHEMA))
    assert caught.value.kind is FailureKind.INVALID_OUTPUT
    assert (await client.complete(ask(schema=SCHEMA))).data == {"verdict": "accept"}
    assert len(endpoint.calls()) == 3


async def test_cache_off_sends_every_call_and_writes_no_file(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = counting_endpoint(scripted)
    cache_path = tmp_path / "cache.sqlite3"
    client = llm_clients(llm_config(endpoint.base_url, cache_path, cache_enabled=False))
    texts = [(await client.complete(ask())).text for _ in range(3)]
    assert texts == ["answer 1", "answer 2", "answer 3"]
    assert client.cache is None and not cache_path.exists()
    assert client.usage.cache_hits == 0 and client.usage.calls == 3


async def test_reopening_with_a_new_client_costs_zero_model_calls(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    """ "Reopening a manuscript or undoing an edit costs zero model calls" (a new process, the same cache)."""
    endpoint = counting_endpoint(scripted, accepted_formats=("json_object", "text"))
    cache_path = tmp_path / "cache.sqlite3"
    requests = [ask(f"Paragraph {index}.", schema=SCHEMA if index % 2 else None) for index in range(6)]
    first_client = llm_clients(llm_config(endpoint.base_url, cache_path))
    first = [await first_client.complete(request) for request in requests]
    await first_client.close()
    sent = len(endpoint.calls())
    assert sent == 6 + 1  # one json_schema refusal while negotiating

    reopened = llm_clients(llm_config(endpoint.base_url, cache_path))
    with reopened.measure() as usage:
        again = await asyncio.gather(*(reopened.complete(request) for request in requests))
    assert len(endpoint.calls()) == sent
    assert [c.text for c in again] == [c.text for c in first] and all(c.cached for c in again)
    assert (usage.calls, usage.requests, usage.cache_hits) == (0, 0, 6)


# -- eviction ------------------------------------------------------------------------------------------------


def test_eviction_drops_least_recently_used_entries_first(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite3", max_bytes=10_000)
    value = {"text": "x" * 980}  # ~1 KB a row
    for index in range(8):
        cache.put(f"key-{index}", value)
    assert cache.get("key-0") is not None  # touch the oldest: it is now the most recently used
    for index in range(8, 14):
        cache.put(f"key-{index}", value)
    cache.evict_now()
    stats = cache.stats()
    assert stats["bytes"] <= 10_000 * 0.9 + 1  # trimmed below the bound with some headroom
    kept = {key for key in (f"key-{index}" for index in range(14)) if cache.get(key) is not None}
    assert "key-0" in kept  # touched, so kept
    assert {"key-1", "key-2", "key-3", "key-4", "key-5"}.isdisjoint(kept)  # untouched and oldest: gone
    assert {"key-11", "key-12", "key-13"} <= kept
    cache.close()


async def test_client_evicts_lru_answers_from_a_tiny_cache(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = counting_endpoint(scripted)
    cache_path = tmp_path / "cache.sqlite3"
    client = llm_clients(llm_config(endpoint.base_url, cache_path, cache_max_bytes=600))
    for index in range(40):  # each row is ~70 bytes; eviction runs every 32 inserts
        await client.complete(ask(f"Paragraph {index}."))
        if index % 2 == 0:
            assert (await client.complete(ask("Paragraph 0."))).cached  # keep touching the first
    assert client.cache is not None
    client.cache.evict_now()
    assert client.cache.stats()["bytes"] <= 600
    calls = len(endpoint.calls())
    assert (await client.complete(ask("Paragraph 0."))).cached  # touched: kept
    assert (await client.complete(ask("Paragraph 39."))).cached  # newest: kept
    assert not (await client.complete(ask("Paragraph 1."))).cached  # old and untouched: evicted
    assert len(endpoint.calls()) == calls + 1


# -- the file ------------------------------------------------------------------------------------------------


async def test_corrupt_file_is_moved_aside_and_rebuilt(
    scripted: ScriptedFactory,
    llm_clients: ClientFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At margin's own location (the default path) a damaged file is moved aside, never deleted."""
    endpoint = counting_endpoint(scripted)
    cache_path = tmp_path / "cache.sqlite3"
    monkeypatch.setattr("margin.workflows.llm.cache.default_cache_path", lambda: cache_path)
    garbage = os.urandom(8192)
    cache_path.write_bytes(garbage)
    client = llm_clients(llm_config(endpoint.base_url, None))
    assert (await client.complete(ask())).text == "answer 1"
    assert (await client.complete(ask())).cached
    aside = list(tmp_path.glob("cache.sqlite3.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == garbage
    assert "unreadable" in caplog.text
    await client.close()
    rows = sqlite3.connect(cache_path).execute("SELECT count(*) FROM responses").fetchone()
    assert rows == (1,)
    assert stat.S_IMODE(cache_path.stat().st_mode) == 0o600


def test_file_with_a_valid_header_but_damaged_pages_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite3"
    cache = ResponseCache(path)
    for index in range(50):
        cache.put(f"key-{index}", {"text": "x" * 500})
    cache.close()
    data = bytearray(path.read_bytes())
    for index in range(200, len(data), 7):
        data[index] = (data[index] * 31 + 7) % 256
    path.write_bytes(bytes(data))
    cache = ResponseCache(path)
    assert cache.get("key-1") is None
    cache.put("fresh", {"text": "y"})
    assert cache.get("fresh") == {"text": "y"}
    assert list(tmp_path.glob("cache.sqlite3.corrupt-*"))
    cache.close()


def test_cache_file_and_journal_are_private(tmp_path: Path) -> None:
    path = tmp_path / "private" / "cache.sqlite3"
    cache = ResponseCache(path)
    cache.put("key", {"text": "answer"})
    assert cache.get("key") == {"text": "answer"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0
    for sidecar in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if sidecar.exists():
            assert stat.S_IMODE(sidecar.stat().st_mode) & 0o077 == 0, sidecar
    cache.close()


def test_existing_world_readable_cache_file_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite3"
    ResponseCache(path).close()
    first = ResponseCache(path)
    first.put("key", {"text": "answer"})
    first.close()
    os.chmod(path, 0o644)
    cache = ResponseCache(path)
    assert cache.get("key") == {"text": "answer"}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    cache.close()


_WRITER = """
import json, sys
from pathlib import Path
from margin.workflows.llm.cache import ResponseCache
path, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
cache = ResponseCache(path, max_bytes=64 * 1024 * 1024)
missing = []
for index in range(count):
    cache.put(f"{name}-{index}", {"text": f"{name} answer {index} " + "x" * 200})
    if cache.get(f"{name}-{index // 2}") is None:
        missing.append(index // 2)
    cache.get(f"other-{index}")
stats = cache.stats()
cache.close()
print(json.dumps({"missing": missing, "entries": stats["entries"]}))
"""


def test_two_processes_share_one_cache_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    count = 400
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), name, str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("alpha", "beta")
    ]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        results.append((json.loads(out), err))
    for report, err in results:
        assert report["missing"] == [], "an entry the process itself wrote could not be read back"
        assert "unreadable" not in err and "busy" not in err, err
    assert not list(tmp_path.glob("*.corrupt-*")), "a busy file was mistaken for a corrupt one"
    cache = ResponseCache(path)
    for name in ("alpha", "beta"):
        for index in range(count):
            assert cache.get(f"{name}-{index}") == {"text": f"{name} answer {index} " + "x" * 200}
    assert cache.stats()["entries"] == 2 * count
    cache.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    """Another connection holding the file's write lock, as a process setting the file up or writing does."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_first_write_to_a_new_file_waits_for_a_competing_writer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Switching a new file to WAL fails at once, without SQLite's busy handler, while another connection
    holds the write lock: the first write must wait for it, not be dropped."""
    path = tmp_path / "cache.sqlite3"
    holder = _hold_write_lock(path)

    def commit() -> None:
        holder.execute("COMMIT")
        holder.close()

    release = threading.Timer(0.3, commit)
    release.start()
    cache = ResponseCache(path)
    try:
        cache.put("first", {"text": "answer"})
        assert cache.get("first") == {"text": "answer"}
    finally:
        release.join()
        cache.close()
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING], caplog.text
    assert not list(tmp_path.glob("*.corrupt-*"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_write_blocked_past_its_deadline_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Waiting is bounded: a write that cannot get the lock in time is given up, and says so as a warning."""
    monkeypatch.setattr(cache_module, "_WRITE_PATIENCE", 0.3)
    path = tmp_path / "cache.sqlite3"
    cache = ResponseCache(path)
    cache.put("before", {"text": "kept"})
    holder = _hold_write_lock(path)
    try:
        started = time.monotonic()
        cache.put("during", {"text": "skipped"})
        waited = time.monotonic() - started
        assert cache.get("before") == {"text": "kept"}  # a held write lock does not stop readers (WAL)
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert 0.25 <= waited < 3, waited
    skipped = [record for record in caplog.records if "skipped writing" in record.getMessage()]
    assert [record.levelno for record in skipped] == [logging.WARNING], caplog.text
    assert cache.get("during") is None
    cache.put("after", {"text": "written"})
    assert cache.get("after") == {"text": "written"}
    assert not list(tmp_path.glob("*.corrupt-*"))
    cache.close()


_STARTING_WRITER = """
import json, sys
from pathlib import Path
from margin.workflows.llm.cache import ResponseCache
path, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
cache = ResponseCache(path, max_bytes=64 * 1024 * 1024)
print("ready", flush=True)
sys.stdin.readline()  # every writer starts at once; its first put opens and sets up the file
missing = []
for index in range(count):
    cache.put(f"{name}-{index}", {"text": f"{name} answer {index}"})
    if cache.get(f"{name}-{index}") != {"text": f"{name} answer {index}"}:
        missing.append(index)
cache.close()
print(json.dumps({"missing": missing}), flush=True)
"""


def test_more_writers_than_cores_starting_together_on_a_new_file_lose_nothing(tmp_path: Path) -> None:
    """More writer processes than cores open one brand-new file at the same moment, while another connection
    holds its write lock: the WAL switch and the schema collide, and no process may lose a write to that."""
    path = tmp_path / "shared.sqlite3"
    writers = min(12, max(6, 2 * (os.cpu_count() or 1)))
    count = 20
    holder = _hold_write_lock(path)
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _STARTING_WRITER, str(path), f"w{number}", str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for number in range(writers)
    ]
    try:
        for process in processes:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        time.sleep(0.3)  # every first put meets the held lock
        holder.execute("COMMIT")
        holder.close()
        results = [process.communicate(timeout=60) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    for process, (out, err) in zip(processes, results, strict=True):
        assert process.returncode == 0, err
        assert json.loads(out)["missing"] == [], f"a write was lost: {err}"
        assert "skipped" not in err and "unreadable" not in err, err
    assert not list(tmp_path.glob("*.corrupt-*")), "a busy file was mistaken for a corrupt one"
    cache = ResponseCache(path)
    assert cache.stats()["entries"] == writers * count
    cache.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_cache_path_that_is_a_directory_leaves_the_directory_alone(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = counting_endpoint(scripted)
    folder = tmp_path / "margin-cache"
    folder.mkdir(mode=0o755)
    (folder / "notes.txt").write_text("mine")
    client = llm_clients(llm_config(endpoint.base_url, folder))
    try:
        assert (await client.complete(ask())).text == "answer 1"
    finally:
        moved = not (folder.is_dir() and (folder / "notes.txt").exists())
        mode = stat.S_IMODE(folder.stat().st_mode) if folder.exists() else None
    assert not moved, f"the directory was moved aside: {sorted(p.name for p in tmp_path.iterdir())}"
    assert mode == 0o755


async def test_unusable_cache_location_does_not_fail_the_call(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = counting_endpoint(scripted)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where a folder should be")
    client = llm_clients(llm_config(endpoint.base_url, blocker / "cache.sqlite3"))
    assert (await client.complete(ask())).text == "answer 1"

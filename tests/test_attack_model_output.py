"""A hostile model: answers of megabytes, floods of findings, JSON nested a hundred thousand levels deep, quotes
built to make matching quadratic, rewrites a hundred times their original. Whatever it sends, margin reads a
bounded amount (cut off at the transport, by the request's max_tokens), checks it in linear time off the event
loop, fails with a clear message, and publishes bounded diagnostics.

Every answer comes from a real scripted OpenAI-compatible server on loopback through the real openai client;
the CLI runs in-process (`main`), the language server as a process of its own. Time bounds are generous (a slow
CI machine passes them many times over); before these bounds the same attacks took tens of seconds to hours.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from margin.server.cli import main
from margin.server.cli.exit_status import MODEL_CALLS_FAILED
from margin.server.cli.exit_status import OK as EXIT_OK
from margin.testing.scripted_endpoint import Reply, Rule, ScriptedEndpoint
from margin.workflows.feedback.pipeline import (
    FINDINGS_READ,
    ReviewContext,
    ReviewOptions,
    _validate,
    review_paragraph,
)
from margin.workflows.feedback.plans import MAX_STEPS, Plan
from margin.workflows.feedback.quotes import locate_quote
from margin.workflows.feedback.types import (
    MAX_QUESTION_CHARS,
    MAX_REASONING_CHARS,
    MAX_REVIEW_CHARS,
    Mode,
)
from margin.workflows.llm.cache import ResponseCache
from margin.workflows.llm.client import answer_byte_limit
from margin.workflows.llm.repetition import repetition
from margin.workflows.llm.structured import MAX_JSON_DEPTH, MAX_JSON_VALUES, parse_answer
from margin.workflows.llm.types import FailureKind, LLMError, Request

from conftest import (
    SCRIPTED_MODEL,
    SERVER_COMMAND,
    ClientFactory,
    ScriptedFactory,
    feedback_llm_config,
    parse_markdown,
)

MB = 1024 * 1024
QUICK = 10.0  # seconds: what any attack may cost end to end (they took 10 s to hours before)
RESPONSIVE = 2.0  # seconds: the longest a hover and a diagnostic pull may take meanwhile (took 20 s to 110 s)

PARAGRAPH = (
    "Our approach outperforms all previous methods by a wide margin on the benchmark, which shows that "
    "attention over clinical notes is the key ingredient for accurate diagnosis prediction in every hospital."
)
QUOTES = (
    "outperforms all previous methods by a wide margin",
    "attention over clinical notes is the key ingredient",
    "accurate diagnosis prediction in every hospital",
)
REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"findings": {"type": "array", "items": {"type": "object"}}},
    "required": ["findings"],
}


def _vocabulary() -> list[str]:
    chooser = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(chooser.choices(letters, k=chooser.randint(3, 9))) for _ in range(20_000)]


VOCABULARY = _vocabulary()


def prose(characters: int, seed: int = 1) -> str:
    """Words that never repeat a run of themselves (so the repetition check lets them through)."""
    text = " ".join(random.Random(seed).choices(VOCABULARY, k=characters // 6 + 1))
    while len(text) < characters:
        text += " " + prose(characters - len(text), seed + 1)
    return text[:characters]


def finding(
    review: str, quote: str = QUOTES[0], label: str = "Substance", reasoning: str = "ok"
) -> dict[str, str]:
    return {"reasoning": reasoning, "quote": quote, "label": label, "review": review}


def bracketed_prose(characters: int, seed: int = 1) -> str:
    """Prose with an unclosed "[" after every word: each one started a bracket scan to the end of the answer."""
    return " ".join(f"{word} [" for word in prose(characters, seed).split())[:characters]


def flood(count: int, review_characters: int = 200) -> list[dict[str, str]]:
    """Distinct findings with valid quotes and labels, the first with a review far past the bound. Random
    words between the fixed ones (quote, label, keys), so that no run of 12 words recurs."""
    labels = ("Substance", "Originality", "Replicability")
    items = [
        {
            "quote": QUOTES[index % 3],
            "reasoning": prose(40, index),
            "label": labels[index % 3],
            "review": bracketed_prose(review_characters, index),
        }
        for index in range(count)
    ]
    items[0] = finding(prose(50_000))
    return items


# -- the attacks, as the reviewer's answers ----------------------------------------------------------------------

ATTACKS: dict[str, Any] = {
    # Valid JSON: one finding whose review is 10 MB.
    "ten_megabyte_json": lambda: Reply(json={"findings": [finding(prose(10 * MB))]}),
    # 100k findings (16 MB).
    "hundred_thousand_findings": lambda: Reply(json={"findings": [finding("Say more.")] * 100_000}),
    # 10 MB as server-sent events, without a Content-Length: cut off while it arrives.
    "ten_megabyte_stream": lambda: Reply(
        json={"findings": [finding(prose(10 * MB))]}, stream=True, stream_piece=64 * 1024
    ),
    # A 5 MB quote almost matching the paragraph.
    "five_megabyte_quote": lambda: Reply(
        json={"findings": [finding("Say more.", (PARAGRAPH[:-1] + "x ") * (5 * MB // len(PARAGRAPH)))]}
    ),
}


def review_settings(tmp_path: Path, **llm: Any) -> Path:
    settings = {
        "margin": {
            "cache": {"path": str(tmp_path / "cache" / "llm-cache.sqlite3")},
            "llm": {"retries": 0, "timeoutSeconds": 30, "model": SCRIPTED_MODEL, **llm},
            "review": {"maxFindings": 3},
        }
    }
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings), encoding="utf-8")
    return path


def run_review(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, endpoint: ScriptedEndpoint, **llm: Any
) -> tuple[int, str, str, float]:
    paper = tmp_path / "paper.md"
    paper.write_text(f"# Study\n\n{PARAGRAPH}\n", encoding="utf-8")
    started = time.monotonic()
    code = main(
        ["review", str(paper), "--mode", "single", "--format", "json", "--endpoint", endpoint.base_url,
         "--settings", str(review_settings(tmp_path, **llm))]
    )  # fmt: skip
    elapsed = time.monotonic() - started
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err, elapsed


# -- margin review: answers past the byte bound ------------------------------------------------------------------


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_answer_past_the_byte_bound_fails_fast_as_oversized_and_prints_little(
    attack: str, capsys: pytest.CaptureFixture[str], scripted: ScriptedFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(role="reviewer", replies=[ATTACKS[attack]()]))
    code, out, err, elapsed = run_review(capsys, tmp_path, endpoint)

    assert elapsed < QUICK, elapsed
    assert code == MODEL_CALLS_FAILED, err
    assert "oversized" in err and f"at most {answer_byte_limit(1024)} bytes" in err, err
    assert json.loads(out)["findings"] == [] and len(out) < 4096
    assert len(endpoint.calls("reviewer")) == 1  # no retry, no repair: the answer is no answer to the request


async def test_a_streamed_answer_is_cut_off_while_it_arrives(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    total = 10 * MB
    endpoint = scripted(
        Rule(role="reviewer", replies=[Reply(content=prose(total), stream=True, stream_piece=4096)])
    )
    llm = llm_clients(feedback_llm_config(endpoint, tmp_path))
    started = time.monotonic()
    with pytest.raises(LLMError) as failure:
        await llm.complete(Request(role="reviewer", messages=({"role": "user", "content": "Review."},)))

    assert time.monotonic() - started < QUICK
    assert failure.value.kind is FailureKind.OVERSIZED
    assert "went on past 65536 bytes" in failure.value.message
    await asyncio.sleep(0.5)  # the server notices the closed connection at its next write
    (call,) = endpoint.calls("reviewer")
    assert call.disconnected and call.body_bytes < total / 2


async def test_a_streamed_answer_within_the_bound_is_read_although_nobody_asked_for_a_stream(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    answer = {"findings": [finding("Name the previous methods and give their scores.")]}
    endpoint = scripted(Rule(role="reviewer", replies=[Reply(json=answer, stream=True)]))
    llm = llm_clients(feedback_llm_config(endpoint, tmp_path))
    completion = await llm.complete(
        Request(role="reviewer", messages=({"role": "user", "content": "Review."},), schema=REVIEW_SCHEMA)
    )
    assert completion.data == answer and completion.completion_tokens > 0


def test_the_byte_bound_follows_max_tokens_with_a_floor_and_a_cap() -> None:
    assert answer_byte_limit(None) == answer_byte_limit(16) == 64 * 1024
    assert answer_byte_limit(65536) == 16 * 65536
    assert answer_byte_limit(10**9) == 4 * MB


# -- margin review: answers within the byte bound that were slow or unbounded before --------------------------


def test_json_nested_thirty_thousand_levels_fails_with_a_clear_message(
    capsys: pytest.CaptureFixture[str], scripted: ScriptedFactory, tmp_path: Path
) -> None:
    nested = '{"findings": [' + "[" * 30_000 + "]" * 30_000 + "]}"  # 60 KB: within the bound of 1024 tokens
    endpoint = scripted(Rule(role="reviewer", replies=[Reply(content=nested)]))
    code, out, err, elapsed = run_review(capsys, tmp_path, endpoint)

    assert elapsed < QUICK, elapsed
    assert code == MODEL_CALLS_FAILED
    assert f"nested more than {MAX_JSON_DEPTH} levels deep" in err, err
    assert json.loads(out)["findings"] == []


def test_a_long_review_full_of_brackets_is_checked_in_linear_time_and_refused(
    capsys: pytest.CaptureFixture[str], scripted: ScriptedFactory, tmp_path: Path
) -> None:
    # 58 KB of JSON with an unclosed "[" every few words took 13 s to extract before (quadratic), twice.
    answer = {"findings": [finding(bracketed_prose(58_000))]}
    endpoint = scripted(Rule(role="reviewer", replies=[Reply(json=answer)]))
    code, out, err, elapsed = run_review(capsys, tmp_path, endpoint)

    assert elapsed < QUICK, elapsed
    assert code == EXIT_OK, err
    assert json.loads(out)["findings"] == []
    assert len(endpoint.calls("reviewer")) == 2  # the answer, and one repair that said what was wrong
    repair = endpoint.calls("reviewer")[1].body["messages"][-1]["content"]
    assert f"the review is 58000 characters long; write at most {MAX_REVIEW_CHARS}" in repair
    assert len(repair) < 2000


def test_a_flood_of_findings_yields_at_most_max_findings_bounded_ones(
    capsys: pytest.CaptureFixture[str], scripted: ScriptedFactory, tmp_path: Path
) -> None:
    answer = {"findings": flood(2500)}  # about 900 KB: within the bound of 65536 tokens
    assert len(json.dumps(answer)) < answer_byte_limit(65536)
    endpoint = scripted(Rule(role="reviewer", replies=[Reply(json=answer)]))
    code, out, err, elapsed = run_review(capsys, tmp_path, endpoint, maxTokens=65536)

    assert elapsed < QUICK, elapsed
    assert code == EXIT_OK, err
    findings = json.loads(out)["findings"]
    assert 1 <= len(findings) <= 3
    assert all(len(item["review"]) <= MAX_REVIEW_CHARS for item in findings)
    assert len(out) < 16_000
    repair = endpoint.calls("reviewer")[-1].body["messages"][-1]["content"]
    assert f"only the first {FINDINGS_READ} were read" in repair and len(repair) < 2000


# -- the checks themselves: linear, and bounded ------------------------------------------------------------------


def timed(function: Any, *arguments: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = function(*arguments)
    return result, time.perf_counter() - started


@pytest.mark.parametrize(
    "answer, problem",
    [
        ("[" * 1_000_000 + "]" * 1_000_000, "nested more than"),  # a RecursionError in json.loads before
        ("Here it is: " + "[" * 2_000_000, "no parseable JSON"),  # unclosed: every opener scanned to the end
        ('{"findings": [' + "0," * 30_000 + "0]}", f"more than {MAX_JSON_VALUES} values"),
        # Unclosed at the end: its inner array is found (in one linear scan) and offered to the schema.
        (
            "Sure! " + json.dumps({"findings": [finding(bracketed_prose(3 * MB))]})[:-1],
            "is not of type 'object'",
        ),
        ("[1, " * 500_000 + json.dumps({"findings": []}), "nested more than"),
    ],
    ids=["deep", "unclosed", "wide", "brackets-in-strings", "prefix"],
)
def test_json_extraction_is_linear_on_hostile_answers(answer: str, problem: str) -> None:
    (data, found), seconds = timed(parse_answer, answer, REVIEW_SCHEMA)
    assert seconds < 5.0, seconds
    assert data is None and found is not None and problem in found and len(found) < 400


def test_json_within_the_bounds_is_still_found_in_prose() -> None:
    wanted = {"findings": [finding("Name the baselines.")]}
    answer = f"Sure [1]. Here is my review:\n{json.dumps(wanted)}\nHope it helps {{: ]"
    assert parse_answer(answer, REVIEW_SCHEMA) == (wanted, None)
    nested = {"findings": [{"deep": [[[[[0]]]]]}]}
    assert parse_answer(json.dumps(nested), REVIEW_SCHEMA) == (nested, None)


@pytest.mark.parametrize(
    "quote",
    [
        "outperforms all" + " " * 1_000_000 + "previous methods",  # \s*…$ backtracked over every run before
        (PARAGRAPH[:-1] + "x ") * (5 * MB // len(PARAGRAPH)),  # 5 MB, almost the paragraph over and over
        "outperforms all previous methods by a wide margin on the benchmarks " * 20,  # fuzzy, and long
    ],
    ids=["white-space-run", "five-megabytes", "long-near-match"],
)
def test_quote_matching_is_bounded_whatever_the_quote(quote: str) -> None:
    long_paragraph = " ".join([PARAGRAPH] * 300)  # 60 KB
    (match, seconds) = timed(locate_quote, quote, long_paragraph)
    assert seconds < 2.0, seconds
    assert match is None


def test_validation_reads_a_bounded_number_of_findings_with_bounded_fields() -> None:
    paragraph = parse_markdown(f"{PARAGRAPH}\n").paragraphs[0]
    raw: list[Any] = [finding("Say more about it, please.", QUOTES[0], "Substance", "r" * 100_000)]
    label = "x" * 1_000_000  # one string, shared by every finding
    raw += [finding(prose(300, index % 100), QUOTES[index % 3], label) for index in range(100_000)]
    (findings, problems), seconds = timed(_validate, raw, paragraph, ReviewOptions(), [])
    assert seconds < 2.0, seconds
    assert len(findings) == 1 and len(findings[0].reasoning) <= MAX_REASONING_CHARS
    assert len(problems) == FINDINGS_READ and all(len(problem) < 300 for problem in problems)
    assert problems[-1] == f"the answer lists 100001 findings; only the first {FINDINGS_READ} were read"


def test_a_plan_keeps_a_bounded_number_of_steps_and_no_runaway_question() -> None:
    runaway = prose(MAX_QUESTION_CHARS * 4)
    steps = [{"action": "paper_question", "question": runaway} for _ in range(50_000)]
    steps[1] = {"action": "paper_question", "question": "How is the BM25 ranking tuned?"}
    plan, seconds = timed(Plan.from_json, {"steps": steps})
    assert seconds < 1.0
    assert len(plan.steps) == MAX_STEPS
    assert [step.question for step in plan.executable().steps if step.question] == [
        "How is the BM25 ranking tuned?"
    ]


def test_repetition_check_is_linear() -> None:
    _, seconds = timed(repetition, prose(4 * MB))
    assert seconds < QUICK


# -- the LLM layer: a pipeline's own bound, and the cache ----------------------------------------------------------


async def test_a_rewrite_a_hundred_times_its_original_is_refused_by_the_requests_bound(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    original = PARAGRAPH
    endpoint = scripted(Rule(role="simplifier", replies=[Reply(content=prose(100 * len(original)))]))
    llm = llm_clients(feedback_llm_config(endpoint, tmp_path))
    request = Request(
        role="simplifier",
        messages=({"role": "user", "content": f"Simplify:\n{original}"},),
        max_answer_chars=4 * len(original),
    )
    with pytest.raises(LLMError) as failure:
        await llm.complete(request)
    assert failure.value.kind is FailureKind.OVERSIZED
    assert f"more than the {4 * len(original)} this request can use" in failure.value.message
    assert len(endpoint.calls("simplifier")) == 1


async def test_an_oversized_answer_stored_in_the_cache_is_asked_again(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(role="journalist", replies=[Reply(content="A short article.")]))
    config = feedback_llm_config(endpoint, tmp_path)
    request = Request(role="journalist", messages=({"role": "user", "content": "Write."},))
    first = llm_clients(config)
    await first.complete(request)
    await first.close()
    assert config.cache_path is not None
    with sqlite3.connect(config.cache_path) as database:
        (key,) = [row[0] for row in database.execute("SELECT key FROM responses")]
    cache = ResponseCache(config.cache_path)  # as an older margin, which read any answer whole, stored it
    cache.put(key, {"text": prose(MB), "finish_reason": "stop", "model": SCRIPTED_MODEL})
    cache.close()
    completion = await llm_clients(config).complete(request)
    assert completion.text == "A short article." and not completion.cached


# -- the pipeline: what reaches a finding ------------------------------------------------------------------------


async def test_a_review_keeps_bounded_findings_from_a_flood(
    scripted: ScriptedFactory, llm_clients: ClientFactory, tmp_path: Path
) -> None:
    manuscript = parse_markdown(f"# Study\n\n{PARAGRAPH}\n")
    paragraph = manuscript.paragraphs[-1]
    endpoint = scripted(Rule(role="reviewer", replies=[Reply(json={"findings": flood(2500)})]))
    llm = llm_clients(feedback_llm_config(endpoint, tmp_path, max_tokens=65536))
    context = await ReviewContext.build(manuscript)
    started = time.monotonic()
    result = await review_paragraph(paragraph, context, llm, ReviewOptions(mode=Mode.SINGLE, max_findings=3))

    assert time.monotonic() - started < QUICK
    assert result.completed and 1 <= len(result.findings) <= 3
    assert all(len(item.review) <= MAX_REVIEW_CHARS for item in result.findings)
    assert len(result.dropped) <= 5 and all(len(problem) < 400 for problem in result.dropped)


# -- the language server: responsive while a hostile answer arrives and is checked, bounded diagnostics -------


@contextlib.asynccontextmanager
async def language_server(workspace: Path, endpoint: ScriptedEndpoint) -> AsyncIterator[LanguageClient]:
    settings = {
        "llm": {"endpoint": endpoint.base_url, "retries": 0, "timeoutSeconds": 60, "maxTokens": 65536},
        "cache": {"path": str(workspace / "cache.sqlite3")},
        "review": {"mode": "single", "maxFindings": 3, "trigger": "manual"},
    }
    client = await ClientServerConfig(server_command=SERVER_COMMAND).start()
    assert isinstance(client, LanguageClient)
    client.set_configuration(settings, section="margin")
    try:
        await asyncio.wait_for(
            client.initialize_session(
                types.InitializeParams(
                    capabilities=client_capabilities("visual-studio-code"),
                    initialization_options={"margin": settings},
                    root_uri=workspace.as_uri(),
                    workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="paper")],
                )
            ),
            30,
        )
        yield client
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), 10)
        await asyncio.wait_for(client.stop(), 10)


async def test_the_server_answers_while_a_hostile_answer_arrives_and_publishes_bounded_diagnostics(
    scripted: ScriptedFactory, tmp_path: Path
) -> None:
    # About 900 KB (within the bound of 65536 tokens) of findings whose reviews are full of unclosed brackets,
    # trickled over a couple of seconds: before, extracting its JSON alone held the event loop for hours.
    hostile = Reply(json={"findings": flood(2500)}, stream=True, stream_piece=32 * 1024, trickle=0.1)
    endpoint = scripted(Rule(role="reviewer", replies=[hostile]))
    uri = (tmp_path / "paper.md").as_uri()
    async with language_server(tmp_path, endpoint) as client:
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="markdown", version=1, text=f"# Study\n\n{PARAGRAPH}\n"
                )
            )
        )
        where = types.TextDocumentIdentifier(uri=uri)
        command = asyncio.ensure_future(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="margin.reviewDocument", arguments=[uri])
            )
        )
        latencies: list[float] = []
        while not command.done():
            started = time.monotonic()
            await asyncio.wait_for(
                client.text_document_hover_async(
                    types.HoverParams(text_document=where, position=types.Position(0, 0))
                ),
                QUICK,
            )
            await asyncio.wait_for(
                client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=where)),
                QUICK,
            )
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(0.05)
        assert await asyncio.wait_for(command, QUICK) == {"reviewed": 1}
        report = await client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(text_document=where)
        )

    assert endpoint.calls("reviewer")[0].body_bytes > 500_000  # the answer did take a while to arrive
    assert len(latencies) >= 5 and max(latencies) < RESPONSIVE, latencies
    findings = [item for item in report.items if isinstance(item.data, dict) and "dismissal" in item.data]
    assert 1 <= len(findings) <= 3
    assert all(len(item.message) <= MAX_REVIEW_CHARS for item in findings)
    published = [item for params in client.diagnostics.values() for item in params]
    assert len(json.dumps([item.message for item in published])) < 16_000

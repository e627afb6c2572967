"""Review benchmark: model calls, tokens and wall time of the feedback pipeline, per mode, against a scripted
stand-in for a busy vLLM server (a fixed latency per call and a cap on concurrent requests).

    python bench/review_bench.py [--paragraphs 30] [--latency 0.2] [--concurrency 8] [--modes full,fast,single]
                                 [--model NAME] [--endpoint process|thread] [--json]

The manuscript is fixtures/latex/paper; the first N reviewable paragraphs are reviewed, with the literature the
server would gather for it (its .bib entries). Every agent role is scripted with valid, deterministic answers
computed from its request (plans built from the paragraph's words, controller decisions that run the next
planned step, answerable investigations, one finding whose quote is six words copied from the paragraph), so
the pipeline runs its whole protocol and nothing is repaired or dropped; any deviation is printed as a warning
(and the exit status is 1).

For each mode it reviews the paragraphs
- concurrently, as review_manuscript does, with the client's limiter at --concurrency, cache off;
- sequentially, as the seed code did: one paragraph after another, one request in flight, cache off;
- twice more concurrently with the response cache on (a fresh cache file), and reports the HTTP requests of the
  second run, which should be 0.

Columns: calls, HTTP requests and tokens per paragraph (tokens as the endpoint counts them: words), wall seconds
concurrent and sequential, their ratio (speedup), the wall time a perfect scheduler would need for the
concurrent run's requests (requests x latency / concurrency), the CPU time of the event loop's thread during the
concurrent run (the client's own overhead), the peak of requests in flight at the endpoint, and the second
cached run's HTTP requests. --json adds the sequential ideal and CPU, the cached run's hits and wall time, and
the calls by role.

By default the model is not named, as in margin's default settings, so the client asks the endpoint for its
models; --model NAME skips that. The stand-in runs in a child process (as vLLM runs apart from the editor);
--endpoint thread runs it in this process, where its Python work competes with the client's for the GIL.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stand_in import StandIn, stand_in

from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule
from margin.workflows.feedback.literature import Literature
from margin.workflows.feedback.pipeline import (
    ReviewContext,
    ReviewOptions,
    review_manuscript,
    review_paragraph,
    reviewable,
)
from margin.workflows.feedback.plans import LITERATURE, PAPER, REVIEW
from margin.workflows.feedback.types import Mode, ParagraphReview, WeaknessType
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.config import EndpointConfig, LLMConfig
from margin.workflows.llm.types import Usage
from margin.workflows.manuscript.loader import ManuscriptLoader
from margin.workflows.manuscript.model import Manuscript, Paragraph
from margin.workflows.prompts import fenced_after

RULES = "review_bench:scripted_rules"  # what the stand-in answers with (it may run in another process)
PAPER_ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "latex" / "paper" / "main.tex"
QUOTE_WORDS = 6

# -- scripted answers ----------------------------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z][A-Za-z-]{4,}")
_COMMON = frozenset(
    "about above after again against among another because before being below between could during every "
    "first found further given however itself large later least might other paper result results shows "
    "since small still study their there these those three through under using value values where which "
    "while whose within without would".split()
)
_CANDIDATE = re.compile(r"Write candidate plan (\d+) of (\d+)\.")
_NEXT_STEP = re.compile(r"Remaining planned steps:\n1\. \[([a-z_]+)\] ?([^\n]*)")
_QUESTION = re.compile(r"\nQuestion: ([^\n]*)\s*\Z")


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def _user_text(request: RecordedRequest) -> str:
    """The first user message: what the agent was asked about (a repair request appends later ones)."""
    for message in request.body.get("messages") or []:
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


def _paragraph_of(request: RecordedRequest) -> str:
    return fenced_after(_user_text(request), "Paragraph:\n") or ""


def _terms(paragraph: str) -> list[str]:
    """The paragraph's content words, in order of first appearance."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(paragraph):
        lowered = word.lower().strip("-")
        if lowered not in _COMMON and len(lowered) >= 5:
            seen.setdefault(lowered, None)
    return list(seen) or ["the proposed approach"]


def _plan(request: RecordedRequest) -> Reply:
    paragraph = _paragraph_of(request)
    candidate = _CANDIDATE.search(_user_text(request))
    shift = int(candidate.group(1)) - 1 if candidate else 0
    terms = _terms(paragraph)

    def term(index: int) -> str:
        return terms[(index + shift) % len(terms)]

    steps = [
        {"action": PAPER, "question": f"How does the manuscript define the term {term(0)}?"},
        {
            "action": PAPER,
            "question": f"Which settings and numbers does the manuscript report for {term(1)}?",
        },
        {"action": PAPER, "question": f"Where does the manuscript support its claim about {term(2)}?"},
        {"action": PAPER, "question": f"On which data is {term(3)} evaluated in the manuscript?"},
        {"action": LITERATURE, "question": f"How do published methods usually handle {term(4)}?"},
        {
            "action": LITERATURE,
            "question": f"What known limitations of {term(5)} does the literature report?",
        },
        {"action": REVIEW, "question": ""},
    ]
    return Reply(json={"steps": steps})


def _control(request: RecordedRequest) -> Reply:
    match = _NEXT_STEP.search(_user_text(request))
    if match is None:
        return Reply(
            json={"explanation": "Nothing is left to ask; the reviewer can write now.", "action": REVIEW}
        )
    action, question = match.group(1), match.group(2).strip()
    explanation = (
        f"The next planned step is still needed: nothing gathered so far answers it, and the reviewer cannot "
        f"judge the paragraph without knowing this, so run the step as written ({action.replace('_', ' ')})."
    )
    return Reply(json={"explanation": explanation, "action": action, "question": question})


def _investigate(request: RecordedRequest) -> Reply:
    match = _QUESTION.search(_user_text(request))
    question = match.group(1).strip() if match else "the question"
    answer = (
        f'Passage 1 addresses this directly. As to "{question.rstrip("?")}": the text states the setting '
        "used, the data it was measured on and the comparison it relies on, though it gives no variance "
        "across runs and does not say how the threshold was chosen."
    )
    return Reply(json={"answerable": True, "answer": answer, "passages": [1]})


def _review(request: RecordedRequest) -> Reply:
    paragraph = _paragraph_of(request)
    words = list(re.finditer(r"\S+", paragraph))
    if len(words) < QUOTE_WORDS:
        return Reply(json={"findings": []})
    digest = _digest(paragraph)
    first = digest % (len(words) - QUOTE_WORDS + 1)
    quote = paragraph[words[first].start() : words[first + QUOTE_WORDS - 1].end()]
    labels = list(WeaknessType)
    label = labels[digest % len(labels)]
    finding = {
        "quote": quote,
        "label": label.value,
        "review": (
            "This statement is not supported by the evidence the paper gives: the experiments report a single "
            "run without variance, and the comparison omits the strongest recent baseline, so the claimed "
            "improvement may not hold."
        ),
        "reasoning": (
            "The context gathered from the paper shows no repeated runs and no baseline of this kind, and the "
            "literature treats both as usual practice."
        ),
    }
    return Reply(json={"findings": [finding]})


def scripted_rules() -> list[Rule]:
    return [
        Rule(role="planner", respond=_plan),
        Rule(role="controller", respond=_control),
        Rule(role="investigator", respond=_investigate),
        Rule(role="reviewer", respond=_review),
    ]


# -- runs ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    endpoint: StandIn
    manuscript: Manuscript
    paragraphs: Sequence[Paragraph]
    literature: Literature
    latency: float
    concurrency: int
    model: str | None  # None: the first model the endpoint lists, as margin's default settings do


@dataclass
class Run:
    usage: Usage
    wall_seconds: float
    loop_cpu_seconds: float  # CPU time of the event loop's thread: the client's own overhead
    reviews: list[ParagraphReview]
    peak_in_flight: int


def _client(setup: Setup, concurrency: int, cache_path: Path | None = None) -> LLMClient:
    endpoint = EndpointConfig(
        base_url=setup.endpoint.base_url, max_concurrency=concurrency, model=setup.model
    )
    config = LLMConfig(default=endpoint, cache_enabled=cache_path is not None, cache_path=cache_path)
    return LLMClient(config)


async def _measured(
    setup: Setup, llm: LLMClient, review: Callable[[], Awaitable[list[ParagraphReview]]]
) -> Run:
    setup.endpoint.take_peak()
    try:
        with llm.measure() as usage:
            started, cpu = time.perf_counter(), time.thread_time()
            reviews = await review()
            wall, cpu = time.perf_counter() - started, time.thread_time() - cpu
    finally:
        await llm.close()
    return Run(usage, wall, cpu, reviews, setup.endpoint.take_peak())


async def concurrent_run(setup: Setup, options: ReviewOptions, cache_path: Path | None = None) -> Run:
    """What the server and `margin review` do: review_manuscript, the limiter bounding requests in flight."""
    llm = _client(setup, setup.concurrency, cache_path)
    return await _measured(
        setup,
        llm,
        lambda: review_manuscript(setup.manuscript, llm, options, setup.paragraphs, setup.literature),
    )


async def sequential_run(setup: Setup, options: ReviewOptions) -> Run:
    """As the seed code did: one paragraph after another, one request in flight."""
    llm = _client(setup, 1)

    async def review() -> list[ParagraphReview]:
        context = await ReviewContext.build(setup.manuscript, setup.literature)
        return [await review_paragraph(paragraph, context, llm, options) for paragraph in setup.paragraphs]

    return await _measured(setup, llm, review)


def _per(value: float, count: int) -> float:
    return round(value / count, 2) if count else 0.0


def _check(mode: Mode, run: Run, count: int, label: str) -> list[str]:
    """Warnings when the scripted protocol did not run cleanly (the figures would then mean little)."""
    problems = []
    failures = sum(len(review.failures) for review in run.reviews)
    dropped = sum(len(review.dropped) for review in run.reviews)
    findings = sum(len(review.findings) for review in run.reviews)
    if len(run.reviews) != count:
        problems.append(f"{mode.value} {label}: {len(run.reviews)} of {count} paragraphs reviewed")
    if failures or dropped or run.usage.repairs or run.usage.retries:
        problems.append(
            f"{mode.value} {label}: {failures} failures, {dropped} dropped findings, {run.usage.repairs} "
            f"repairs, {run.usage.retries} retries"
        )
    if findings != count:
        problems.append(
            f"{mode.value} {label}: {findings} findings for {count} paragraphs (expected one each)"
        )
    return problems


async def bench_mode(setup: Setup, mode: Mode, cache_runs: bool = True) -> tuple[dict[str, Any], list[str]]:
    """One mode: concurrent, sequential and (if cache_runs) twice with the cache on. Returns (row, problems)."""
    options = ReviewOptions(mode=mode)
    count = len(setup.paragraphs)
    _progress(f"{mode.value}: concurrent")
    concurrent = await concurrent_run(setup, options)
    _progress(f"{mode.value}: sequential")
    sequential = await sequential_run(setup, options)
    cache_problems: list[str] = []
    cached: Run | None = None
    if cache_runs:
        _progress(f"{mode.value}: cache on, twice")
        with tempfile.TemporaryDirectory(prefix="margin-review-bench-") as folder:
            cache_path = Path(folder) / "llm-cache.sqlite3"
            first = await concurrent_run(setup, options, cache_path)
            cached = await concurrent_run(setup, options, cache_path)
        cache_problems = [
            *_check(mode, first, count, "cache first run"),
            *_check(mode, cached, count, "cache second run"),
        ]
    problems = [
        *_check(mode, concurrent, count, "concurrent"),
        *_check(mode, sequential, count, "sequential"),
        *cache_problems,
    ]
    usage = concurrent.usage
    if (usage.calls, usage.requests) != (sequential.usage.calls, sequential.usage.requests):
        problems.append(
            f"{mode.value}: concurrent made {usage.calls} calls / {usage.requests} requests, sequential "
            f"{sequential.usage.calls} / {sequential.usage.requests}"
        )
    speedup = sequential.wall_seconds / concurrent.wall_seconds if concurrent.wall_seconds else 0.0
    row: dict[str, Any] = {
        "mode": mode.value,
        "paragraphs": count,
        "calls": usage.calls,
        "requests": usage.requests,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "calls_per_para": _per(usage.calls, count),
        "requests_per_para": _per(usage.requests, count),
        "prompt_tok_per_para": _per(usage.prompt_tokens, count),
        "completion_tok_per_para": _per(usage.completion_tokens, count),
        "wall_s_concurrent": round(concurrent.wall_seconds, 2),
        "wall_s_sequential": round(sequential.wall_seconds, 2),
        "speedup": round(speedup, 2),
        "ideal_s_concurrent": round(usage.requests * setup.latency / setup.concurrency, 2),
        "ideal_s_sequential": round(sequential.usage.requests * setup.latency, 2),
        "loop_cpu_s_concurrent": round(concurrent.loop_cpu_seconds, 2),
        "loop_cpu_s_sequential": round(sequential.loop_cpu_seconds, 2),
        "peak_in_flight": concurrent.peak_in_flight,
        "cached_rerun_requests": cached.usage.requests if cached else None,
        "cached_rerun_hits": cached.usage.cache_hits if cached else None,
        "wall_s_cached_rerun": round(cached.wall_seconds, 2) if cached else None,
        "calls_by_role": {role: counts["calls"] for role, counts in sorted(usage.by_role.items())},
    }
    return row, problems


def _progress(message: str) -> None:
    print(f"[review_bench] {message}", file=sys.stderr, flush=True)


def load_paragraphs(count: int) -> tuple[Manuscript, list[Paragraph]]:
    manuscript, _warnings = ManuscriptLoader().load_path(PAPER_ROOT)
    chosen = [paragraph for paragraph in manuscript.paragraphs if reviewable(paragraph, ReviewOptions())]
    if count > len(chosen):
        raise SystemExit(f"{PAPER_ROOT} has only {len(chosen)} reviewable paragraphs (asked for {count})")
    return manuscript, chosen[:count]


async def run(
    count: int,
    latency: float,
    concurrency: int,
    modes: Sequence[Mode],
    model: str | None = None,
    endpoint: str = "process",
) -> dict[str, Any]:
    manuscript, paragraphs = load_paragraphs(count)
    literature = await Literature.gather(manuscript)  # the .bib entries, as the server reads them
    results: list[dict[str, Any]] = []
    problems: list[str] = []
    with stand_in(endpoint, latency, concurrency, RULES) as server:
        setup = Setup(server, manuscript, paragraphs, literature, latency, concurrency, model)
        for mode in modes:
            row, found = await bench_mode(setup, mode)
            results.append(row)
            problems.extend(found)
    return {
        "manuscript": str(PAPER_ROOT.relative_to(PAPER_ROOT.parents[3])),
        "paragraphs": count,
        "latency_s": latency,
        "concurrency": concurrency,
        "model": model or "(listed by the endpoint)",
        "endpoint": endpoint,
        "results": results,
        "problems": problems,
    }


COLUMNS = (
    "mode",
    "paragraphs",
    "calls_per_para",
    "requests_per_para",
    "prompt_tok_per_para",
    "completion_tok_per_para",
    "wall_s_concurrent",
    "wall_s_sequential",
    "speedup",
    "ideal_s_concurrent",
    "loop_cpu_s_concurrent",
    "peak_in_flight",
    "cached_rerun_requests",
)


def print_table(report: dict[str, Any]) -> None:
    print(
        f"{report['manuscript']}: {report['paragraphs']} paragraphs, {report['latency_s']:g} s a call, "
        f"{report['concurrency']} concurrent, model {report['model']}, endpoint in a {report['endpoint']}"
    )
    rows = report["results"]
    widths = [max(len(column), *(len(str(row[column])) for row in rows)) for column in COLUMNS]
    print("  ".join(column.ljust(width) for column, width in zip(COLUMNS, widths, strict=True)).rstrip())
    for row in rows:
        cells = (str(row[column]).ljust(width) for column, width in zip(COLUMNS, widths, strict=True))
        print("  ".join(cells).rstrip())
    for problem in report["problems"]:
        print(f"warning: {problem}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--paragraphs", type=int, default=30, help="reviewable paragraphs to review (default 30)"
    )
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the endpoint takes a call (0.2)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests the endpoint serves at once (8)")
    parser.add_argument("--modes", default="full,fast,single", help="comma-separated: full,fast,single")
    parser.add_argument(
        "--model",
        default=None,
        help="name the model (as margin.llm.model does) instead of asking the endpoint for its list",
    )
    parser.add_argument(
        "--endpoint",
        choices=("process", "thread"),
        default="process",
        help="run the stand-in server in a child process (default, as vLLM is) or in a thread of this one",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    arguments = parser.parse_args(argv)
    try:
        modes = [Mode(name.strip()) for name in arguments.modes.split(",") if name.strip()]
    except ValueError as error:
        parser.error(str(error))
    if arguments.paragraphs < 1 or arguments.concurrency < 1 or arguments.latency < 0:
        parser.error("--paragraphs and --concurrency must be positive, --latency not negative")
    report = asyncio.run(
        run(
            arguments.paragraphs,
            arguments.latency,
            arguments.concurrency,
            modes,
            arguments.model,
            arguments.endpoint,
        )
    )
    if arguments.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""Cache benchmark: what the response cache saves when a review runs again, and after a one-paragraph edit.

    python bench/cache_bench.py [--paragraphs 8] [--modes full,fast] [--latency 0.2] [--concurrency 8]
                                [--model NAME] [--endpoint process|thread] [--json]

For each mode it reviews the first N reviewable paragraphs of fixtures/latex/paper (as review_bench does,
concurrently, answers scripted by review_bench's rules) with the response cache on, in a fresh cache file:
1. a first run, cold cache;
2. the identical run again with a new client (as reopening the manuscript in a new session, or running
   `margin review` again, does): it should send no request;
3. one reviewed paragraph edited (a word inserted in its source, in an unsaved buffer), the manuscript parsed again
   and the same paragraphs reviewed: only the edited paragraph should send requests.
Requests are counted where they arrive, at the endpoint (chat completions, and the GET /models a client sends
once to learn the model's name when none is configured), and attributed to paragraphs through each paragraph
review's own usage. A run that does not go as the scripted protocol expects is a failure (exit status 1); a
cache that does not save what it should is a finding, printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from review_bench import PAPER_ROOT, RULES, Run, Setup, _check, concurrent_run, load_paragraphs
from stand_in import StandIn, stand_in

from margin.workflows.feedback.literature import Literature
from margin.workflows.feedback.pipeline import ReviewOptions, reviewable
from margin.workflows.feedback.types import Mode
from margin.workflows.manuscript.loader import ManuscriptLoader
from margin.workflows.manuscript.model import Manuscript, Paragraph
from margin.workflows.manuscript.source import SourceFile
from margin.workflows.manuscript.sources import SourceProvider

INSERTED = "indeed "


def edit_one(paragraphs: list[Paragraph], index: int) -> tuple[Manuscript, list[Paragraph]]:
    """The manuscript with one word inserted into paragraphs[index]'s source (an open, unsaved buffer), and
    the same first len(paragraphs) reviewable paragraphs of it."""
    paragraph = paragraphs[index]
    space = paragraph.text.index(" ", 1)
    start, _ = paragraph.offsets.source_span(space + 1, space + 2)  # the second word's first character
    text = paragraph.source.text
    edited = SourceFile(
        uri=paragraph.uri,
        text=text[:start] + INSERTED + text[start:],
        version=(paragraph.source.version or 1) + 1,
    )
    loader = ManuscriptLoader(SourceProvider(open_documents={edited.uri: edited}.get))
    manuscript, _warnings = loader.load_path(PAPER_ROOT)
    chosen = [p for p in manuscript.paragraphs if reviewable(p, ReviewOptions())][: len(paragraphs)]
    changed = [
        number for number, (old, new) in enumerate(zip(paragraphs, chosen, strict=True)) if old.id != new.id
    ]
    if len(chosen) != len(paragraphs) or changed != [index]:
        raise RuntimeError(f"editing paragraph {index + 1} changed paragraphs {[n + 1 for n in changed]}")
    return manuscript, chosen


def _attribution(run: Run, edited: int) -> list[dict[str, Any]]:
    """The paragraphs (1-based, in review order) whose review sent requests, with the roles that asked."""
    concerned = []
    for number, review in enumerate(run.reviews):
        usage = review.usage
        if usage is None or not usage.requests:
            continue
        concerned.append(
            {
                "paragraph": number + 1,
                "edited": number == edited,
                "requests": usage.requests,
                "cache_hits": usage.cache_hits,
                "calls_by_role": {
                    role: counts["calls"] for role, counts in sorted(usage.by_role.items()) if counts["calls"]
                },
            }
        )
    return concerned


async def bench_mode(
    server: StandIn, manuscript: Manuscript, paragraphs: list[Paragraph], setup: Setup, mode: Mode
) -> tuple[dict[str, Any], list[str], list[str]]:
    """One mode's three runs: (row, problems that make the figures meaningless, findings about the cache)."""
    options = ReviewOptions(mode=mode)
    count = len(paragraphs)
    edited = count // 2
    problems: list[str] = []
    findings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="margin-cache-bench-") as folder:
        cache_path = Path(folder) / "llm-cache.sqlite3"
        server.take_requests()
        _progress(f"{mode.value}: first run, cold cache")
        first = await concurrent_run(setup, options, cache_path)
        first_http = server.take_requests()
        _progress(f"{mode.value}: identical run")
        again = await concurrent_run(setup, options, cache_path)
        again_http = server.take_requests()
        _progress(f"{mode.value}: paragraph {edited + 1} edited")
        edited_manuscript, edited_paragraphs = edit_one(paragraphs, edited)
        literature = await Literature.gather(edited_manuscript)
        after_setup = replace(
            setup, manuscript=edited_manuscript, paragraphs=edited_paragraphs, literature=literature
        )
        after = await concurrent_run(after_setup, options, cache_path)
        after_http = server.take_requests()
    for run, label in ((first, "cache first run"), (again, "identical run"), (after, "after the edit")):
        problems.extend(_check(mode, run, count, label))
    concerned = _attribution(after, edited)
    others = [item for item in concerned if not item["edited"]]
    if again_http["chat"]:
        findings.append(
            f"{mode.value}: the identical run sent {again_http['chat']} chat requests (expected 0)"
        )
    if others:
        findings.append(
            f"{mode.value}: after editing paragraph {edited + 1}, the reviews of {len(others)} unchanged "
            f"paragraphs sent {sum(item['requests'] for item in others)} requests "
            f"(paragraphs {', '.join(str(item['paragraph']) for item in others)})"
        )
    if not any(item["edited"] for item in concerned):
        problems.append(f"{mode.value}: the edited paragraph's review sent no request (it cannot be new)")
    row = {
        "mode": mode.value,
        "paragraphs": count,
        "first_run": {
            **first_http,
            "cache_hits": first.usage.cache_hits,
            "wall_s": round(first.wall_seconds, 2),
        },
        "identical_run": {
            **again_http,
            "cache_hits": again.usage.cache_hits,
            "wall_s": round(again.wall_seconds, 2),
        },
        "after_edit": {
            **after_http,
            "cache_hits": after.usage.cache_hits,
            "wall_s": round(after.wall_seconds, 2),
            "edited_paragraph": edited + 1,
            "paragraphs_with_requests": concerned,
            "edited_requests": sum(item["requests"] for item in concerned if item["edited"]),
            "other_requests": sum(item["requests"] for item in others),
        },
    }
    return row, problems, findings


def _progress(message: str) -> None:
    print(f"[cache_bench] {message}", file=sys.stderr, flush=True)


async def run(
    count: int,
    latency: float,
    concurrency: int,
    modes: list[Mode],
    model: str | None = None,
    endpoint: str = "process",
) -> dict[str, Any]:
    manuscript, paragraphs = load_paragraphs(count)
    literature = await Literature.gather(manuscript)
    results: list[dict[str, Any]] = []
    problems: list[str] = []
    findings: list[str] = []
    with stand_in(endpoint, latency, concurrency, RULES) as server:
        setup = Setup(server, manuscript, paragraphs, literature, latency, concurrency, model)
        for mode in modes:
            row, failed, found = await bench_mode(server, manuscript, paragraphs, setup, mode)
            results.append(row)
            problems.extend(failed)
            findings.extend(found)
    return {
        "paragraphs": count,
        "latency_s": latency,
        "concurrency": concurrency,
        "model": model or "(listed by the endpoint)",
        "endpoint": endpoint,
        "results": results,
        "findings": findings,
        "problems": problems,
    }


def describe(row: dict[str, Any]) -> tuple[str, str]:
    """Two lines of text: the identical run, and the run after the edit."""
    again, after = row["identical_run"], row["after_edit"]
    probes = f" + {again['models']} GET /models" if again["models"] else ""
    identical = (
        f"{again['chat']} chat requests{probes}, {again['cache_hits']} cache hits, {again['wall_s']} s "
        f"(first run: {row['first_run']['chat']} requests, {row['first_run']['wall_s']} s)"
    )
    concerned = ", ".join(
        f"#{item['paragraph']}{' (edited)' if item['edited'] else ''}: {item['requests']}"
        for item in after["paragraphs_with_requests"]
    )
    edit = (
        f"{after['chat']} chat requests for {len(after['paragraphs_with_requests'])} of {row['paragraphs']} "
        f"paragraphs ({concerned}), {after['cache_hits']} cache hits, {after['wall_s']} s"
    )
    return identical, edit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--paragraphs", type=int, default=8, help="reviewable paragraphs (default 8)")
    parser.add_argument("--modes", default="full,fast", help="comma-separated: full,fast,single")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--model", default=None, help="name the model instead of asking the endpoint")
    parser.add_argument("--endpoint", choices=("process", "thread"), default="process")
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args(argv)
    try:
        modes = [Mode(name.strip()) for name in arguments.modes.split(",") if name.strip()]
    except ValueError as error:
        parser.error(str(error))
    if arguments.paragraphs < 2:
        parser.error("--paragraphs must be at least 2")
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
        for row in report["results"]:
            identical, edit = describe(row)
            print(f"{row['mode']:6} identical run:  {identical}")
            print(f"{'':6} after one edit: {edit}")
        for finding in report["findings"]:
            print(f"finding: {finding}")
        for problem in report["problems"]:
            print(f"warning: {problem}")
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())

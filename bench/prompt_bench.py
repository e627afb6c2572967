"""Prompt cost benchmark: what each pipeline sends a model, and how much of it vLLM's prefix cache would reuse.

    python bench/prompt_bench.py [--paragraphs 8] [--json]

Each pipeline runs against a scripted endpoint in this process (every agent answered validly, as in
review_bench.py and rewrite_bench.py), with the response cache off and no latency: only what is sent counts.
- review full / fast / single: focused feedback on the first N reviewable paragraphs of fixtures/latex/paper;
- soms: Simplify paragraph on one paragraph; agentsimp: AgentSimp on N paragraphs; jrel: a lay article.
Per pipeline: HTTP requests, prompt and completion tokens per paragraph (per article for jrel; tokens are
words, as the endpoint counts them), and the share of prompt tokens in leading 16-token blocks an earlier
request already had (margin.testing.prefix_cache): what vLLM's automatic prefix caching would not compute again.
For review full, where the prompt tokens of a paragraph go, per role and per part of the prompt. The target in
the design is a reuse share of at least 50% for review full.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import review_bench
import rewrite_bench
from stand_in import stand_in

from margin.testing.prefix_cache import prefix_reuse, prompt_tokens
from margin.testing.scripted_endpoint import RecordedRequest
from margin.workflows.feedback.literature import Literature
from margin.workflows.feedback.pipeline import ReviewOptions, review_manuscript
from margin.workflows.feedback.types import Mode
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.config import EndpointConfig, LLMConfig
from margin.workflows.manuscript.loader import ManuscriptLoader
from margin.workflows.manuscript.source import path_to_uri
from margin.workflows.prompts import prompt
from margin.workflows.rewrite.edits import targets_in

REUSE_TARGET = 0.5
# Where a system prompt's parts begin: the reviewer's examples, then the answer format (structured.py).
_EXAMPLES = "\n\nExamples of findings, written the way yours should be:"
_FORMAT = "\n\nAnswer with one JSON value and nothing else"
# The headings that open each part of a user message (agents.py), and the part each opens.
_USER_PARTS = (
    ("Paragraph:\n", "paragraph"),
    ("Context gathered from the rest of the paper and the literature:\n", "review context"),
    ("What has been learned so far:\n", "evidence log"),
    ("Remaining planned steps:\n", "step"),
    ("Decide what to do about step 1", "step"),
    ("Passages:\n", "passages"),
    ("Question: ", "step"),
    ("Write your plan.", "step"),
    ("The plans:\n", "step"),
)
_HEADING = re.compile("|".join(re.escape(heading) for heading, _ in _USER_PARTS))
PARTS = (
    "instructions",
    "examples",
    "answer format",
    "paragraph",
    "passages",
    "evidence log",
    "review context",
    "step",
    "repair",
    "other",
)

Pipeline = Callable[[LLMClient], Awaitable[int]]  # runs, returns the number of paragraphs it covered


def _words(text: str) -> int:
    return len(text.split())


def parts_of(request: RecordedRequest) -> dict[str, int]:
    """The request's prompt tokens by part: the system prompt's instructions, examples and answer format; the
    first user message's parts by heading; every later message (an answer quoted back, a repair) as repair."""
    counts = dict.fromkeys(PARTS, 0)
    messages = request.body.get("messages") or []
    counts["other"] += len(prompt_tokens(messages)) - sum(_words(str(m.get("content", ""))) for m in messages)
    first_user = True
    for message in messages:
        content = str(message.get("content", ""))
        if message.get("role") == "system":
            instructions, _, answer_format = content.partition(_FORMAT)
            instructions, _, examples = instructions.partition(_EXAMPLES)
            counts["instructions"] += _words(instructions)
            counts["examples"] += _words(examples)
            counts["answer format"] += _words(answer_format)
        elif message.get("role") == "user" and first_user:
            first_user = False
            headings = list(_HEADING.finditer(content))
            counts["other"] += _words(content[: headings[0].start()] if headings else content)
            names = dict(_USER_PARTS)
            for found, following in zip(headings, [*headings[1:], None], strict=True):
                end = following.start() if following is not None else len(content)
                counts[names[found.group()]] += _words(content[found.start() : end])
        else:
            counts["repair"] += _words(content)
    return counts


async def _review(mode: Mode, count: int) -> Pipeline:
    manuscript, paragraphs = review_bench.load_paragraphs(count)
    literature = await Literature.gather(manuscript)

    async def run(llm: LLMClient) -> int:
        await review_manuscript(manuscript, llm, ReviewOptions(mode=mode), paragraphs, literature)
        return len(paragraphs)

    return run


def _rewrite(name: str, count: int) -> Pipeline:
    manuscript, _ = ManuscriptLoader().load_path(rewrite_bench.PAPER)
    targets = targets_in(manuscript, path_to_uri(rewrite_bench.SECTION), 8)[:count]
    work = rewrite_bench.methods(manuscript, targets)[name]
    covered = 1 if name == "soms" else (len(manuscript.paragraphs) if name == "jrel" else len(targets))

    async def run(llm: LLMClient) -> int:
        await work(llm)
        return covered

    return run


async def measure(name: str, pipeline: Pipeline, rules: str) -> dict[str, Any]:
    with stand_in("thread", 0.0, 64, rules) as server:
        endpoint = server.endpoint  # type: ignore[attr-defined]
        llm = LLMClient(
            LLMConfig(
                default=EndpointConfig(base_url=server.base_url, model="scripted-model", max_concurrency=8),
                cache_enabled=False,
            )
        )
        try:
            with llm.measure() as usage:
                covered = await pipeline(llm)
        finally:
            await llm.close()
        requests = sorted(endpoint.calls(), key=lambda request: request.started)
    reuse = prefix_reuse((request.role, request.body.get("messages") or []) for request in requests)
    per = max(covered, 1)
    row: dict[str, Any] = {
        "pipeline": name,
        "paragraphs": covered,
        "requests_per_para": round(len(requests) / per, 2),
        "prompt_tok_per_para": round(usage.prompt_tokens / per),
        "completion_tok_per_para": round(usage.completion_tokens / per),
        "prefix_reuse": round(reuse.share, 3),
        "reuse_by_role": {role: round(item.share, 3) for role, item in sorted(reuse.by_role.items())},
        "failures": usage.failures,
    }
    if name == "review full":
        by_part = dict.fromkeys(PARTS, 0)
        by_role: dict[str, int] = {}
        for request in requests:
            for part, count in parts_of(request).items():
                by_part[part] += count
            role = request.role or "(none)"
            by_role[role] = by_role.get(role, 0) + len(prompt_tokens(request.body.get("messages") or []))
        row["tokens_per_para_by_part"] = {
            part: round(count / per) for part, count in by_part.items() if count
        }
        row["tokens_per_para_by_role"] = {role: round(count / per) for role, count in sorted(by_role.items())}
    return row


async def run(paragraphs: int = 8) -> dict[str, Any]:
    prompt("reviewer")  # the prompt files load outside the figures
    pipelines: list[tuple[str, Pipeline, str]] = [
        (f"review {mode.value}", await _review(mode, paragraphs), review_bench.RULES) for mode in Mode
    ]
    pipelines += [
        ("soms", _rewrite("soms", paragraphs), rewrite_bench.RULES),
        ("agentsimp", _rewrite("agentsimp-pl", paragraphs), rewrite_bench.RULES),
        ("jrel", _rewrite("jrel", paragraphs), rewrite_bench.RULES),
    ]
    rows = []
    for name, pipeline, rules in pipelines:
        print(f"[prompt_bench] {name}", file=sys.stderr)
        rows.append(await measure(name, pipeline, rules))
    problems = [f"{row['pipeline']}: {row['failures']} failed calls" for row in rows if row["failures"]]
    return {"paragraphs": paragraphs, "reuse_target": REUSE_TARGET, "results": rows, "problems": problems}


def print_table(report: dict[str, Any]) -> None:
    columns = (
        "pipeline",
        "paragraphs",
        "requests_per_para",
        "prompt_tok_per_para",
        "completion_tok_per_para",
        "prefix_reuse",
    )
    rows = report["results"]
    widths = [max(len(column), *(len(str(row[column])) for row in rows)) for column in columns]
    print("  ".join(column.ljust(width) for column, width in zip(columns, widths, strict=True)).rstrip())
    for row in rows:
        print("  ".join(str(row[c]).ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in rows:
        print(f"prefix reuse by role, {row['pipeline']}: {row['reuse_by_role']}")
        if "tokens_per_para_by_part" in row:
            print(f"{row['pipeline']} prompt tokens per paragraph by part: {row['tokens_per_para_by_part']}")
            print(f"{row['pipeline']} prompt tokens per paragraph by role: {row['tokens_per_para_by_role']}")
    full = next((row for row in rows if row["pipeline"] == "review full"), None)
    if full is not None and full["prefix_reuse"] < REUSE_TARGET:
        print(f"finding: review full reuses {full['prefix_reuse']:.0%} of its prompt tokens (target 50%)")
    for problem in report["problems"]:
        print(f"warning: {problem}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--paragraphs", type=int, default=8, help="paragraphs reviewed and rewritten (8)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    arguments = parser.parse_args(argv)
    if arguments.paragraphs < 1:
        parser.error("--paragraphs must be positive")
    report = asyncio.run(run(arguments.paragraphs))
    if arguments.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())

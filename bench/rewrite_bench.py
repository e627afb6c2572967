"""Rewrite benchmark: model calls, tokens and wall time of each rewriting method on the fixture paper, against a
scripted stand-in for a busy vLLM server (a fixed latency per call, a cap on concurrent requests).

    python bench/rewrite_bench.py [--paragraphs 8] [--latency 0.2] [--concurrency 8] [--endpoint process|thread]
                                  [--json]

Methods (every agent answered by margin.testing.scripted_agents, deterministic and valid):
- soms: Society of Medical Simplifiers on one paragraph (its loops are sequential by design);
- soms-all: the same on N paragraphs at once (paragraphs run concurrently);
- agentsimp-pl: AgentSimp, pipeline communication + iterative combination (the default), on N paragraphs;
- agentsimp-sync: AgentSimp, synchronous communication + direct combination, on N paragraphs;
- jrel: a JRE-L lay article of the whole paper, 3 iterations (sequential by design).
Each runs twice with the response cache off: concurrently (the client's limiter at --concurrency) and one request
at a time (--concurrency 1). Columns: calls, prompt and completion tokens (words, as the stand-in counts them),
wall seconds both ways and their ratio (the speedup concurrency buys), and the status of the rewrites.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from stand_in import stand_in

from margin.workflows import readability
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.config import EndpointConfig, LLMConfig
from margin.workflows.manuscript.loader import ManuscriptLoader
from margin.workflows.manuscript.model import Manuscript
from margin.workflows.manuscript.source import path_to_uri
from margin.workflows.rewrite import agentsimp, jrel, soms
from margin.workflows.rewrite.edits import Target, targets_in
from margin.workflows.rewrite.types import Rewrite

RULES = "margin.testing.scripted_agents:rewrite_rules"
ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "fixtures" / "latex" / "paper" / "main.tex"
SECTION = ROOT / "fixtures" / "latex" / "paper" / "sections" / "introduction.tex"
MODEL = "scripted"

Work = Callable[[LLMClient], Awaitable[str]]


def _statuses(rewrites: list[Rewrite]) -> str:
    counts: dict[str, int] = {}
    for rewrite in rewrites:
        counts[rewrite.status.value] = counts.get(rewrite.status.value, 0) + 1
    return ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))


def methods(manuscript: Manuscript, targets: list[Target]) -> dict[str, Work]:
    sources = [target.source for target in targets]
    language = targets[0].language
    document = "\n\n".join(paragraph.text for paragraph in manuscript.paragraphs)

    async def soms_one(llm: LLMClient) -> str:
        return _statuses([await soms.simplify_paragraph(sources[0], language, llm)])

    async def soms_all(llm: LLMClient) -> str:
        return _statuses(
            list(await asyncio.gather(*(soms.simplify_paragraph(s, language, llm) for s in sources)))
        )

    def agentsimp_with(communication: str, combination: str) -> Work:
        async def run(llm: LLMClient) -> str:
            options = agentsimp.AgentSimpOptions(communication=communication, combination=combination)
            return _statuses(
                await agentsimp.simplify_document(sources, language, llm, options, document=document)
            )

        return run

    async def lay(llm: LLMClient) -> str:
        article = await jrel.write_lay_article(manuscript, llm)
        return f"{len(article.versions)} versions" if article.ok else "failed"

    return {
        "soms": soms_one,
        "soms-all": soms_all,
        "agentsimp-pl": agentsimp_with(agentsimp.PIPELINE, agentsimp.ITERATIVE),
        "agentsimp-sync": agentsimp_with(agentsimp.SYNCHRONOUS, agentsimp.DIRECT),
        "jrel": lay,
    }


async def measure(base_url: str, concurrency: int, work: Work) -> dict[str, Any]:
    config = LLMConfig(
        default=EndpointConfig(base_url=base_url, model=MODEL, max_concurrency=concurrency),
        cache_enabled=False,
    )
    llm = LLMClient(config)
    try:
        with llm.measure() as usage:
            started = time.perf_counter()
            outcome = await work(llm)
            wall = time.perf_counter() - started
    finally:
        await llm.close()
    return {
        "calls": usage.calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "failures": usage.failures,
        "wall_s": round(wall, 2),
        "outcome": outcome,
        "by_role": {role: counts["calls"] for role, counts in usage.by_role.items()},
    }


async def run(arguments: argparse.Namespace, base_url: str) -> list[dict[str, Any]]:
    readability.warm_up()  # the pronouncing dictionary loads once, outside the timings
    manuscript, _ = ManuscriptLoader().load_path(PAPER)
    targets = targets_in(manuscript, path_to_uri(SECTION), 8)[: arguments.paragraphs]
    rows = []
    for name, work in methods(manuscript, targets).items():
        print(f"[rewrite_bench] {name}", file=sys.stderr)
        concurrent = await measure(base_url, arguments.concurrency, work)
        sequential = await measure(base_url, 1, work)
        rows.append(
            {
                "method": name,
                "paragraphs": 1 if name in ("soms",) else (0 if name == "jrel" else len(targets)),
                "calls": concurrent["calls"],
                "prompt_tokens": concurrent["prompt_tokens"],
                "completion_tokens": concurrent["completion_tokens"],
                "wall_s_concurrent": concurrent["wall_s"],
                "wall_s_sequential": sequential["wall_s"],
                "speedup": round(sequential["wall_s"] / max(concurrent["wall_s"], 1e-9), 2),
                "failures": concurrent["failures"] + sequential["failures"],
                "outcome": concurrent["outcome"],
                "by_role": concurrent["by_role"],
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]], arguments: argparse.Namespace) -> None:
    print(
        f"{PAPER.relative_to(ROOT)} ({SECTION.name} for paragraph methods): {arguments.latency} s a call, "
        f"{arguments.concurrency} concurrent, endpoint in a {arguments.endpoint}"
    )
    columns = [
        "method",
        "paragraphs",
        "calls",
        "prompt_tokens",
        "completion_tokens",
        "wall_s_concurrent",
        "wall_s_sequential",
        "speedup",
        "failures",
        "outcome",
    ]
    widths = {column: max(len(column), *(len(str(row[column])) for row in rows)) for column in columns}
    print("  ".join(column.ljust(widths[column]) for column in columns))
    for row in rows:
        print("  ".join(str(row[column]).ljust(widths[column]) for column in columns))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--paragraphs", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--endpoint", choices=("process", "thread"), default="process")
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args(argv)
    with stand_in(arguments.endpoint, arguments.latency, arguments.concurrency, RULES) as server:
        rows = asyncio.run(run(arguments, server.base_url))
    if arguments.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows, arguments)
    return 1 if any(row["failures"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

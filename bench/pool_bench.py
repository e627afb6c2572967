"""Endpoint pool benchmark: does review throughput scale with the replicas of a model?

    python bench/pool_bench.py [--replicas 1,2,4] [--paragraphs 64] [--mode fast] [--latency 0.5]
                               [--concurrency 4] [--json]

Each replica is a scripted stand-in for a vLLM server in a process of its own (bench/stand_in.py): a fixed
latency per call and a cap of --concurrency requests in flight, the same for every replica, with margin's
per-endpoint limit (margin.llm.maxConcurrency) at that cap too. margin.llm.endpoint lists the replicas. The
review is focused feedback on the first --paragraphs reviewable paragraphs of fixtures/real/celerite/ms.tex,
the agents answering as in review_bench.py, response cache off.

For each pool size: wall seconds, paragraphs per second, the requests each replica served, and the scaling
efficiency: (throughput with n replicas) / (n x throughput with one). The target is at least 0.85. A replica
count whose run had a problem (a failed call, a replica left idle) is listed and the exit status is 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from review_bench import RULES
from stand_in import StandIn, stand_in

from margin.workflows.feedback.literature import Literature
from margin.workflows.feedback.pipeline import ReviewOptions, review_manuscript, reviewable
from margin.workflows.feedback.types import Mode
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.config import EndpointConfig, LLMConfig
from margin.workflows.manuscript.loader import ManuscriptLoader

PAPER = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "celerite" / "ms.tex"
TARGET_EFFICIENCY = 0.85


async def review_with_pool(
    servers: list[StandIn], paragraphs_wanted: int, mode: Mode, concurrency: int
) -> dict[str, Any]:
    manuscript, _ = ManuscriptLoader().load_path(PAPER)
    options = ReviewOptions(mode=mode)
    paragraphs = [paragraph for paragraph in manuscript.paragraphs if reviewable(paragraph, options)]
    if len(paragraphs) < paragraphs_wanted:
        raise SystemExit(
            f"{PAPER} has {len(paragraphs)} reviewable paragraphs (asked for {paragraphs_wanted})"
        )
    paragraphs = paragraphs[:paragraphs_wanted]
    literature = await Literature.gather(manuscript)
    urls = [server.base_url for server in servers]
    endpoint = EndpointConfig(
        base_url=urls[0], replicas=tuple(urls[1:]), max_concurrency=concurrency, model="scripted-model"
    )
    llm = LLMClient(LLMConfig(default=endpoint, cache_enabled=False))
    for server in servers:
        server.take_requests()
    try:
        with llm.measure() as usage:
            started = time.perf_counter()
            reviews = await review_manuscript(manuscript, llm, options, paragraphs, literature)
            wall = time.perf_counter() - started
    finally:
        await llm.close()
    served = [server.take_requests()["chat"] for server in servers]
    return {
        "replicas": len(servers),
        "paragraphs": len(reviews),
        "reviewed": sum(review.completed for review in reviews),
        "requests": usage.requests,
        "failures": usage.failures,
        "wall_s": round(wall, 2),
        "paragraphs_per_s": round(len(reviews) / wall, 2),
        "served_per_replica": served,
    }


async def run(
    replica_counts: list[int], paragraphs: int, mode: Mode, latency: float, concurrency: int
) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for count in replica_counts:
        with ExitStack() as stack:
            servers = [
                stack.enter_context(stand_in("process", latency, concurrency, RULES)) for _ in range(count)
            ]
            row = await review_with_pool(servers, paragraphs, mode, concurrency)
        rows.append(row)
        if row["failures"] or row["reviewed"] != row["paragraphs"]:
            problems.append(f"{count} replica(s): {row['failures']} failed call(s)")
        if 0 in row["served_per_replica"]:
            problems.append(f"{count} replica(s): a replica served nothing {row['served_per_replica']}")
    base = next((row for row in rows if row["replicas"] == 1), None)
    for row in rows:
        linear = base["paragraphs_per_s"] * row["replicas"] if base else None
        row["efficiency"] = round(row["paragraphs_per_s"] / linear, 3) if linear else None
    return {
        "manuscript": str(PAPER.relative_to(PAPER.parents[3])),
        "mode": mode.value,
        "latency_s": latency,
        "concurrency_per_replica": concurrency,
        "target_efficiency": TARGET_EFFICIENCY,
        "results": rows,
        "problems": problems,
    }


def print_table(report: dict[str, Any]) -> None:
    print(
        f"{report['manuscript']}: review ({report['mode']}), {report['latency_s']:g} s a call, "
        f"{report['concurrency_per_replica']} in flight per replica"
    )
    print("replicas  paragraphs  requests  wall_s  paragraphs_per_s  efficiency  served_per_replica")
    for row in report["results"]:
        efficiency = "-" if row["efficiency"] is None else f"{row['efficiency']:.2f}"
        print(
            f"{row['replicas']:<9} {row['paragraphs']:<11} {row['requests']:<9} {row['wall_s']:<7} "
            f"{row['paragraphs_per_s']:<17} {efficiency:<11} {row['served_per_replica']}"
        )
    for row in report["results"]:
        if row["efficiency"] is not None and row["replicas"] > 1 and row["efficiency"] < TARGET_EFFICIENCY:
            print(
                f"finding: {row['replicas']} replicas scale at {row['efficiency']:.2f} of linear (target 0.85)"
            )
    for problem in report["problems"]:
        print(f"warning: {problem}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", default="1,2,4", help="pool sizes to run, comma-separated (1,2,4)")
    parser.add_argument("--paragraphs", type=int, default=64, help="reviewable paragraphs (64)")
    parser.add_argument("--mode", choices=[mode.value for mode in Mode], default="fast")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds a replica takes a call (0.5)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests a replica serves at once (4)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    arguments = parser.parse_args(argv)
    try:
        counts = [int(part) for part in arguments.replicas.split(",") if part.strip()]
    except ValueError:
        parser.error("--replicas takes whole numbers, e.g. 1,2,4")
    if not counts or min(counts) < 1 or arguments.paragraphs < 1 or arguments.concurrency < 1:
        parser.error("--replicas, --paragraphs and --concurrency must be positive")
    report = asyncio.run(
        run(counts, arguments.paragraphs, Mode(arguments.mode), arguments.latency, arguments.concurrency)
    )
    if arguments.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())

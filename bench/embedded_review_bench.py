"""Focused feedback on the embedded model: how many findings survive, and what it took.

    python bench/embedded_review_bench.py [FILE] [--mode fast|single|full] [--limit N] [--json]

Reviews the reviewable paragraphs of FILE (default: the fixture paper fixtures/latex/paper/main.tex) with the
embedded SmolLM2 model, no cache, and prints: paragraphs reviewed, findings shown per reviewed paragraph,
reviewer calls, client-side schema repairs and the pipeline's finding repairs per call, findings dropped per
call (a quote not in the paragraph, a label not among the five, a copied example), failures and wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from margin.workflows.feedback.literature import Literature
from margin.workflows.feedback.pipeline import ReviewOptions, review_manuscript, reviewable
from margin.workflows.feedback.types import Mode
from margin.workflows.llm import embedded
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.config import EndpointConfig, LLMConfig
from margin.workflows.manuscript.loader import ManuscriptLoader

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILE = ROOT / "fixtures" / "latex" / "paper" / "main.tex"


async def measure(path: Path, mode: Mode, limit: int | None) -> dict[str, Any]:
    manuscript, _ = ManuscriptLoader().load_path(path)
    options = ReviewOptions(mode=mode)
    paragraphs = [paragraph for paragraph in manuscript.paragraphs if reviewable(paragraph, options)][:limit]
    llm = LLMClient(
        LLMConfig(default=EndpointConfig(base_url="auto", temperature=0.0, timeout=300), cache_enabled=False)
    )
    started = time.perf_counter()
    try:
        reviews = await review_manuscript(
            manuscript, llm, options, paragraphs=paragraphs, literature=await Literature.gather(manuscript)
        )
    finally:
        await llm.close()
        embedded.stop_shared_server()
    seconds = time.perf_counter() - started
    reviewed = [review for review in reviews if review.completed]
    reviewer_calls = sum(review.usage.by_role.get("reviewer", {}).get("calls", 0) for review in reviews)
    finding_repairs = sum(
        max(0, review.usage.by_role.get("reviewer", {}).get("calls", 0) - 1) for review in reviews
    )
    calls = max(1, llm.usage.calls)
    return {
        "file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
        "mode": mode.value,
        "paragraphs": len(paragraphs),
        "reviewed": len(reviewed),
        "findings": sum(len(review.findings) for review in reviewed),
        "findings_per_reviewed_paragraph": round(
            sum(len(review.findings) for review in reviewed) / max(1, len(reviewed)), 2
        ),
        "no_weakness_answers": sum(review.no_weakness for review in reviewed),
        "model_calls": llm.usage.calls,
        "reviewer_calls": reviewer_calls,
        "schema_repairs_per_call": round(llm.usage.repairs / calls, 2),
        "finding_repairs_per_call": round(finding_repairs / calls, 2),
        "dropped_per_call": round(sum(len(review.dropped) for review in reviews) / calls, 2),
        "dropped_reasons": [reason for review in reviews for reason in review.dropped][:10],
        "failures": llm.usage.failures,
        "seconds": round(seconds, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("file", type=Path, nargs="?", default=DEFAULT_FILE)
    parser.add_argument("--mode", choices=("fast", "single", "full"), default="fast")
    parser.add_argument("--limit", type=int, default=None, help="only the first N reviewable paragraphs")
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args(argv)
    if not embedded.available():
        print(f"the embedded model is not installed ({embedded.INSTALL_HINT})", file=sys.stderr)
        return 1
    result = asyncio.run(measure(arguments.file, Mode(arguments.mode), arguments.limit))
    if arguments.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:32} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`margin eval`: run a pipeline over a dataset against the configured endpoint and report the papers' metrics
beside the papers' own figures."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from margin.workflows.evaluation.datasets import METHODS, DatasetError, load_examples

from . import exit_status

if TYPE_CHECKING:
    from .settings import Settings

EXIT_OK, EXIT_USAGE, EXIT_MISSING = exit_status.OK, exit_status.USAGE, exit_status.MISSING_DATA
EVAL_EXTRA_HINT = "pip install 'margin[eval]'"


def add_command(commands: argparse._SubParsersAction, llm_options: object) -> None:  # type: ignore[type-arg]
    evaluate = commands.add_parser(
        "eval", help="run a pipeline over a dataset and report the papers' metrics"
    )
    evaluate.add_argument("method", choices=METHODS, metavar="METHOD", help=" | ".join(METHODS))
    evaluate.add_argument(
        "--dataset",
        type=Path,
        required=True,
        help="JSONL file, or a folder of Cochrane pairs or eLife/PLOS lay summaries",
    )
    evaluate.add_argument("--limit", type=int, metavar="N", help="only the first N examples")
    evaluate.add_argument("--out", type=Path, metavar="DIR", help="default: eval-out/METHOD-DATASET")
    evaluate.add_argument(
        "--concurrency", type=int, metavar="N", help="examples in flight (default: llm.maxConcurrency)"
    )
    llm_options(evaluate)  # type: ignore[operator]


class ProgressBar:
    def __init__(self, label: str) -> None:
        self.label = label
        self.enabled = sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or not total:
            return
        filled = 30 * done // total
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total} examples")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


async def run_eval(arguments: argparse.Namespace, settings: Settings) -> int:
    try:
        from margin.workflows.evaluation import report, runner, scoring
    except ImportError as error:
        print(
            f"margin: the evaluation needs its metric libraries ({error.name}): {EVAL_EXTRA_HINT}",
            file=sys.stderr,
        )
        return EXIT_MISSING
    method: str = arguments.method
    try:
        examples = load_examples(arguments.dataset, method)
    except DatasetError as error:
        print(f"margin: {error}", file=sys.stderr)
        return EXIT_USAGE
    if arguments.limit is not None:
        examples = examples[: max(0, arguments.limit)]
    name = arguments.dataset.stem if arguments.dataset.is_file() else arguments.dataset.name
    folder: Path = arguments.out or Path("eval-out") / f"{method}-{name}"
    config = settings.llm_config()
    review = settings.review_options()
    review.min_words = 1  # a dataset's paragraph is reviewed whatever its length
    online = settings.online_searches()
    options = runner.EvalOptions(
        review=review,
        soms=settings.soms_options(),
        agentsimp=settings.agentsimp_options(),
        lay=settings.lay_options(),
        concurrency=arguments.concurrency or config.default.max_concurrency,
        web=online.web,
        scholarly=online.scholarly,
    )
    store = runner.ResultStore(folder, runner.run_key(method, config, options))
    if store.other_settings:
        print(
            f"margin: {store.other_settings} earlier prediction(s) in {store.path} came from other settings or "
            "another model; they are left out and those examples run again",
            file=sys.stderr,
        )
    from margin.workflows.llm.client import LLMClient

    llm = LLMClient(config)
    try:
        with llm.measure() as usage:
            ran = await runner.run(method, examples, llm, store, options, ProgressBar(f"{method} on {name}"))
    finally:
        await llm.close()
    scored = {example.id: store.records[example.id] for example in examples if store.done(example.id)}
    result = report.summary(method, name, len(examples), scored, scoring.score(method, examples, scored))
    result["usage"] = usage.to_json()
    result["resumed"] = len(examples) - ran
    report.write(folder, result)
    if method == "lay":
        plotted = report.plot_iterations(
            scoring.readability_by_iteration(scored), folder / "readability_by_iteration.png"
        )
        if plotted is not None:
            print(f"margin: readability per iteration plotted in {plotted}", file=sys.stderr)
    print(report.markdown(result))
    print(
        f"margin: {ran} example(s) run now, {len(examples) - ran} kept from an earlier run; {usage.summary()}; "
        f"results in {folder}",
        file=sys.stderr,
    )
    failed = [example.id for example in examples if not store.done(example.id)]
    if failed:
        print(
            f"margin: {len(failed)} of {len(examples)} example(s) failed and are not scored; run the same "
            "command again to retry them",
            file=sys.stderr,
        )
    status = exit_status.model_status(usage)
    return status if status != EXIT_OK or not failed else exit_status.MODEL_CALLS_FAILED

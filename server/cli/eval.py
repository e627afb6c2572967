"""`margin eval`: run a pipeline over a dataset against the configured endpoint and report the papers' metrics
beside the papers' own figures."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from margin.workflows.evaluation.datasets import DatasetError, load_examples
from margin.workflows.rewrite.output import OutputProblem, check_folder

from . import exit_status
from .output import print_or_keep, write_or_keep
from .progress import TerminalProgress
from .shared import settings_for, with_models
from .usage import UsageError, output_checks

if TYPE_CHECKING:
    from margin.workflows.evaluation.runner import ResultStore

    from ..settings import Settings

EVAL_EXTRA_HINT = "pip install 'margin[eval]'"
PREDICTIONS = "predictions.jsonl"
REPORTS = ("summary.json", "report.md", "readability_by_iteration.png")  # replaced by every run


def run(arguments: argparse.Namespace) -> int:
    return with_models(run_eval(arguments, settings_for(arguments)))


def check_out_folder(folder: Path) -> None:
    """Before any model call (OutputProblem): margin can create files in `folder` (made if missing), appends
    predictions to a file of its own, and replaces reports only in the folder of an earlier `margin eval` run
    (one with predictions): never a user's summary.json or report.md in a folder given to --out by mistake."""
    check_folder(folder, create=True)
    predictions = folder / PREDICTIONS
    if predictions.is_symlink() or (predictions.exists() and not predictions.is_file()):
        raise OutputProblem(f"{predictions} is not a file of margin's; choose another --out")
    for name in REPORTS:
        report = folder / name
        if report.is_dir():
            raise OutputProblem(f"{report} is a folder; choose another --out")
        if os.path.lexists(report) and not predictions.exists():
            raise OutputProblem(
                f"{report} exists and {folder} holds no earlier eval run; choose another --out"
            )


def kept_store(folder: Path, key: str) -> ResultStore:
    """The run's predictions.jsonl, appended safely (output.append_line: never through a link). An append that
    fails (the disk filled up meanwhile) does not end the run: the record stays in memory (`write_error`) and
    every prediction is saved elsewhere at the end."""
    from margin.workflows.evaluation.runner import ResultStore
    from margin.workflows.rewrite.output import append_line

    class KeptStore(ResultStore):
        write_error: OSError | None = None

        def add(self, record: dict[str, Any]) -> None:
            # ResultStore.add, with the append through append_line and its failure remembered, not raised.
            if self.key:
                record = {**record, "run": self.key}
            self.records[str(record["id"])] = record
            try:
                append_line(self.path, json.dumps(record, ensure_ascii=False) + "\n")
            except OSError as error:
                self.write_error = self.write_error or error

    return KeptStore(folder, key)


def _save_predictions(store: ResultStore) -> int:
    """OK, or (after saying why) the status for predictions that could not be appended during the run: then
    all of them are kept in a new file beside predictions.jsonl, else in margin's cache folder, else on stdout."""
    from margin.workflows.rewrite.output import reason, rescue

    error: OSError | None = getattr(store, "write_error", None)
    if error is None:
        return exit_status.OK
    print(f"margin: cannot append predictions to {store.path}: {reason(error)}", file=sys.stderr)
    lines = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in store.records.values())
    what = f"all {len(store.records)} prediction(s)"
    kept = rescue(lines, store.path, error)
    if kept.saved is not None:
        print(f"margin: {what} saved to {kept.saved} instead", file=sys.stderr)
    else:
        print(f"margin: {what} could not be saved anywhere; they follow on stdout", file=sys.stderr)
        print_or_keep(lines, store.path.name, "the predictions")
    return exit_status.NOT_WRITTEN


def _write_reports(folder: Path, result: dict[str, Any], by_iteration: dict[int, dict[str, float]]) -> int:
    """summary.json, report.md and the lay plot, each replaced atomically (output.write_file). A write that fails
    now keeps its text elsewhere; the plot is only said (the same command draws it again without model calls)."""
    from margin.workflows.evaluation import report
    from margin.workflows.rewrite.output import reason, write_file

    status = exit_status.OK
    texts = {
        "summary.json": (json.dumps(result, indent=2, ensure_ascii=False) + "\n", "the summary"),
        "report.md": (report.markdown(result), "the report"),
    }
    for name, (text, what) in texts.items():
        if write_or_keep(text, folder / name, what, force=True) is None:
            status = exit_status.NOT_WRITTEN
    if by_iteration:
        path = folder / "readability_by_iteration.png"
        try:
            write_file(path, lambda temporary: report.plot_iterations(by_iteration, temporary), force=True)
        except OSError as error:
            print(f"margin: cannot write the plot to {path}: {reason(error)}", file=sys.stderr)
            status = exit_status.NOT_WRITTEN
        else:
            print(f"margin: readability per iteration plotted in {path}", file=sys.stderr)
    return status


async def run_eval(arguments: argparse.Namespace, settings: Settings) -> int:
    try:
        from margin.workflows.evaluation import report, runner, scoring
    except ImportError as error:
        print(
            f"margin: the evaluation needs its metric libraries ({error.name}): {EVAL_EXTRA_HINT}",
            file=sys.stderr,
        )
        return exit_status.MISSING_DATA
    method: str = arguments.method
    try:
        examples = load_examples(arguments.dataset, method)
    except DatasetError as error:
        raise UsageError(str(error)) from error
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
    with output_checks():
        check_out_folder(folder)
    store = kept_store(folder, runner.run_key(method, config, options))
    if store.other_settings:
        print(
            f"margin: {store.other_settings} earlier prediction(s) in {store.path} came from other settings or "
            "another model; they are left out and those examples run again",
            file=sys.stderr,
        )
    from margin.workflows.llm.client import LLMClient

    llm = LLMClient(config)
    progress = TerminalProgress(unit="examples")
    await progress.begin(f"{method} on {name}", len(examples))

    def counted(done: int, total: int) -> None:
        progress.step(f"{done}/{total} examples", done)

    try:
        with llm.measure() as usage:
            ran = await runner.run(method, examples, llm, store, options, counted)
    finally:
        progress.end(f"{method} on {name}: done")
        await llm.close()
    scored = {example.id: store.records[example.id] for example in examples if store.done(example.id)}
    result = report.summary(method, name, len(examples), scored, scoring.score(method, examples, scored))
    result["usage"] = usage.to_json()
    result["resumed"] = len(examples) - ran
    written = _save_predictions(store)
    by_iteration = scoring.readability_by_iteration(scored) if method == "lay" else {}
    written = exit_status.worst(written, _write_reports(folder, result, by_iteration))
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
    status = status if status != exit_status.OK or not failed else exit_status.MODEL_CALLS_FAILED
    return exit_status.worst(status, written)

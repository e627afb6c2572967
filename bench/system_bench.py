"""The whole system's speed and cost in one table: `python -m bench` (or `python bench/system_bench.py`).

    python -m bench [--json] [--sections parse,lsp,review,prompts,pool,rewrite,cache,memory] [--review-paragraphs 8]
                    [--rewrite-paragraphs 4] [--latency 0.2] [--concurrency 8] [--documents 20] ...

Sections (each reuses the benchmark script named, with more modest defaults; see --help for the options):
- startup (startup_bench.py): `margin --version`, `margin check` on a short Markdown file, and the server's
  start until it answers `initialize`, each a fresh process;
- parse (parse_bench.py): cold parse and a one-character edit + full re-analysis of fixtures/large/large.tex and
  large.md, in this process;
- lsp (lsp_bench.py): the real server over stdio: didOpen of large.tex until its first diagnostics, and a pull
  of diagnostics after a one-character edit (review.trigger "manual": the editor path alone);
- corpus (corpus_bench.py): each real paper of fixtures/real: its paragraphs, how many are anchored in their
  source and how many carry markup, and its parse time;
- editor (lsp_bench.py): the real paper fixtures/real/celerite/ms.tex with default settings: didOpen sent right
  after `initialized` until the first diagnostics, and pulls after one-character edits while no model answers,
  while the test endpoint reviews, and while the embedded model reviews (when installed);
- prompts (prompt_bench.py): per pipeline, requests, prompt and completion tokens per paragraph, and the share
  of prompt tokens vLLM's prefix cache would reuse (target 50% for review full);
- pool (pool_bench.py): a 64-paragraph review (fast) against 1, 2 and 4 stand-in replicas of one model, with
  the same limit per replica: throughput and its efficiency against linear scaling (target 0.85);
- review (review_bench.py): SWIF2T focused feedback on fixtures/latex/paper per mode (full, fast, single):
  model calls, tokens and wall time against a stand-in endpoint with a fixed latency per call and a cap on
  concurrent requests, concurrently and one call at a time, and their ratio;
- rewrite (rewrite_bench.py): Simplify paragraph (SoMS) on one paragraph and on several, AgentSimp (both
  communication strategies) and a JRE-L lay article, the same way;
- cache (cache_bench.py): the identical review again with the response cache on (a reopen: it should send no
  request), then after a one-paragraph edit (only that paragraph should send requests), requests counted at
  the endpoint and attributed to paragraphs;
- memory (memory_bench.py): the server's peak memory (VmHWM) and VmRSS with 20 copies of large.tex open, and
  with 20 distinct documents of that size;
- embedded (embedded_bench.py): the embedded model's tokens/s with margin's thread count and with every core,
  on an idle machine and beside a process that keeps one core busy.

Tokens are the stand-in's count (words). The table's figures are also in --json, with each section's raw
results. The exit status is 1 if a measurement failed (an error, or a scripted pipeline that did not run its
protocol cleanly), else 0; what looks wrong in the figures (a target missed, a cache that did not save what it
should) is listed under the table as a finding and does not change the exit status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LARGE_TEX = ROOT / "fixtures" / "large" / "large.tex"
LARGE_MD = ROOT / "fixtures" / "large" / "large.md"
REAL_PAPER = ROOT / "fixtures" / "real" / "celerite" / "ms.tex"
SECTIONS = (
    "startup",
    "parse",
    "corpus",
    "lsp",
    "editor",
    "review",
    "prompts",
    "pool",
    "rewrite",
    "cache",
    "memory",
    "embedded",
)

# Targets from the design (README, Performance): above them a figure is listed as a finding.
PARSE_COLD_TARGET_MS = 300.0
PARSE_EDIT_TARGET_MS = 20.0
LSP_PULL_TARGET_MS = 25.0
FIRST_OPEN_TARGET_MS = 400.0
STARTUP_TARGETS_MS = {"margin --version": 150.0, "margin check": 400.0, "server start": 600.0}

REWRITE_LABELS = {
    "soms": "Simplify paragraph (SoMS), 1 paragraph",
    "soms-all": "SoMS, {n} paragraphs at once",
    "agentsimp-pl": "AgentSimp pipeline + iterative, {n} paragraphs",
    "agentsimp-sync": "AgentSimp synchronous + direct, {n} paragraphs",
    "jrel": "lay article (JRE-L, 3 iterations), whole paper",
}
SEQUENTIAL_BY_DESIGN = ("soms", "jrel")


@dataclass
class Row:
    section: str
    measure: str
    value: float | int | str
    unit: str
    notes: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    sections: dict[str, Any] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, section: str, measure: str, value: float | int | str, unit: str, notes: str = "") -> None:
        self.rows.append(Row(section, measure, value, unit, notes))


def _progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _tokens(prompt: int, completion: int) -> str:
    return f"{prompt:,} prompt + {completion:,} completion tokens"


def _speedup(concurrent: float, sequential: float) -> str:
    ratio = sequential / concurrent if concurrent else 0.0
    return f"one call at a time {sequential:.2f} s: {ratio:.1f}x"


# -- sections --------------------------------------------------------------------------------------------------


def parse_section(options: argparse.Namespace, report: Report) -> None:
    import parse_bench

    from margin.workflows.readability import warm_up

    warm_up()  # the pronouncing dictionary loads once per process; the server does this at start-up
    results = []
    for path in (LARGE_TEX, LARGE_MD):
        _progress(f"parse: {path.name}")
        result = parse_bench.measure(path, options.parse_edits, options.cold_runs)
        result["file"] = str(path.relative_to(ROOT))
        results.append(result)
        name = path.name
        cold, edit = float(result["cold_ms_median"]), float(result["edit_ms_p95"])
        report.add(
            "parse",
            f"{name}: cold parse, median of {options.cold_runs}",
            cold,
            "ms",
            f"{result['lines']:,} lines, {result['paragraphs']} paragraphs; target {PARSE_COLD_TARGET_MS:g} ms",
        )
        report.add(
            "parse",
            f"{name}: one-character edit + re-analysis, p95",
            edit,
            "ms",
            f"median {result['edit_ms_median']} ms over {options.parse_edits} edits; "
            f"target {PARSE_EDIT_TARGET_MS:g} ms",
        )
        if cold > PARSE_COLD_TARGET_MS:
            report.findings.append(
                f"parse: {name} cold parse {cold} ms is over its {PARSE_COLD_TARGET_MS:g} ms target"
            )
        if edit > PARSE_EDIT_TARGET_MS:
            report.findings.append(
                f"parse: {name} edit p95 {edit} ms is over its {PARSE_EDIT_TARGET_MS:g} ms target"
            )
    report.sections["parse"] = results


def lsp_section(options: argparse.Namespace, report: Report) -> None:
    import lsp_bench

    _progress("lsp: open, then one-character edits and pulls")
    result = asyncio.run(lsp_bench.measure(LARGE_TEX, options.lsp_edits))
    result["file"] = str(LARGE_TEX.relative_to(ROOT))
    report.sections["lsp"] = result
    report.add(
        "lsp",
        "large.tex: didOpen -> first diagnostics",
        result["open_to_diagnostics_ms"],
        "ms",
        "push client, server warmed up, one open",
    )
    pull = float(result["pull_after_edit_ms_p95"])
    report.add(
        "lsp",
        "pull diagnostics after a one-character edit, p95",
        pull,
        "ms",
        f"median {result['pull_after_edit_ms_median']} ms over {options.lsp_edits} edits; "
        f"target {LSP_PULL_TARGET_MS:g} ms",
    )
    if pull > LSP_PULL_TARGET_MS:
        report.findings.append(
            f"lsp: pull after an edit p95 {pull} ms is over its {LSP_PULL_TARGET_MS:g} ms target"
        )


def startup_section(options: argparse.Namespace, report: Report) -> None:
    import startup_bench

    _progress("startup: margin --version, margin check, server start to initialize")
    rows = startup_bench.startup_rows(options.startup_runs)
    report.sections["startup"] = [{"measure": measure, "figure": figure} for measure, figure in rows]
    for measure, figure in rows:
        milliseconds = float(figure.split()[0])
        target = next((value for key, value in STARTUP_TARGETS_MS.items() if measure.startswith(key)), None)
        report.add(
            "startup", measure, milliseconds, "ms", f"median of {options.startup_runs}; target {target:g} ms"
        )
        if target is not None and milliseconds > target:
            report.findings.append(f"startup: {measure} {milliseconds:g} ms is over its {target:g} ms target")


def corpus_section(options: argparse.Namespace, report: Report) -> None:
    """The real papers of fixtures/real: paragraphs, anchoring and markup rates, parse time per manuscript."""
    import corpus_bench

    _progress("corpus: the real papers of fixtures/real")
    audits = corpus_bench.run()
    report.sections["corpus"] = [
        {**{key: value for key, value in vars(item).items()}, "anchored_rate": item.anchored_rate}
        for item in audits
    ]
    for item in audits:
        name = item.manuscript.removeprefix("fixtures/real/")
        report.add(
            "corpus",
            f"{name}: paragraphs, anchored, with markup",
            item.paragraphs,
            "paragraphs",
            f"{item.anchored_rate:.1%} anchored, {item.markup_rate:.1%} with markup, "
            f"{len(item.from_front_matter)} from front matter, {len(item.unread_includes)} includes unread; "
            f"parsed in {item.parse_ms} ms ({item.files} file(s))",
        )
        if item.unanchored or item.with_markup or item.from_front_matter or item.unread_includes:
            report.findings.append(f"corpus: {name} is not read cleanly (python bench/corpus_bench.py)")


def editor_section(options: argparse.Namespace, report: Report) -> None:
    """The editor with default settings on a real paper: the first open right after `initialized`, and pulls
    after edits while nothing answers, while a model server reviews, and while the embedded model reviews."""
    import lsp_bench
    from stand_in import stand_in

    from margin.workflows.llm import embedded

    name = REAL_PAPER.name
    results: dict[str, Any] = {"file": str(REAL_PAPER.relative_to(ROOT))}
    _progress(f"editor: {name} opened right after initialized")
    opens = [asyncio.run(lsp_bench.first_open_ms(REAL_PAPER)) for _ in range(3)]
    results["first_open_ms"] = [round(value, 1) for value in opens]
    first = round(sorted(opens)[1], 1)
    report.add(
        "editor",
        f"{name}: didOpen right after initialized -> first diagnostics",
        first,
        "ms",
        f"median of 3 fresh servers, default settings; target {FIRST_OPEN_TARGET_MS:g} ms",
    )
    if first > FIRST_OPEN_TARGET_MS:
        report.findings.append(
            f"editor: first open {first} ms is over its {FIRST_OPEN_TARGET_MS:g} ms target"
        )

    conditions = [("no model answers", "none"), ("a model server reviews (test endpoint)", "server")]
    if embedded.available():
        conditions.append(("the embedded model reviews (after a save)", "embedded"))
    for label, kind in conditions:
        _progress(f"editor: pulls after edits while {label}")
        no_cache = {"cache": {"enabled": False}}
        if kind == "none":
            result = asyncio.run(
                lsp_bench.pulls_while_reviewing(
                    REAL_PAPER, {"llm": {"endpoint": lsp_bench.DEAD_ENDPOINT}}, options.lsp_edits
                )
            )
        elif kind == "server":
            with stand_in(
                options.endpoint, options.latency, options.concurrency, "review_bench:scripted_rules"
            ) as server:
                result = asyncio.run(
                    lsp_bench.pulls_while_reviewing(
                        REAL_PAPER, {"llm": {"endpoint": server.base_url}, **no_cache}, options.lsp_edits
                    )
                )
        else:
            result = asyncio.run(
                lsp_bench.pulls_while_reviewing(REAL_PAPER, no_cache, options.lsp_edits, save_first=True)
            )
        results[kind] = result
        pull = float(result["pull_after_edit_ms_p95"])
        running = f"{result['reviews_running_before']} reviews running when the edits began"
        if result["problem"]:
            running += "; the server reported the endpoint down once"
        report.add(
            "editor",
            f"pull after an edit, p95, while {label}",
            pull,
            "ms",
            f"median {result['pull_after_edit_ms_median']} ms over {options.lsp_edits} edits; {running}; "
            f"target {LSP_PULL_TARGET_MS:g} ms",
        )
        if pull > LSP_PULL_TARGET_MS:
            report.findings.append(
                f"editor: pull p95 {pull} ms while {label} is over {LSP_PULL_TARGET_MS:g} ms"
            )
        if kind != "none" and not result["reviews_running_before"]:
            report.problems.append(
                f"editor: no review was running while {label}: the figure measures nothing"
            )
    report.sections["editor"] = results


def embedded_section(options: argparse.Namespace, report: Report) -> None:
    import embedded_bench

    from margin.workflows.llm import embedded

    if not embedded.available():
        report.add("embedded", "tokens/s", "not installed", "", f"{embedded.INSTALL_HINT}")
        return
    _progress("embedded: tokens/s alone and beside a busy process")
    results = embedded_bench.run(options.embedded_tokens, options.embedded_runs)
    report.sections["embedded"] = results
    for result in results:
        threads = f"{result['threads']} of {result['cores']} thread(s)"
        who = "margin's default" if result["margin_default"] else "every core (before)"
        for key, when in (
            ("alone_tokens_per_s", "idle machine"),
            ("beside_busy_tokens_per_s", "one core busy"),
        ):
            report.add("embedded", f"SmolLM2 generation, {threads}, {when}", result[key], "tokens/s", who)


def review_section(options: argparse.Namespace, report: Report) -> None:
    import review_bench
    from stand_in import stand_in

    from margin.workflows.feedback.literature import Literature
    from margin.workflows.feedback.types import Mode

    async def run() -> list[dict[str, Any]]:
        manuscript, paragraphs = review_bench.load_paragraphs(options.review_paragraphs)
        literature = await Literature.gather(manuscript)
        rows = []
        with stand_in(options.endpoint, options.latency, options.concurrency, review_bench.RULES) as server:
            setup = review_bench.Setup(
                server,
                manuscript,
                paragraphs,
                literature,
                options.latency,
                options.concurrency,
                options.model,
            )
            for mode in options.modes:
                row, problems = await review_bench.bench_mode(setup, Mode(mode), cache_runs=False)
                rows.append(row)
                report.problems.extend(problems)
        return rows

    rows = asyncio.run(run())
    report.sections["review"] = rows
    for row in rows:
        report.add(
            "review",
            f"{row['mode']}, {row['paragraphs']} paragraphs",
            row["wall_s_concurrent"],
            "s",
            f"{row['calls']} calls ({row['calls_per_para']}/paragraph), "
            f"{_tokens(row['prompt_tokens'], row['completion_tokens'])}; "
            f"{_speedup(row['wall_s_concurrent'], row['wall_s_sequential'])}",
        )


def prompts_section(options: argparse.Namespace, report: Report) -> None:
    import prompt_bench

    result = asyncio.run(prompt_bench.run(options.review_paragraphs))
    report.sections["prompts"] = result
    report.problems.extend(f"prompts: {problem}" for problem in result["problems"])
    for row in result["results"]:
        report.add(
            "prompts",
            f"{row['pipeline']}, {row['paragraphs']} paragraphs",
            row["prompt_tok_per_para"],
            "prompt tokens/paragraph",
            f"{row['requests_per_para']} requests/paragraph, {row['completion_tok_per_para']} completion "
            f"tokens/paragraph; {row['prefix_reuse']:.0%} of prompt tokens in a prefix an earlier request had",
        )
        if row["pipeline"] == "review full" and row["prefix_reuse"] < prompt_bench.REUSE_TARGET:
            report.findings.append(f"prompts: review full reuses {row['prefix_reuse']:.0%} (target 50%)")


def pool_section(options: argparse.Namespace, report: Report) -> None:
    import pool_bench

    from margin.workflows.feedback.types import Mode

    result = asyncio.run(
        pool_bench.run(
            [1, 2, 4], options.pool_paragraphs, Mode.FAST, options.pool_latency, options.pool_concurrency
        )
    )
    report.sections["pool"] = result
    report.problems.extend(f"pool: {problem}" for problem in result["problems"])
    for row in result["results"]:
        report.add(
            "pool",
            f"{row['replicas']} replica(s), {row['paragraphs']} paragraphs (fast)",
            row["wall_s"],
            "s",
            f"{row['paragraphs_per_s']} paragraphs/s, {row['efficiency']:.2f} of linear; "
            f"requests per replica {row['served_per_replica']}",
        )
        if row["replicas"] > 1 and row["efficiency"] < pool_bench.TARGET_EFFICIENCY:
            report.findings.append(
                f"pool: {row['replicas']} replicas scale at {row['efficiency']:.2f} of linear (target 0.85)"
            )


def rewrite_section(options: argparse.Namespace, report: Report) -> None:
    import rewrite_bench
    from stand_in import stand_in

    arguments = argparse.Namespace(paragraphs=options.rewrite_paragraphs, concurrency=options.concurrency)
    with stand_in(options.endpoint, options.latency, options.concurrency, rewrite_bench.RULES) as server:
        rows = asyncio.run(rewrite_bench.run(arguments, server.base_url))
    report.sections["rewrite"] = rows
    for row in rows:
        method = row["method"]
        label = REWRITE_LABELS.get(method, method).format(n=row["paragraphs"])
        by_design = " (sequential by design)" if method in SEQUENTIAL_BY_DESIGN else ""
        report.add(
            "rewrite",
            label,
            row["wall_s_concurrent"],
            "s",
            f"{row['calls']} calls, {_tokens(row['prompt_tokens'], row['completion_tokens'])}; "
            f"{_speedup(row['wall_s_concurrent'], row['wall_s_sequential'])}{by_design}; {row['outcome']}",
        )
        if row["failures"]:
            report.problems.append(f"rewrite {method}: {row['failures']} failed calls")


def cache_section(options: argparse.Namespace, report: Report) -> None:
    import cache_bench

    from margin.workflows.feedback.types import Mode

    result = asyncio.run(
        cache_bench.run(
            options.review_paragraphs,
            options.latency,
            options.concurrency,
            [Mode(mode) for mode in options.cache_modes],
            options.model,
            options.endpoint,
        )
    )
    report.sections["cache"] = result
    report.problems.extend(result["problems"])
    report.findings.extend(f"cache: {finding}" for finding in result["findings"])
    for row in result["results"]:
        again, after = row["identical_run"], row["after_edit"]
        probes = f" + {again['models']} GET /models" if again["models"] else ""
        report.add(
            "cache",
            f"reopen: the same {row['mode']} review again",
            again["chat"] + again["models"],
            "HTTP requests",
            f"{again['chat']} chat{probes}; {again['cache_hits']} cache hits, {again['wall_s']} s "
            f"(first run {row['first_run']['chat']} requests, {row['first_run']['wall_s']} s)",
        )
        concerned = after["paragraphs_with_requests"]
        others = [item for item in concerned if not item["edited"]]
        where = (
            f"all for the edited paragraph (#{after['edited_paragraph']})"
            if not others
            else f"{after['edited_requests']} for the edited #{after['edited_paragraph']}, "
            + ", ".join(f"{item['requests']} for #{item['paragraph']}" for item in others)
        )
        report.add(
            "cache",
            f"one paragraph edited, {row['mode']} review of all {row['paragraphs']}",
            after["chat"],
            "chat requests",
            f"{where}; {len(concerned)} of {row['paragraphs']} paragraphs; {after['cache_hits']} cache hits, "
            f"{after['wall_s']} s",
        )


def memory_section(options: argparse.Namespace, report: Report) -> None:
    import memory_bench

    results = []
    for distinct in (False, True) if options.distinct else (False,):
        _progress(f"memory: {options.documents} {'distinct documents' if distinct else 'copies'}")
        result = asyncio.run(memory_bench.measure(LARGE_TEX, options.documents, distinct))
        results.append(result)
        what = "distinct documents the size of large.tex" if distinct else "copies of large.tex"
        report.add(
            "memory",
            f"server VmHWM, {options.documents} {what} open",
            result["vm_hwm_mib"],
            "MiB",
            f"VmRSS {result['vm_rss_mib']} MiB, {result['rss_before_mib']} MiB before any document "
            f"(+{result['rss_per_document_mib']} MiB each); all diagnosed in {result['open_to_all_diagnostics_s']} s",
        )
    report.sections["memory"] = results


RUNNERS: dict[str, Callable[[argparse.Namespace, Report], None]] = {
    "startup": startup_section,
    "parse": parse_section,
    "corpus": corpus_section,
    "lsp": lsp_section,
    "editor": editor_section,
    "review": review_section,
    "prompts": prompts_section,
    "pool": pool_section,
    "rewrite": rewrite_section,
    "cache": cache_section,
    "memory": memory_section,
    "embedded": embedded_section,
}


# -- the whole ------------------------------------------------------------------------------------------------


def run(options: argparse.Namespace) -> tuple[Report, dict[str, Any]]:
    report = Report()
    machine = {
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(load, 2) for load in os.getloadavg()],
        "python": platform.python_version(),
    }
    started = time.perf_counter()
    for section in options.sections:
        section_started = time.perf_counter()
        try:
            RUNNERS[section](options, report)
        except Exception as error:  # one failed section does not hide the others' figures
            traceback.print_exc(file=sys.stderr)
            report.problems.append(f"{section}: {type(error).__name__}: {error}")
            report.add(section, "(measurement failed)", "failed", "", f"{type(error).__name__}: {error}")
        _progress(f"{section}: {time.perf_counter() - section_started:.1f} s")
    machine["load_average_at_end"] = [round(load, 2) for load in os.getloadavg()]
    machine["wall_s"] = round(time.perf_counter() - started, 1)
    return report, machine


def _settings(options: argparse.Namespace) -> dict[str, Any]:
    return {
        "sections": options.sections,
        "latency_s": options.latency,
        "concurrency": options.concurrency,
        "model": options.model or "(listed by the endpoint)",
        "endpoint": options.endpoint,
        "review_paragraphs": options.review_paragraphs,
        "rewrite_paragraphs": options.rewrite_paragraphs,
        "pool": [options.pool_paragraphs, options.pool_latency, options.pool_concurrency],
        "modes": options.modes,
        "cache_modes": options.cache_modes,
        "parse_edits": options.parse_edits,
        "cold_runs": options.cold_runs,
        "lsp_edits": options.lsp_edits,
        "documents": options.documents,
        "distinct": options.distinct,
        "startup_runs": options.startup_runs,
        "embedded_tokens": options.embedded_tokens,
        "embedded_runs": options.embedded_runs,
    }


def to_json(report: Report, machine: dict[str, Any], options: argparse.Namespace) -> dict[str, Any]:
    return {
        "machine": machine,
        "settings": _settings(options),
        "rows": [asdict(row) for row in report.rows],
        "sections": report.sections,
        "findings": report.findings,
        "problems": report.problems,
    }


def format_table(report: Report, machine: dict[str, Any], options: argparse.Namespace) -> str:
    header = ("section", "measure", "value", "unit / notes")
    cells = [
        (row.section, row.measure, str(row.value), f"{row.unit}; {row.notes}" if row.notes else row.unit)
        for row in report.rows
    ]
    widths = [max(len(header[column]), *(len(cell[column]) for cell in cells)) for column in range(3)]

    def line(cell: tuple[str, str, str, str]) -> str:
        return f"{cell[0]:<{widths[0]}}  {cell[1]:<{widths[1]}}  {cell[2]:>{widths[2]}}  {cell[3]}".rstrip()

    lines = [
        f"margin benchmark: {machine['cpus']} CPUs, load average {machine['load_average_at_start'][0]} at start, "
        f"Python {machine['python']}; test endpoint {options.latency:g} s a call, {options.concurrency} concurrent "
        f"(endpoint in a {options.endpoint}); {machine['wall_s']} s in all",
        line(header),
        line(tuple("-" * width for width in (*widths, len(header[3])))),  # type: ignore[arg-type]
        *(line(cell) for cell in cells),
    ]
    lines.extend(f"finding: {finding}" for finding in report.findings)
    lines.extend(f"FAILED: {problem}" for problem in report.problems)
    return "\n".join(lines)


def _names(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in allowed]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown {what}: {', '.join(unknown)} (choose from {', '.join(allowed)})"
        )
    return names


def parser() -> argparse.ArgumentParser:
    modes = ("full", "fast", "single")
    result = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    result.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    result.add_argument(
        "--sections",
        type=lambda text: _names(text, SECTIONS, "section"),
        default=list(SECTIONS),
        help=f"comma-separated, in this order: {','.join(SECTIONS)} (default all)",
    )
    result.add_argument(
        "--latency", type=float, default=0.2, help="seconds the test endpoint takes a call (0.2)"
    )
    result.add_argument("--concurrency", type=int, default=8, help="requests the endpoint serves at once (8)")
    result.add_argument("--model", default=None, help="name the model instead of asking the endpoint")
    result.add_argument(
        "--endpoint",
        choices=("process", "thread"),
        default="process",
        help="run the test endpoint in a child process (default, as vLLM runs apart) or a thread of this one",
    )
    result.add_argument(
        "--review-paragraphs", type=int, default=8, help="paragraphs reviewed by review and cache (8)"
    )
    result.add_argument("--rewrite-paragraphs", type=int, default=4, help="paragraphs for the rewrites (4)")
    result.add_argument(
        "--pool-paragraphs", type=int, default=64, help="paragraphs for the pool section (64)"
    )
    result.add_argument(
        "--pool-latency", type=float, default=0.5, help="seconds a replica takes a call in the pool section"
    )
    result.add_argument(
        "--pool-concurrency",
        type=int,
        default=4,
        help="requests each replica serves at once, pool section (4)",
    )
    result.add_argument(
        "--modes",
        type=lambda text: _names(text, modes, "mode"),
        default=list(modes),
        help="review modes (full,fast,single)",
    )
    result.add_argument(
        "--cache-modes",
        type=lambda text: _names(text, modes, "mode"),
        default=["full", "fast"],
        help="review modes for the cache section (full,fast)",
    )
    result.add_argument("--parse-edits", type=int, default=100, help="one-character edits per file (100)")
    result.add_argument("--cold-runs", type=int, default=5, help="cold parses per file (5)")
    result.add_argument("--lsp-edits", type=int, default=50, help="edits, each followed by a pull (50)")
    result.add_argument("--documents", type=int, default=20, help="documents open for the memory figure (20)")
    result.add_argument("--startup-runs", type=int, default=7, help="runs of each start-up measure (7)")
    result.add_argument("--embedded-tokens", type=int, default=96, help="tokens per embedded request (96)")
    result.add_argument("--embedded-runs", type=int, default=2, help="requests per embedded condition (2)")
    result.add_argument(
        "--distinct",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure memory with distinct documents (default on)",
    )
    return result


def main(argv: list[str] | None = None) -> int:
    arguments = parser()
    options = arguments.parse_args(argv)
    if (
        min(options.review_paragraphs - 1, options.rewrite_paragraphs, options.concurrency, options.documents)
        < 1
    ):
        arguments.error("--review-paragraphs must be at least 2; the other counts at least 1")
    if options.latency < 0 or min(options.parse_edits, options.cold_runs, options.lsp_edits) < 1:
        arguments.error("--latency must not be negative, the edit and run counts at least 1")
    report, machine = run(options)
    if options.json:
        print(json.dumps(to_json(report, machine, options), indent=2))
    else:
        print(format_table(report, machine, options))
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""What an evaluation run writes: summary.json (the aggregate, beside the papers' figures), report.md (the same as a
Markdown table) and, for lay articles, readability_by_iteration.png (like JRE-L's Figure 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from margin.workflows.rewrite.output import write_output

from .papers import PAPER_FIGURES
from .scoring import LOWER_IS_BETTER

_MARKS = ("†", "‡", "§", "¶")


def summary(
    method: str, dataset: str, total: int, records: dict[str, dict[str, Any]], scores: dict[str, float]
) -> dict[str, Any]:
    statuses: dict[str, int] = {}
    for record in records.values():
        for status in str(record.get("status", "")).split(","):
            statuses[status] = statuses.get(status, 0) + 1
    return {
        "method": method,
        "dataset": dataset,
        "examples": total,
        "completed": len(records),
        "statuses": statuses,
        "metrics": {key: round(value, 2) for key, value in scores.items()},
        "paper": PAPER_FIGURES[method],
    }


def markdown(report: dict[str, Any]) -> str:
    """One row per system (margin's run first, then the paper's rows), one column per metric."""
    paper = report["paper"]
    columns = list(report["metrics"]) or sorted({key for row in paper["rows"].values() for key in row})
    caveats: dict[str, str] = dict(paper.get("not_comparable", {}))
    marks = {
        column: _MARKS[number % len(_MARKS)]
        for number, column in enumerate(c for c in columns if c in caveats)
    }
    header = [
        "system",
        *[
            f"{column}{marks.get(column, '')} {'↓' if column in LOWER_IS_BETTER else '↑'}"
            for column in columns
        ],
    ]
    lines = [
        f"**{report['method']}** on {report['dataset']}: {report['completed']} of {report['examples']} examples "
        f"({', '.join(f'{count} {status}' for status, count in sorted(report['statuses'].items()))})",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        "| margin (this run) | "
        + " | ".join(_cell(report["metrics"].get(column)) for column in columns)
        + " |",
    ]
    for name, row in paper["rows"].items():
        lines.append(f"| {name} (paper) | " + " | ".join(_cell(row.get(column)) for column in columns) + " |")
    # Where our figure and the paper's are not measured the same way, the table says so under itself.
    if marks:
        lines.append("")
    lines += [
        f"{mark} Not comparable with the paper's {column}: {caveats[column]}."
        for column, mark in marks.items()
    ]
    lines += ["", f"Paper figures: {paper['source']}."]
    return "\n".join(lines) + "\n"


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def plot_iterations(by_iteration: dict[int, dict[str, float]], path: Path) -> Path | None:
    """Readability per JRE-L iteration as a PNG; None when there is nothing to plot."""
    if not by_iteration:
        return None
    import matplotlib

    matplotlib.use("Agg")  # no display here or in CI
    from matplotlib import pyplot

    iterations = sorted(by_iteration)
    figure, axes = pyplot.subplots(figsize=(5, 3.5), dpi=120)
    for key, label in (("cli", "Coleman-Liau"), ("fkgl", "Flesch-Kincaid grade"), ("dcrs", "Dale-Chall")):
        axes.plot(iterations, [by_iteration[i][key] for i in iterations], marker="o", label=label)
    axes.set_xlabel("iteration (0 = first draft)")
    axes.set_ylabel("score (lower is easier)")
    axes.set_xticks(iterations)
    axes.set_title("Lay article readability per iteration")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)
    return path


def write(folder: Path, report: dict[str, Any]) -> None:
    # Replaced atomically, never through a link planted at these names.
    write_output(folder / "summary.json", json.dumps(report, indent=2, ensure_ascii=False) + "\n", force=True)
    write_output(folder / "report.md", markdown(report), force=True)

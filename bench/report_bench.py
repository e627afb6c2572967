"""HTML report benchmark: how long a report takes to build, how large it is, and how long Chromium takes to open
it and place its margin notes, for a large manuscript with a finding in every paragraph.

    python bench/report_bench.py [FILE] [--findings-per-paragraph N] [--runs N] [--no-browser]

The findings are made up (each quotes the first words of its paragraph, the types in turn): the report does not
care where they came from, and a model would take hours to review 2,000 lines. The browser part needs Chromium
and Playwright (the test extras) and is skipped without them.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from margin.server.cli.destination import html_page
from margin.server.render import check
from margin.server.report import ReportManuscript
from margin.server.settings import DEFAULTS
from margin.workflows.feedback.types import WeaknessType
from margin.workflows.manuscript.loader import ManuscriptLoader
from margin.workflows.manuscript.model import Manuscript
from margin.workflows.readability import ReadabilityCache, warm_up

LARGE = Path(__file__).resolve().parent.parent / "fixtures" / "large" / "large.tex"
LABELS = list(WeaknessType)


def made_up_findings(manuscript: Manuscript, per_paragraph: int) -> dict[str, list[dict[str, Any]]]:
    findings: dict[str, list[dict[str, Any]]] = {}
    for number, paragraph in enumerate(manuscript.paragraphs):
        words = paragraph.text.split()
        records = []
        for index in range(min(per_paragraph, len(words) // 4)):
            quote = " ".join(words[index * 3 : index * 3 + 3])
            start = paragraph.text.find(quote)
            records.append(
                {
                    "quote": quote,
                    "text_offsets": [start, start + len(quote)],
                    "label": LABELS[(number + index) % len(LABELS)].value,
                    "review": "Say what this rests on, with the numbers, and compare it with the closest work.",
                    "reasoning": "The paragraph states it without support from the rest of the paper.",
                    "evidence": [
                        {"question": "Where is this shown?", "answer": "Nowhere.", "source": "paper"}
                    ],
                }
            )
        findings[paragraph.id] = records
    return findings


def build(manuscript: Manuscript, per_paragraph: int) -> tuple[str, int]:
    entry = ReportManuscript(
        manuscript,
        check(manuscript, DEFAULTS, ReadabilityCache()),
        findings=made_up_findings(manuscript, per_paragraph),
        reviewed={paragraph.id: True for paragraph in manuscript.paragraphs},
    )
    notes = sum(len(records) for records in entry.findings.values())
    return html_page([entry], DEFAULTS, ["benchmark"]), notes


def browser_times(page_file: Path, runs: int) -> dict[str, float] | None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if chromium is None:
        return None
    flags = [
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-gpu",
        "--no-first-run",
    ]
    opened, filtered = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=flags)
        for _ in range(runs):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            started = time.perf_counter()
            page.goto(page_file.as_uri())
            page.wait_for_function("document.documentElement.dataset.notesPlaced === 'yes'")
            opened.append(time.perf_counter() - started)
            # Hiding a type re-places every note: what a click on a filter costs.
            filtered.append(
                page.evaluate(
                    """() => { const box = document.querySelector(".filters input[data-type='soundness']");
                    const t = performance.now(); box.click(); return (performance.now() - t) / 1000; }"""
                )
            )
            page.close()
        browser.close()
    return {"open_s": statistics.median(opened), "filter_s": statistics.median(filtered)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=LARGE)
    parser.add_argument("--findings-per-paragraph", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true")
    arguments = parser.parse_args(argv)
    warm_up()
    manuscript, _ = ManuscriptLoader().load_path(arguments.file)
    times = []
    page, notes = "", 0
    for _ in range(arguments.runs):
        started = time.perf_counter()
        page, notes = build(manuscript, arguments.findings_per_paragraph)
        times.append(time.perf_counter() - started)
    print(f"manuscript: {arguments.file.name}, {len(manuscript.paragraphs)} paragraphs, {notes} margin notes")
    print(
        f"build: {statistics.median(times) * 1000:.0f} ms (median of {arguments.runs}); page: {len(page.encode()) / 1024:.0f} KiB"
    )
    if arguments.no_browser:
        return 0
    with tempfile.TemporaryDirectory() as folder:
        page_file = Path(folder) / "report.html"
        page_file.write_text(page, encoding="utf-8")
        measured = browser_times(page_file, arguments.runs)
    if measured is None:
        print("browser: skipped (no Chromium or Playwright)", file=sys.stderr)
        return 0
    print(
        f"Chromium: opened with every note placed in {measured['open_s'] * 1000:.0f} ms; "
        f"hiding a type and placing the notes again: {measured['filter_s'] * 1000:.0f} ms (medians)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

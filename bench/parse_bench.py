"""Parse benchmark: cold parse and keystroke re-analysis times per manuscript file.

    python bench/parse_bench.py FILE... [--json] [--edits N] [--cold-runs N]

For each file it prints lines, paragraphs, cold_ms_median (a fresh parser, empty caches, whole manuscript) and
edit_ms_p95 (one-character edits typed at random places in prose, each followed by what the server does on a
keystroke: re-parse through the warm caches and recompute the document's diagnostics).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

from margin.server.diagnostics import document_diagnostics
from margin.server.settings import DEFAULTS
from margin.workflows.manuscript.loader import ManuscriptLoader
from margin.workflows.manuscript.source import SourceFile, path_to_uri, read_source
from margin.workflows.manuscript.sources import SourceProvider
from margin.workflows.readability import ReadabilityCache, warm_up


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def _edit_offset(loader: ManuscriptLoader, source: SourceFile, rng: random.Random) -> int:
    """A source offset inside a word of some paragraph of this file."""
    manuscript = loader.load(source)
    paragraphs = [p for p in manuscript.paragraphs if p.uri == source.uri and len(p.text) > 20]
    if not paragraphs:
        return len(source.text) // 2
    paragraph = rng.choice(paragraphs)
    for _ in range(50):
        index = rng.randrange(len(paragraph.text))
        if paragraph.text[index].isalpha():
            start, end = paragraph.offsets.source_span(index, index + 1)
            if end - start == 1:
                return start
    return paragraph.source_span[0]


def measure(path: Path, edits: int, cold_runs: int, seed: int = 7) -> dict[str, float | int | str]:
    source, _ = read_source(path)
    cold: list[float] = []
    manuscript = None
    for _ in range(cold_runs):
        loader = ManuscriptLoader()
        started = time.perf_counter()
        manuscript = loader.load(source)
        cold.append((time.perf_counter() - started) * 1000)
    assert manuscript is not None

    # The server's keystroke path: the edited buffer overrides disk for this file, caches stay warm.
    buffers: dict[str, SourceFile] = {source.uri: source}
    loader = ManuscriptLoader(SourceProvider(open_documents=buffers.get))
    scores = ReadabilityCache()
    document_diagnostics(loader.load(source), source.uri, DEFAULTS, scores)
    rng = random.Random(seed)
    timings: list[float] = []
    current = source
    for version in range(edits):
        offset = _edit_offset(loader, current, rng)
        text = current.text[:offset] + "x" + current.text[offset:]
        current = SourceFile(uri=source.uri, text=text, version=version + 2)
        buffers[source.uri] = current
        started = time.perf_counter()
        edited = loader.load(current)
        document_diagnostics(edited, current.uri, DEFAULTS, scores)
        timings.append((time.perf_counter() - started) * 1000)
    return {
        "file": str(path),
        "lines": source.lines.line_count,
        "files": len(manuscript.files),
        "paragraphs": len(manuscript.paragraphs),
        "cold_ms_median": round(statistics.median(cold), 2),
        "edit_ms_median": round(statistics.median(timings), 2) if timings else 0.0,
        "edit_ms_p95": round(_percentile(timings, 0.95), 2) if timings else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--edits", type=int, default=200, help="one-character edits per file (default 200)")
    parser.add_argument("--cold-runs", type=int, default=7, help="cold parses per file (default 7)")
    arguments = parser.parse_args(argv)
    warm_up()  # the pronouncing dictionary loads once per process; the server does this at start-up
    results = [measure(path, arguments.edits, arguments.cold_runs) for path in arguments.files]
    if arguments.json:
        print(json.dumps({"results": results}, indent=2))
        return 0
    columns = ("file", "lines", "paragraphs", "cold_ms_median", "edit_ms_median", "edit_ms_p95")
    widths = [max(len(column), *(len(str(row[column])) for row in results)) for column in columns]
    print("  ".join(column.ljust(width) for column, width in zip(columns, widths, strict=True)))
    for row in results:
        print("  ".join(str(row[column]).ljust(width) for column, width in zip(columns, widths, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["measure", "path_to_uri"]

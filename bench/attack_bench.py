"""Hostile input: parse time of pathological manuscripts, and what another document's requests wait meanwhile.

    python bench/attack_bench.py [--megabytes 1] [--json]

For each pathological family (runs of each special character, deep nesting, a long line, many paragraphs), in
LaTeX and Markdown, it prints the seconds to parse about N MB with a fresh parser, seconds per MB, and the
ratio of the time for 2N MB to the time for N MB (2.0 is linear). Then, over stdio against the real server,
it opens a large hostile document and, while the server parses it, times hovers and diagnostic pulls on a small
document: the most any of them waited.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsp_bench import close_session, open_session
from lsprotocol import types

from margin.workflows.manuscript.loader import ManuscriptLoader
from margin.workflows.manuscript.source import SourceFile

Family = tuple[str, str, Callable[[int], str]]  # format, name, text of about n characters


def repeated(unit: str) -> Callable[[int], str]:
    return lambda size: "Some prose before. " + unit * max(1, size // len(unit)) + " Some prose after.\n"


def nested(opening: str, closing: str) -> Callable[[int], str]:
    def make(size: int) -> str:
        depth = max(1, size // (len(opening) + len(closing)))
        return "Prose before.\n\n" + opening * depth + "inner words" + closing * depth + "\n\nProse after.\n"

    return make


FAMILIES: list[Family] = [
    *[("markdown", f"run of {char!r}", repeated(char)) for char in "{[*_`$<\\!&~#:-=|"],
    ("markdown", "[( pairs", repeated("[(")),
    ("markdown", "![ pairs", repeated("![")),
    ("markdown", "[@a citations", repeated("[@a ")),
    ("markdown", "{a= attributes", repeated("{a=")),
    ("markdown", "$a math", repeated("$a ")),
    ("markdown", "nested > quotes", lambda size: ">" * size + " x\n"),
    ("markdown", "one long line", repeated("word ")),
    ("markdown", "paragraphs", lambda size: "Paragraph with some words.\n\n" * max(1, size // 28)),
    *[("latex", f"run of {char!r}", repeated(char)) for char in "{}[]\\$~`'-%"],
    ("latex", "nested quote lines", nested("\\begin{quote}\n", "\\end{quote}\n")),
    ("latex", "nested quote, blank lines", nested("\\begin{quote}\n\n", "\\end{quote}\n\n")),
    ("latex", "nested itemize, unclosed", repeated("\\begin{itemize}\\item ")),
    ("latex", "nested braces", nested("{", "}")),
    ("latex", "nested \\emph", nested("\\emph{", "}")),
    ("latex", "\\begin{ runs", repeated("\\begin{")),
    ("latex", "\\input runs", repeated("\\input{a}")),
    ("latex", "one long line", repeated("word ")),
    ("latex", "paragraphs", lambda size: "Paragraph with some words.\n\n" * max(1, size // 28)),
]


def parse_seconds(kind: str, text: str) -> float:
    suffix = "md" if kind == "markdown" else "tex"
    source = SourceFile(f"file:///nonexistent/attack.{suffix}", text)
    started = time.process_time()
    ManuscriptLoader().load(source, kind)
    return time.process_time() - started


def parse_rows(megabytes: float) -> list[dict[str, Any]]:
    rows = []
    size = int(megabytes * 1_000_000)
    for kind, name, make in FAMILIES:
        small, large = make(size), make(2 * size)
        first = min(parse_seconds(kind, small) for _ in range(2))
        second = min(parse_seconds(kind, large) for _ in range(2))
        mb = len(small.encode("utf-8")) / 1e6
        rows.append(
            {
                "format": kind,
                "input": name,
                "megabytes": round(mb, 2),
                "seconds": round(first, 3),
                "seconds_per_mb": round(first / mb, 3),
                "doubling_ratio": round(second / first, 2) if first > 0.001 else None,
            }
        )
        print(f"  {kind:8} {name:28} {first:7.3f} s  {first / mb:6.3f} s/MB  x{rows[-1]['doubling_ratio']}",
              file=sys.stderr, flush=True)  # fmt: skip
    return rows


async def waits_while_parsing(hostile: str, suffix: str) -> dict[str, Any]:
    """Open a small document, then the hostile one, and time requests about the small one until the hostile
    one's diagnostics arrive."""
    with tempfile.TemporaryDirectory() as folder:
        session = await open_session(pull=True)
        client = session.client
        small_uri = (Path(folder) / "small.md").as_uri()
        hostile_uri = (Path(folder) / f"hostile.{suffix}").as_uri()
        language = "markdown" if suffix == "md" else "latex"
        small = "# Notes\n\n" + "We measured the growth of colonies over three weeks in the laboratory. " * 5
        for uri, text, lang in ((small_uri, small, "markdown"), (hostile_uri, hostile, language)):
            item = types.TextDocumentItem(uri=uri, language_id=lang, version=1, text=text)
            client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
        document = types.TextDocumentIdentifier(uri=small_uri)
        await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=document))
        hostile_pull = asyncio.ensure_future(
            client.text_document_diagnostic_async(
                types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=hostile_uri))
            )
        )
        waits: list[float] = []
        started = time.perf_counter()
        while not hostile_pull.done():
            begun = time.perf_counter()
            await client.text_document_hover_async(
                types.HoverParams(text_document=document, position=types.Position(line=2, character=5))
            )
            await client.text_document_diagnostic_async(
                types.DocumentDiagnosticParams(text_document=document)
            )
            waits.append((time.perf_counter() - begun) / 2)
            await asyncio.sleep(0.02)
        hostile_seconds = time.perf_counter() - started
        await hostile_pull
        await close_session(session, timeout=120)
    return {
        "hostile_mb": round(len(hostile.encode("utf-8")) / 1e6, 1),
        "hostile_pull_s": round(hostile_seconds, 2),
        "requests": len(waits),
        "wait_ms_median": round(statistics.median(waits) * 1000, 1) if waits else None,
        "wait_ms_max": round(max(waits) * 1000, 1) if waits else None,
    }


def server_rows() -> list[dict[str, Any]]:
    paragraphs = "".join(f"Paragraph {index} says something about colonies.\n\n" for index in range(200_000))
    cases = [
        ("10 MB of distinct LaTeX paragraphs", paragraphs, "tex"),
        ("4 MB of nested LaTeX quotes", nested("\\begin{quote}\n", "\\end{quote}\n")(4_000_000), "tex"),
        ("2 MB Markdown line of {", repeated("{")(2_000_000), "md"),
    ]
    rows = []
    for name, text, suffix in cases:
        row = {"case": name, **asyncio.run(waits_while_parsing(text, suffix))}
        print(f"  {name}: {row}", file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--megabytes", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-server", action="store_true", help="only the parse rows")
    options = parser.parse_args(argv)
    result: dict[str, Any] = {"parse": parse_rows(options.megabytes)}
    if not options.no_server:
        result["server"] = server_rows()
    if options.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{'format':8} {'input':28} {'MB':>5} {'s':>7} {'s/MB':>6} {'x2 ratio':>8}")
    for row in result["parse"]:
        print(
            f"{row['format']:8} {row['input']:28} {row['megabytes']:5.2f} {row['seconds']:7.3f} "
            f"{row['seconds_per_mb']:6.3f} {row['doubling_ratio'] or '-':>8}"
        )
    for row in result.get("server", []):
        print(
            f"server: {row['case']}: its pull took {row['hostile_pull_s']} s; meanwhile {row['requests']} "
            f"requests on another document waited {row['wait_ms_median']} ms median, {row['wait_ms_max']} ms max"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

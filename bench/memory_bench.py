"""Memory benchmark: the language server's peak memory with many large documents open.

    python bench/memory_bench.py [FILE] [--documents 20] [--distinct] [--json]

Starts `python -m margin.server` over stdio (a push client, review.trigger "manual" so that no model work runs),
initializes it, writes N copies of FILE (default fixtures/large/large.tex) into a temporary folder, opens them
all under their own file URIs, waits for every one's first publishDiagnostics, then reads the server process's
VmHWM (peak resident memory) and VmRSS from /proc/PID/status. Also reported: VmRSS after initialize (before any
document) and the wall time from the first didOpen to the last document's diagnostics.

Identical copies share the parser's chunk cache (it is keyed by text), as they would in a real session that
opens the same file twice; --distinct gives every copy's every blank-line chunk a comment of its own (the prose
is unchanged), so nothing is shared: the cost of N different manuscripts of that size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsp_bench import EDITOR_PATH_ONLY, close_session, open_session
from lsprotocol import types

from margin.workflows.manuscript.loader import is_markdown

ROOT = Path(__file__).resolve().parent.parent
LARGE = ROOT / "fixtures" / "large" / "large.tex"
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def read_status(pid: int) -> dict[str, int]:
    """The Vm* lines of /proc/PID/status, in kB."""
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name.startswith("Vm") and rest.strip().endswith("kB"):
            values[name] = int(rest.split()[0])
    return values


def _copy_text(text: str, number: int, distinct: bool, comment: str) -> str:
    """The text of copy `number`; if distinct, each blank-line chunk starts with a comment naming it."""
    if not distinct:
        return text
    counter = iter(range(1_000_000))
    return _BLANK_LINE.sub(
        lambda match: match.group(0) + comment.format(f"copy {number} chunk {next(counter)}") + "\n", text
    )


def _mib(kilobytes: int) -> float:
    return round(kilobytes / 1024, 1)


async def measure(
    path: Path = LARGE, documents: int = 20, distinct: bool = False, timeout: float = 300
) -> dict[str, Any]:
    if not Path("/proc/self/status").exists():
        raise RuntimeError("this benchmark reads /proc/PID/status (Linux only)")
    text = path.read_text(encoding="utf-8")
    language = "markdown" if is_markdown(path.name) else "latex"
    comment = "<!-- {} -->" if language == "markdown" else "% {}"
    session = await open_session(pull=False, settings=EDITOR_PATH_ONLY)
    try:
        await asyncio.sleep(1.0)  # the server warms up its readability data right after initialized
        before = read_status(session.pid)
        with tempfile.TemporaryDirectory(prefix="margin-memory-bench-") as folder:
            copies: dict[str, str] = {}
            for number in range(1, documents + 1):
                copy = Path(folder) / f"{path.stem}-{number:02d}{path.suffix}"
                body = _copy_text(text, number, distinct, comment)
                copy.write_text(body, encoding="utf-8")
                copies[copy.as_uri()] = body
            waiting = set(copies)
            diagnostics = 0
            started = time.perf_counter()
            for uri, body in copies.items():
                item = types.TextDocumentItem(uri=uri, language_id=language, version=1, text=body)
                session.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
            deadline = started + timeout
            while waiting:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    raise RuntimeError(f"{len(waiting)} of {documents} documents got no diagnostics")
                published = await asyncio.wait_for(session.published.get(), remaining)
                if published.uri in waiting:
                    waiting.discard(published.uri)
                    diagnostics += len(published.diagnostics)
            wall = time.perf_counter() - started
            after = read_status(session.pid)
    finally:
        await close_session(session)
    return {
        "file": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
        "documents": documents,
        "distinct": distinct,
        "lines_each": len(text.splitlines()),
        "diagnostics": diagnostics,
        "open_to_all_diagnostics_s": round(wall, 2),
        "rss_before_mib": _mib(before.get("VmRSS", 0)),
        "vm_hwm_mib": _mib(after.get("VmHWM", 0)),
        "vm_rss_mib": _mib(after.get("VmRSS", 0)),
        "rss_per_document_mib": round(
            (after.get("VmRSS", 0) - before.get("VmRSS", 0)) / 1024 / max(documents, 1), 2
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("file", nargs="?", type=Path, default=LARGE)
    parser.add_argument("--documents", type=int, default=20, help="copies to open (default 20)")
    parser.add_argument("--distinct", action="store_true", help="make every copy's chunks distinct")
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args(argv)
    if arguments.documents < 1:
        parser.error("--documents must be positive")
    result = asyncio.run(measure(arguments.file, arguments.documents, arguments.distinct))
    if arguments.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

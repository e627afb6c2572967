"""Start-up benchmark: how long a user waits for margin's commands and for the server, cold process each time.

    python bench/startup_bench.py [--runs N]

Prints the median over N runs (after one untimed run that warms the OS file cache and margin's own caches) of
  - `margin --version`,
  - `margin check` on fixtures/markdown/short.md,
  - the server from process start until it answers LSP `initialize` over stdio.
Each figure is wall-clock time of a fresh process with the interpreter running this script, so it includes
Python's own start-up; targets on a 2-core machine: < 150 ms, < 400 ms and < 600 ms. The children may write
Python's bytecode cache even where PYTHONDONTWRITEBYTECODE is set (as in some sandboxes and CI images): an
installed package always has its bytecode, so compiling margin's sources on every start is a cost no user pays.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
SHORT_MARKDOWN = REPO / "fixtures" / "markdown" / "short.md"
TIMEOUT = 60.0


def margin_command() -> list[str]:
    """The `margin` console script next to this interpreter (what users run), else the same entry point by -c."""
    script = Path(sys.executable).with_name("margin")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from margin.server.cli import main; sys.exit(main())"]


def _environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def _run(arguments: list[str]) -> float:
    """Milliseconds for one run of `margin ARGUMENTS` to finish; a failing command is an error, not a figure."""
    started = time.perf_counter()
    completed = subprocess.run(
        [*margin_command(), *arguments],
        cwd=REPO,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    elapsed = (time.perf_counter() - started) * 1000
    if completed.returncode != 0:
        raise RuntimeError(f"margin {' '.join(arguments)} exited {completed.returncode}: {completed.stderr}")
    return elapsed


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return f"Content-Length: {len(body)}\r\n\r\n".encode("ascii") + body


def _read_message(stream: IO[bytes]) -> dict[str, Any]:
    length = None
    while True:
        line = stream.readline()
        if not line:
            raise RuntimeError("the server closed its stdout before answering")
        line = line.strip()
        if not line:
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.lower() == "content-length":
            length = int(value)
    if length is None:
        raise RuntimeError("a message from the server had no Content-Length")
    message: dict[str, Any] = json.loads(stream.read(length))
    return message


def _initialize() -> float:
    """Milliseconds from starting `margin serve` until its answer to `initialize` is read."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"processId": None, "rootUri": None, "capabilities": {}},
    }
    started = time.perf_counter()
    process = subprocess.Popen(
        [*margin_command(), "serve"],
        cwd=REPO,
        env=_environment(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # never read: a full stderr pipe would block the server
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(_frame(initialize))
        process.stdin.flush()
        while True:  # the server may log or notify before it answers
            message = _read_message(process.stdout)
            if message.get("id") == 1:
                break
        elapsed = (time.perf_counter() - started) * 1000
        if "result" not in message:
            raise RuntimeError(f"initialize failed: {message.get('error')}")
        process.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None}))
        process.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit", "params": None}))
        process.stdin.flush()
        process.wait(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return elapsed


def _median(measure: Callable[[], float], runs: int) -> float:
    measure()  # untimed: OS file cache, bytecode, margin's pronouncing-dictionary cache
    return statistics.median(measure() for _ in range(max(1, runs)))


def startup_rows(runs: int = 7) -> list[tuple[str, str]]:
    """(measure, figure) rows: the median wall-clock milliseconds of each start-up path over `runs` runs."""
    measures: list[tuple[str, Callable[[], float]]] = [
        ("margin --version", lambda: _run(["--version"])),
        ("margin check on a short Markdown file", lambda: _run(["check", str(SHORT_MARKDOWN)])),
        ("server start to initialize answered", _initialize),
    ]
    return [(name, f"{_median(measure, runs):.0f} ms") for name, measure in measures]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="timed runs per measure (default 7)")
    arguments = parser.parse_args(argv)
    rows = startup_rows(arguments.runs)
    heading = ("measure", f"median of {arguments.runs}")
    width = max(len(name) for name, _ in [heading, *rows])
    print(f"| {heading[0]:<{width}} | {heading[1]} |")
    print(f"|{'-' * (width + 2)}|{'-' * (len(heading[1]) + 1)}:|")
    for name, figure in rows:
        print(f"| {name:<{width}} | {figure:>{len(heading[1])}} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

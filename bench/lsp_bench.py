"""LSP latency benchmark over stdio: the real server, a real client, a real pipe.

    python bench/lsp_bench.py FILE [--edits N] [--json]

Prints open_to_diagnostics_ms (didOpen until the first publishDiagnostics, push client), and
pull_after_edit_ms median and p95 (a one-character didChange, then textDocument/diagnostic, pull client).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

SERVER = [sys.executable, "-m", "margin.server"]


def _capabilities(pull: bool) -> types.ClientCapabilities:
    text_document = types.TextDocumentClientCapabilities(
        publish_diagnostics=types.PublishDiagnosticsClientCapabilities(version_support=True),
        diagnostic=types.DiagnosticClientCapabilities() if pull else None,
    )
    return types.ClientCapabilities(text_document=text_document)


async def _session(pull: bool) -> tuple[LanguageClient, asyncio.Queue[types.PublishDiagnosticsParams]]:
    client = LanguageClient("margin-bench", "1")
    published: asyncio.Queue[types.PublishDiagnosticsParams] = asyncio.Queue()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def _on_publish(params: types.PublishDiagnosticsParams) -> None:
        published.put_nowait(params)

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def _on_log(params: types.LogMessageParams) -> None:
        pass

    await client.start_io(*SERVER)
    await client.initialize_async(types.InitializeParams(capabilities=_capabilities(pull)))
    client.initialized(types.InitializedParams())
    return client, published


async def _close(client: LanguageClient) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


def _open(client: LanguageClient, uri: str, text: str) -> None:
    item = types.TextDocumentItem(uri=uri, language_id="latex", version=1, text=text)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))


async def measure(path: Path, edits: int, seed: int = 11) -> dict[str, float | int | str]:
    text = path.read_text(encoding="utf-8")
    uri = path.resolve().as_uri()

    client, published = await _session(pull=False)
    await asyncio.sleep(1.0)  # let the server finish warming up, as it has by the time a user opens a file
    started = time.perf_counter()
    _open(client, uri, text)
    first = await asyncio.wait_for(published.get(), timeout=30)
    open_ms = (time.perf_counter() - started) * 1000
    await _close(client)

    client, _ = await _session(pull=True)
    _open(client, uri, text)
    identifier = types.TextDocumentIdentifier(uri=uri)
    await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=identifier))
    lines = text.splitlines()
    prose = [number for number, line in enumerate(lines) if line[:1].isalpha()]
    rng = random.Random(seed)
    timings: list[float] = []
    for version in range(2, edits + 2):
        line = rng.choice(prose)
        character = rng.randrange(len(lines[line]))
        position = types.Position(line=line, character=character)
        change = types.TextDocumentContentChangePartial(
            range=types.Range(start=position, end=position), text="x"
        )
        started = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[change],
            )
        )
        await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=identifier))
        timings.append((time.perf_counter() - started) * 1000)
        lines[line] = lines[line][:character] + "x" + lines[line][character:]
    await _close(client)
    ordered = sorted(timings)
    return {
        "file": str(path),
        "lines": len(text.splitlines()),
        "diagnostics_on_open": len(first.diagnostics),
        "open_to_diagnostics_ms": round(open_ms, 1),
        "pull_after_edit_ms_median": round(statistics.median(timings), 1),
        "pull_after_edit_ms_p95": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("file", type=Path)
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args(argv)
    result = asyncio.run(measure(arguments.file, arguments.edits))
    if arguments.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""LSP latency benchmark over stdio: the real server, a real client, a real pipe.

    python bench/lsp_bench.py FILE [--edits N] [--reviews-on-open] [--json]

Prints open_to_diagnostics_ms (didOpen until the first publishDiagnostics, push client), and
pull_after_edit_ms median and p95 (a one-character didChange, then textDocument/diagnostic, pull client).

The server runs with margin.review.trigger "manual", so the figures are the editor path alone. With the server's
default ("openAndSave") opening the file starts a review of it, which with no endpoint configured starts the
embedded model (when installed) on every core while the edits are timed; --reviews-on-open measures that.
The server's stderr is read and kept (its last lines are shown if it fails): pygls's client never reads it,
and a server that writes more than a pipe's buffer there would block.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

SERVER = [sys.executable, "-m", "margin.server"]
EDITOR_PATH_ONLY: dict[str, Any] = {"review": {"trigger": "manual"}}  # no focused feedback on open


def _capabilities(pull: bool) -> types.ClientCapabilities:
    text_document = types.TextDocumentClientCapabilities(
        publish_diagnostics=types.PublishDiagnosticsClientCapabilities(version_support=True),
        diagnostic=types.DiagnosticClientCapabilities() if pull else None,
    )
    return types.ClientCapabilities(text_document=text_document)


class Session:
    """A client connected to a server process over stdio, with the server's pid and the tail of its stderr."""

    def __init__(
        self, client: LanguageClient, published: asyncio.Queue[types.PublishDiagnosticsParams]
    ) -> None:
        self.client = client
        self.published = published
        self.stderr: deque[str] = deque(maxlen=40)
        self._drain: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        process = self.client._server  # pygls keeps the asyncio subprocess here
        assert process is not None
        return int(process.pid)

    def drain_stderr(self) -> None:
        process = self.client._server
        assert process is not None and process.stderr is not None
        stream = process.stderr

        async def drain() -> None:
            while line := await stream.readline():
                self.stderr.append(line.decode("utf-8", "replace").rstrip())

        self._drain = asyncio.create_task(drain())


async def open_session(pull: bool, settings: dict[str, Any] | None = EDITOR_PATH_ONLY) -> Session:
    """Start the server and initialize it (initializationOptions: `settings`; None: the server's defaults)."""
    client = LanguageClient("margin-bench", "1")
    published: asyncio.Queue[types.PublishDiagnosticsParams] = asyncio.Queue()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def _on_publish(params: types.PublishDiagnosticsParams) -> None:
        published.put_nowait(params)

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def _on_log(params: types.LogMessageParams) -> None:
        pass

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def _on_show(params: types.ShowMessageParams) -> None:
        pass

    await client.start_io(*SERVER)
    session = Session(client, published)
    session.drain_stderr()
    await client.initialize_async(
        types.InitializeParams(capabilities=_capabilities(pull), initialization_options=settings)
    )
    client.initialized(types.InitializedParams())
    return session


async def close_session(session: Session, timeout: float = 30) -> None:
    """shutdown, exit, and wait for the server to end (it is killed if it has not within `timeout`)."""
    client = session.client
    process = client._server
    try:
        await asyncio.wait_for(client.shutdown_async(None), timeout)
        client.exit(None)
        if process is not None:
            await asyncio.wait_for(process.wait(), timeout)
    except TimeoutError as error:
        if process is not None and process.returncode is None:
            process.kill()
        tail = "\n".join(session.stderr)
        raise RuntimeError(
            f"the server did not exit within {timeout:g} s; its stderr ended:\n{tail}"
        ) from error
    finally:
        await client.stop()
        if session._drain is not None:
            await asyncio.wait_for(session._drain, 5)


def _open(client: LanguageClient, uri: str, text: str) -> None:
    item = types.TextDocumentItem(uri=uri, language_id="latex", version=1, text=text)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))


async def timed_edits(
    client: LanguageClient, uri: str, text: str, edits: int, seed: int, pause: float = 0.0
) -> list[float]:
    """Milliseconds from each one-character edit (at a random place in a prose line) to its pull's answer."""
    identifier = types.TextDocumentIdentifier(uri=uri)
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
        if pause:
            await asyncio.sleep(pause)
    return timings


async def measure(
    path: Path, edits: int, seed: int = 11, settings: dict[str, Any] | None = EDITOR_PATH_ONLY
) -> dict[str, float | int | str]:
    text = path.read_text(encoding="utf-8")
    uri = path.resolve().as_uri()

    session = await open_session(pull=False, settings=settings)
    await asyncio.sleep(1.0)  # let the server finish warming up, as it has by the time a user opens a file
    started = time.perf_counter()
    _open(session.client, uri, text)
    first = await asyncio.wait_for(session.published.get(), timeout=30)
    open_ms = (time.perf_counter() - started) * 1000
    await close_session(session)

    session = await open_session(pull=True, settings=settings)
    client = session.client
    _open(client, uri, text)
    identifier = types.TextDocumentIdentifier(uri=uri)
    await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=identifier))
    timings = await timed_edits(client, uri, text, edits, seed)
    await close_session(session)
    ordered = sorted(timings)
    return {
        "file": str(path),
        "lines": len(text.splitlines()),
        "diagnostics_on_open": len(first.diagnostics),
        "open_to_diagnostics_ms": round(open_ms, 1),
        "pull_after_edit_ms_median": round(statistics.median(timings), 1),
        "pull_after_edit_ms_p95": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 1),
    }


# -- with default settings: the first open right after `initialized`, and edits while models review ------------

STATUS = "margin.status"
DEAD_ENDPOINT = "http://127.0.0.1:9/v1"  # nothing listens on the discard port: "no model answers"


async def status_of(client: LanguageClient) -> dict[str, Any]:
    return dict(
        await client.workspace_execute_command_async(types.ExecuteCommandParams(command=STATUS, arguments=[]))
    )


async def first_open_ms(path: Path, settings: dict[str, Any] | None = None) -> float:
    """didOpen sent right after `initialized`, as editors do, until the first publishDiagnostics (push)."""
    text = path.read_text(encoding="utf-8")
    session = await open_session(pull=False, settings=settings)
    started = time.perf_counter()
    _open(session.client, path.resolve().as_uri(), text)
    await asyncio.wait_for(session.published.get(), timeout=60)
    elapsed = (time.perf_counter() - started) * 1000
    await close_session(session)
    return elapsed


async def pulls_while_reviewing(
    path: Path, settings: dict[str, Any] | None, edits: int, save_first: bool = False, seed: int = 11
) -> dict[str, Any]:
    """Open (pull client), optionally save (the embedded model's default trigger), wait until reviews run if
    any will, then time one-character edits each followed by a pull. Returns the timings and what the server's
    status said before and after the edits (reviews running, the problem it reports)."""
    text = path.read_text(encoding="utf-8")
    uri = path.resolve().as_uri()
    session = await open_session(pull=True, settings=settings)
    client = session.client
    _open(client, uri, text)
    identifier = types.TextDocumentIdentifier(uri=uri)
    await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=identifier))
    if save_first:
        client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=identifier))
    before: dict[str, Any] = {}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # until reviews run, the server says why they cannot, or 90 s
        before = await status_of(client)
        if before["reviews"] or before.get("problem"):
            break
        await asyncio.sleep(0.5)
    timings = await timed_edits(client, uri, text, edits, seed, pause=0.05)  # a fast typist: 20 keys/s
    after = await status_of(client)
    await close_session(session)
    ordered = sorted(timings)
    return {
        "pull_after_edit_ms_median": round(statistics.median(timings), 1),
        "pull_after_edit_ms_p95": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 1),
        "reviews_running_before": before.get("reviews", 0),
        "reviews_running_after": after.get("reviews", 0),
        "endpoints": [endpoint["url"] for endpoint in after.get("endpoints", [])],
        "problem": after.get("problem"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("file", type=Path)
    parser.add_argument("--edits", type=int, default=100)
    parser.add_argument(
        "--reviews-on-open",
        action="store_true",
        help="keep the server's default review trigger (a review starts when the file opens)",
    )
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args(argv)
    settings = None if arguments.reviews_on_open else EDITOR_PATH_ONLY
    result = asyncio.run(measure(arguments.file, arguments.edits, settings=settings))
    if arguments.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

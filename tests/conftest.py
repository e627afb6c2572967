"""Shared test helpers: paths to fixtures, the command that starts margin's server, parse helpers, scripted
endpoints, and a language client that records what the server sends."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from margin.workflows.manuscript.latex.project import LatexProject
from margin.workflows.manuscript.markdown.parse import MarkdownProject
from margin.workflows.manuscript.model import Manuscript, Paragraph
from margin.workflows.manuscript.source import SourceFile

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
SERVER_COMMAND = [sys.executable, "-m", "margin.server"]

LATEX_URI = "file:///tmp/margin-tests/snippet.tex"
MARKDOWN_URI = "file:///tmp/margin-tests/snippet.md"
_PLACEHOLDER = re.compile(r"\[(?:math|citation|reference|url|code)\]")
_ASCII_WORD = re.compile(r"[A-Za-z]{3,}")


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


def parse_latex(text: str, uri: str = LATEX_URI, project: LatexProject | None = None) -> Manuscript:
    """A manuscript from one LaTeX snippet (a fresh parser unless `project` is given)."""
    return (project or LatexProject()).parse(SourceFile(uri, text))


def parse_markdown(text: str, uri: str = MARKDOWN_URI, project: MarkdownProject | None = None) -> Manuscript:
    """A manuscript from one Markdown snippet (a fresh parser unless `project` is given)."""
    return (project or MarkdownProject()).parse([SourceFile(uri, text)])


def texts(manuscript: Manuscript) -> list[str]:
    return [paragraph.text for paragraph in manuscript.paragraphs]


def only(manuscript: Manuscript) -> Paragraph:
    """The manuscript's single paragraph (fails with the texts if there is not exactly one)."""
    assert len(manuscript.paragraphs) == 1, texts(manuscript)
    return manuscript.paragraphs[0]


def source_of(paragraph: Paragraph, phrase: str, occurrence: int = 0) -> str:
    """The source text that the `occurrence`-th `phrase` in the paragraph's plain text maps to."""
    start = -1
    for _ in range(occurrence + 1):
        start = paragraph.text.index(phrase, start + 1)
    begin, end = paragraph.offsets.source_span(start, start + len(phrase))
    return paragraph.source.text[begin:end]


def paragraph_signature(paragraph: Paragraph) -> tuple[object, ...]:
    """Everything observable about a paragraph, for comparing two parses."""
    return (
        paragraph.id,
        paragraph.kind,
        paragraph.section,
        paragraph.uri,
        paragraph.text,
        tuple(paragraph.offsets.segments()),
        paragraph.range,
    )


def visible_signature(paragraph: Paragraph) -> tuple[object, ...]:
    """What an editor shows of a paragraph: unaffected by edits elsewhere on other lines."""
    return (paragraph.id, paragraph.kind, paragraph.section, paragraph.text, paragraph.range)


def manuscript_signature(manuscript: Manuscript) -> tuple[object, ...]:
    return (
        manuscript.title,
        tuple(paragraph_signature(paragraph) for paragraph in manuscript.paragraphs),
        tuple((problem.uri, problem.range, problem.message) for problem in manuscript.problems),
        tuple(source.uri for source in manuscript.files),
    )


def _produced_by_markup(word: str, mapped: str) -> bool:
    """Whether source `mapped` can produce `word`: its letters in order with markup between them (a*b*c,
    wor%comment + newline + ld), or a macro, entity or escape that spells it differently."""
    if "\\" in mapped or "&" in mapped:
        return True
    letters = iter(mapped)
    return all(char in letters for char in word)


def offset_violations(manuscript: Manuscript, check_words: bool = True) -> list[str]:
    """Every way the manuscript's offset maps break their contract (empty when they are sound).

    * exact segments copy the source character for character;
    * segments tile the plain text and lie within the file;
    * per-character source spans are monotone and lie within the paragraph's span;
    * the paragraph's range has valid positions (line < line count);
    * (check_words) an ASCII word of the plain text outside placeholders maps to itself in the source, or
      to markup that produced it (its letters in order with markup between, or a macro/entity/escape).
    """
    problems: list[str] = []
    for paragraph in manuscript.paragraphs:
        source = paragraph.source.text
        text = paragraph.text
        label = f"{text[:60]!r}"
        segments = list(paragraph.offsets.segments())
        if text and not segments:
            problems.append(f"{label}: no segments")
        expected_start = 0
        for segment in segments:
            if segment.plain_start != expected_start or segment.plain_end <= segment.plain_start:
                problems.append(f"{label}: segments do not tile the text at {segment}")
            expected_start = segment.plain_end
            if not 0 <= segment.source_start <= segment.source_end <= len(source):
                problems.append(f"{label}: segment outside the file {segment}")
            if segment.exact:
                copied = source[segment.source_start : segment.source_end]
                plain = text[segment.plain_start : segment.plain_end]
                if copied != plain:
                    problems.append(f"{label}: exact segment {segment} has {plain!r} but source {copied!r}")
        if segments and expected_start != len(text):
            problems.append(f"{label}: segments end at {expected_start}, text at {len(text)}")
        span_start, span_end = paragraph.source_span
        if not 0 <= span_start <= span_end <= len(source):
            problems.append(f"{label}: paragraph span {span_start, span_end} outside the file")
        previous = -1
        for index in range(len(text)):
            begin, end = paragraph.offsets.source_span(index, index + 1)
            if begin < previous:
                problems.append(f"{label}: source spans go backwards at plain offset {index}")
                break
            previous = begin
            if not span_start <= begin <= end <= span_end:
                problems.append(f"{label}: character {index} maps outside the paragraph span")
                break
        line_count = paragraph.source.lines.line_count
        for position in (paragraph.range.start, paragraph.range.end):
            if not (0 <= position.line < line_count and position.character >= 0):
                problems.append(f"{label}: invalid position {position}")
        if check_words:
            for match in _ASCII_WORD.finditer(_PLACEHOLDER.sub(lambda m: " " * len(m.group()), text)):
                begin, end = paragraph.offsets.source_span(match.start(), match.end())
                mapped = source[begin:end]
                if mapped != match.group() and not _produced_by_markup(match.group(), mapped):
                    problems.append(f"{label}: word {match.group()!r} maps to {mapped!r}")
    return problems


# -- LLM layer: scripted endpoints, configurations and clients that clean up after themselves -------------------

import threading  # noqa: E402
from collections.abc import AsyncIterator, Callable, Iterator  # noqa: E402
from typing import Any  # noqa: E402

from margin.testing.scripted_endpoint import Rule, ScriptedEndpoint  # noqa: E402
from margin.workflows.llm.client import LLMClient  # noqa: E402
from margin.workflows.llm.config import EndpointConfig, LLMConfig, RoleRoute  # noqa: E402

ScriptedFactory = Callable[..., ScriptedEndpoint]
ClientFactory = Callable[[LLMConfig], LLMClient]


@pytest.fixture
def scripted() -> Iterator[ScriptedFactory]:
    """Start real scripted OpenAI-compatible servers on loopback: `scripted(Rule(...), latency=0.1)`."""
    started: list[ScriptedEndpoint] = []

    def start(*rules: Rule, **options: Any) -> ScriptedEndpoint:
        endpoint = ScriptedEndpoint(rules=list(rules), **options).start()
        started.append(endpoint)
        return endpoint

    yield start
    # ThreadingHTTPServer.shutdown() waits out serve_forever's 0.5 s poll: stop in the background so each test
    # does not pay it (the handlers notice the stop at once; every endpoint has its own port).
    for endpoint in started:
        threading.Thread(target=endpoint.stop, name="scripted-endpoint-stop", daemon=True).start()


def llm_config(
    base_url: str,
    cache_path: Path | None,
    *,
    retries: int = 1,
    cache_enabled: bool = True,
    cache_max_bytes: int = 16 * 1024 * 1024,
    roles: dict[str, RoleRoute] | None = None,
    **endpoint: Any,
) -> LLMConfig:
    """An LLMConfig for tests: a private cache file, short timeouts, few retries. `endpoint` sets
    EndpointConfig fields (timeout, model, max_concurrency, structured_mode, api_key_env...)."""
    endpoint.setdefault("timeout", 5.0)
    return LLMConfig(
        default=EndpointConfig(base_url=base_url, **endpoint),
        roles=roles or {},
        cache_enabled=cache_enabled,
        cache_path=cache_path,
        cache_max_bytes=cache_max_bytes,
        retries=retries,
    )


@pytest.fixture
async def llm_clients() -> AsyncIterator[ClientFactory]:
    """Make LLMClients that are closed (HTTP clients and cache) when the test ends."""
    clients: list[LLMClient] = []

    def make(config: LLMConfig) -> LLMClient:
        client = LLMClient(config)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shrink the client's exponential backoff so retry tests stay fast (Retry-After is still honoured)."""
    monkeypatch.setattr("margin.workflows.llm.client._BACKOFF_BASE", 0.02)


@pytest.fixture
def dead_url() -> str:
    """A base URL on a loopback port that nothing listens on (bound, then closed)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class BusyServer:
    """A real OpenAI-compatible server on loopback that is slow to list its models, like llama-cpp-python's
    server, whose /v1/models waits for the generation in progress: GET /v1/models answers after `models_delay`
    seconds, POST /v1/chat/completions answers "ok" at once."""

    def __init__(self, models_delay: float, port: int = 0, model: str = "busy-model") -> None:
        import contextlib
        import json
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        stopping = threading.Event()
        self.stopping = stopping

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _json(self, payload: Any) -> None:
                body = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client gave up waiting (what the tests are about)
                    self.wfile.write(body)

            def do_GET(self) -> None:
                if stopping.wait(models_delay):
                    return  # stopped while "busy": the client has gone or is about to
                self._json({"object": "list", "data": [{"id": model, "object": "model"}]})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                message = {"role": "assistant", "content": "ok"}
                self._json(
                    {
                        "id": "busy",
                        "object": "chat.completion",
                        "created": 0,
                        "model": model,
                        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


# -- focused feedback: the fixture paper, scripted agents and what they were asked ------------------------------

from margin.testing.scripted_endpoint import RecordedRequest, Reply  # noqa: E402

PAPER_MAIN = FIXTURES / "latex" / "paper" / "main.tex"
SCRIPTED_MODEL = "scripted-model"


def load_manuscript(path: Path) -> Manuscript:
    """A manuscript loaded from disk the way `margin review` loads it."""
    from margin.workflows.manuscript.loader import ManuscriptLoader

    manuscript, _warnings = ManuscriptLoader().load_path(path)
    return manuscript


@pytest.fixture(scope="module")
def paper() -> Manuscript:
    """The fixture paper (fixtures/latex/paper), loaded once per test module the way `margin review` loads it."""
    return load_manuscript(PAPER_MAIN)


def paragraph_starting(manuscript: Manuscript, prefix: str) -> Paragraph:
    """The one paragraph whose plain text starts with `prefix`."""
    matches = [paragraph for paragraph in manuscript.paragraphs if paragraph.text.startswith(prefix)]
    assert len(matches) == 1, [paragraph.text[:60] for paragraph in matches]
    return matches[0]


def feedback_llm_config(endpoint: ScriptedEndpoint, tmp_path: Path, **endpoint_options: Any) -> LLMConfig:
    """A config for a scripted endpoint with the model named (no GET /models), no retries and a private cache."""
    endpoint_options.setdefault("model", SCRIPTED_MODEL)
    retries = endpoint_options.pop("retries", 0)
    return llm_config(endpoint.base_url, tmp_path / "llm-cache.sqlite3", retries=retries, **endpoint_options)


def finding_json(
    quote: str,
    label: str = "Substance",
    review: str = "Say how the threshold was chosen and report its effect on recall.",
    reasoning: str = "Nothing in the gathered context gives the value or its rationale.",
) -> dict[str, str]:
    """One finding as the reviewer writes it."""
    return {"quote": quote, "label": label, "review": review, "reasoning": reasoning}


def review_reply(*findings: dict[str, str]) -> Reply:
    return Reply(json={"findings": list(findings)})


def chat_requests_in_order(endpoint: ScriptedEndpoint) -> list[RecordedRequest]:
    """The chat requests the endpoint received, in the order they arrived."""
    return sorted(endpoint.calls(), key=lambda request: request.started)


def message_contents(request: RecordedRequest, role: str) -> list[str]:
    return [str(message["content"]) for message in request.body["messages"] if message["role"] == role]


def final_user_message(request: RecordedRequest) -> str:
    return message_contents(request, "user")[-1]


def without_nagle(endpoint: ScriptedEndpoint) -> ScriptedEndpoint:
    """Send the scripted server's replies without Nagle's delay: its handler writes the headers and the body
    separately, and with delayed ACKs each request then costs ~40 ms on loopback instead of ~5 ms."""
    server = endpoint._server
    assert server is not None, "start the endpoint first"
    server.RequestHandlerClass.disable_nagle_algorithm = True  # type: ignore[attr-defined]
    return endpoint


import io  # noqa: E402


def minimal_pdf(lines: list[str], title: str | None = None) -> bytes:
    """A valid one-page PDF whose content stream shows `lines` in Helvetica, written by hand."""
    escaped = [line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for line in lines]
    operations = " ".join(f"({line}) Tj 0 -14 Td" for line in escaped)
    content = f"BT /F1 12 Tf 72 720 Td {operations} ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    if title is not None:
        objects.append(b"<< /Title (" + title.encode("latin-1") + b") >>")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    info = b" /Info %d 0 R" % len(objects) if title is not None else b""
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, info, xref)
    )
    return out.getvalue()


import json  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402
from urllib.parse import parse_qs, urlsplit  # noqa: E402


class SearchServer:
    """A real HTTP server on 127.0.0.1 answering GET /search with a scripted JSON body (or status)."""

    def __init__(self) -> None:
        self.payload: Any = {"results": []}
        self.status = 200
        self.raw: bytes | None = None
        self.queries: list[dict[str, list[str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                owner.queries.append(parse_qs(urlsplit(self.path).query))
                body = owner.raw if owner.raw is not None else json.dumps(owner.payload).encode()
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/search"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- embedded model: shared by the tests that start it --------------------------------------------------------

from margin.workflows.llm import embedded as _embedded  # noqa: E402
from margin.workflows.llm.config import VLLM_DEFAULT_URL as _VLLM_DEFAULT_URL  # noqa: E402
from margin.workflows.llm.endpoints import probe as _probe  # noqa: E402
from margin.workflows.llm.types import Usage  # noqa: E402


def assert_the_model_answered(usage: Usage) -> None:
    """What every test of the embedded model checks first: the model answered at least once (an answer that broke
    the schema counts: the model did answer). A dead or crashed model server passes none of those tests."""
    assert usage.model_answers >= 1, (
        f"the embedded model never answered: {usage.first_failure or 'no model call was made'}"
    )


@pytest.fixture(scope="module")
def stop_the_embedded_server_afterwards() -> Iterator[None]:
    """Modules that start the embedded model stop it when they are done, so it never outlives them."""
    yield
    _embedded.stop_shared_server()


@pytest.fixture
async def nothing_on_localhost_8000() -> None:
    if (await _probe(_VLLM_DEFAULT_URL)).present:
        pytest.skip(
            f"an LLM server answers at {_VLLM_DEFAULT_URL}: 'auto' would use it, not the embedded model"
        )


# -- language server: a client that records what the server sends and lets a test wait for a condition -----------

import asyncio  # noqa: E402
import contextlib  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import TypeVar, Union  # noqa: E402

from lsprotocol import types  # noqa: E402
from pygls.protocol import default_converter  # noqa: E402
from pytest_lsp import LanguageClient  # noqa: E402
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features  # noqa: E402

LSP_WAIT = 20.0  # seconds; only turns a hang into a failure


def lsp_range(start: tuple[int, int], end: tuple[int, int]) -> types.Range:
    return types.Range(
        start=types.Position(line=start[0], character=start[1]),
        end=types.Position(line=end[0], character=end[1]),
    )


class RecordingClient(LanguageClient):
    """pytest-lsp's client, plus every publishDiagnostics in order and waiting on arbitrary conditions.

    Made by `recording_client`, which routes the notifications it is given through `notified`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.published: list[types.PublishDiagnosticsParams] = []
        self.initialize_result: types.InitializeResult | None = None
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    def notified(self, method: str, params: Any) -> None:
        if method == types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS:
            params.diagnostics = list(params.diagnostics)  # the converter makes a tuple; lists compare simply
            self.published.append(params)
        for predicate, future in list(self._waiters):
            if not future.done() and predicate():
                future.set_result(None)

    async def wait_until(self, predicate: Callable[[], bool], what: str, timeout: float = LSP_WAIT) -> None:
        if predicate():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (predicate, future)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}") from None
        finally:
            self._waiters.remove(entry)

    # -- documents ------------------------------------------------------------------------------------------

    def open(self, uri: str, text: str, version: int = 1, language_id: str | None = None) -> None:
        language = language_id or ("markdown" if uri.endswith(".md") else "latex")
        self.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id=language, version=version, text=text
                )
            )
        )

    def edit(self, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
        """An incremental didChange replacing one range."""
        self.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[
                    types.TextDocumentContentChangePartial(range=lsp_range(start, end), text=text)
                ],
            )
        )

    def replace_all(self, uri: str, version: int, text: str) -> None:
        self.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def close(self, uri: str) -> None:
        self.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    # -- answers --------------------------------------------------------------------------------------------

    def latest_publish(self, uri: str, after: int = 0) -> types.PublishDiagnosticsParams | None:
        for params in reversed(self.published[after:]):
            if params.uri == uri:
                return params
        return None

    async def published_for(
        self, uri: str, version: int | None = None, after: int = 0
    ) -> types.PublishDiagnosticsParams:
        """The latest publishDiagnostics for `uri` (with `version`, if given) received after index `after`."""

        def matching() -> types.PublishDiagnosticsParams | None:
            for params in reversed(self.published[after:]):
                if params.uri == uri and (version is None or params.version == version):
                    return params
            return None

        await self.wait_until(lambda: matching() is not None, f"publishDiagnostics for {uri} v{version}")
        found = matching()
        assert found is not None
        return found

    async def pull(self, uri: str) -> list[types.Diagnostic]:
        report = await asyncio.wait_for(
            self.text_document_diagnostic_async(
                types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
            ),
            LSP_WAIT,
        )
        assert report.kind == "full", report
        return list(report.items)

    async def hover(
        self, uri: str, line: int, character: int, timeout: float = LSP_WAIT
    ) -> types.Hover | None:
        return await asyncio.wait_for(
            self.text_document_hover_async(
                types.HoverParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    position=types.Position(line=line, character=character),
                )
            ),
            timeout,
        )

    async def hover_text(self, uri: str, line: int, character: int, timeout: float = LSP_WAIT) -> str | None:
        """The hover's Markdown, or None when there is no hover."""
        answer = await self.hover(uri, line, character, timeout)
        if answer is None:
            return None
        assert isinstance(answer.contents, types.MarkupContent)
        return answer.contents.value


Client = TypeVar("Client", bound=RecordingClient)


def _recording(method: str, handler: Callable[..., Any]) -> Callable[..., Any]:
    def recorded(client: LanguageClient, params: Any) -> Any:
        result = handler(client, params)
        if isinstance(client, RecordingClient):
            client.notified(method, params)
        return result

    return recorded


def recording_client(
    client_class: type[Client], recorded: Sequence[str], handlers: dict[str, Callable[..., Any]] | None = None
) -> Client:
    """A `client_class` with pytest-lsp's features (and `handlers` instead of some), which passes the
    messages named in `recorded` to its `notified` after pytest-lsp's own handling."""
    client = client_class(converter_factory=default_converter)
    features = {**DEFAULT_CLIENT_FEATURES, **(handlers or {})}
    for method in recorded:
        features[method] = _recording(method, features[method])
    register_lsp_features(client, features)
    return client


async def stop_session(client: LanguageClient, timeout: float = LSP_WAIT) -> None:
    """End a test's own server, also after a failure inside the test: shut it down, or kill it if it does not
    answer, since the client's stop() waits for the server process to exit."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(client.shutdown_session(), timeout)
    server = client._server
    if server is not None and server.returncode is None:
        server.kill()
    await asyncio.wait_for(client.stop(), timeout)


def fix_code_action_hook(client: LanguageClient) -> None:
    """lsprotocol's hook structures every code-action result item that has a "command" key as a Command, so
    a CodeAction that carries a command (valid LSP, what VS Code and Neovim expect) would arrive mangled.
    Tell this client's converter what the spec says: a Command's "command" is a string."""
    converter = client.protocol._converter

    def structure(item: Any, _: Any) -> Any:
        wanted = types.Command if isinstance(item.get("command"), str) else types.CodeAction
        return converter.structure(item, wanted)

    converter.register_structure_hook(types.Command | types.CodeAction, structure)
    converter.register_structure_hook(Union[types.Command, types.CodeAction], structure)  # noqa: UP007


async def eventually(predicate: Callable[[], bool], what: str, timeout: float = LSP_WAIT) -> None:
    """Poll state outside the client (the endpoint's requests, what the client received) until it holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.02)

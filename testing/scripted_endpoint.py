"""A scripted OpenAI-compatible HTTP server on loopback, for tests and benchmarks.

It is a real server (the real openai client talks to it over a socket), answering /v1/models and
/v1/chat/completions from rules matched by agent role (the X-Margin-Role header margin sends) or by a pattern in
the prompt. Replies can inject faults: HTTP errors with Retry-After, hangs, dropped connections, invalid or
schema-breaking JSON, empty content, finish_reason "length", slow (trickled) bodies. A fixed latency per call
and a cap on concurrent requests make it a stand-in for a busy vLLM server in benchmarks.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from margin.workflows.llm.types import ROLE_HEADER


@dataclass
class Reply:
    """One scripted answer. `content` is the assistant message; `json` is serialized into it."""

    content: str | None = None
    json: Any = None
    status: int = 200
    retry_after: float | None = None
    finish_reason: str = "stop"
    delay: float = 0.0  # extra seconds before answering
    hang: bool = False  # never answer (until the server stops or the client gives up)
    drop: bool = False  # close the connection without a response
    trickle: float = 0.0  # seconds between body chunks (slow streaming)
    error_message: str = "scripted failure"
    # Answer with server-sent events even when the request did not ask to stream (as a misbehaving or hostile
    # server may): no Content-Length, the connection closed at the end. `stream_piece`: characters per event.
    stream: bool = False
    stream_piece: int = 8

    def text(self) -> str:
        if self.json is not None:
            return json.dumps(self.json)
        return self.content if self.content is not None else ""


@dataclass
class RecordedRequest:
    path: str
    role: str | None
    body: dict[str, Any]
    headers: dict[str, str]
    started: float
    finished: float = 0.0
    disconnected: bool = False
    body_bytes: int = 0  # bytes of the answer's body written before it ended (or the client went away)

    @property
    def prompt(self) -> str:
        messages = self.body.get("messages") or []
        return "\n".join(str(message.get("content", "")) for message in messages)

    @property
    def n(self) -> int:
        """Choices asked for (`n`), 1 when absent."""
        value = self.body.get("n")
        return value if isinstance(value, int) and value > 0 else 1

    @property
    def priority(self) -> int | None:
        """vLLM's per-request priority, None when absent."""
        value = self.body.get("priority")
        return value if isinstance(value, int) else None

    @property
    def response_format(self) -> str | None:
        value = self.body.get("response_format")
        return value.get("type") if isinstance(value, dict) else None


Responder = Callable[[RecordedRequest], Reply]


@dataclass
class Rule:
    """Answers requests whose role equals `role` and whose prompt matches `pattern` (both optional).

    `replies` are used in order, the last one repeating; or give `respond` to compute a reply per request.
    """

    role: str | None = None
    pattern: str | None = None
    replies: Sequence[Reply] = ()
    respond: Responder | None = None
    used: int = 0

    def matches(self, request: RecordedRequest) -> bool:
        if self.role is not None and request.role != self.role:
            return False
        return self.pattern is None or re.search(self.pattern, request.prompt, re.S) is not None

    def next_reply(self, request: RecordedRequest) -> Reply:
        if self.respond is not None:
            return self.respond(request)
        reply = self.replies[min(self.used, len(self.replies) - 1)]
        self.used += 1
        return reply


@dataclass
class ScriptedEndpoint:
    """Start with `with ScriptedEndpoint(rules) as endpoint:`; `endpoint.base_url` ends in /v1."""

    rules: list[Rule] = field(default_factory=list)
    default: Reply = field(default_factory=lambda: Reply(content="ok"))
    models: tuple[str, ...] = ("scripted-model",)
    context_tokens: int | None = None  # listed as each model's max_model_len, as vLLM does
    latency: float = 0.0
    max_concurrency: int | None = None
    accepted_formats: tuple[str, ...] = ("json_schema", "json_object", "text")
    rejected_format_status: int = 400
    # `n` > 1: True answers with n choices (each the matching rule's next reply), False refuses it with HTTP 400,
    # None ignores it and answers with one choice (as llama.cpp's server does).
    accepts_n: bool | None = True
    # False: a request with a priority other than 0 is refused with HTTP 400, as vLLM refuses it when not
    # started with --scheduling-policy priority.
    accepts_priority: bool = True
    requests: list[RecordedRequest] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._slots = threading.Semaphore(self.max_concurrency) if self.max_concurrency else None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def start(self) -> ScriptedEndpoint:
        endpoint = self

        class Handler(_Handler):
            owner = endpoint

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="scripted-endpoint", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ScriptedEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "start the endpoint first"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting ----------------------------------------------------------------------------------------------

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self.rules.append(rule)
        return rule

    def calls(self, role: str | None = None) -> list[RecordedRequest]:
        with self._lock:
            chat = [r for r in self.requests if r.path.endswith("/chat/completions")]
        return [r for r in chat if role is None or r.role == role]

    def _reply_for(self, request: RecordedRequest) -> Reply:
        with self._lock:
            for rule in self.rules:
                if rule.matches(request):
                    return rule.next_reply(request)
        return self.default

    def _enter(self) -> None:
        if self._slots is not None:
            self._slots.acquire()
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1
        if self._slots is not None:
            self._slots.release()

    def _wait(self, seconds: float) -> None:
        self._stopping.wait(seconds)


_SLICE = 64 * 1024


class _Server(ThreadingHTTPServer):
    request_queue_size = (
        256  # the stdlib's 5 drops bursts of connections, which are then retried a second later
    )


class _Handler(BaseHTTPRequestHandler):
    owner: ScriptedEndpoint
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle's algorithm the second waits for the client's delayed
    # ACK (~40 ms a call), which a real server does not add.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _send_json(
        self,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        request: RecordedRequest | None = None,
    ) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        # In slices, so that a client that stops reading a huge body shows in `body_bytes`.
        for index in range(0, len(body), _SLICE):
            self.wfile.write(body[index : index + _SLICE])
            if request is not None:
                request.body_bytes += min(_SLICE, len(body) - index)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            window = {"max_model_len": self.owner.context_tokens} if self.owner.context_tokens else {}
            data = [
                {"id": model, "object": "model", "owned_by": "scripted", **window}
                for model in self.owner.models
            ]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw)
        except ValueError:
            self._send_json(400, {"error": {"message": "body is not JSON"}})
            return
        request = RecordedRequest(
            path=self.path,
            role=self.headers.get(ROLE_HEADER),
            body=body,
            headers={key.lower(): value for key, value in self.headers.items()},
            started=time.monotonic(),
        )
        owner = self.owner
        with owner._lock:
            owner.requests.append(request)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        owner._enter()
        try:
            self._answer(request)
        except (BrokenPipeError, ConnectionResetError):
            request.disconnected = True
        finally:
            request.finished = time.monotonic()
            owner._leave()

    def _answer(self, request: RecordedRequest) -> None:
        owner = self.owner
        wanted = request.response_format or "text"
        if wanted not in owner.accepted_formats:
            self._send_json(
                owner.rejected_format_status,
                {
                    "error": {
                        "message": f"response_format {wanted} is not supported",
                        "type": "BadRequestError",
                    }
                },
            )
            return
        refusal = _refusal(owner, request)
        if refusal is not None:
            self._send_json(400, {"error": {"message": refusal, "type": "BadRequestError"}})
            return
        reply = owner._reply_for(request)
        if owner.latency or reply.delay:
            owner._wait(owner.latency + reply.delay)
        if reply.hang:
            # Wait until the client goes away or the server stops; notice a closed socket by polling it.
            while not owner._stopping.is_set():
                if self._client_gone():
                    request.disconnected = True
                    return
                owner._wait(0.05)
            return
        if reply.drop:
            self.close_connection = True
            self.connection.close()
            return
        if reply.status != 200:
            headers = {"Retry-After": f"{reply.retry_after:g}"} if reply.retry_after is not None else None
            self._send_json(reply.status, {"error": {"message": reply.error_message}}, headers)
            return
        if request.body.get("stream") or reply.stream:
            self._stream(request, reply)
            return
        more = [owner._reply_for(request) for _ in range(request.n - 1)] if owner.accepts_n else []
        payload = _completion(request, reply, more)
        if reply.trickle:
            self._trickle(json.dumps(payload).encode(), reply.trickle)
        else:
            self._send_json(200, payload, request=request)

    def _client_gone(self) -> bool:
        import select

        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, 0x2) == b""  # MSG_PEEK: closed when nothing is left to read
        except OSError:
            return True

    def _trickle(self, body: bytes, pause: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for index in range(0, len(body), 16):
            if self.owner._stopping.is_set():
                return
            self.wfile.write(body[index : index + 16])
            self.wfile.flush()
            self.owner._wait(pause)

    def _stream(self, request: RecordedRequest, reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.close_connection = True
        self.end_headers()
        text = reply.text()
        model = request.body.get("model") or self.owner.models[0]
        size = max(1, reply.stream_piece)
        pieces = [text[index : index + size] for index in range(0, len(text), size)] or [""]
        for piece in pieces:
            chunk = {
                "id": "scripted",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
            }
            event = f"data: {json.dumps(chunk)}\n\n".encode()
            self.wfile.write(event)
            self.wfile.flush()
            request.body_bytes += len(event)
            if reply.trickle:
                self.owner._wait(reply.trickle)
        final = {
            "id": "scripted",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}],
            "usage": _usage(request, text),
        }
        self.wfile.write(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()


def _usage(request: RecordedRequest, text: str) -> dict[str, int]:
    prompt_tokens = max(1, len(request.prompt.split()))
    completion_tokens = len(text.split())
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _refusal(owner: ScriptedEndpoint, request: RecordedRequest) -> str | None:
    """Why the request's options are refused (HTTP 400), if they are."""
    if request.n > 1 and owner.accepts_n is False:
        return "n > 1 is not supported by this server"
    if not owner.accepts_priority and request.priority:
        return f"Got priority {request.priority} but Priority scheduling is not enabled."
    return None


def _completion(request: RecordedRequest, reply: Reply, more: Sequence[Reply] = ()) -> dict[str, Any]:
    """A chat completion: the reply, and further choices for a request with `n` (the prompt counted once)."""
    replies = [reply, *more]
    texts = [answer.text() for answer in replies]
    usage = _usage(request, texts[0])
    usage["completion_tokens"] = sum(len(text.split()) for text in texts)
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {
        "id": f"scripted-{len(texts[0])}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.body.get("model") or "scripted-model",
        "choices": [
            {
                "index": index,
                "message": {"role": "assistant", "content": text},
                "finish_reason": answer.finish_reason,
            }
            for index, (answer, text) in enumerate(zip(replies, texts, strict=True))
        ],
        "usage": usage,
    }

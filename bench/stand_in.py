"""A scripted stand-in for a busy vLLM server, for the benchmarks: a fixed latency per call, a cap on concurrent
requests, and answers from a rules factory named "module:function" (so that a child process can build them)."""

from __future__ import annotations

import importlib
import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from multiprocessing.connection import Connection
from typing import Any, Protocol

from margin.testing.scripted_endpoint import Rule, ScriptedEndpoint


def _rules(spec: str) -> list[Rule]:
    module, function = spec.split(":")
    return list(getattr(importlib.import_module(module), function)())


# Two artifacts of the harness's http.server, which vLLM (uvicorn on asyncio) does not have, are removed here:
# - Nagle's algorithm on the server's sockets: the response headers and body go out in two writes, the second
#   waits for the client's delayed ACK, and every call costs about 40 ms more than its latency;
# - a listen backlog of 5 (uvicorn: 2048): a burst of new connections (one per concurrent request, and one per
#   /models probe) overflows it, the kernel drops SYNs and the client retransmits them a second later.
_BACKLOG = 2048


class StandIn(Protocol):
    @property
    def base_url(self) -> str: ...

    def take_peak(self) -> int:
        """The most requests in flight at once since the last call."""
        ...

    def take_requests(self) -> dict[str, int]:
        """The HTTP requests the endpoint received since the last call: {"chat": POST /chat/completions,
        "models": GET /models, "other": anything else}."""
        ...


class _InThread:
    def __init__(self, endpoint: ScriptedEndpoint) -> None:
        self.endpoint = endpoint
        self._seen = 0  # requests already counted (the endpoint records POSTs only; GETs are counted here)
        self._gets = {"models": 0, "other": 0}
        handler = endpoint._server.RequestHandlerClass if endpoint._server is not None else None
        assert handler is not None, "start the endpoint first"
        answer_get = handler.do_GET
        gets, lock = self._gets, endpoint._lock

        def do_get(request_handler: Any) -> None:
            with lock:
                gets["models" if request_handler.path.rstrip("/").endswith("/models") else "other"] += 1
            answer_get(request_handler)

        handler.do_GET = do_get  # this endpoint's own handler class only

    @property
    def base_url(self) -> str:
        return self.endpoint.base_url

    def take_peak(self) -> int:
        with self.endpoint._lock:
            peak, self.endpoint.max_in_flight = self.endpoint.max_in_flight, 0
        return peak

    def take_requests(self) -> dict[str, int]:
        with self.endpoint._lock:
            posts = self.endpoint.requests[self._seen :]
            self._seen = len(self.endpoint.requests)
            models, other = self._gets["models"], self._gets["other"]
            self._gets.update(models=0, other=0)
        chat = sum(1 for request in posts if request.path.rstrip("/").endswith("/chat/completions"))
        return {"chat": chat, "models": models, "other": other + len(posts) - chat}


def _start(latency: float, concurrency: int, rules: str) -> ScriptedEndpoint:
    endpoint = ScriptedEndpoint(rules=_rules(rules), latency=latency, max_concurrency=concurrency).start()
    server = endpoint._server
    assert server is not None
    server.RequestHandlerClass.disable_nagle_algorithm = True  # this endpoint's own handler class only
    server.socket.listen(_BACKLOG)
    return endpoint


def _serve(connection: Connection, latency: float, concurrency: int, rules: str) -> None:
    """The child process's loop: serve until the parent says stop (or goes away)."""
    endpoint = _start(latency, concurrency, rules)
    served = _InThread(endpoint)
    connection.send(endpoint.base_url)
    try:
        while True:
            try:
                command = connection.recv()
            except EOFError:
                break
            if command == "peak":
                connection.send(served.take_peak())
            elif command == "requests":
                connection.send(served.take_requests())
            else:
                break
    finally:
        endpoint.stop()


class _InProcess:
    """The stand-in in a process of its own, as vLLM is: its Python work does not compete for our GIL."""

    def __init__(self, latency: float, concurrency: int, rules: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, latency, concurrency, rules), daemon=True)
        self._process.start()
        child.close()
        self._base_url = str(self._connection.recv())

    @property
    def base_url(self) -> str:
        return self._base_url

    def take_peak(self) -> int:
        self._connection.send("peak")
        return int(self._connection.recv())

    def take_requests(self) -> dict[str, int]:
        self._connection.send("requests")
        return dict(self._connection.recv())

    def stop(self) -> None:
        with suppress(OSError):
            self._connection.send("stop")
        self._process.join(10)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()
        self._connection.close()


@contextmanager
def stand_in(where: str, latency: float, concurrency: int, rules: str) -> Iterator[StandIn]:
    if where == "thread":
        endpoint = _start(latency, concurrency, rules)
        try:
            yield _InThread(endpoint)
        finally:
            endpoint.stop()
    else:
        process = _InProcess(latency, concurrency, rules)
        try:
            yield process
        finally:
            process.stop()

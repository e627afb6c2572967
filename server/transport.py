"""How the language server meets its client: stdio, or one authenticated client on 127.0.0.1 or a Unix socket.

This replaces pygls' start_io/start_tcp loops, which (a) never recovered from a wrong Content-Length (the next
header was read as part of a body, or the stream was waited on forever), (b) logged a traceback for every
message written to a client that had stopped reading, and (c) over TCP served every connection, with no
authentication, parsed an HTTP request from any web page as LSP, and shut down when any of them closed.

- Frames are decoded by FrameDecoder. A bad frame (no or non-numeric Content-Length, a body that is not JSON, a
  length that runs past the message) is reported once and the decoder resynchronises on the next
  `Content-Length:` header, so later requests are answered.
- Writing happens off the event loop (stdio) or through asyncio's buffered transport (sockets). A closed pipe,
  a reset connection or a client that has not read WRITE_BACKLOG bytes of replies ends the session once,
  quietly.
- A socket server serves one client. Before a connection is admitted, its first frame must be well-formed LSP
  (else it is closed unread; an HTTP request line never gets further) and an `initialize` request; over TCP
  its initializationOptions must also carry the server's token under TOKEN_KEY. Other connections are closed
  without affecting the admitted one, and the server stops when that client's session ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import queue
import re
import secrets
import socket
import stat
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from . import logs
from .rpc import HardenedProtocol, usable_id

if TYPE_CHECKING:
    from pygls.server import JsonRPCServer

log = logging.getLogger(f"{logs.LOGGER_NAME}.transport")

TOKEN_KEY = "marginToken"  # initializationOptions.marginToken
TOKEN_ENV = "MARGIN_TOKEN"
MIN_TOKEN_LENGTH = 16
HOST = "127.0.0.1"

CHUNK = 64 * 1024
MAX_HEADER_BYTES = 8 * 1024  # LSP headers are two short lines
MAX_BODY = 256 * 1024 * 1024  # a large manuscript in one didOpen, JSON-escaped
MAX_FIRST_BODY = 1024 * 1024  # before a socket client is admitted: an initialize request, nothing bigger
WRITE_BACKLOG = 64 * 1024 * 1024  # replies a client may leave unread before it counts as gone
ADMIT_TIMEOUT = 10.0  # seconds a socket connection has to send its initialize request
MAX_PENDING = 4  # connections waiting to be admitted at once (one idle connection cannot lock the editor out)
OVERRUN_CHECKS = 16  # parses a pending body may cost while looking for a length that was too long
CLOSE_TIMEOUT = 2.0  # seconds to flush the last replies when the session ends
LOGGED_REFUSALS = 20

_CONTENT_LENGTH = re.compile(rb"content-length:", re.IGNORECASE)
_HEADER = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*(.*?)[ \t]*")
_DIGITS = re.compile(rb"[0-9]{1,12}")


class ServeError(Exception):
    """The server cannot start as asked (unusable token, socket path or port): a message for the user."""


# -- frames ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    data: Any  # the decoded JSON value, not yet checked as JSON-RPC


@dataclass(frozen=True)
class BadFrame:
    reason: str


Frame = Message | BadFrame


class FrameDecoder:
    """LSP base protocol frames (`Content-Length: N\\r\\n\\r\\n` + N bytes of JSON) from a byte stream.

    `read_chunk` returns the next bytes, or b"" at the end of input. After a bad frame the decoder looks for the
    next `Content-Length:` anywhere in the stream (a body cut short leaves its tail in front of the next header,
    on the same line), starting inside a body that did not parse: a length that was too long has swallowed the
    start of the next frame.
    """

    def __init__(self, read_chunk: Callable[[], Awaitable[bytes]], max_body: int = MAX_BODY) -> None:
        self._read_chunk = read_chunk
        self.max_body = max_body
        self._buffer = bytearray()
        self._eof = False
        self._resync = False
        self._overrun_checks = OVERRUN_CHECKS

    async def _fill(self) -> bool:
        if self._eof:
            return False
        chunk = await self._read_chunk()
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True

    async def next(self) -> Frame | None:
        """The next frame, or None at the end of input (a frame cut off by the end is dropped)."""
        if self._resync and not await self._skip_to_header():
            return None
        self._resync = False
        length = await self._headers()
        if length is None:
            return None
        if isinstance(length, BadFrame):
            self._resync = True
            return length
        return await self._body(length)

    async def _skip_to_header(self) -> bool:
        while True:
            found = _CONTENT_LENGTH.search(self._buffer)
            if found is not None:
                del self._buffer[: found.start()]
                return True
            # Keep a tail that may be the start of the header, split across two reads.
            del self._buffer[: max(0, len(self._buffer) - len(_CONTENT_LENGTH.pattern) + 1)]
            if not await self._fill():
                return False

    async def _headers(self) -> int | BadFrame | None:
        length: int | None = None
        start = 0
        while True:
            end = self._buffer.find(b"\n", start)
            if end < 0:
                if len(self._buffer) > MAX_HEADER_BYTES:
                    del self._buffer[: max(start, 1)]  # at least a byte, or resync could find this line again
                    return BadFrame(f"a header longer than {MAX_HEADER_BYTES} bytes")
                if not await self._fill():
                    return None
                continue
            line = bytes(self._buffer[start:end]).removesuffix(b"\r")
            start = end + 1
            if not line:
                del self._buffer[:start]
                return length if length is not None else BadFrame("headers without Content-Length")
            if start > MAX_HEADER_BYTES:
                del self._buffer[:start]
                return BadFrame(f"headers longer than {MAX_HEADER_BYTES} bytes")
            header = _HEADER.fullmatch(line)
            if header is None:  # e.g. "POST / HTTP/1.1", or the tail of a body cut short
                del self._buffer[:start]
                return BadFrame(f"not an LSP header: {line[:60]!r}")
            if header.group(1).lower() != b"content-length":
                continue  # Content-Type, the only other LSP header, says nothing margin needs
            value = header.group(2)
            if not _DIGITS.fullmatch(value):
                del self._buffer[:start]
                return BadFrame(f"Content-Length is not a number: {value[:30]!r}")
            if length is not None and int(value) != length:
                del self._buffer[:start]
                return BadFrame("two different Content-Length headers")
            length = int(value)
            if length > self.max_body:
                del self._buffer[:start]
                return BadFrame(f"Content-Length {length} is over the limit of {self.max_body} bytes")

    async def _body(self, length: int) -> Frame | None:
        scanned = 0
        self._overrun_checks = OVERRUN_CHECKS
        while len(self._buffer) < length:
            overrun = self._overrun(scanned)
            if overrun is not None:
                return overrun
            scanned = max(0, len(self._buffer) - len(_CONTENT_LENGTH.pattern))
            if not await self._fill():
                return None
        body = bytes(self._buffer[:length])
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as error:  # RecursionError: nesting too deep for the decoder
            self._resync = True  # from the start of this body (see the class docstring)
            return BadFrame(f"the body of {length} bytes is not JSON ({_short(error)})")
        del self._buffer[:length]
        return Message(data)

    def _overrun(self, scanned: int) -> BadFrame | None:
        """While a body is incomplete: a whole JSON message followed by a new header means the declared length
        was too long. Report it now rather than wait, perhaps forever, for bytes the client will not send."""
        found = _CONTENT_LENGTH.search(self._buffer, scanned)
        while found is not None and self._overrun_checks > 0:
            end = found.start()
            while end and self._buffer[end - 1] in b" \t\r\n":
                end -= 1
            # Parse only where a message could end, and only a few times a body: a peer that fills a body
            # with headers must not make each one cost a copy and a parse of everything before it.
            if end and self._buffer[end - 1] in b"}]":
                self._overrun_checks -= 1
                try:
                    json.loads(bytes(self._buffer[:end]))
                except (ValueError, RecursionError):
                    pass
                else:
                    del self._buffer[: found.start()]
                    return BadFrame(f"Content-Length was longer than the message ({found.start()} bytes)")
            found = _CONTENT_LENGTH.search(self._buffer, found.end())
        return None


def _short(error: BaseException) -> str:
    return str(error)[:120]


# -- writers -----------------------------------------------------------------------------------------------------


class Writer(Protocol):
    """What pygls writes replies to, plus the end of the session. write never raises."""

    def write(self, data: bytes) -> None: ...

    async def aclose(self) -> None: ...


class PipeWriter:
    """Writes to a file descriptor (stdout) from a thread of its own.

    The event loop never blocks on a client that does not read; a closed pipe is reported once through
    `on_lost` (pygls logged a traceback per message, thousands of them); a client that leaves WRITE_BACKLOG
    bytes unread counts as gone.
    """

    def __init__(self, fd: int, on_lost: Callable[[str], None], backlog: int = WRITE_BACKLOG) -> None:
        self._fd = fd
        self._on_lost = on_lost
        self._limit = backlog
        self._loop = asyncio.get_running_loop()
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._pending = 0
        self._lock = threading.Lock()
        self._lost = False
        self._drained = threading.Event()
        threading.Thread(target=self._drain, name="margin-stdout", daemon=True).start()

    def write(self, data: bytes) -> None:
        if self._lost:
            return
        with self._lock:
            self._pending += len(data)
            backlog = self._pending
        if backlog > self._limit:
            self._lose(f"the client has left {backlog} bytes of replies unread")
            return
        self._queue.put(data)

    def _drain(self) -> None:
        try:
            while (data := self._queue.get()) is not None:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view) :]
                with self._lock:
                    self._pending -= len(data)
        except OSError as error:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the server is already exiting
                self._loop.call_soon_threadsafe(self._lose, f"cannot write to the client ({error})")
        finally:
            self._drained.set()

    def _lose(self, reason: str) -> None:
        if not self._lost:
            self._lost = True
            self._on_lost(reason)

    async def aclose(self) -> None:
        """Flush what is queued (a client that stopped reading gets CLOSE_TIMEOUT seconds)."""
        self._queue.put(None)
        await asyncio.to_thread(self._drained.wait, CLOSE_TIMEOUT)


class SocketWriter:
    """Writes to a stream socket through asyncio's buffered transport; a closed connection or a client that
    stops reading is reported once (asyncio itself warns on every write after the connection is lost)."""

    def __init__(
        self, stream: asyncio.StreamWriter, on_lost: Callable[[str], None], backlog: int = WRITE_BACKLOG
    ) -> None:
        self._stream = stream
        self._on_lost = on_lost
        self._limit = backlog
        self._lost = False

    def write(self, data: bytes) -> None:
        if self._lost:
            return
        transport = self._stream.transport
        if transport.is_closing():
            self._lose("the client closed the connection")
        elif transport.get_write_buffer_size() + len(data) > self._limit:
            self._lose(f"the client has left over {self._limit} bytes of replies unread")
            transport.abort()
        else:
            self._stream.write(data)

    def _lose(self, reason: str) -> None:
        if not self._lost:
            self._lost = True
            self._on_lost(reason)

    async def aclose(self) -> None:
        await close_stream(self._stream)


async def close_stream(stream: asyncio.StreamWriter) -> None:
    """Close after flushing, for at most CLOSE_TIMEOUT seconds; never raises."""
    try:
        stream.close()
        await asyncio.wait_for(stream.wait_closed(), CLOSE_TIMEOUT)
    except (OSError, TimeoutError):
        stream.transport.abort()


# -- one session ---------------------------------------------------------------------------------------------


async def run_session(
    protocol: HardenedProtocol,
    decoder: FrameDecoder,
    make_writer: Callable[[Callable[[str], None]], Writer],
    first: Message | None = None,
) -> int:
    """Serve one client until `exit`, the end of its input, or a write that cannot reach it; the exit code."""
    ended: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def end(code: int) -> None:
        if not ended.done():
            ended.set_result(code)

    writer = make_writer(protocol.client_lost)
    protocol.open_session(writer, end)
    reading = asyncio.ensure_future(_dispatch(protocol, decoder, first))

    def input_ended(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("reading from the client failed", exc_info=task.exception())
        protocol.end_session()  # end of input: LSP's exit code rule applies (0 only after shutdown)

    reading.add_done_callback(input_ended)
    try:
        return await ended
    finally:
        reading.cancel()
        await writer.aclose()


async def _dispatch(protocol: HardenedProtocol, decoder: FrameDecoder, first: Message | None) -> None:
    if first is not None:
        protocol.receive(first.data)
    while (frame := await decoder.next()) is not None:
        if isinstance(frame, BadFrame):
            protocol.bad_frame(frame.reason)
        else:
            protocol.receive(frame.data)


def _run(server: JsonRPCServer, main: Awaitable[int]) -> int:
    try:
        return asyncio.run(main)  # type: ignore[arg-type]
    except KeyboardInterrupt:
        return 130
    finally:
        server.shutdown()  # pygls' own clean-up (its thread pool)


# -- stdio -------------------------------------------------------------------------------------------------------


class _StdinChunks:
    """Reads a file descriptor in a daemon thread: a blocked read can neither hold the event loop nor keep the
    process from exiting. At most a few chunks wait in memory, so a fast client still meets the pipe's limit."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._loop = asyncio.get_running_loop()
        self._chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self._room = threading.Semaphore(16)
        threading.Thread(target=self._pump, name="margin-stdin", daemon=True).start()

    def _pump(self) -> None:
        while True:
            self._room.acquire()
            try:
                chunk = os.read(self._fd, CHUNK)
            except OSError:
                chunk = b""
            try:
                self._loop.call_soon_threadsafe(self._chunks.put_nowait, chunk)
            except RuntimeError:  # the loop is closed: the server is exiting
                return
            if not chunk:
                return

    async def read(self) -> bytes:
        chunk = await self._chunks.get()
        self._room.release()
        return chunk


def serve_stdio(server: JsonRPCServer) -> int:
    """The language server on stdin/stdout; the exit code LSP prescribes."""

    async def main() -> int:
        chunks = _StdinChunks(sys.stdin.fileno())
        stdout = sys.stdout.fileno()
        return await run_session(
            _protocol(server), FrameDecoder(chunks.read), lambda lost: PipeWriter(stdout, lost)
        )

    return _run(server, main())


def _protocol(server: JsonRPCServer) -> HardenedProtocol:
    protocol = server.protocol
    if not isinstance(protocol, HardenedProtocol):
        raise TypeError("margin's transport needs a HardenedProtocol")
    return protocol


# -- sockets -----------------------------------------------------------------------------------------------------


def read_token(token_file: Path | None) -> tuple[str, bool]:
    """The TCP token: from --token-file, else $MARGIN_TOKEN, else a new random one. True if generated."""
    if token_file is not None:
        try:
            info = token_file.stat()
            token = token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise ServeError(f"cannot read the token file {token_file}: {error}") from error
        if os.name == "posix" and info.st_mode & 0o077:
            raise ServeError(f"the token file {token_file} is readable by others: chmod 600 it")
        source = str(token_file)
    elif os.environ.get(TOKEN_ENV):
        token, source = os.environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
    else:
        return secrets.token_urlsafe(32), True
    if len(token) < MIN_TOKEN_LENGTH or not token.isprintable():
        raise ServeError(f"the token from {source} must be at least {MIN_TOKEN_LENGTH} printable characters")
    return token, False


Connected = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class _Door:
    """Admission for a socket server: one client at a time, each with the token when there is one."""

    token: str | None
    admitted: bool = False
    pending: int = 0
    refusals: int = 0

    def refuse(self, peer: object, reason: str) -> None:
        self.refusals += 1
        if self.refusals <= LOGGED_REFUSALS:
            log.warning("refused a connection from %s: %s", peer or "a local client", reason)
        elif self.refusals == LOGGED_REFUSALS + 1:
            log.warning("more connections refused; they are no longer logged")

    def check(self, first: Frame | None) -> tuple[str | None, Any]:
        """Why the first frame does not admit its connection (None if it does), and the id to answer."""
        if first is None:
            return "it sent no complete message", None
        if isinstance(first, BadFrame):
            return f"it did not speak LSP ({first.reason})", None
        data = first.data
        if not isinstance(data, dict) or data.get("method") != "initialize" or "id" not in data:
            return "its first message was not an initialize request", None
        msg_id = data["id"] if usable_id(data["id"]) else None
        params = data.get("params")
        options = params.get("initializationOptions") if isinstance(params, dict) else None
        presented = options.pop(TOKEN_KEY, None) if isinstance(options, dict) else None  # not a setting
        if self.token is None:
            return None, msg_id
        if not isinstance(presented, str) or not hmac.compare_digest(
            presented.encode("utf-8"), self.token.encode("utf-8")
        ):
            return f"initializationOptions.{TOKEN_KEY} was missing or wrong", msg_id
        return None, msg_id


async def _serve_socket(
    server: JsonRPCServer,
    listen: Callable[[Connected], Awaitable[asyncio.Server]],
    door: _Door,
    ready: Callable[[asyncio.Server], None],
) -> int:
    protocol = _protocol(server)
    finished: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def connected(reader: asyncio.StreamReader, stream: asyncio.StreamWriter) -> None:
        peer = stream.get_extra_info("peername")
        try:
            if door.admitted or door.pending >= MAX_PENDING:
                door.refuse(peer, "margin serves one client, and it has one")
                await close_stream(stream)
                return
            decoder = FrameDecoder(_socket_chunks(reader), max_body=MAX_FIRST_BODY)
            door.pending += 1
            try:
                first = await asyncio.wait_for(decoder.next(), ADMIT_TIMEOUT)
            except TimeoutError:
                first = None
            finally:
                door.pending -= 1
            reason, msg_id = door.check(first)
            if reason is None and door.admitted:
                reason = "margin serves one client, and it has one"
            if reason is not None:
                door.refuse(peer, reason)
                if msg_id is not None:  # a real LSP client with a wrong token: tell it why
                    stream.write(_error_frame(msg_id, f"margin refused the connection: {reason}"))
                await close_stream(stream)
                return
            door.admitted = True
            decoder.max_body = MAX_BODY
            assert isinstance(first, Message)
            code = await run_session(protocol, decoder, lambda lost: SocketWriter(stream, lost), first=first)
            if not finished.done():
                finished.set_result(code)
        except Exception:  # asyncio would only log it; the server must stop if its client's session broke
            log.exception("the connection from %s failed", peer)
            await close_stream(stream)
            if door.admitted and not finished.done():
                finished.set_result(protocol.exit_code)

    listener = await listen(connected)
    try:
        ready(listener)
        return await finished
    finally:
        listener.close()


def _socket_chunks(reader: asyncio.StreamReader) -> Callable[[], Awaitable[bytes]]:
    async def read() -> bytes:
        try:
            return await reader.read(CHUNK)
        except OSError:  # a reset connection is the end of input
            return b""

    return read


def _error_frame(msg_id: Any, message: str) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32600, "message": message}})
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body.encode("utf-8"))


def serve_tcp(server: JsonRPCServer, port: int, token_file: Path | None = None) -> int:
    """One client on 127.0.0.1:port that presents the token. Prints one JSON line on stdout when listening:
    {"host", "port"} (the real port when port is 0), plus "token" when the server generated it."""
    token, generated = read_token(token_file)

    def ready(listener: asyncio.Server) -> None:
        bound = listener.sockets[0].getsockname()[1]
        log.info("listening on %s:%d for one client with the token", HOST, bound)
        announcement: dict[str, object] = {"host": HOST, "port": bound}
        if generated:
            announcement["token"] = token
        with contextlib.suppress(OSError):  # whoever started us may not read stdout
            sys.stdout.write(json.dumps(announcement) + "\n")
            sys.stdout.flush()

    async def main() -> int:
        try:
            return await _serve_socket(
                server, lambda connected: asyncio.start_server(connected, HOST, port), _Door(token), ready
            )
        except OSError as error:
            raise ServeError(f"cannot listen on {HOST}:{port}: {error}") from error

    return _run(server, main())


def prepare_socket_path(path: Path) -> None:
    """The socket must sit in a directory only this user can enter (macOS ignores a socket's own mode), and may
    replace only a stale socket of ours."""
    path = path.absolute()
    folder = path.parent
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
    except OSError as error:
        raise ServeError(f"cannot create the socket's folder {folder}: {error}") from error
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ServeError(f"the socket's folder {folder} must be yours and private (chmod 700 {folder})")
    try:
        existing = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(existing.st_mode) or existing.st_uid != os.getuid():
        raise ServeError(f"{path} exists and is not a socket of yours")
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # nobody listens: a server that did not clean up
            return
    raise ServeError(f"another server is listening on {path}")


def serve_unix(server: JsonRPCServer, path: Path) -> int:
    """One client on a Unix socket created 0600 in a private folder: the file system is the authentication."""
    if os.name != "posix":
        raise ServeError("--socket needs Unix sockets; use --tcp")
    prepare_socket_path(path)

    async def listen(connected: Connected) -> asyncio.Server:
        previous = os.umask(0o177)  # the socket is born 0600: no moment when others may connect
        try:
            return await asyncio.start_unix_server(connected, path=str(path))
        finally:
            os.umask(previous)

    def ready(listener: asyncio.Server) -> None:
        log.info("listening on %s for one client", path)

    async def main() -> int:
        try:
            return await _serve_socket(server, listen, _Door(None), ready)
        except OSError as error:
            raise ServeError(f"cannot listen on {path}: {error}") from error
        finally:
            with contextlib.suppress(OSError):
                path.unlink()

    return _run(server, main())

"""A broken or hostile client, in raw bytes, against the real server in a child process.

Each test reproduces one report: an unauthenticated TCP port that parsed a web page's HTTP POST as LSP and served
(and was shut down by) any connection; a wrong Content-Length after which nothing was answered; malformed ids and
JSON that got no error response; requests after shutdown that got no answer; and a client that stopped reading,
which produced thousands of BrokenPipe tracebacks. Every wait has a timeout, so a hang fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

WAIT = 20.0  # seconds for anything the server must do; generous because CI shares two cores
QUIET = 1.0  # seconds of silence that show a message got no answer
SERVER = [sys.executable, "-m", "margin.server"]  # __main__ adds "serve"

Json = dict[str, Any]


def frame(message: object) -> bytes:
    return body_frame(json.dumps(message).encode("utf-8"))


def body_frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def initialize(msg_id: int = 1, options: object = None) -> Json:
    params: Json = {"processId": None, "rootUri": None, "capabilities": {}}
    if options is not None:
        params["initializationOptions"] = options
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize", "params": params}


def status(msg_id: object) -> Json:
    """A request every server state can answer without a document or a model."""
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": "workspace/executeCommand",
        "params": {"command": "margin.status", "arguments": []},
    }


SHUTDOWN: Json = {"jsonrpc": "2.0", "id": 900, "method": "shutdown"}
EXIT: Json = {"jsonrpc": "2.0", "method": "exit"}


class Responses:
    """Responses in the order they came; responses[msg_id] is the only one with that id."""

    def __init__(self) -> None:
        self.items: list[Json] = []

    def with_id(self, msg_id: object) -> list[Json]:
        # By JSON value and type: in Python 1 == 1.0 == True, in JSON-RPC they are different ids.
        return [r for r in self.items if r.get("id", ...) == msg_id and type(r.get("id")) is type(msg_id)]

    def __getitem__(self, msg_id: object) -> Json:
        matching = self.with_id(msg_id)
        assert len(matching) == 1, f"{len(matching)} responses with id {msg_id!r} in {self.items}"
        return matching[0]

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return repr(self.items)


class Incoming:
    """Frames read by a thread from `read` (a pipe or a socket), so that every wait can time out."""

    _END = object()

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self._read = read
        self._frames: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        buffer = b""
        try:
            while chunk := self._read(65536):
                buffer += chunk
                while (end := buffer.find(b"\r\n\r\n")) >= 0:
                    header = re.search(rb"Content-Length: *(\d+)", buffer[:end], re.IGNORECASE)
                    assert header is not None, buffer[:end]
                    length = int(header.group(1))
                    if len(buffer) < end + 4 + length:
                        break
                    self._frames.put(json.loads(buffer[end + 4 : end + 4 + length]))
                    buffer = buffer[end + 4 + length :]
        except OSError:
            pass
        self._frames.put(self._END)

    def next(self, timeout: float = WAIT) -> Json | None:
        """The next message, or None when the other side closed; fails after `timeout` seconds."""
        try:
            item = self._frames.get(timeout=max(0.01, timeout))
        except queue.Empty:
            raise AssertionError(f"nothing from the server in {timeout:.1f} s") from None
        if item is self._END:
            self._frames.put(item)
            return None
        return item

    def collect(self, *ids: object, timeout: float = WAIT) -> Responses:
        """Every response (not notification) until all of `ids` are answered.

        Errors for unusable messages are sent as soon as they are read, so they come before the answer to a
        request sent after them."""
        found = Responses()
        deadline = time.monotonic() + timeout
        while not all(found.with_id(msg_id) for msg_id in ids):
            message = self.next(deadline - time.monotonic())
            assert message is not None, f"the server closed the connection; got {found}"
            if "method" not in message:
                found.items.append(message)
        return found

    def answer(self, msg_id: object) -> Json:
        return self.collect(msg_id)[msg_id]

    def rest(self, timeout: float = WAIT) -> list[Json]:
        """Every message until the other side closes the connection; fails if it stays open."""
        messages: list[Json] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.next(deadline - time.monotonic())
            except AssertionError:
                raise AssertionError(f"the connection stayed open {timeout} s; it sent {messages}") from None
            if message is None:
                return messages
            messages.append(message)


class Child:
    """margin's server in a child process; stderr is collected by a thread (a full pipe must not block it)."""

    def __init__(self, *arguments: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [*SERVER, *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else {**os.environ, **env},
        )
        assert self.process.stdin and self.process.stdout and self.process.stderr
        self._stderr: list[bytes] = []
        stderr = self.process.stderr
        self._stderr_thread = threading.Thread(
            target=lambda: self._stderr.extend(iter(lambda: stderr.read1(65536), b"")), daemon=True
        )
        self._stderr_thread.start()

    def send(self, data: bytes) -> None:
        assert self.process.stdin
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def wait(self, timeout: float = WAIT) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the server did not exit within {timeout} s") from None

    @property
    def stderr(self) -> str:
        if self.process.poll() is not None:
            self._stderr_thread.join(timeout=2)
        return b"".join(self._stderr).decode("utf-8", errors="replace")

    def logged(self, text: str, since: int = 0, settle: float = 2.0) -> int:
        """How often `text` is on stderr after offset `since`, once a first one has had time to arrive."""
        deadline = time.monotonic() + settle
        while text not in self.stderr[since:] and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.stderr[since:].count(text)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


# -- stdio ---------------------------------------------------------------------------------------------------


class StdioClient:
    def __init__(self) -> None:
        self.child = Child()
        assert self.child.process.stdout
        fd = self.child.process.stdout.fileno()
        self.incoming = Incoming(lambda size: os.read(fd, size))
        self._ids = iter(range(1000, 10**9))
        try:
            assert "result" in self.request(initialize())
            self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        except BaseException:
            self.child.stop()  # nobody else holds the child yet
            raise

    def send(self, message: object) -> None:
        self.child.send(frame(message))

    def request(self, message: Json) -> Json:
        self.send(message)
        return self.incoming.answer(message["id"])

    def new_id(self) -> int:
        """Ids no earlier test on a shared server has used."""
        return next(self._ids)

    def assert_still_answers(self) -> None:
        msg_id = self.new_id()
        answer = self.request(status(msg_id))
        assert "result" in answer and answer["result"]["endpoint"], answer


def stdio_server() -> Iterator[StdioClient]:
    client = StdioClient()
    try:
        yield client
    finally:
        client.child.stop()


# Tests that leave the session usable share a server (each start costs about 1.5 s); the bad-frame tests have
# their own, so that what they count in the log is theirs whatever runs before them.
frames_server = pytest.fixture(scope="module")(stdio_server)
messages_server = pytest.fixture(scope="module")(stdio_server)
stdio = pytest.fixture(stdio_server)


# 2. A bad frame is reported once, and the server resynchronises on the next Content-Length header.

INNER_BODY = json.dumps(status(50)).encode("utf-8")  # a request inside a bad frame is never run
BAD_FRAMES = {
    "length too short": b"Content-Length: 10\r\n\r\n" + INNER_BODY,
    "length too long": b"Content-Length: %d\r\n\r\n" % (len(INNER_BODY) + 40) + INNER_BODY,
    # Longer than everything the client will send: the server must not wait for bytes that never come.
    "length far too long": b"Content-Length: %d\r\n\r\n" % (len(INNER_BODY) + 100_000) + INNER_BODY,
    "length not a number": b"Content-Length: ten\r\n\r\n" + INNER_BODY,
    "no content-length": b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + INNER_BODY,
    "garbage line": b"hello there\r\n",
}


@pytest.mark.parametrize("bad", BAD_FRAMES.values(), ids=BAD_FRAMES.keys())
def test_a_bad_frame_is_reported_once_and_later_requests_are_answered(
    frames_server: StdioClient, bad: bytes
) -> None:
    server = frames_server
    log_offset = len(server.child.stderr)
    first, second = server.new_id(), server.new_id()
    server.child.send(bad + frame(status(first)) + frame(status(second)))
    answers = server.incoming.collect(None, first, second)
    assert answers[None]["error"]["code"] == -32700, answers
    assert "result" in answers[first] and "result" in answers[second], answers
    assert not answers.with_id(50)
    assert server.child.logged("bad frame from the client", since=log_offset) == 1


def test_bad_frames_back_to_back_then_a_valid_request(messages_server: StdioClient) -> None:
    after = messages_server.new_id()
    messages_server.child.send(b"".join(BAD_FRAMES.values()) + frame(status(after)))
    answers = messages_server.incoming.collect(after)
    assert "result" in answers[after]
    parse_errors = [answer for answer in answers.with_id(None) if answer["error"]["code"] == -32700]
    # Bytes skipped while resynchronising belong to the bad frame before them: fewer errors than frames.
    assert 1 <= len(parse_errors) <= len(BAD_FRAMES), answers
    assert not answers.with_id(50)


# 3. Malformed ids and JSON get JSON-RPC errors, with id null when the id cannot be used.


@pytest.mark.parametrize(
    "bad_id", [{"a": 1}, [1], 1.5, None, True], ids=["object", "list", "float", "null", "bool"]
)
def test_a_request_with_an_unusable_id_gets_invalid_request_with_id_null(
    messages_server: StdioClient, bad_id: object
) -> None:
    after = messages_server.new_id()
    messages_server.child.send(frame(status(bad_id)) + frame(status(after)))
    answers = messages_server.incoming.collect(None, after)
    assert answers[None]["error"]["code"] == -32600 and len(answers) == 2, answers


@pytest.mark.parametrize(
    "body",
    [b"{not json", b'{"jsonrpc": "2.0", "id": 3, "method": ', b"\xff\xfe\x00", b"[" * 100_000],
    ids=["bad syntax", "cut short", "not utf-8", "nested too deep"],
)
def test_malformed_json_gets_parse_error_with_id_null_and_the_server_goes_on(
    messages_server: StdioClient, body: bytes
) -> None:
    after = messages_server.new_id()
    messages_server.child.send(body_frame(body) + frame(status(after)))
    answers = messages_server.incoming.collect(None, after)
    assert answers[None]["error"]["code"] == -32700 and len(answers) == 2, answers


@pytest.mark.parametrize(
    "message",
    [
        [status(5)],
        {"jsonrpc": "1.0", "id": 5, "method": "workspace/executeCommand"},
        {"jsonrpc": "2.0", "id": 5, "method": 7},
        {"jsonrpc": "2.0", "id": 5, "method": "workspace/executeCommand", "params": "margin.status"},
        "just a string",
    ],
    ids=["batch", "wrong version", "method not a string", "params not structured", "not an object"],
)
def test_a_message_that_is_not_a_valid_request_gets_invalid_request(
    messages_server: StdioClient, message: object
) -> None:
    after = messages_server.new_id()
    messages_server.child.send(frame(message) + frame(status(after)))
    answers = messages_server.incoming.collect(after)
    errors = answers.with_id(5) + answers.with_id(None)
    assert len(errors) == 1 and errors[0]["error"]["code"] == -32600, answers


def test_a_request_whose_params_do_not_fit_gets_invalid_params(messages_server: StdioClient) -> None:
    msg_id = messages_server.new_id()
    answer = messages_server.request(
        {"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover", "params": {"position": "here"}}
    )
    assert answer["error"]["code"] == -32602
    messages_server.assert_still_answers()


# 4. After shutdown: requests get InvalidRequest, notifications are dropped, and exit's code follows LSP.


def test_requests_after_shutdown_get_invalid_request_and_exit_then_exits_0(stdio: StdioClient) -> None:
    assert stdio.request(SHUTDOWN)["result"] is None
    stdio.send({"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration", "params": {"settings": {}}})
    stdio.send(status(7))
    stdio.send({"jsonrpc": "2.0", "id": 8, "method": "shutdown"})
    answers = stdio.incoming.collect(7, 8)
    assert [answer["id"] for answer in answers.items] == [7, 8], answers  # nothing for the notification
    assert all(answer["error"]["code"] == -32600 for answer in answers.items), answers
    stdio.send(EXIT)
    assert stdio.child.wait() == 0


def test_a_request_right_behind_shutdown_is_refused(stdio: StdioClient) -> None:
    stdio.child.send(frame(SHUTDOWN) + frame(status(7)))
    answers = stdio.incoming.collect(900, 7)
    assert answers[900]["result"] is None and answers[7]["error"]["code"] == -32600, answers
    stdio.send(EXIT)
    assert stdio.child.wait() == 0


def test_exit_without_shutdown_exits_1(stdio: StdioClient) -> None:
    stdio.send(EXIT)
    assert stdio.child.wait() == 1


# 5. A client that stops reading: one line on stderr, and the server exits.


def test_a_client_that_closed_its_end_of_stdout_gets_one_log_line_and_the_server_exits(
    stdio: StdioClient,
) -> None:
    assert stdio.child.process.stdout
    stdio.child.process.stdout.close()
    try:
        for msg_id in range(100, 400):  # each answer is a write to the closed pipe
            stdio.send(status(msg_id))
    except BrokenPipeError:
        pass  # the server already exited, as it should
    assert stdio.child.wait() == 1  # no shutdown was asked for
    log = stdio.child.stderr
    assert "Traceback" not in log and "BrokenPipeError" not in log, log[:2000]
    assert log.count("cannot write to the client") == 1, log[:2000]


async def test_a_client_that_leaves_replies_unread_counts_as_gone_once() -> None:
    from margin.server.transport import PipeWriter

    read_end, write_end = os.pipe()  # a pipe holds 64 KiB; nobody reads this one
    lost: list[str] = []
    writer = PipeWriter(write_end, lost.append, backlog=1024 * 1024)
    try:
        for _ in range(32):
            writer.write(b"x" * 65536)  # never blocks the event loop, however full the pipe
        writer.write(b"more")
        assert len(lost) == 1 and "unread" in lost[0], lost
    finally:
        os.close(read_end)  # the writer's blocked write fails, and it stops
        await writer.aclose()
        os.close(write_end)
    assert len(lost) == 1, lost


# 1. TCP: one authenticated client, nothing that is not LSP, and a Unix socket option.


class Listening:
    """`margin serve --tcp` (or --socket) and what it announced on stdout: {"host", "port", "token"}."""

    def __init__(self, *arguments: str, env: dict[str, str] | None = None) -> None:
        port = None
        if "--tcp" in arguments and "--port" not in arguments:
            port = free_port()
            arguments = (*arguments, "--port", str(port))
        self.child = Child(*arguments, env=env)
        assert self.child.process.stdout
        self.announced: Json = {}
        if "--tcp" in arguments:
            try:
                line = _readline(self.child.process.stdout.fileno(), WAIT)
                # An old server announces nothing: the tests then show what it does, not a missing line.
                self.announced = json.loads(line) if line else {"host": "127.0.0.1", "port": port}
                assert port is None or self.announced["port"] == port
            except BaseException:
                self.child.stop()  # nobody else holds the child yet
                raise

    @property
    def token(self) -> str:
        return str(self.announced.get("token", "no token was announced"))

    def connect(self) -> socket.socket:
        return socket.create_connection((self.announced["host"], self.announced["port"]), timeout=WAIT)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _readline(fd: int, timeout: float) -> bytes:
    """One line from a pipe, read byte by byte so nothing after it is consumed; b"" after `timeout`."""
    found: queue.Queue[bytes] = queue.Queue()

    def read() -> None:
        line = b""
        while (byte := os.read(fd, 1)) and byte != b"\n":
            line += byte
        found.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        return found.get(timeout=timeout)
    except queue.Empty:
        return b""


def socket_incoming(connection: socket.socket) -> Incoming:
    connection.settimeout(None)  # the reader thread blocks; each wait on Incoming has its own timeout
    return Incoming(connection.recv)


def listening(*arguments: str) -> Iterator[Listening]:  # the port is chosen here
    server = Listening(*arguments)
    try:
        yield server
    finally:
        server.child.stop()


@pytest.fixture(scope="module")
def refusing() -> Iterator[Listening]:
    """Refused connections leave the server waiting for its client, so the refusal tests share one."""
    yield from listening("--tcp")


@pytest.fixture
def tcp() -> Iterator[Listening]:
    yield from listening("--tcp")


def authenticated(server: Listening, token: str | None = None) -> tuple[socket.socket, Incoming]:
    connection = server.connect()
    incoming = socket_incoming(connection)
    connection.sendall(frame(initialize(options={"marginToken": token or server.token})))
    assert "result" in incoming.answer(1)
    return connection, incoming


def http_post(token: str) -> bytes:
    """What any web page may send to localhost: a text/plain POST needs no CORS preflight."""
    body = json.dumps(initialize(options={"marginToken": token}))
    return (
        f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\n\r\n{body}"
    ).encode()


def refused_silently(server: Listening, data: bytes) -> None:
    """The connection that sent `data` is closed without a byte in answer."""
    connection = server.connect()
    incoming = socket_incoming(connection)
    connection.sendall(data)
    assert incoming.rest() == []
    connection.close()


def test_tcp_refuses_an_http_post_without_reading_it_as_lsp(refusing: Listening) -> None:
    log_offset = len(refusing.child.stderr)
    refused_silently(refusing, http_post(refusing.token))  # even with the right token inside
    assert refusing.child.logged("not an LSP header: b'POST / HTTP/1.1'", since=log_offset) == 1


def test_tcp_refuses_a_first_message_that_is_not_initialize(refusing: Listening) -> None:
    refused_silently(refusing, frame(status(2)))


@pytest.mark.parametrize("token", [None, "wrong-token-wrong-token"], ids=["missing", "wrong"])
def test_tcp_refuses_an_initialize_without_the_right_token(refusing: Listening, token: str | None) -> None:
    connection = refusing.connect()
    incoming = socket_incoming(connection)
    connection.sendall(frame(initialize(options=None if token is None else {"marginToken": token})))
    (answer,) = incoming.rest()  # one error that says why, then the connection is closed
    assert answer["id"] == 1 and answer["error"]["code"] == -32600, answer
    assert "marginToken" in answer["error"]["message"]
    connection.close()


def test_tcp_serves_one_client_and_other_connections_do_not_affect_it(tcp: Listening) -> None:
    refused_silently(tcp, http_post(tcp.token))
    editor, answers = authenticated(tcp)  # a refusal leaves the server waiting for the editor
    refused_silently(tcp, frame(initialize(options={"marginToken": tcp.token})))
    time.sleep(0.3)  # the intruder's close must not stop the server
    assert tcp.child.process.poll() is None
    editor.sendall(frame(status(2)))
    assert "result" in answers.answer(2)
    editor.sendall(frame(SHUTDOWN))
    answers.answer(900)
    editor.sendall(frame(EXIT))
    assert tcp.child.wait() == 0


def test_tcp_takes_the_token_from_the_environment_or_a_private_file(tmp_path: Path) -> None:
    token = "from-the-environment-0123456789"
    server = Listening("--tcp", "--port", "0", env={"MARGIN_TOKEN": token})
    try:
        assert "token" not in server.announced  # the client already knows it
        assert server.announced["port"] > 0  # --port 0: the port the system chose
        authenticated(server, token)
    finally:
        server.child.stop()

    token_file = tmp_path / "token"
    token_file.write_text("from-a-file-0123456789abcdef\n", encoding="utf-8")
    token_file.chmod(0o644)
    refused = Child("--tcp", "--port", "0", "--token-file", str(token_file))
    try:
        assert refused.wait() == 2 and "chmod 600" in refused.stderr
    finally:
        refused.stop()
    token_file.chmod(0o600)
    server = Listening("--tcp", "--port", "0", "--token-file", str(token_file))
    try:
        authenticated(server, "from-a-file-0123456789abcdef")
    finally:
        server.child.stop()


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix sockets here")
def test_unix_socket_is_private_and_serves_one_client(tmp_path: Path) -> None:
    folder = tmp_path / "private"
    path = folder / "margin.sock"
    listening = Listening("--socket", str(path))
    try:
        deadline = time.monotonic() + WAIT
        while not path.exists():
            assert time.monotonic() < deadline and listening.child.process.poll() is None, (
                listening.child.stderr
            )
            time.sleep(0.05)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        editor = socket.socket(socket.AF_UNIX)
        editor.connect(str(path))
        answers = socket_incoming(editor)
        editor.sendall(frame(initialize()))  # the file system is the authentication: no token
        assert "result" in answers.answer(1)
        second = socket.socket(socket.AF_UNIX)
        second.connect(str(path))
        second_incoming = socket_incoming(second)
        second.sendall(frame(initialize()))
        assert second_incoming.rest() == []
        editor.sendall(frame(SHUTDOWN) + frame(EXIT))
        assert listening.child.wait() == 0
        assert not path.exists()
    finally:
        listening.child.stop()


def test_unix_socket_refuses_a_folder_others_can_enter(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    child = Child("--socket", str(folder / "margin.sock"))
    try:
        assert child.wait() == 2 and "private" in child.stderr
    finally:
        child.stop()

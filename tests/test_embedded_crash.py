"""A crashing embedded model server is reported as a crash: that it died, how (signal or exit status), the last
lines of its own log (kept in the user cache directory), and what to do; the commands that met it exit non-zero.

The server here is tests/crashing_model_server.py, started exactly as margin starts the embedded model (same
process handling, same log), standing in for llama-cpp-python on an AMX CPU: it lists its model, then dies with
SIGSEGV on the first completion. The real model killed mid-session is in test_llm_embedded.py.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from margin.server.cli import main
from margin.server.cli.exit_status import NO_MODEL
from margin.workflows.llm import embedded
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.config import EndpointConfig, LLMConfig
from margin.workflows.llm.types import FailureKind, LLMError, Request, Usage

from conftest import FIXTURES, assert_the_model_answered

STAND_IN = Path(__file__).with_name("crashing_model_server.py")


@pytest.fixture
def crashing_embedded_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nothing_on_localhost_8000: None
) -> Iterator[list[list[str]]]:
    """The embedded model, installed as far as margin can tell, served by the crashing stand-in; the user cache
    directory is the test's own. Yields the commands margin started."""
    model = tmp_path / "SmolLM2-stand-in.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(embedded, "embedded_model_file", lambda: model)
    monkeypatch.setattr(embedded, "server_installed", lambda: True)
    started: list[list[str]] = []
    real_command = embedded.EmbeddedServer.command

    def stand_in_command(server: embedded.EmbeddedServer) -> list[str]:
        command = real_command(server)
        started.append(command)
        return [sys.executable, str(STAND_IN), *command[3:]]  # margin's own options, the stand-in's program

    monkeypatch.setattr(embedded.EmbeddedServer, "command", stand_in_command)
    embedded.stop_shared_server()
    yield started
    embedded.stop_shared_server()


def log_file(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "margin" / embedded.LOG_NAME


def ask() -> Request:
    return Request(role="reviewer", messages=({"role": "user", "content": "Is this paragraph sound?"},))


def assert_reported_as_a_crash(message: str, tmp_path: Path) -> None:
    assert "crashed" in message
    assert "signal 11 (SIGSEGV" in message
    assert str(log_file(tmp_path)) in message
    assert "general protection fault" in message  # the last lines of the server's own log
    assert "What to do" in message
    assert "No LLM server answered" not in message


async def test_a_completion_that_kills_the_server_is_a_crash_with_its_signal_and_log(
    crashing_embedded_server: list[list[str]], tmp_path: Path
) -> None:
    client = LLMClient(
        LLMConfig(default=EndpointConfig(base_url="auto", timeout=20), cache_enabled=False, retries=2)
    )
    try:
        with pytest.raises(LLMError) as raised:
            await client.complete(ask())
        assert raised.value.kind is FailureKind.CRASHED
        assert raised.value.attempts == 1  # a dead process is not asked again
        assert_reported_as_a_crash(str(raised.value), tmp_path)
        assert log_file(tmp_path).is_file()

        # Every call after it says the same at once, without starting the server again.
        with pytest.raises(LLMError) as again:
            await client.complete(ask())
        assert again.value.kind is FailureKind.CRASHED and again.value.repeated
        assert len(crashing_embedded_server) == 1

        client.retry_now()  # what a command or new settings do: one more real try
        with pytest.raises(LLMError) as retried:
            await client.complete(ask())
        assert retried.value.kind is FailureKind.CRASHED and not retried.value.repeated
        assert len(crashing_embedded_server) == 2
        assert client.usage.failures == 3 and client.usage.no_model_answered
    finally:
        await client.close()


def test_the_model_leaves_the_editor_a_core() -> None:
    assert embedded.model_threads(8) == 7
    assert embedded.model_threads(2) == 1
    assert embedded.model_threads(1) == 1


def test_the_real_command_runs_margins_launcher_with_the_thread_count() -> None:
    server = embedded.EmbeddedServer(Path("/models/SmolLM2.gguf"), threads=3)
    command = server.command()
    assert command[1:3] == ["-m", "margin.workflows.llm.llama_server"]
    assert command[command.index("--n_threads") + 1] == "3"
    assert command[command.index("--n_threads_batch") + 1] == "3"


def test_margin_doctor_reports_the_crash_and_exits_3(
    crashing_embedded_server: list[list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--no-cache"])
    out, err = capsys.readouterr()
    assert code == NO_MODEL == 3
    assert "embedded model installed: yes" in out
    assert_reported_as_a_crash(err, tmp_path)


def test_margin_review_says_no_paragraph_was_reviewed_and_exits_3(
    crashing_embedded_server: list[list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["review", str(FIXTURES / "markdown" / "short.md"), "--mode", "fast", "--no-cache"])
    out, err = capsys.readouterr()
    assert code == NO_MODEL
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("0 finding(s) in 0 reviewed paragraph(s); ")
    assert "could not be reviewed" in summary
    assert "no model answered" in err
    assert_reported_as_a_crash(err, tmp_path)
    assert len(crashing_embedded_server) == 1  # one crash, not one per paragraph


def test_a_server_that_dies_while_starting_is_reported_with_its_exit_status(
    crashing_embedded_server: list[list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CRASH_HOW", "start")
    code = main(["doctor", "--no-cache"])
    _, err = capsys.readouterr()
    assert code == NO_MODEL
    assert "crashed while starting" in err and "exited with status 3" in err
    assert "cannot load the model file" in err


def test_a_test_of_the_embedded_model_fails_when_the_model_never_answered() -> None:
    usage = Usage()
    usage.record(
        "reviewer", None, LLMError(FailureKind.CRASHED, "the embedded model server crashed", "reviewer")
    )
    with pytest.raises(AssertionError, match="never answered: reviewer: crashed"):
        assert_the_model_answered(usage)
    usage.record("reviewer", None, LLMError(FailureKind.INVALID_OUTPUT, "no JSON"))
    assert_the_model_answered(usage)  # it answered, if badly

"""`margin review` over a pile of manuscripts: reviewed concurrently, one JSON line per finding as each
paragraph's review ends, and resumable with --out (the store `margin eval` uses). The real CLI against a real
scripted endpoint on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_review_cli import FINDING_KEYS, quoting_reviewer, review, settings_file

from margin.server.cli.exit_status import OK as EXIT_OK
from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule

from conftest import FIXTURES, ScriptedFactory, without_nagle

MARKDOWN = FIXTURES / "markdown"


@pytest.fixture
def pile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of three Markdown manuscripts (the working directory is tmp_path)."""
    folder = tmp_path / "pile"
    folder.mkdir()
    text = (MARKDOWN / "short.md").read_text(encoding="utf-8")
    for number in (1, 2, 3):  # each abstract names its thesis, so that requests tell the files apart
        own = text.replace("We propose", f"In thesis {number} we propose", 1)
        (folder / f"thesis-{number}.md").write_text(own, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return folder


def findings_of(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_a_folder_of_manuscripts_is_reviewed_concurrently_one_jsonl_line_per_finding(
    scripted: ScriptedFactory, pile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = without_nagle(scripted(Rule(role="reviewer", respond=quoting_reviewer), latency=0.3))
    settings = settings_file(
        tmp_path, llm_endpoint=endpoint.base_url, llm_maxConcurrency=16, cache_enabled=False
    )
    code, out, err = review(capsys, pile, "--mode", "single", "--format", "jsonl", "--settings", settings)
    assert code == EXIT_OK, err
    lines = findings_of(out)
    files = {str(line["file"]) for line in lines}
    assert len(files) == 3 and len(lines) == len(endpoint.calls("reviewer"))  # every paragraph quotes one
    assert all(set(line) >= FINDING_KEYS for line in lines)
    # Concurrently across manuscripts: every abstract's review was asked for before the first one ended.
    calls = endpoint.calls("reviewer")
    first_end = min(call.finished for call in calls)
    theses = {n for call in calls for n in (1, 2, 3) if f"thesis {n} " in json.dumps(call.body)}
    early = {
        n
        for call in calls
        if call.started < first_end
        for n in (1, 2, 3)
        if f"thesis {n} " in json.dumps(call.body)
    }
    assert theses == early == {1, 2, 3}
    assert "3 manuscript(s)" in err


def test_findings_stream_out_before_the_last_review_ends(
    scripted: ScriptedFactory, pile: Path, tmp_path: Path
) -> None:
    fast = Rule(role="reviewer", respond=quoting_reviewer)
    endpoint = without_nagle(scripted(fast, latency=0.05, max_concurrency=1))
    settings = settings_file(tmp_path, llm_endpoint=endpoint.base_url, cache_enabled=False)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "margin.server.cli",
            "review",
            str(pile),
            "--mode",
            "single",
            "--format",
            "jsonl",
            "--settings",
            str(settings),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    first_at = time.monotonic()
    rest, err = process.communicate(timeout=60)
    assert process.returncode == EXIT_OK, err
    assert json.loads(first)["label"]
    total = len(endpoint.calls("reviewer"))
    # One request at a time: when the first line arrived, later reviews had not been asked for yet.
    asked_after = [call for call in endpoint.calls("reviewer") if call.started > first_at - 0.01]
    assert total >= 6 and len(asked_after) >= 2
    assert len(findings_of(first + rest)) == total


def test_out_resumes_without_asking_again_and_retries_failed_and_edited_paragraphs(
    scripted: ScriptedFactory, pile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failed_once: set[str] = set()

    def flaky(request: RecordedRequest) -> Reply:
        text = json.dumps(request.body)
        if "thesis 2 " in text and "failed" not in failed_once:
            failed_once.add("failed")
            return Reply(status=500, error_message="the server broke")
        return quoting_reviewer(request)

    endpoint = without_nagle(scripted(Rule(role="reviewer", respond=flaky)))
    settings = settings_file(tmp_path, llm_endpoint=endpoint.base_url, cache_enabled=False)
    out = tmp_path / "run"
    arguments = (pile, "--mode", "single", "--format", "jsonl", "--out", out, "--settings", settings)
    code, first_out, err = review(capsys, *arguments)
    first_calls = len(endpoint.calls("reviewer"))
    assert code != EXIT_OK and (out / "predictions.jsonl").is_file()  # one paragraph's call failed
    stored = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [record["status"] for record in stored].count("failed") == 1

    code, second_out, err = review(capsys, *arguments)
    assert code == EXIT_OK, err
    assert len(endpoint.calls("reviewer")) == first_calls + 1  # only the failed paragraph was asked again
    assert "not asked again" in err
    assert len(findings_of(second_out)) == len(findings_of(first_out)) + 1

    # An edited paragraph is reviewed again; the others still come from the store.
    edited = pile / "thesis-1.md"
    text = edited.read_text(encoding="utf-8")
    paragraphs = text.split("\n\n")
    longest = max(range(len(paragraphs)), key=lambda index: len(paragraphs[index]))
    paragraphs[longest] = paragraphs[longest].replace(" the ", " this ", 1)
    edited.write_text("\n\n".join(paragraphs), encoding="utf-8")
    code, third_out, err = review(capsys, *arguments)
    assert code == EXIT_OK, err
    assert len(endpoint.calls("reviewer")) == first_calls + 2
    assert len(findings_of(third_out)) == len(findings_of(second_out))


def test_a_different_mode_does_not_take_the_stores_paragraphs(
    scripted: ScriptedFactory, pile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = without_nagle(scripted(Rule(role="reviewer", respond=quoting_reviewer)))
    settings = settings_file(tmp_path, llm_endpoint=endpoint.base_url, cache_enabled=False)
    out = tmp_path / "run"
    review(capsys, pile, "--mode", "single", "--out", out, "--settings", settings)
    calls = len(endpoint.calls("reviewer"))
    code, _, err = review(capsys, pile, "--mode", "fast", "--out", out, "--settings", settings)
    assert code == EXIT_OK, err
    assert len(endpoint.calls("reviewer")) == 2 * calls


def test_out_refuses_a_link_in_place_of_its_store(
    pile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    target = tmp_path / "someone-elses.txt"
    target.write_text("keep me\n", encoding="utf-8")
    (out / "predictions.jsonl").symlink_to(target)
    code, _, err = review(capsys, pile, "--out", out, "--settings", settings_file(tmp_path))
    assert code == 2 and "not a file of margin's" in err
    assert target.read_text(encoding="utf-8") == "keep me\n"

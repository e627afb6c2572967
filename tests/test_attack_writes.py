"""Everything margin writes, attacked: outputs in folders that do not exist, under regular files, read-only or
full; outputs that are folders, pipes or links planted at predictable names; folders that go away while the
models work; stdout redirected to a full disk; dismissals in a workspace that cannot take them.

The rules checked: a bad output location is refused in one line, with the usage status, before any model call
(the scripted endpoint records every call); nothing existing is replaced without --force, and nothing is ever
written through a link; a write that fails after the model work keeps the text elsewhere and says where and
the OS's reason. The CLI runs as `main` in-process (as in test_rewrite_cli) or, where stdout itself must fail,
as a subprocess; dismissals go through a real language server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from test_eval import SIMPLIFICATION  # the same two pairs as the eval tests

from margin.server.cli import main
from margin.server.cli.exit_status import NOT_WRITTEN, USAGE
from margin.testing.scripted_agents import rewrite_rules
from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule, ScriptedEndpoint
from margin.workflows.feedback.dismissals import DismissalStore
from margin.workflows.rewrite.output import OutputProblem, check_output, create_beside, write_output

from conftest import FIXTURES, SCRIPTED_MODEL, ScriptedFactory

EXIT_OK = 0
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
AS_ROOT = "root writes into a chmod 0o555 folder; the cases with a regular file in the path cover this run"
# -- helpers -----------------------------------------------------------------------------------------------------


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path/work holds short.md; the working directory is tmp_path; margin's cache folder (where text that
    could not be written goes) is tmp_path/xdg-cache/margin."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    folder = tmp_path / "work"
    folder.mkdir()
    shutil.copy(FIXTURES / "markdown" / "short.md", folder / "short.md")
    settings_file(tmp_path)
    return folder


def unsaved(tmp_path: Path) -> list[Path]:
    """The files margin kept in its cache folder because they could not be written where asked."""
    folder = tmp_path / "xdg-cache" / "margin" / "unsaved"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def settings_file(tmp_path: Path) -> Path:
    settings = {
        "cache": {"path": str(tmp_path / "cache" / "llm-cache.sqlite3")},
        "llm": {"retries": 0, "timeoutSeconds": 5, "model": SCRIPTED_MODEL},
    }
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"margin": settings}), encoding="utf-8")
    return path


def run(
    capsys: pytest.CaptureFixture[str], endpoint: ScriptedEndpoint, tmp_path: Path, *arguments: str | Path
) -> tuple[int, str, str]:
    """`margin ARGUMENTS` in-process against `endpoint`; never a traceback."""
    common = ["--endpoint", endpoint.base_url, "--settings", str(tmp_path / "settings.json")]
    code = main([str(argument) for argument in (*arguments, *common)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


def leftovers(folder: Path) -> list[str]:
    """Temporary or probe files margin left behind."""
    return [p.name for p in folder.rglob(".*") if "margin-tmp" in p.name or "margin-probe" in p.name]


def swapping_folder(scripted: ScriptedFactory, folder: Path) -> ScriptedEndpoint:
    """The rewriting agents, plus a disaster: at the first model call `folder` (an output folder checked before
    the run) is moved away and a regular file takes its name, so that every write into it fails."""
    (answering,) = rewrite_rules()
    lock = threading.Lock()

    def respond(request: RecordedRequest) -> Reply:
        with lock:
            if folder.is_dir():
                folder.rename(folder.with_name(folder.name + "-moved"))
                folder.write_text("a file where the output folder was\n", encoding="utf-8")
        return answering.next_reply(request)

    return scripted(Rule(respond=respond))


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody but root can write into (restored afterwards so that tmp_path can be removed)."""
    if ROOT:
        pytest.skip(AS_ROOT)
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


# -- 1. outputs checked before any model call --------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    ["missing folder", "under a regular file", "a folder", "a pipe with --force", "existing, no --force"],
)
@pytest.mark.parametrize("option", ["-o", "--transcript"])
@pytest.mark.parametrize("command", ["simplify", "lay"])
def test_a_bad_output_is_refused_in_one_line_before_any_model_call(
    scripted: ScriptedFactory,
    capsys: pytest.CaptureFixture[str],
    work: Path,
    tmp_path: Path,
    command: str,
    option: str,
    where: str,
) -> None:
    endpoint = scripted(*rewrite_rules())
    (tmp_path / "a-file").write_text("mine\n", encoding="utf-8")
    force: list[str] = []
    if where == "missing folder":
        target, expected = tmp_path / "missing" / "dir" / "out.md", "the folder"
    elif where == "under a regular file":
        target, expected = tmp_path / "a-file" / "out.md", "is a file, not a folder"
    elif where == "a folder":
        target, expected = work, "is a folder; name a file to write"
    elif where == "a pipe with --force":
        target, expected, force = tmp_path / "pipe", "is not a regular file", ["--force"]
        os.mkfifo(target)
    else:
        target, expected = tmp_path / "a-file", "exists; choose another name or pass --force"
    before = sorted(p.name for p in tmp_path.rglob("*"))

    code, out, err = run(capsys, endpoint, tmp_path, command, work / "short.md", option, target, *force)

    assert (code, out) == (USAGE, "")
    assert err.count("\n") == 1 and err.startswith("margin: ") and expected in err, err
    assert str(target) in err
    assert endpoint.requests == []  # refused before any model call: no work to lose
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing created, no probe left
    assert (tmp_path / "a-file").read_text(encoding="utf-8") == "mine\n"


def test_the_same_file_for_output_and_transcript_is_refused(
    scripted: ScriptedFactory, capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path
) -> None:
    endpoint = scripted(*rewrite_rules())
    target = tmp_path / "both.md"
    code, _, err = run(
        capsys, endpoint, tmp_path, "lay", work / "short.md", "-o", target, "--transcript", target, "--force"
    )
    assert code == USAGE and "-o and --transcript both name" in err
    assert endpoint.requests == [] and not target.exists()


@pytest.mark.parametrize("option", ["-o", "--transcript"])
def test_a_read_only_folder_is_refused_before_any_model_call(
    scripted: ScriptedFactory,
    capsys: pytest.CaptureFixture[str],
    work: Path,
    tmp_path: Path,
    read_only: Path,
    option: str,
) -> None:
    endpoint = scripted(*rewrite_rules())
    code, out, err = run(
        capsys, endpoint, tmp_path, "simplify", work / "short.md", "--all", option, read_only / "out.md"
    )
    assert (code, out) == (USAGE, "")
    assert "Permission denied" in err and str(read_only) in err
    assert endpoint.requests == []


def test_lay_beside_a_file_in_a_read_only_folder_is_refused_before_any_model_call(
    scripted: ScriptedFactory, capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path, read_only: Path
) -> None:
    read_only.chmod(0o755)
    shutil.copy(work / "short.md", read_only / "short.md")
    read_only.chmod(0o555)
    endpoint = scripted(*rewrite_rules())
    code, _, err = run(capsys, endpoint, tmp_path, "lay", read_only / "short.md", "--iterations", "0")
    assert code == USAGE and "short-lay-article.md" in err and "Permission denied" in err
    assert endpoint.requests == []


@pytest.mark.parametrize("where", ["under a regular file", "a user's report", "a linked predictions file"])
def test_a_bad_eval_folder_is_refused_before_any_model_call(
    scripted: ScriptedFactory, capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path, where: str
) -> None:
    endpoint = scripted(*rewrite_rules())
    dataset = tmp_path / "pairs.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in SIMPLIFICATION), encoding="utf-8")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    out = tmp_path / "out"
    if where == "under a regular file":
        out = victim / "out"
    elif where == "a user's report":
        out.mkdir()
        (out / "report.md").write_text("the user's own report\n", encoding="utf-8")
    else:
        out.mkdir()
        (out / "predictions.jsonl").symlink_to(victim)

    code, out_text, err = run(capsys, endpoint, tmp_path, "eval", "soms", "--dataset", dataset, "--out", out)

    assert (code, out_text) == (USAGE, ""), err
    assert err.count("\n") == 1 and ("choose another --out" in err or "is a file, not a folder" in err), err
    assert endpoint.requests == []
    assert victim.read_text(encoding="utf-8") == "precious\n"
    if where == "a user's report":
        assert (out / "report.md").read_text(encoding="utf-8") == "the user's own report\n"


# -- 2. writes that fail after the model work keep the work ------------------------------------------------------


def test_simplify_keeps_the_file_when_its_folder_goes_away_during_the_run(
    scripted: ScriptedFactory, capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path
) -> None:
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    endpoint = swapping_folder(scripted, outputs)

    arguments = ("simplify", work / "short.md", "--all", "-o", outputs / "simple.md", "--no-cache")
    code, out, err = run(capsys, endpoint, tmp_path, *arguments)

    assert endpoint.requests, "the models worked"
    assert code == NOT_WRITTEN and out == ""
    assert f"cannot write the simplified file to {outputs / 'simple.md'}: [Errno 20] Not a directory" in err
    (kept,) = unsaved(tmp_path)
    assert kept.name.startswith("simple.unsaved-") and kept.suffix == ".md"
    assert f"saved to {kept} instead" in err
    # The same run with a usable output (the scripted agents answer the same) writes exactly what was kept.
    code, _, err = run(
        capsys, endpoint, tmp_path, "simplify", work / "short.md", "--all", "-o", tmp_path / "ok.md"
    )
    assert code == EXIT_OK, err
    assert kept.read_text(encoding="utf-8") == (tmp_path / "ok.md").read_text(encoding="utf-8")


def test_with_nowhere_to_keep_it_the_simplified_file_goes_to_stdout(
    scripted: ScriptedFactory,
    capsys: pytest.CaptureFixture[str],
    work: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "a-file").write_text("x\n", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file" / "cache"))  # no cache folder either
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    endpoint = swapping_folder(scripted, outputs)

    arguments = ("simplify", work / "short.md", "--all", "-o", outputs / "simple.md", "--no-cache")
    code, out, err = run(capsys, endpoint, tmp_path, *arguments)

    assert code == NOT_WRITTEN
    assert "[Errno 20] Not a directory, nor anywhere else; it follows on stdout" in err
    assert out.startswith("---\ntitle:") and "# Discussion" in out


def test_lay_keeps_the_article_when_the_transcript_cannot_be_written(
    scripted: ScriptedFactory, capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path
) -> None:
    transcripts = tmp_path / "transcripts"
    transcripts.mkdir()
    endpoint = swapping_folder(scripted, transcripts)

    arguments = ("lay", work / "short.md", "--iterations", "0", "--transcript", transcripts / "t.json")
    code, out, err = run(capsys, endpoint, tmp_path, *arguments)

    assert code == NOT_WRITTEN
    article = work / "short-lay-article.md"
    assert out == f"{article}\n" and article.read_text(encoding="utf-8").startswith("---\n")
    assert f"cannot write the transcript to {transcripts / 't.json'}: [Errno 20] Not a directory" in err
    (kept,) = unsaved(tmp_path)
    assert json.loads(kept.read_text(encoding="utf-8"))["method"] == "jrel"


def test_lay_keeps_the_article_when_its_output_folder_goes_away(
    scripted: ScriptedFactory, capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path
) -> None:
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    endpoint = swapping_folder(scripted, outputs)

    code, out, err = run(
        capsys, endpoint, tmp_path, "lay", work / "short.md", "--iterations", "0", "-o", outputs / "lay.md"
    )

    assert (code, out) == (NOT_WRITTEN, "")
    (kept,) = unsaved(tmp_path)
    assert f"saved to {kept} instead" in err
    assert "Early Stopping by Gradient Noise" in kept.read_text(encoding="utf-8")


def test_eval_keeps_its_predictions_and_reports_when_the_folder_goes_away(
    scripted: ScriptedFactory, capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path
) -> None:
    dataset = tmp_path / "pairs.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in SIMPLIFICATION), encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    endpoint = swapping_folder(scripted, out)

    code, table, err = run(capsys, endpoint, tmp_path, "eval", "soms", "--dataset", dataset, "--out", out)

    assert code == NOT_WRITTEN, err
    assert f"cannot append predictions to {out / 'predictions.jsonl'}: [Errno 20] Not a directory" in err
    assert "| margin (this run) |" in table  # the table is still printed
    kept = {path.name.split(".unsaved-")[0]: path for path in unsaved(tmp_path)}
    assert set(kept) == {"predictions", "summary", "report"}
    records = [json.loads(line) for line in kept["predictions"].read_text(encoding="utf-8").splitlines()]
    assert {record["id"] for record in records} == {"s1", "s2"}
    assert json.loads(kept["summary"].read_text(encoding="utf-8"))["completed"] == 2


def margin_process(
    tmp_path: Path, endpoint: ScriptedEndpoint, *arguments: str | Path
) -> subprocess.CompletedProcess[str]:
    """The real CLI in its own process, its stdout on /dev/full: every write to it fails with ENOSPC."""
    command = [sys.executable, "-c", "import sys; from margin.server.cli import main; sys.exit(main())"]
    common = ["--endpoint", endpoint.base_url, "--settings", str(tmp_path / "settings.json")]
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg-cache")}
    with open("/dev/full", "w") as full:
        return subprocess.run(
            [*command, *map(str, arguments), *common],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux) to fill stdout's disk")
def test_simplify_keeps_the_paragraph_when_stdout_is_on_a_full_disk(
    scripted: ScriptedFactory, work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = scripted(*rewrite_rules())

    done = margin_process(tmp_path, endpoint, "simplify", work / "short.md", "--paragraph", "2")

    assert done.returncode == NOT_WRITTEN, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert "cannot print the simplified paragraph: [Errno 28] No space left on device" in done.stderr
    (kept,) = unsaved(tmp_path)
    assert kept.name.startswith("short-simplified.unsaved-") and f"saved to {kept}" in done.stderr
    _, printed, _ = run(capsys, endpoint, tmp_path, "simplify", work / "short.md", "--paragraph", "2")
    assert kept.read_text(encoding="utf-8") == printed


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux) to fill stdout's disk")
def test_review_keeps_its_sarif_when_stdout_is_on_a_full_disk(
    scripted: ScriptedFactory, work: Path, tmp_path: Path
) -> None:
    endpoint = scripted(Rule(role="reviewer", replies=[Reply(json={"findings": []})]))

    done = margin_process(
        tmp_path, endpoint, "review", work / "short.md", "--mode", "single", "--format", "sarif"
    )

    assert done.returncode == NOT_WRITTEN, done.stderr
    assert endpoint.calls("reviewer") and "Traceback" not in done.stderr
    assert "cannot print the review: [Errno 28] No space left on device" in done.stderr
    (kept,) = unsaved(tmp_path)
    assert kept.suffix == ".sarif" and json.loads(kept.read_text(encoding="utf-8"))["version"] == "2.1.0"


# -- 3. one safe writer: no link followed, nothing replaced without force, atomic ------------------------------


def test_a_transcript_link_is_refused_without_force_and_replaced_not_followed_with_it(
    scripted: ScriptedFactory, capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path
) -> None:
    endpoint = scripted(*rewrite_rules())
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    planted = tmp_path / "t.json"
    planted.symlink_to(victim)
    arguments = ("simplify", work / "short.md", "--paragraph", "2", "--transcript", planted)

    code, _, err = run(capsys, endpoint, tmp_path, *arguments)
    assert code == USAGE and "exists" in err and endpoint.requests == []

    code, _, err = run(capsys, endpoint, tmp_path, *arguments, "--force")
    assert code == EXIT_OK, err
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert not planted.is_symlink() and json.loads(planted.read_text(encoding="utf-8"))["method"] == "soms"
    assert leftovers(tmp_path) == []


def test_a_link_planted_at_the_lay_article_name_is_passed_over(
    scripted: ScriptedFactory, capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path
) -> None:
    endpoint = scripted(*rewrite_rules())
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    (work / "short-lay-article.md").symlink_to(victim)
    (work / "short-lay-article-2.md").symlink_to(tmp_path / "dangling")

    code, out, err = run(capsys, endpoint, tmp_path, "lay", work / "short.md", "--iterations", "0")

    assert code == EXIT_OK, err
    assert out == f"{work / 'short-lay-article-3.md'}\n"
    assert victim.read_text(encoding="utf-8") == "precious\n" and not (tmp_path / "dangling").exists()
    assert leftovers(tmp_path) == []


def test_eval_replaces_a_linked_report_itself_not_what_it_points_at(
    scripted: ScriptedFactory, capsys: pytest.CaptureFixture[str], work: Path, tmp_path: Path
) -> None:
    endpoint = scripted(*rewrite_rules())
    dataset = tmp_path / "pairs.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in SIMPLIFICATION), encoding="utf-8")
    out = tmp_path / "out"
    assert run(capsys, endpoint, tmp_path, "eval", "soms", "--dataset", dataset, "--out", out)[0] == EXIT_OK
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    for name in ("summary.json", "report.md"):
        (out / name).unlink()
        (out / name).symlink_to(victim)

    code, _, err = run(capsys, endpoint, tmp_path, "eval", "soms", "--dataset", dataset, "--out", out)

    assert code == EXIT_OK, err
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["resumed"] == 2
    assert not (out / "report.md").is_symlink()
    assert leftovers(tmp_path) == []


def test_write_output_is_atomic_and_new_files_are_never_half_written(tmp_path: Path) -> None:
    """A new file appears whole under its name (linked from a finished temporary) or not at all."""
    target = tmp_path / "out.md"

    class Boom(Exception):
        pass

    def failing(path: Path) -> None:
        path.write_text("half", encoding="utf-8")
        raise Boom

    from margin.workflows.rewrite.output import write_file

    with pytest.raises(Boom):
        write_file(target, failing)
    assert not target.exists() and os.listdir(tmp_path) == []
    assert write_output(target, "whole") == target and target.read_text(encoding="utf-8") == "whole"
    with pytest.raises(FileExistsError, match="--force"):
        write_output(target, "again")
    assert create_beside(target, "next").name == "out-2.md"
    assert sorted(os.listdir(tmp_path)) == ["out-2.md", "out.md"]


def test_check_output_names_the_problem(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    for path, words in (
        (tmp_path / "nope" / "out.md", "does not exist"),
        (tmp_path / "file" / "out.md", "is a file, not a folder"),
        (tmp_path, "is a folder"),
        (tmp_path / "file", "exists"),
    ):
        with pytest.raises(OutputProblem, match=words):
            check_output(path)
    check_output(tmp_path / "file", force=True)
    check_output(tmp_path / "new.md")
    assert sorted(os.listdir(tmp_path)) == ["file"]  # the probe leaves nothing


# -- dismissals --------------------------------------------------------------------------------------------------


def test_a_dismissal_that_cannot_be_saved_raises_and_is_not_remembered(tmp_path: Path) -> None:
    (tmp_path / ".margin").write_text("a file where the folder would go\n", encoding="utf-8")
    store = DismissalStore(tmp_path)
    with pytest.raises(NotADirectoryError, match=r"\.margin is a file, not a folder"):
        store.dismiss("k", "Substance", "quote", "paragraph")
    assert not store.is_dismissed("k")  # the store does not claim what it could not save
    (tmp_path / ".margin").unlink()
    store.dismiss("k", "Substance", "quote", "paragraph")
    assert DismissalStore(tmp_path).is_dismissed("k")


def test_dismissals_are_never_written_through_links(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / ".margin").symlink_to(elsewhere, target_is_directory=True)  # shipped by a repository
    with pytest.raises(OSError, match="is a link"):
        DismissalStore(workspace).dismiss("k", "Substance", "quote", "paragraph")
    assert os.listdir(elsewhere) == []

    other = tmp_path / "other"
    (other / ".margin").mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    (other / ".margin" / "dismissed.json").symlink_to(victim)
    DismissalStore(other).dismiss("k", "Substance", "quote", "paragraph")
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert not (other / ".margin" / "dismissed.json").is_symlink()
    assert DismissalStore(other).is_dismissed("k")
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("how", ["a file named .margin", "a read-only workspace"])
async def test_dismissing_where_the_workspace_cannot_take_it_tells_the_user(
    scripted: ScriptedFactory, tmp_path: Path, how: str
) -> None:
    from test_lsp_review import (
        COMPARISON,
        DISMISS_FINDING,
        PAPER_FINDINGS,
        Reviewer,
        by_code,
        paper,
        review_server,
        tag_for,
    )

    workspace = tmp_path / "workspace"
    workspace.mkdir()
    if how == "a file named .margin":
        (workspace / ".margin").write_text("not a folder\n", encoding="utf-8")
        expected = ".margin is a file, not a folder"
    elif ROOT:
        pytest.skip(AS_ROOT)
    else:
        expected = "Permission denied"
    endpoint = scripted(Rule(role="reviewer", respond=Reviewer(PAPER_FINDINGS)))
    uri = (workspace / "paper.md").as_uri()
    async with review_server(workspace, endpoint.base_url, llm={"model": SCRIPTED_MODEL}) as client:
        client.open(uri, paper(tag_for(workspace)))
        shown = by_code(await client.published_findings(uri, 3))
        assert isinstance(shown[COMPARISON].data, dict)
        key: Any = shown[COMPARISON].data["dismissal"]
        if how == "a read-only workspace":
            workspace.chmod(0o555)
        try:
            answer = await client.execute(DISMISS_FINDING, uri, key)
        finally:
            workspace.chmod(0o755)

        assert answer == {"dismissed": False}  # an answer, not an internal error
        (message,) = [m for m in client.messages if "not dismissed" in m.message]
        assert message.type == types.MessageType.Error
        assert expected in message.message and "dismissed.json" in message.message
        await client.barrier(uri)
        assert COMPARISON in by_code(client.latest(uri))  # still shown: it was not dismissed

        # Once the workspace can take it, the same quick fix works.
        if how == "a file named .margin":
            (workspace / ".margin").unlink()
        assert await client.execute(DISMISS_FINDING, uri, key) == {"dismissed": True}
        assert (workspace / ".margin" / "dismissed.json").is_file()

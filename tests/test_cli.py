"""The `margin` command line: `check` in text and JSON, errors and exit codes, `--version`, `python -m`, and the
progress the model commands draw on a terminal."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from margin.server import __version__
from margin.server.cli import main
from margin.server.cli.exit_status import OK as EXIT_OK
from margin.server.cli.exit_status import UNREADABLE as EXIT_UNREADABLE
from margin.server.cli.exit_status import USAGE as EXIT_USAGE
from margin.server.cli.progress import TerminalProgress
from margin.workflows.manuscript.loader import ManuscriptLoader

from conftest import FIXTURES, REPO

PAPER = FIXTURES / "latex" / "paper" / "main.tex"
MARKDOWN = FIXTURES / "markdown" / "paper.md"
MANUBOT = FIXTURES / "markdown" / "manubot" / "content"
BINARY = FIXTURES / "broken" / "binary.tex"

_TEXT_PARAGRAPH_LINE = re.compile(r"^[ !] (?P<file>\S+):(?P<line>\d+):(?P<column>\d+) \[(?P<kind>\w+)\] ")


def run(capsys: pytest.CaptureFixture[str], *arguments: str | Path) -> tuple[int, str, str]:
    code = main([str(argument) for argument in arguments])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *arguments: str | Path) -> tuple[int, dict, str]:
    code, out, err = run(capsys, "check", *arguments, "--format", "json")
    return code, json.loads(out), err


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# -- JSON ---------------------------------------------------------------------------------------------------------


def test_check_json_has_one_entry_per_paragraph_with_the_documented_fields(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report, err = run_json(capsys, PAPER)
    assert code == EXIT_OK and err == ""
    assert set(report) >= {"paragraphs", "documents", "errors"}
    manuscript, _ = ManuscriptLoader().load_path(PAPER)
    assert len(report["paragraphs"]) == len(manuscript.paragraphs)
    for item, paragraph in zip(report["paragraphs"], manuscript.paragraphs, strict=True):
        assert set(item) >= {"file", "range", "section", "kind", "text", "readability"}
        assert Path(item["file"]).resolve() == Path(paragraph.file).resolve()
        assert item["range"] == {
            "start": {"line": paragraph.range.start.line, "character": paragraph.range.start.character},
            "end": {"line": paragraph.range.end.line, "character": paragraph.range.end.character},
        }
        assert item["section"] == list(paragraph.section)
        assert item["kind"] == paragraph.kind.value
        assert item["text"] == paragraph.text
        assert set(item["readability"]) >= {"fkgl", "cli", "dcrs"}
        assert all(isinstance(item["readability"][key], int | float) for key in ("fkgl", "cli", "dcrs"))
    assert report["errors"] == []
    [document] = report["documents"]
    assert document["title"] == manuscript.title
    assert document["paragraphs"] == len(manuscript.paragraphs)
    assert len(document["files"]) == 6
    assert document["problems"] == []


def test_check_json_sections_and_kinds_for_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = run_json(capsys, MARKDOWN)
    assert code == EXIT_OK
    kinds = {item["kind"] for item in report["paragraphs"]}
    assert kinds == {"paragraph", "list_item", "caption", "footnote", "quote"}
    assert ["Methods", "Graph construction", "Message passing"] in [
        item["section"] for item in report["paragraphs"]
    ]
    assert report["documents"][0]["title"] == "Mesh-Free Graph Surrogates for Transient Groundwater Flow"


def test_check_json_is_valid_unicode_json(capsys: pytest.CaptureFixture[str]) -> None:
    _, report, _ = run_json(capsys, PAPER)
    assert any("Erdős" in item["text"] for item in report["paragraphs"])


def test_check_manubot_content_folder(capsys: pytest.CaptureFixture[str]) -> None:
    code, report, err = run_json(capsys, MANUBOT)
    assert code == EXIT_OK and err == ""
    files = {Path(item["file"]).name for item in report["paragraphs"]}
    assert {"01.abstract.md", "03.methods.md", "05.discussion.md"} <= files
    assert len(report["documents"]) == 1
    assert len(report["documents"][0]["files"]) == 6


def test_check_several_files_gives_one_document_each(capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = run_json(capsys, PAPER, MARKDOWN)
    assert code == EXIT_OK
    assert len(report["documents"]) == 2
    assert sum(document["paragraphs"] for document in report["documents"]) == len(report["paragraphs"])


def test_threshold_flags_hard_paragraphs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dense = (
        "Notwithstanding the aforementioned methodological considerations, heterogeneous computational "
        "infrastructures necessitate systematically operationalised multidimensional evaluation frameworks "
        "encompassing interdisciplinary epistemological perspectives and institutionalised organisational "
        "interoperability requirements, thereby substantiating previously unverifiable theoretical "
        "propositions concerning computational reproducibility."
    )
    path = _write(tmp_path / "two.tex", f"The cat sat on the mat.\n\n{dense}\n")
    _, report, _ = run_json(capsys, path, "--threshold", "12")
    assert [item["hard_to_read"] for item in report["paragraphs"]] == [False, True]
    code, out, _ = run(capsys, "check", path, "--threshold", "12")
    assert code == EXIT_OK
    flagged = [line for line in out.splitlines() if line.startswith("! ")]
    assert len(flagged) == 1
    assert "1 paragraph(s) above grade 12" in out


def test_out_of_range_threshold_is_reported_and_ignored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _write(tmp_path / "one.tex", "A plain sentence of words.\n")
    code, out, err = run(capsys, "check", path, "--threshold", "-5")
    assert code == EXIT_OK
    assert "threshold" in err
    assert "above grade 18" in out


def test_problems_are_reported_in_json_and_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _write(tmp_path / "main.tex", "Para one words.\n\n\\input{missing}\n")
    code, report, _ = run_json(capsys, path)
    assert code == EXIT_OK
    [problem] = report["documents"][0]["problems"]
    assert problem["message"] == "Included file not found: missing"
    assert problem["range"]["start"] == {"line": 2, "character": 0}
    code, out, _ = run(capsys, "check", path)
    assert "main.tex:3: warning: Included file not found: missing" in out


def test_problem_file_is_a_path_like_paragraph_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _write(tmp_path / "main.tex", "Para one words.\n\n\\input{missing}\n")
    _, report, _ = run_json(capsys, path)
    assert report["documents"][0]["problems"][0]["file"] == report["paragraphs"][0]["file"]


# -- text ---------------------------------------------------------------------------------------------------------


def test_check_text_prints_a_line_per_paragraph(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "check", PAPER)
    assert code == EXIT_OK and err == ""
    manuscript, _ = ManuscriptLoader().load_path(PAPER)
    lines = out.splitlines()
    assert lines[0].startswith(manuscript.title or "")
    assert f"({len(manuscript.files)} file(s), {len(manuscript.paragraphs)} paragraphs)" in lines[0]
    matches = [match for line in lines if (match := _TEXT_PARAGRAPH_LINE.match(line))]
    assert len(matches) == len(manuscript.paragraphs)
    for match, paragraph in zip(matches, manuscript.paragraphs, strict=True):
        assert int(match["line"]) == paragraph.range.start.line + 1
        assert int(match["column"]) == paragraph.range.start.character + 1
        assert match["kind"] == paragraph.kind.value
    assert lines[-1].startswith("Document: FKGL")


# -- errors and usage ------------------------------------------------------------------------------------------------


def test_missing_and_binary_files_are_reported_and_the_rest_still_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere.tex"
    code, report, err = run_json(capsys, missing, BINARY, MARKDOWN)
    assert code == EXIT_UNREADABLE
    assert f"margin: {missing} does not exist" in err
    assert "binary.tex looks like a binary file" in err
    assert len(report["errors"]) == 2
    assert len(report["documents"]) == 1
    assert report["paragraphs"]


def test_missing_file_in_text_mode(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "check", tmp_path / "nowhere.md", MARKDOWN)
    assert code == EXIT_UNREADABLE
    assert "does not exist" in err
    assert "Mesh-Free Graph Surrogates" in out


def test_empty_folder_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "check", tmp_path)
    assert code == EXIT_UNREADABLE
    assert "no LaTeX root file or Markdown manuscript in this folder" in err


def test_invalid_utf8_is_a_warning_not_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, report, err = run_json(capsys, FIXTURES / "broken" / "latin1.tex")
    assert code == EXIT_OK
    assert "not valid UTF-8" in err
    assert report["paragraphs"]


def test_empty_file_checks_with_no_paragraphs(capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = run_json(capsys, FIXTURES / "broken" / "empty.tex")
    assert code == EXIT_OK
    assert report["paragraphs"] == []
    assert report["documents"][0]["paragraphs"] == 0


def test_broken_latex_is_checked_with_its_problems(capsys: pytest.CaptureFixture[str]) -> None:
    # fixtures/broken/unbalanced.tex crashed `margin check` with an IndexError before 2954b0f.
    code, report, err = run_json(capsys, FIXTURES / "broken" / "unbalanced.tex", MARKDOWN)
    assert code == EXIT_OK and "Traceback" not in err
    assert len(report["documents"]) == 2
    assert (
        report["documents"][0]["problems"][0]["message"] == "Included file not found: sections/does-not-exist"
    )


@pytest.mark.parametrize(
    "arguments",
    [
        [],
        ["bogus"],
        ["check"],
        ["check", "x.tex", "--format", "xml"],
        ["check", "x.tex", "--threshold", "high"],
        ["--no-such-option"],
    ],
    ids=["no-args", "unknown-command", "check-without-files", "bad-format", "bad-threshold", "bad-option"],
)
def test_bad_usage_exits_2_with_usage_on_stderr(
    capsys: pytest.CaptureFixture[str], arguments: list[str]
) -> None:
    code, out, err = run(capsys, *arguments)
    assert code == EXIT_USAGE
    assert "usage: margin" in err
    assert out == ""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == EXIT_OK
    assert out.strip() == f"margin {__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", __version__)


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", "--help")
    assert code == EXIT_OK
    assert "--format" in out and "--threshold" in out


# -- the real entry point, in a subprocess ----------------------------------------------------------------------------

_ENTRY = "from margin.server.cli import main; raise SystemExit(main())"


def test_entry_point_in_a_subprocess() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", _ENTRY, "check", str(MARKDOWN), "--format", "json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == EXIT_OK, completed.stderr
    report = json.loads(completed.stdout)
    assert (
        report["paragraphs"][0]["file"] == "fixtures/markdown/paper.md"
    )  # relative to the working directory
    assert report["paragraphs"][0]["section"] == ["Introduction"]


def test_entry_point_exit_codes_in_a_subprocess(tmp_path: Path) -> None:
    usage = subprocess.run([sys.executable, "-c", _ENTRY], capture_output=True, text=True, timeout=120)
    assert usage.returncode == EXIT_USAGE
    assert "usage: margin" in usage.stderr
    unreadable = subprocess.run(
        [sys.executable, "-c", _ENTRY, "check", str(tmp_path / "none.tex")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert unreadable.returncode == EXIT_UNREADABLE
    assert "does not exist" in unreadable.stderr
    assert "Traceback" not in unreadable.stderr


# -- one manuscript once ------------------------------------------------------------------------------------------


def paragraph_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if "[paragraph]" in line]


def test_every_file_of_a_manubot_folder_on_the_command_line_checks_the_manuscript_once(
    capsys: pytest.CaptureFixture[str], fixtures: Path
) -> None:
    content = fixtures / "markdown" / "manubot" / "content"
    files = sorted(content.glob("*.md"))
    assert len(files) > 2
    code, once, _ = run(capsys, "check", content)
    assert code == EXIT_OK
    code, out, err = run(capsys, "check", *files)
    assert code == EXIT_OK
    assert paragraph_lines(out) == paragraph_lines(once)  # not once per file
    assert f"{len(files) - 1} of the files given are part of a manuscript read once" in err


def test_an_included_file_given_beside_its_root_is_read_once_under_the_root(
    capsys: pytest.CaptureFixture[str], fixtures: Path
) -> None:
    root = fixtures / "latex" / "paper" / "main.tex"
    included = fixtures / "latex" / "paper" / "sections" / "method.tex"
    _, alone, _ = run(capsys, "check", root)
    for order in ((included, root), (root, included)):
        code, out, err = run(capsys, "check", *order)
        assert code == EXIT_OK
        assert paragraph_lines(out) == paragraph_lines(alone)
        assert "part of a manuscript read once" in err


def test_a_latex_project_folder_checks_its_root_and_says_what_it_skipped(
    capsys: pytest.CaptureFixture[str], fixtures: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    shutil.copytree(fixtures / "latex" / "paper", project)
    (project / "notes.txt").write_text("not a manuscript", encoding="utf-8")
    code, out, err = run(capsys, "check", project)
    _, alone, _ = run(capsys, "check", project / "main.tex")
    assert code == EXIT_OK
    assert paragraph_lines(out) == paragraph_lines(alone) and paragraph_lines(out)
    assert "skipped" in err and "notes.txt" in err and "references.bib" in err
    assert "LaTeX file(s) that are not a root" in err  # the sections, read through main.tex


def test_python_dash_m_runs_the_command_line() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "margin.server.cli", "check", str(MARKDOWN), "--format", "json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == EXIT_OK, completed.stderr
    assert json.loads(completed.stdout)["paragraphs"]
    usage = subprocess.run(
        [sys.executable, "-m", "margin.server.cli"], capture_output=True, text=True, timeout=120
    )
    assert usage.returncode == EXIT_USAGE and "usage: margin" in usage.stderr


# -- progress on a terminal ------------------------------------------------------------------------------------------


class Stream(io.StringIO):
    """stderr, as a terminal or not."""

    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


async def test_progress_of_counted_work_is_a_bar_that_ends_its_line() -> None:
    stream = Stream(terminal=True)
    progress = TerminalProgress("paper.md (fast)", unit="paragraphs", stream=stream)
    await progress.begin("Reviewing 0/4 paragraphs", 4)
    for done in range(1, 5):
        progress.step(f"Reviewing {done}/4 paragraphs", done)
    progress.end("Reviewed 4/4 paragraphs")
    drawn = stream.getvalue()
    assert drawn.split("\r")[1:] == [
        f"paper.md (fast) [{'#' * filled}{'.' * (30 - filled)}] {done}/4 paragraphs"
        + ("\n" if done == 4 else "")
        for done, filled in ((1, 7), (2, 15), (3, 22), (4, 30))
    ]


async def test_progress_of_counted_work_stopped_early_still_ends_its_line() -> None:
    stream = Stream(terminal=True)
    progress = TerminalProgress(unit="examples", stream=stream)
    await progress.begin("soms on cochrane", 3)
    progress.step("1/3 examples", 1)
    progress.end("cancelled")
    assert stream.getvalue() == f"\rsoms on cochrane [{'#' * 10}{'.' * 20}] 1/3 examples\n"


async def test_progress_of_uncounted_work_is_the_current_step_on_one_line_cleared_at_the_end() -> None:
    stream = Stream(terminal=True)
    progress = TerminalProgress(stream=stream)
    await progress.begin("paper.md (agentsimp)")
    progress.step("planner: reading the paragraph")
    progress.step("simplifier: " + "x" * 300)
    progress.end("done")
    first, second, cleared = stream.getvalue().split("\r")[1:]
    assert first == "\033[Kpaper.md (agentsimp) [1] planner: reading the paragraph"
    assert second.startswith("\033[Kpaper.md (agentsimp) [2] simplifier: xxx") and len("\r" + second) == 200
    assert cleared == "\033[K"


@pytest.mark.parametrize("total", [3, None])
async def test_progress_draws_nothing_when_stderr_is_not_a_terminal(total: int | None) -> None:
    stream = Stream(terminal=False)
    progress = TerminalProgress("paper.md", unit="paragraphs", stream=stream)
    await progress.begin("work", total)
    for done in range(1, 4):
        progress.step("a step", done)
    progress.end("done")
    assert stream.getvalue() == ""


async def test_progress_of_no_work_draws_nothing() -> None:
    stream = Stream(terminal=True)
    progress = TerminalProgress("paper.md", unit="paragraphs", stream=stream)
    await progress.begin("Reviewing 0/0 paragraphs", 0)
    progress.end("Reviewed 0/0 paragraphs")
    assert stream.getvalue() == ""


def test_progress_follows_stderr_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = Stream(terminal=True)
    monkeypatch.setattr(sys, "stderr", terminal)
    assert TerminalProgress().enabled
    monkeypatch.setattr(sys, "stderr", Stream(terminal=False))
    assert not TerminalProgress().enabled

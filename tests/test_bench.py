"""Smoke test of `python -m bench`: its cheapest sections run and report sane figures (not timings)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import system_bench  # a top-level module of the bench folder, as the scripts import each other


def test_cache_and_memory_sections_report_sane_figures(capsys: pytest.CaptureFixture[str]) -> None:
    status = system_bench.main(
        [
            "--json",
            "--sections",
            "cache,memory",
            "--review-paragraphs",
            "3",
            "--cache-modes",
            "single,full",
            "--latency",
            "0",
            "--documents",
            "2",
            "--no-distinct",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert status == 0, report["problems"]
    assert report["problems"] == []
    assert {row["section"] for row in report["rows"]} == {"cache", "memory"}
    assert all(set(row) == {"section", "measure", "value", "unit", "notes"} for row in report["rows"])

    single, full = report["sections"]["cache"]["results"]
    for result in (single, full):
        assert result["first_run"]["chat"] > 0
        assert result["identical_run"]["chat"] == 0  # a reopen: everything from the cache
        # One hit per answer: a request with n (the candidate plans) gave several answers.
        assert result["identical_run"]["cache_hits"] >= result["first_run"]["chat"]
        edited = result["after_edit"]
        assert edited["edited_paragraph"] == 2
        assert edited["edited_requests"] > 0
        assert edited["chat"] == edited["edited_requests"] + edited["other_requests"]
    assert single["first_run"]["chat"] == 3  # one reviewer call a paragraph
    assert single["after_edit"]["paragraphs_with_requests"] == [
        {"paragraph": 2, "edited": True, "requests": 1, "cache_hits": 0, "calls_by_role": {"reviewer": 1}}
    ]
    assert full["first_run"]["chat"] > 3 * 5  # planner, controller, investigator and reviewer calls

    (memory,) = report["sections"]["memory"]
    assert memory["documents"] == 2
    assert memory["diagnostics"] >= 0
    assert 20 < memory["rss_before_mib"] <= memory["vm_rss_mib"] <= memory["vm_hwm_mib"] < 4096


def test_bench_runs_as_a_package_and_as_a_script() -> None:
    for command in (
        [sys.executable, "-m", "bench", "--help"],
        [sys.executable, "bench/system_bench.py", "--help"],
        [sys.executable, "bench/cache_bench.py", "--help"],
    ):
        completed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert completed.returncode == 0, completed.stderr
        assert "--json" in completed.stdout

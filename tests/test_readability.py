"""Readability scores: plausible values, placeholders ignored, and no network or NLTK download needed."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from margin.workflows.manuscript.loader import ManuscriptLoader
from margin.workflows.readability import (
    Readability,
    ReadabilityCache,
    document_score,
    prose_for_metrics,
    score,
)

from conftest import FIXTURES

SIMPLE = "The cat sat on the mat. It was warm. We liked it."
DENSE = (
    "Notwithstanding the aforementioned methodological considerations, heterogeneous computational "
    "infrastructures necessitate systematically operationalised multidimensional evaluation frameworks "
    "encompassing interdisciplinary epistemological perspectives."
)


def test_simple_text_scores_lower_than_dense_text_on_every_metric() -> None:
    simple, dense = score(SIMPLE), score(DENSE)
    assert simple.fkgl < 4 < 16 < dense.fkgl
    assert simple.cli < dense.cli
    assert simple.dcrs < dense.dcrs
    assert simple.words == 12 and simple.sentences == 3
    assert simple.mean_sentence_length == 4.0
    assert dense.sentences == 1


def test_scores_are_finite_rounded_numbers() -> None:
    for text in (SIMPLE, DENSE, "One.", "Word"):
        result = score(text)
        for value in (result.fkgl, result.cli, result.dcrs, result.mean_sentence_length):
            assert isinstance(value, float) and math.isfinite(value)
            assert round(value, 2) == value


@pytest.mark.parametrize("placeholder", ["[math]", "[citation]", "[reference]", "[url]", "[code]"])
def test_placeholders_are_not_counted_as_words(placeholder: str) -> None:
    with_placeholders = score(f"The cat {placeholder} sat on the mat {placeholder}. It was warm.")
    without = score("The cat sat on the mat. It was warm.")
    assert with_placeholders == without
    assert with_placeholders.words == 9


def test_only_placeholders_or_nothing_scores_zero() -> None:
    empty = Readability(0.0, 0.0, 0.0, 0.0, 0, 0)
    assert score("") == empty
    assert score("   \n ") == empty
    assert score("[math] [citation], [reference]. [url] [code]") == Readability(0.0, 0.0, 0.0, 0.0, 0, 0)


def test_prose_for_metrics_strips_placeholders_and_white_space() -> None:
    assert prose_for_metrics("  As [citation] shows,\n  [math] is   small. ") == "As shows, is small."
    assert prose_for_metrics("[mathematics] stays") == "[mathematics] stays"


def test_cache_scores_each_text_once_and_evicts_least_recent() -> None:
    cache = ReadabilityCache(capacity=2)
    first = cache.score(SIMPLE)
    assert cache.score(SIMPLE) is first
    cache.score(DENSE)
    cache.score("A third short text.")
    assert cache.score(DENSE) == score(DENSE)
    assert cache.score(SIMPLE) == first  # evicted and recomputed, same value


def test_document_score_is_the_score_of_the_joined_paragraphs() -> None:
    assert document_score([SIMPLE, DENSE]) == score(SIMPLE + "\n" + DENSE)
    assert document_score([]) == score("")


def test_summary_and_json() -> None:
    result = score(SIMPLE)
    assert set(result.to_json()) == {"fkgl", "cli", "dcrs", "mean_sentence_length", "words", "sentences"}
    assert result.summary().startswith(f"FKGL {result.fkgl:.1f} · Coleman-Liau {result.cli:.1f}")
    assert result.summary().endswith("words per sentence")


def test_fixture_paragraphs_score_in_a_plausible_range() -> None:
    manuscript, _ = ManuscriptLoader().load_path(FIXTURES / "latex" / "paper" / "main.tex")
    grades = [score(paragraph.text).fkgl for paragraph in manuscript.paragraphs if len(paragraph.text) > 200]
    assert len(grades) > 20
    assert all(5 < grade < 30 for grade in grades), grades
    assert 10 < sum(grades) / len(grades) < 20


_SITECUSTOMIZE = """
import socket

def _refuse(*args, **kwargs):
    raise OSError("network access is disabled in this test")

socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
socket.create_connection = _refuse
socket.getaddrinfo = _refuse

try:
    import nltk
except ImportError:
    pass
else:
    def _no_download(*args, **kwargs):
        raise RuntimeError("nltk.download was called")

    nltk.download = _no_download
"""

_CHILD = """
import json, socket, sys
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
except OSError:
    pass
else:
    sys.exit("the network block is not in effect")
from margin.workflows.readability import score, warm_up
warm_up()
result = score(sys.argv[1])
print(json.dumps(result.to_json()))
"""


def test_scores_work_offline_without_nltk_data(tmp_path: Path) -> None:
    home = tmp_path / "home"
    nltk_data = tmp_path / "nltk_data_empty"
    site = tmp_path / "site"
    for folder in (home, nltk_data, site):
        folder.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(_SITECUSTOMIZE), encoding="utf-8")
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HTTP", "HTTPS", "NLTK", "PYTHON", "XDG")) and key.lower() != "all_proxy"
    }
    environment.update(
        HOME=str(home),
        NLTK_DATA=str(nltk_data),
        PYTHONPATH=str(site),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
    )
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD, DENSE],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == score(DENSE).to_json()
    assert "Traceback" not in completed.stderr
    created = [path for path in tmp_path.rglob("*") if "nltk" in path.name.lower() and path != nltk_data]
    assert created == []
    assert list(nltk_data.iterdir()) == []

"""A hostile document open in the editor must not freeze the others: over stdio against the real server, requests
about a small document are answered while a large pathological one is being parsed.

The issue's target is 100 ms on the machine it was measured on; the bound here is looser because CI machines are
slower and busier (bench/attack_bench.py prints the figures). Before the fix, documents under 512 KB were parsed
on the event loop and a 10k-deep nesting took seconds there, so every request waited that long.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

from attack_bench import nested, repeated, waits_while_parsing

MAX_WAIT_MS = 750


@pytest.mark.parametrize(
    ("name", "make", "suffix"),
    [
        ("2 MB of nested LaTeX quotes", nested("\\begin{quote}\n", "\\end{quote}\n"), "tex"),
        ("a 2 MB Markdown line of {", repeated("{"), "md"),
    ],
)
def test_requests_about_another_document_are_answered_while_a_hostile_one_parses(
    name: str, make: object, suffix: str
) -> None:
    assert callable(make)
    text = make(2_000_000)  # seconds of parsing, so that many requests overlap it
    result = asyncio.run(waits_while_parsing(text, suffix))
    assert result["requests"] >= 1, result
    assert result["wait_ms_max"] < MAX_WAIT_MS, (name, result)
    assert result["hostile_pull_s"] < 60, (name, result)

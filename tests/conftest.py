"""Shared test helpers: paths to fixtures and the command that starts margin's server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
SERVER_COMMAND = [sys.executable, "-m", "margin.server"]


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES

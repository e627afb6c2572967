"""Headless Chromium for the browser tests (the HTML report, VS Code in code-server): the system's Chromium driven
by Playwright, started so that it reaches for nothing on the network, and a folder for the screenshots.

Playwright's own browser download (`playwright install`) is never used: Chromium comes from the system's packages
(Debian: `chromium`). Set MARGIN_SKIP_BROWSER_TESTS=1 to skip these tests on a machine without it; otherwise a
missing browser fails them with what to install, so that CI never passes without running them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

from code_server import Missing, chromium
from conftest import REPO

if TYPE_CHECKING:
    from playwright.sync_api import Browser

ARTIFACTS = Path(os.environ.get("MARGIN_TEST_ARTIFACTS", REPO / "test-artifacts"))
# The flags that keep Chromium off the network: without them it looks up Google's hosts at every start.
CHROMIUM_FLAGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
]


def artifacts(name: str) -> Path:
    """A folder for one test's screenshots, emptied first (test-artifacts/ at the repository's root)."""
    folder = ARTIFACTS / name
    if folder.exists():
        for old in folder.glob("*.png"):
            old.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def unavailable(missing: Exception) -> NoReturn:
    pytest.fail(f"{missing} (or set MARGIN_SKIP_BROWSER_TESTS=1 to skip the browser tests)")


def needed() -> None:
    """Skip (only when asked to) or fail when the browser tests cannot run here."""
    if os.environ.get("MARGIN_SKIP_BROWSER_TESTS") == "1":
        pytest.skip("MARGIN_SKIP_BROWSER_TESTS=1")


@contextlib.contextmanager
def headless_chromium() -> Iterator[Browser]:
    needed()
    try:
        executable = chromium()
    except Missing as missing:
        unavailable(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()

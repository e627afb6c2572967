"""Driving VS Code's workbench (in code-server) from headless Chromium the way a user does: the keyboard, the
mouse and what is on the screen. What the editor shows is read from its DOM: a squiggle is a decoration
element whose pixels are matched to the characters drawn above it, so "under the right words" means exactly
that."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

if TYPE_CHECKING:
    from playwright.sync_api import Page

T = TypeVar("T")
WAIT_S = 60.0  # only turns a hang into a failure

# For every squiggle of a kind in the active editor: its line number and the characters drawn above it. Monaco
# draws text in .view-line elements and decorations in .view-overlays, both placed by their top; a character
# belongs to a squiggle when its centre lies within the squiggle's horizontal extent.
_SQUIGGLES_JS = """
(kind) => {
  const editor = document.querySelector('.editor-group-container.active .monaco-editor:not(.inline-diff-editor)');
  if (!editor) return [];
  const rows = (selector) => [...editor.querySelectorAll(selector)].map((el) => [el, el.getBoundingClientRect()]);
  const lines = rows('.view-lines .view-line');
  const numbers = rows('.margin-view-overlays .line-numbers');
  const range = document.createRange();
  const found = [];
  for (const [el, box] of rows('.view-overlays .cdr.squiggly-' + kind)) {
    const middle = box.top + box.height / 2;
    const line = lines.find(([, b]) => b.top <= middle && middle < b.bottom);
    const number = numbers.find(([, b]) => b.top <= middle && middle < b.bottom);
    if (!line) continue;
    let text = '';
    const walker = document.createTreeWalker(line[0], NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.length; i++) {
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const c = range.getBoundingClientRect();
        const centre = (c.left + c.right) / 2;
        if (centre >= box.left && centre <= box.right) text += node.data[i];
      }
    }
    found.push({line: number ? Number(number[0].textContent) : -1, top: box.top, left: box.left,
                width: box.width, height: box.height, text: text.replace(/\\u00a0/g, ' ')});
  }
  found.sort((a, b) => a.top - b.top || a.left - b.left);
  return found;
}
"""

# The text of a line of the active editor as drawn (the line must be on screen).
_LINE_TEXT_JS = """
(wanted) => {
  const editor = document.querySelector('.editor-group-container.active .monaco-editor');
  if (!editor) return null;
  const lines = [...editor.querySelectorAll('.view-lines .view-line')];
  const numbers = [...editor.querySelectorAll('.margin-view-overlays .line-numbers')];
  const number = numbers.find((el) => Number(el.textContent) === wanted);
  if (!number) return null;
  const top = number.getBoundingClientRect().top;
  const line = lines.find((el) => Math.abs(el.getBoundingClientRect().top - top) < 2);
  return line ? line.textContent.replace(/\\u00a0/g, ' ') : null;
}
"""


@dataclass(frozen=True, slots=True)
class Squiggle:
    line: int  # 1-based, as the editor numbers lines
    text: str
    top: float
    left: float
    width: float
    height: float

    @property
    def centre(self) -> tuple[float, float]:
        return self.left + self.width / 2, self.top + self.height / 2


@dataclass
class Workbench:
    page: Page
    screenshots: Path
    taken: list[Path] = field(default_factory=list)
    margin_log: Callable[[], str] = str  # margin's output channel, as VS Code keeps it
    page_errors: list[str] = field(default_factory=list)  # uncaught errors in the workbench's page

    def __post_init__(self) -> None:
        self.page.on("pageerror", lambda error: self.page_errors.append(str(error)))

    # -- waiting ---------------------------------------------------------------------------------------------

    def until(self, probe: Callable[[], T | None], what: str, timeout: float = WAIT_S) -> T:
        """Poll `probe` until it returns something truthy; fail with `what` (and a screenshot) after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            if time.monotonic() > deadline:
                shot = self.screenshot(f"timeout-{len(self.taken):02d}")
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (screen: {shot})")
            self.page.wait_for_timeout(200)

    def screenshot(self, name: str) -> Path:
        path = self.screenshots / f"{len(self.taken) + 1:02d}-{name}.png"
        self.page.screenshot(path=str(path))
        self.taken.append(path)
        return path

    # -- the workbench -------------------------------------------------------------------------------------

    def open_folder(self, base_url: str, folder: Path, first_file: str) -> None:
        self.page.goto(f"{base_url}/?folder={quote(str(folder))}")
        self.page.wait_for_selector(".monaco-workbench", timeout=WAIT_S * 1000)
        # The explorer lists the folder once the file service is up; Quick Open needs it.
        self.page.wait_for_selector(
            f".explorer-folders-view .monaco-list-row[aria-label*='{first_file}']", timeout=WAIT_S * 1000
        )

    def quick_open(self, name: str) -> None:
        self._pick("Control+P", name, "Quick Open")
        self.until(lambda: self.active_tab() == name, f"the editor tab {name}")

    def command(self, title: str) -> None:
        """Run a command from the Command Palette by its title, as a user types it."""
        self._pick("Control+Shift+P", title, "the Command Palette")

    def _pick(self, keys: str, label: str, where: str) -> None:
        """Open a quick pick with `keys`, type `label` and take it once it is the one offered first."""
        self.page.keyboard.press(keys)
        self.page.wait_for_selector(".quick-input-widget input", state="visible")
        self.page.keyboard.type(label)
        self.until(lambda: self._focused_pick() == label, f"{where} to offer {label} first")
        self.page.keyboard.press("Enter")

    def _focused_pick(self) -> str | None:
        label: str | None = self.page.evaluate(
            """() => { const row = document.querySelector('.quick-input-list .monaco-list-row.focused .label-name');
                       return row ? row.textContent.trim() : null; }"""
        )
        return label

    def active_tab(self) -> str | None:
        name: str | None = self.page.evaluate(
            """() => { const tab = document.querySelector('.editor-group-container.active .tab.active .label-name');
                       return tab ? tab.textContent : null; }"""
        )
        return name

    def show_tab(self, name: str) -> None:
        self.page.locator(".editor-group-container.active .tab", has_text=name).first.click()
        self.until(lambda: self.active_tab() == name, f"the editor tab {name}")

    def dirty(self, name: str) -> bool:
        """Whether the tab shows unsaved changes."""
        tab = self.page.locator(".editor-group-container.active .tab", has_text=name).first
        return "dirty" in (tab.get_attribute("class") or "")

    def status_item(self, item_id: str) -> str:
        text: str = self.page.evaluate(
            "(id) => { const item = document.getElementById(id); return item ? item.innerText : ''; }",
            item_id,
        )
        return text

    # -- the editor ----------------------------------------------------------------------------------------

    def focus_editor(self) -> None:
        self.page.locator(".editor-group-container.active .monaco-editor .view-lines").first.click()

    def go_to(self, line: int, column: int = 1) -> None:
        self.focus_editor()
        self.page.keyboard.press("Control+G")
        self.page.wait_for_selector(".quick-input-widget input", state="visible")
        self.page.keyboard.type(f"{line}:{column}")
        self.page.keyboard.press("Enter")
        self.until(lambda: self.line_text(line) is not None, f"line {line} on screen")

    def line_text(self, line: int) -> str | None:
        text: str | None = self.page.evaluate(_LINE_TEXT_JS, line)
        return text

    def squiggles(self, kind: str) -> list[Squiggle]:
        """kind: error, warning, info or hint."""
        found: list[dict[str, Any]] = self.page.evaluate(_SQUIGGLES_JS, kind)
        return [
            Squiggle(item["line"], item["text"], item["top"], item["left"], item["width"], item["height"])
            for item in found
        ]

    def hover(self, squiggle: Squiggle, showing: list[str]) -> str:
        """Point at a squiggle; the hover's text once it shows every string of `showing` (a hover fills in its
        parts one after the other)."""
        self.page.mouse.move(1, 1)
        x, y = squiggle.centre
        self.page.mouse.move(x, y - 2)

        def shown() -> str | None:
            text: str | None = self.page.evaluate(
                """() => { const hover = document.querySelector('.monaco-hover:not(.hidden) .monaco-hover-content');
                           return hover && hover.offsetParent !== null ? hover.innerText : null; }"""
            )
            return text if text is not None and all(part in text for part in showing) else None

        return self.until(shown, f"a hover showing {showing}")

    # -- panels ---------------------------------------------------------------------------------------------

    def search_settings(self, query: str) -> None:
        """Open the Settings UI and search it."""
        self.command("Preferences: Open Settings (UI)")
        search = self.page.locator(".settings-editor .settings-header .suggest-input-container")
        search.wait_for(state="visible")
        search.click()
        self.page.keyboard.type(query)

    def open_problems(self) -> None:
        if not self.page.locator(".markers-panel").first.is_visible():
            self.page.keyboard.press("Control+Shift+M")
            self.page.wait_for_selector(".markers-panel", state="visible")

    def problems(self) -> list[tuple[str, str, str, str]]:
        """(message, source, code, position) of each problem in the Problems panel (opened if need be)."""
        self.open_problems()
        rows: list[list[str]] = self.page.evaluate(
            """() => [...document.querySelectorAll('.markers-panel .monaco-list-row')]
                 .filter((row) => row.querySelector('.marker-message'))
                 .map((row) => ['.marker-message', '.marker-source', '.marker-code', '.marker-line']
                   .map((part) => { const el = row.querySelector(part); return el ? el.innerText : ''; }))"""
        )
        return [(message, source, code, position) for message, source, code, position in rows]

    def problem(self, source: str, code: str) -> tuple[str, str, str, str]:
        """The one problem with this source and code, once the Problems panel shows it."""
        matching = self.until(
            lambda: [entry for entry in self.problems() if entry[1:3] == (source, code)],
            f"a {source}({code}) problem in the Problems panel",
        )
        assert len(matching) == 1, matching
        return matching[0]

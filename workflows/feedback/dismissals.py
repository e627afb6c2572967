"""Dismissed findings, stored in the workspace (.margin/dismissed.json) and keyed by content, not position:
paragraph text + label + quote. A dismissal survives edits anywhere else in the document."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import re
import threading
import time
from pathlib import Path
from typing import Any

from margin.workflows.rewrite.output import write_output

log = logging.getLogger("margin.feedback.dismissals")
FOLDER = ".margin"
FILE = "dismissed.json"


def dismissal_key(paragraph_text: str, label: str, quote: str) -> str:
    def normal(text: str) -> str:
        return re.sub(r"\s+", " ", text).strip().casefold()

    material = "\x1f".join((normal(paragraph_text), label, normal(quote)))
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:32]


class DismissalStore:
    def __init__(self, folder: Path) -> None:
        self.path = folder / FOLDER / FILE
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] | None = None

    def _load(self) -> dict[str, dict[str, Any]]:
        if self._entries is not None:
            return self._entries
        entries: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                for item in data.get("dismissed", []):
                    if isinstance(item, dict) and isinstance(item.get("key"), str):
                        entries[item["key"]] = item
            except (OSError, ValueError, AttributeError, TypeError) as error:
                # Keep the unreadable file for the user and start a new one beside it.
                aside = self.path.with_name(f"{FILE}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}")
                log.warning("%s is unreadable (%s); moved to %s", self.path, error, aside.name)
                with contextlib.suppress(OSError):
                    self.path.replace(aside)
        self._entries = entries
        return entries

    def is_dismissed(self, key: str) -> bool:
        with self._lock:
            return key in self._load()

    def dismiss(self, key: str, label: str, quote: str, paragraph_excerpt: str) -> None:
        with self._lock:
            self._entries = (
                None  # another store (an editor, the CLI) may have written since: merge, not clobber
            )
            entries = self._load()
            entries[key] = {
                "key": key,
                "label": label,
                "quote": quote,
                "paragraph": paragraph_excerpt[:160],
                "dismissed": time.strftime("%Y-%m-%dT%H:%M:%S"),
            }
            try:
                self._write(entries)
            except OSError:
                # Not saved (a read-only workspace, a full disk): the store must not claim it is dismissed.
                self._entries = None
                raise

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        folder = self.path.parent
        if folder.is_symlink():
            # A repository could ship .margin as a link to elsewhere: margin writes only inside the workspace.
            raise OSError(errno.ELOOP, f"{folder} is a link; margin writes dismissals only in a real folder")
        if folder.exists() and not folder.is_dir():
            # mkdir would say "File exists", which tells the user nothing
            raise NotADirectoryError(errno.ENOTDIR, f"{folder} is a file, not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        payload = json.dumps({"dismissed": list(entries.values())}, indent=2, ensure_ascii=False) + "\n"
        # Atomic (a crash never leaves half a file) and never through a link planted at a known name.
        write_output(self.path, payload, force=True)

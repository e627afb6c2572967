"""A persistent, content-addressed cache of model responses in SQLite.

Key: model, role, messages, sampling parameters and schema, hashed. The file lives in the user cache directory
with mode 0600, is bounded in size (least recently used rows go first), works with several processes at once
(WAL journal, busy timeout), and is rebuilt if it is corrupt. Calls are synchronous and short; the client runs
them in a worker thread so the event loop never waits on the disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir

log = logging.getLogger("margin.llm.cache")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    size INTEGER NOT NULL,
    accessed REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_accessed ON responses (accessed);
"""
_EVICT_EVERY = 32  # inserts between size checks


class CacheUnusable(Exception):
    pass


def default_cache_path() -> Path:
    return Path(user_cache_dir("margin", appauthor=False)) / "llm-cache.sqlite3"


def cache_key(
    model: str,
    role: str,
    messages: tuple[dict[str, str], ...] | list[dict[str, str]],
    parameters: dict[str, Any],
    schema: dict[str, Any] | None,
) -> str:
    material = json.dumps(
        {
            "model": model,
            "role": role,
            "messages": list(messages),
            "parameters": parameters,
            "schema": schema,
        },
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, path: Path | None = None, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.path = path or default_cache_path()
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._inserts = 0
        self._unusable = False

    # -- connection ---------------------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None:
            return self._connection
        if self.path.is_dir():
            raise CacheUnusable(f"{self.path} is a directory")
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.path.exists():
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        os.chmod(self.path, 0o600)
        connection = sqlite3.connect(self.path, timeout=10, check_same_thread=False, isolation_level=None)
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.executescript(_SCHEMA)
            connection.execute("SELECT count(*) FROM responses").fetchone()
        except sqlite3.DatabaseError:
            connection.close()
            raise
        for sidecar in (
            self.path.with_name(self.path.name + "-wal"),
            self.path.with_name(self.path.name + "-shm"),
        ):
            if sidecar.exists():
                os.chmod(sidecar, 0o600)
        self._connection = connection
        return connection

    def _rebuild(self, error: Exception) -> sqlite3.Connection:
        """Move a corrupt file aside and start an empty cache: a cache is never worth failing a run for."""
        log.warning("model cache %s is unreadable (%s); starting a new one", self.path, error)
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
            self._connection = None
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for suffix in ("", "-wal", "-shm"):
            broken = self.path.with_name(self.path.name + suffix)
            if broken.is_file():
                broken.replace(broken.with_name(f"{broken.name}.corrupt-{stamp}"))
        return self._connect()

    def _run(self, action: Any) -> Any:
        with self._lock:
            if self._unusable:
                return None
            try:
                return action(self._connect())
            except (CacheUnusable, OSError) as error:
                # A location we cannot use (a directory, a file where a folder should be, no permission):
                # carry on without a cache, and say so once.
                self._unusable = True
                log.warning("model cache disabled: cannot use %s (%s)", self.path, error)
                return None
            except sqlite3.DatabaseError as error:
                if isinstance(error, sqlite3.OperationalError) and "locked" in str(error):
                    log.info("model cache busy (%s); skipping it for this call", error)
                    return None
                try:
                    return action(self._rebuild(error))
                except sqlite3.Error as again:
                    log.warning("model cache unusable (%s); continuing without it", again)
                    return None

    # -- operations ---------------------------------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        def action(connection: sqlite3.Connection) -> dict[str, Any] | None:
            row = connection.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            connection.execute("UPDATE responses SET accessed = ? WHERE key = ?", (time.time(), key))
            try:
                value = json.loads(row[0])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None

        return self._run(action)

    def put(self, key: str, value: dict[str, Any]) -> None:
        text = json.dumps(value, ensure_ascii=False)

        def action(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT OR REPLACE INTO responses (key, value, size, accessed) VALUES (?, ?, ?, ?)",
                (key, text, len(text.encode("utf-8")), time.time()),
            )
            self._inserts += 1
            if self._inserts % _EVICT_EVERY == 1:
                self._evict(connection)

        self._run(action)

    def _evict(self, connection: sqlite3.Connection) -> None:
        total = connection.execute("SELECT coalesce(sum(size), 0) FROM responses").fetchone()[0]
        if total <= self.max_bytes:
            return
        target = int(self.max_bytes * 0.9)
        rows = connection.execute("SELECT key, size FROM responses ORDER BY accessed ASC").fetchall()
        doomed = []
        for key, size in rows:
            if total <= target:
                break
            doomed.append((key,))
            total -= size
        connection.executemany("DELETE FROM responses WHERE key = ?", doomed)

    def evict_now(self) -> None:
        self._run(self._evict)

    def stats(self) -> dict[str, Any]:
        def action(connection: sqlite3.Connection) -> dict[str, Any]:
            count, size = connection.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM responses"
            ).fetchone()
            return {"path": str(self.path), "entries": count, "bytes": size, "max_bytes": self.max_bytes}

        return self._run(action) or {
            "path": str(self.path),
            "entries": 0,
            "bytes": 0,
            "max_bytes": self.max_bytes,
        }

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

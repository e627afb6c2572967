"""A persistent, content-addressed cache of model responses in SQLite.

Key: model, role, messages, sampling parameters and schema, hashed. The file lives in the user cache directory
with mode 0600, is bounded in size (least recently used rows go first), works with several processes at once
(WAL journal, busy timeout, retries), and is rebuilt if it is corrupt. Calls are synchronous and short; the
client runs them in a worker thread so the event loop never waits on the disk.

Contention: SQLite does not always call its busy handler. Switching a new file to WAL, or upgrading a read
lock to a write lock inside a transaction, fails at once with SQLITE_BUSY when another process holds the lock
(waiting could deadlock). So connection set-up and writes retry on their own until a deadline, and writes take
their lock up front (BEGIN IMMEDIATE), where the busy handler does apply. A write is only given up after
_WRITE_PATIENCE, with a warning; a read gives up sooner, as a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
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
_WRITE_PATIENCE = 10.0  # seconds a write (or connection set-up) may wait for the lock before it is skipped
_READ_PATIENCE = 1.0  # seconds a read may wait: a miss costs one model call, a long stall costs more
# Seconds a hit's recency update may wait: it only guides eviction, and the hit is served either way.
_TOUCH_PATIENCE = 0.1
_FIRST_BACKOFF = 0.002  # seconds; doubled after each busy attempt, up to _MAX_BACKOFF
_MAX_BACKOFF = 0.05
# Result codes that mean "someone else holds the lock right now", never "the file is damaged".
_CONTENTION = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL}


class CacheUnusable(Exception):
    pass


_SQLITE_HEADER = b"SQLite format 3\x00"
_APPLICATION_ID = 0x6D72676E  # "mrgn" in the SQLite header: this database is margin's cache
_OUR_TABLES = {"responses", "responses_accessed"}


def _header(path: Path) -> bytes:
    """The first 100 bytes of a regular file (the SQLite header); never blocks on a pipe or a device."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise CacheUnusable(f"{path} is not a regular file")
        return os.read(descriptor, 100)
    finally:
        os.close(descriptor)


def _foreign(path: Path) -> str | None:
    """Why the existing file at `path` is not margin's cache, or None when it is (or is empty)."""
    header = _header(path)
    if not header:
        return None
    if not header.startswith(_SQLITE_HEADER):
        return "it is not an SQLite database"
    application = int.from_bytes(header[68:72], "big")
    if application == _APPLICATION_ID:
        return None
    if application != 0:
        return "it is another program's SQLite database"
    # No application id: a cache from before margin set one, or another program's database; its tables tell.
    try:
        connection = sqlite3.connect(path, timeout=_WRITE_PATIENCE)  # only read from
        try:
            names = {
                row[0]
                for row in connection.execute("SELECT name FROM sqlite_master")
                if not row[0].startswith("sqlite_")  # SQLite's own, such as a primary key's index
            }
        finally:
            connection.close()
    except sqlite3.Error as error:
        return None if _is_contention(error) else "it is an SQLite database margin cannot read"
    return None if names <= _OUR_TABLES else "it is another program's SQLite database"


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


def _is_contention(error: sqlite3.Error) -> bool:
    """Busy or locked: wait or skip, never rebuild. Extended codes (SQLITE_BUSY_RECOVERY...) share the low
    byte."""
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _CONTENTION:
        return True
    message = str(error)
    return "locked" in message or "busy" in message or "locking protocol" in message


class _Backoff:
    """Sleeps between attempts until a deadline; tells the caller when the time is up."""

    def __init__(self, patience: float) -> None:
        self.deadline = time.monotonic() + patience
        self._delay = _FIRST_BACKOFF

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def wait(self) -> bool:
        """Sleep a little and return True, or return False if the deadline has passed."""
        remaining = self.remaining()
        if remaining <= 0:
            return False
        time.sleep(min(self._delay, remaining))
        self._delay = min(self._delay * 2, _MAX_BACKOFF)
        return True


class ResponseCache:
    def __init__(self, path: Path | None = None, max_bytes: int = 256 * 1024 * 1024) -> None:
        # The default file is margin's own: a damaged one there is moved aside. A file the user named is
        # taken only if it is margin's cache: anything else (a document, another program's database) is left
        # exactly as it is, and the cache is off.
        self.own_location = path is None
        self.path = path or default_cache_path()
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._inserts = 0
        self._unusable = False
        self._busy_ms = -1  # the busy timeout last set on the connection

    # -- connection ---------------------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None:
            return self._connection
        if self.path.is_dir():
            raise CacheUnusable(f"{self.path} is a directory")
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
            os.close(os.open(self.path, flags, 0o600))
        except FileExistsError:
            reason = _foreign(self.path)
            if reason is not None and not self.own_location:
                raise CacheUnusable(
                    f"{self.path} is not margin's cache ({reason}); margin leaves it alone"
                ) from None
            if reason is not None:
                # margin's own location: moved aside and started afresh
                raise sqlite3.DatabaseError(reason) from None
        os.chmod(self.path, 0o600)
        # Several processes opening a new file at once collide on the WAL switch and the schema; those
        # collisions are not always handed to the busy handler, so retry here rather than lose the call.
        backoff = _Backoff(_WRITE_PATIENCE)
        while True:
            connection = sqlite3.connect(
                self.path, timeout=_WRITE_PATIENCE, check_same_thread=False, isolation_level=None
            )
            try:
                self._set_up(connection, backoff.remaining())
                break
            except sqlite3.DatabaseError as error:
                connection.close()
                if not (_is_contention(error) and backoff.wait()):
                    raise
        for sidecar in (
            self.path.with_name(self.path.name + "-wal"),
            self.path.with_name(self.path.name + "-shm"),
        ):
            if sidecar.exists():
                os.chmod(sidecar, 0o600)
        self._connection = connection
        self._busy_ms = -1
        return connection

    @staticmethod
    def _set_up(connection: sqlite3.Connection, patience: float) -> None:
        connection.execute(f"PRAGMA busy_timeout = {max(100, math.ceil(patience * 1000))}")
        # Only switch when needed: the switch takes an exclusive lock and skips the busy handler.
        if str(connection.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
            connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        present = {
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE name IN ('responses', 'responses_accessed')"
            )
        }
        marked = connection.execute("PRAGMA application_id").fetchone()[0] == _APPLICATION_ID
        if len(present) < 2 or not marked:

            def create(connection: sqlite3.Connection) -> None:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        connection.execute(statement)
                connection.execute(f"PRAGMA application_id = {_APPLICATION_ID}")

            ResponseCache._transaction(
                connection, create
            )  # the write lock up front: the busy handler applies
        connection.execute("SELECT count(*) FROM responses").fetchone()

    def _set_busy_timeout(self, connection: sqlite3.Connection, seconds: float) -> None:
        # Rounded up to a tenth of a second, so that calls in a row set the same value and skip the pragma.
        milliseconds = max(100, math.ceil(seconds * 10) * 100)
        if milliseconds != self._busy_ms:
            connection.execute(f"PRAGMA busy_timeout = {milliseconds}")
            self._busy_ms = milliseconds

    def _move_aside(self, error: Exception) -> None:
        """Move a corrupt file aside so that the next connection starts an empty cache: a cache is never worth
        failing a run for."""
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

    def _disable(self, error: Exception) -> None:
        # A location we cannot use (a directory, a file where a folder should be, no permission):
        # carry on without a cache, and say so once.
        self._unusable = True
        log.warning("model cache disabled: cannot use %s (%s)", self.path, error)

    def _run(self, action: Callable[[sqlite3.Connection], Any], *, write: bool) -> Any:
        with self._lock:
            if self._unusable:
                return None
            backoff = _Backoff(_WRITE_PATIENCE if write else _READ_PATIENCE)
            rebuilt = False
            while True:
                try:
                    connection = self._connect()
                    self._set_busy_timeout(connection, backoff.remaining())
                    if not write:
                        return action(connection)
                    return self._transaction(connection, action)
                except (CacheUnusable, OSError) as error:
                    self._disable(error)
                    return None
                except sqlite3.DatabaseError as error:
                    if _is_contention(error):
                        # Someone else holds the lock: wait and try again, never treat it as corruption.
                        if backoff.wait():
                            continue
                        if write:
                            log.warning(
                                "model cache busy for %g s (%s); skipped writing this entry",
                                _WRITE_PATIENCE,
                                error,
                            )
                        else:
                            log.info("model cache busy (%s); skipping it for this read", error)
                        return None
                    if rebuilt:
                        log.warning("model cache unusable (%s); continuing without it", error)
                        return None
                    rebuilt = True
                    try:
                        self._move_aside(error)
                    except OSError as again:
                        self._disable(again)
                        return None

    @staticmethod
    def _transaction(connection: sqlite3.Connection, action: Callable[[sqlite3.Connection], Any]) -> Any:
        # IMMEDIATE takes the write lock before anything is read, where the busy handler applies; a deferred
        # transaction would upgrade a read lock later, which fails at once under contention.
        connection.execute("BEGIN IMMEDIATE")
        try:
            result = action(connection)
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
            raise
        return result

    # -- operations ---------------------------------------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        def action(connection: sqlite3.Connection) -> dict[str, Any] | None:
            row = connection.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            try:
                self._set_busy_timeout(connection, _TOUCH_PATIENCE)
                connection.execute("UPDATE responses SET accessed = ? WHERE key = ?", (time.time(), key))
            except sqlite3.OperationalError as error:
                # Only recency for eviction is lost; the hit itself is still good.
                if not _is_contention(error):
                    raise
            try:
                value = json.loads(row[0])
            except ValueError:
                return None
            return value if isinstance(value, dict) else None

        return self._run(action, write=False)

    def put(self, key: str, value: dict[str, Any]) -> None:
        text = json.dumps(value, ensure_ascii=False)

        def action(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT OR REPLACE INTO responses (key, value, size, accessed) VALUES (?, ?, ?, ?)",
                (key, text, len(text.encode("utf-8")), time.time()),
            )
            nonlocal counted
            if not counted:  # a retried attempt is the same insert
                self._inserts += 1
                counted = True
            if self._inserts % _EVICT_EVERY == 1:
                self._evict(connection)

        counted = False
        self._run(action, write=True)

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
        self._run(self._evict, write=True)

    def stats(self) -> dict[str, Any]:
        def action(connection: sqlite3.Connection) -> dict[str, Any]:
            count, size = connection.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM responses"
            ).fetchone()
            return {"path": str(self.path), "entries": count, "bytes": size, "max_bytes": self.max_bytes}

        return self._run(action, write=False) or {
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

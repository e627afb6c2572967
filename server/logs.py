"""Logging: to stderr always, and to the editor's log (window/logMessage) once a client is connected.

stdout belongs to the protocol when serving over stdio, so nothing here ever writes to it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

LOGGER_NAME = "margin"
_LEVELS = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}


class EditorLogHandler(logging.Handler):
    """Forwards margin's log records to the client; a failure to send is never raised into the caller."""

    def __init__(self, send: Callable[[int, str], None]) -> None:
        super().__init__()
        self._send = send
        self._sending = False

    def emit(self, record: logging.LogRecord) -> None:
        if self._sending:  # a record logged while sending one must not loop
            return
        self._sending = True
        try:
            self._send(record.levelno, self.format(record))
        except Exception:
            pass  # the editor's log is best-effort; stderr still has the record
        finally:
            self._sending = False


def configure(level: str = "info") -> logging.Logger:
    logger = logging.getLogger(LOGGER_NAME)
    if not any(getattr(handler, "_margin_stderr", False) for handler in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler._margin_stderr = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False
    set_level(level)
    return logger


def set_level(level: str) -> None:
    logging.getLogger(LOGGER_NAME).setLevel(_LEVELS.get(level, logging.INFO))

"""What every command's run shares: its settings (a --settings file, then flags on top) and, for the commands
that call models, the event loop and the embedded model server's lifetime."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..settings import parse_settings
from .usage import UsageError

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from ..settings import Settings

T = TypeVar("T")


def settings_for(arguments: argparse.Namespace) -> Settings:
    """Settings for a CLI run: a settings file, then flags on top. Unusable values are reported on stderr."""
    raw: dict[str, object] = {}
    path: Path | None = getattr(arguments, "settings", None)
    if path is not None:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise UsageError(f"cannot read settings file {path}: {error}") from error
        if not isinstance(loaded, dict):
            raise UsageError(f"settings file {path} must hold a JSON object")
        raw.update(loaded.get("margin", loaded))
    flags = {
        # --endpoint may be repeated for a pool's replicas; once, it is one URL (or "auto").
        "llm.endpoint": _one_or_list(getattr(arguments, "endpoint", None)),
        "llm.model": getattr(arguments, "model", None),
        "readability.threshold": getattr(arguments, "threshold", None),
    }
    raw.update({key: value for key, value in flags.items() if value is not None})
    if getattr(arguments, "no_cache", False):
        raw["cache.enabled"] = False
    settings, problems = parse_settings(raw)
    for problem in problems:
        print(f"margin: {problem}", file=sys.stderr)
    return settings


def with_models(work: Coroutine[Any, Any, T]) -> T:
    """Run a command that calls models; the embedded model server, if it had to start, stops with the command."""
    import asyncio  # not at the top: it imports ssl, which `check` and `--version` do not need

    from margin.workflows.llm.embedded import stop_shared_server

    try:
        return asyncio.run(work)
    finally:
        stop_shared_server()


def _one_or_list(values: list[str] | None) -> str | list[str] | None:
    if not values:
        return None
    return values[0] if len(values) == 1 else values

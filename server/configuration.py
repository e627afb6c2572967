"""Which settings are in force: the user's (initializationOptions), the server-wide ones (didChangeConfiguration)
and each document's (workspace/configuration), with user-only settings taken only from the user."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from margin.workflows.manuscript.source import normalize_uri

from .settings import DEFAULTS, Settings, ignored_message, keep_user_values, parse_settings

log = logging.getLogger("margin.settings")

CONFIGURATION_TIMEOUT_S = 5.0  # for a document's settings; then the user's apply
Ask = Callable[[str], Awaitable[Any]]  # a document's settings from the client (workspace/configuration)
Tell = Callable[[str], None]  # a message for the user


class Configuration:
    def __init__(self, tell: Tell) -> None:
        self._tell = tell
        self.global_settings: Settings = DEFAULTS
        # What the editor's launch configuration sent (initializationOptions): the user's level, the only
        # source of user-only settings unless the client itself keeps workspaces from setting them.
        self.user_settings: Settings = DEFAULTS
        self.client_enforces_scopes = False
        self._ignored_reported: set[tuple[str, ...]] = set()
        self._documents: dict[str, Settings] = {}

    def apply_user(self, initialization_options: Any) -> None:
        """initializationOptions: the user's own settings, and whether the client enforces setting scopes."""
        if isinstance(initialization_options, dict):
            # The VS Code extension declares user-only settings machine-scoped, so VS Code never lets a
            # workspace set them; it says so here and its workspace/configuration answers are then trusted.
            self.client_enforces_scopes = initialization_options.get("enforcesSettingScopes") is True
        settings, problems = parse_settings(initialization_options)
        self.user_settings = settings
        self.global_settings = settings
        self.report(problems)

    def apply_global(self, raw: Any) -> None:
        """Settings pushed by a client without workspace/configuration (didChangeConfiguration)."""
        settings, problems = parse_settings(raw)
        self.global_settings = self.workspace_level(settings, "workspace/didChangeConfiguration")
        self.report(problems)

    def workspace_level(self, settings: Settings, source: str) -> Settings:
        """Settings from a channel a project can write: user-only values come from the user's settings."""
        if self.client_enforces_scopes:
            return settings
        settings, ignored = keep_user_values(settings, self.user_settings)
        if ignored and tuple(ignored) not in self._ignored_reported:
            self._ignored_reported.add(tuple(ignored))
            self._tell(ignored_message(ignored, source))
        return settings

    def report(self, problems: list[str]) -> None:
        """One message for a settings object however many problems it has (each is in the log)."""
        if not problems:
            return
        for problem in problems[1:]:
            log.info("%s", problem)
        more = (
            f" (and {len(problems) - 1} more problem(s) with the settings: see margin's log)"
            if len(problems) > 1
            else ""
        )
        self._tell(problems[0] + more)

    async def for_document(self, uri: str, ask: Ask | None) -> Settings:
        """Settings in force for a document: the client's answer scoped to it (`ask`), else the global ones."""
        key = normalize_uri(uri)
        cached = self._documents.get(key)
        if cached is not None:
            return cached
        settings = self.global_settings
        if ask is not None:
            try:
                answer = await asyncio.wait_for(ask(uri), timeout=CONFIGURATION_TIMEOUT_S)
                if answer and answer[0] is not None:
                    # Scoped to this document only: nothing here changes other documents' behaviour.
                    settings, problems = parse_settings(answer[0])
                    self.report(problems)
                    settings = self.workspace_level(settings, "workspace/configuration")
            except TimeoutError:
                log.info(
                    "the editor did not answer workspace/configuration in %g s; using the user's settings",
                    CONFIGURATION_TIMEOUT_S,
                )
            except Exception as error:  # a client that fails this request still gets diagnostics
                log.info("workspace/configuration failed (%s); using the user's settings", error)
        self._documents[key] = settings
        return settings

    def forget(self) -> None:
        self._documents.clear()

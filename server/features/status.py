"""The margin.status command, what an editor's status bar shows: the endpoint setting, the endpoints in use, why
models cannot run now (nothing answers, a crash) or None, and what each feature adds (the work running). No
network: only what the server already knows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Command, Feature

STATUS = "margin.status"


class Status(Feature):
    def commands(self) -> Mapping[str, Command]:
        return {STATUS: Command(self.status_command, cancellable=False)}

    async def status_command(self) -> dict[str, Any]:
        session = self.session
        endpoint = session.global_settings.llm.endpoint or "auto"
        # One string for the status bar: a pool's replicas joined.
        status: dict[str, Any] = {"endpoint": endpoint if isinstance(endpoint, str) else ", ".join(endpoint)}
        status.update(session.models.status())
        for feature in session.features:
            status.update(feature.status())
        return status

"""The editor's LLM clients: one per distinct LLM configuration (folders may set different ones), shared by every
feature, so all of them draw on the same endpoints, limits and outage records."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from margin.workflows.llm.client import LLMClient

    from .settings import Settings


class ModelClients:
    def __init__(self) -> None:
        self._clients: dict[str, LLMClient] = {}
        # Why no model can run at all (nothing answers and nothing is installed), once a feature found out.
        self.no_model: str | None = None
        self._said: set[str] = set()  # model problems the user was told of since the last retry

    def client(self, settings: Settings, asked: bool = False) -> LLMClient:
        """The client for these settings. `asked`: the user asked for this work, so endpoints found dead are
        tried again now. Only after `pipelines.ready()` (it imports the OpenAI client)."""
        from margin.workflows.llm.client import LLMClient

        config = settings.llm_config()
        key = repr(config)
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = LLMClient(config)
        if asked:
            client.retry_now()
            self._said.clear()
        return client

    def first_time(self, problem: str) -> bool:
        """Whether to tell the user of this problem: once until endpoints are tried again, not per request."""
        if problem in self._said:
            return False
        self._said.add(problem)
        return True

    def retry_now(self) -> None:
        """Settings changed: try every endpoint again."""
        for client in self._clients.values():
            client.retry_now()
        self._said.clear()

    def problem(self) -> str | None:
        """Why models cannot run now, if they cannot: the latest outage, else no model at all."""
        latest = max(
            (outage for client in self._clients.values() for outage in client.pool.current_outages()),
            key=lambda outage: outage.until,
            default=None,
        )
        return latest.error.message if latest is not None else self.no_model

    def endpoints_in_use(self) -> list[dict[str, str | None]]:
        """The endpoints resolved so far, with their model and structured-output mode (no network)."""
        return [
            {
                "url": endpoint.label,
                "model": client.config.default.model or (endpoint.models[0] if endpoint.models else None),
                "mode": endpoint.mode.value if endpoint.mode else None,
            }
            for client in self._clients.values()
            for endpoint in client.pool.endpoints()
        ]

    def status(self) -> dict[str, Any]:
        return {"endpoints": self.endpoints_in_use(), "problem": self.problem()}

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()

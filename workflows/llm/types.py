"""What pipelines hand to the LLM layer and what they get back, including its typed failures."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any

# Sent with every request so logs, proxies and the scripted test endpoint can tell agent roles apart.
ROLE_HEADER = "X-Margin-Role"


class Priority(IntEnum):
    """Lower goes first: an action the user just picked waits for no background review."""

    INTERACTIVE = 0
    BACKGROUND = 1


class StructuredMode(StrEnum):
    AUTO = "auto"
    JSON_SCHEMA = "json_schema"  # response_format json_schema: vLLM >= 0.12, llama.cpp's llama-server, OpenAI
    JSON_OBJECT = "json_object"  # response_format json_object with a schema: llama-cpp-python's server
    TEXT = "text"  # no constraint: the schema is in the prompt and JSON is extracted tolerantly


NEGOTIATION_ORDER = (StructuredMode.JSON_SCHEMA, StructuredMode.JSON_OBJECT, StructuredMode.TEXT)


@dataclass(frozen=True, slots=True)
class Request:
    """One model call. `messages` put stable text first (system prompt, schema, shared context) for vLLM's
    prefix cache; `schema` asks for JSON matching it; `schema_name` names it for the endpoint."""

    role: str
    messages: tuple[dict[str, str], ...]
    schema: dict[str, Any] | None = None
    schema_name: str = "answer"
    # A stricter schema for the decoder (not the prompt: see client._with_schema), e.g. with enums of the only valid choices: endpoints
    # that constrain decoding then cannot produce an invalid answer, while answers are still validated on our
    # side against `schema`, so that an endpoint without constraints gets the pipeline's own tolerant checks.
    decoding_schema: dict[str, Any] | None = None
    priority: Priority = Priority.BACKGROUND
    max_tokens: int | None = None
    # A pipeline's own sampling (the papers': JRE-L top_p 0.4 and frequency penalty 1, AgentSimp temperature
    # 0.6); None: the endpoint settings'. A role's route in margin.llm.roles overrides both.
    temperature: float | None = None
    top_p: float | None = None
    frequency_penalty: float | None = None
    # The longest answer text the pipeline can use (e.g. a rewrite at most a few times its original): a longer
    # one is refused as OVERSIZED before any check reads it. None: only the byte bound of max_tokens applies.
    max_answer_chars: int | None = None

    @property
    def schema_sent(self) -> dict[str, Any] | None:
        """The schema the endpoint and the model see."""
        return self.decoding_schema if self.decoding_schema is not None else self.schema


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    model: str
    role: str
    data: Any = None  # the validated JSON when the request had a schema
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    mode: StructuredMode | None = None
    repetition: str = ""  # how the answer repeated itself when its repeats had to be removed


class FailureKind(StrEnum):
    UNAVAILABLE = "unavailable"  # nothing answers at the endpoint
    CRASHED = "crashed"  # the embedded model server died (a signal or an exit status)
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    REJECTED = "rejected"  # the endpoint refused the request (4xx)
    TRUNCATED = "truncated"  # finish_reason "length" and no room to finish
    INVALID_OUTPUT = "invalid_output"  # no JSON, or JSON that breaks the schema, even after one repair
    EMPTY = "empty"
    # More than margin reads from a model: a body past the byte bound of max_tokens, JSON nested or sized past
    # what any schema needs, or an answer longer than the request's max_answer_chars.
    OVERSIZED = "oversized"


# Failures that say no model can answer at all, rather than that one call went wrong: an endpoint that gives one
# is left alone for a while (see EndpointPool's outages), and a run that meets one says so plainly.
NO_MODEL_FAILURES = frozenset({FailureKind.UNAVAILABLE, FailureKind.CRASHED})
# Failures where the model did answer, but with nothing usable.
ANSWERED_FAILURES = frozenset(
    {FailureKind.INVALID_OUTPUT, FailureKind.TRUNCATED, FailureKind.EMPTY, FailureKind.OVERSIZED}
)


class LLMError(Exception):
    """A typed failure of a model call. Pipelines catch this; it never reaches the editor."""

    def __init__(
        self, kind: FailureKind, message: str, role: str = "", attempts: int = 1, repeated: bool = False
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.role = role
        self.attempts = attempts
        self.repeated = repeated  # the same outage as an earlier call's, answered without a request

    @property
    def message(self) -> str:
        return str(self.args[0])

    def __str__(self) -> str:
        prefix = f"{self.role}: " if self.role else ""
        return f"{prefix}{self.kind.value}: {self.args[0]}"


@dataclass
class Usage:
    """What a run cost: network calls, cache hits, tokens, failures and wall time, overall and per role."""

    calls: int = 0  # answers that came from a model (a repaired answer is one call)
    requests: int = 0  # HTTP requests sent, counting retries, repairs and format negotiation
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    repairs: int = 0
    retries: int = 0
    repetition_retries: int = 0  # answers asked again because they repeated themselves
    wall_seconds: float = 0.0
    by_role: dict[str, dict[str, int]] = field(default_factory=dict)
    failure_kinds: dict[str, int] = field(default_factory=dict)
    first_failure: str = ""  # the first failed call's message, as the user should read it

    def record(self, role: str, completion: Completion | None, error: LLMError | None = None) -> None:
        counts = self.by_role.setdefault(role, {"calls": 0, "cache_hits": 0, "tokens": 0, "failures": 0})
        if error is not None:
            self.failures += 1
            counts["failures"] += 1
            self.failure_kinds[error.kind.value] = self.failure_kinds.get(error.kind.value, 0) + 1
            self.first_failure = self.first_failure or str(error)
            return
        assert completion is not None
        if completion.cached:
            self.cache_hits += 1
            counts["cache_hits"] += 1
            return
        self.calls += 1
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens
        counts["calls"] += 1
        counts["tokens"] += completion.prompt_tokens + completion.completion_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "requests": self.requests,
            "cache_hits": self.cache_hits,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "failures": self.failures,
            "repairs": self.repairs,
            "retries": self.retries,
            "repetition_retries": self.repetition_retries,
            "wall_seconds": round(self.wall_seconds, 3),
            "by_role": self.by_role,
            "failure_kinds": self.failure_kinds,
        }

    @property
    def answered(self) -> int:
        """Calls that got an answer from a model (now or from the cache)."""
        return self.calls + self.cache_hits

    @property
    def model_answers(self) -> int:
        """Answers a model generated in this run: usable ones, and those that broke the schema or were empty."""
        return self.calls + sum(self.failure_kinds.get(kind.value, 0) for kind in ANSWERED_FAILURES)

    @property
    def no_model_answered(self) -> bool:
        """Every call failed, and none because of what a model said: nothing answered at all."""
        return self.failures > 0 and self.model_answers + self.cache_hits == 0

    def summary(self) -> str:
        return (
            f"{self.calls} model calls ({self.requests} HTTP requests), {self.cache_hits} cache hits, {self.prompt_tokens} prompt + "
            f"{self.completion_tokens} completion tokens, {self.failures} failures, {self.wall_seconds:.1f} s"
        )

"""The one way pipelines call models: routed per role, negotiated, validated, retried, cached and accounted.

`await llm.complete(Request(...))` returns a Completion or raises LLMError, a typed failure the pipeline
decides about. Cancelling the awaiting task closes the HTTP request, which makes vLLM abort the generation.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import openai

from .cache import ResponseCache, cache_key
from .config import EndpointConfig, LLMConfig, RoleRoute
from .endpoints import Endpoint, EndpointPool, Replicas, unavailable_message
from .repetition import collapse, repetition
from .structured import parse_answer, schema_instructions
from .types import (
    NEGOTIATION_ORDER,
    NO_MODEL_FAILURES,
    ROLE_HEADER,
    Completion,
    FailureKind,
    LLMError,
    Priority,
    Request,
    StructuredMode,
    Usage,
)

log = logging.getLogger("margin.llm")

_RETRY_AFTER_CAP = 30.0
_BACKOFF_BASE = 0.5
_BACKOFF_CAP = 8.0
_CONTINUATIONS = 2  # a plain-text answer cut off by max_tokens is continued at most this often
_FORMAT_REJECTION_STATUSES = frozenset({400, 415, 422, 501})
# llama-cpp-python answers an unknown response_format with HTTP 500; a 500 counts as a refusal of the format
# only when its message is about the format, so that a passing server error does not downgrade the endpoint.
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema", "grammar", "guided", "structured")
# Sampling for a second try at an answer that repeated itself: standard OpenAI fields, which vLLM and
# llama-cpp-python's server also take.
_DISCOURAGE_REPEATS = {"frequency_penalty": 0.6, "presence_penalty": 0.4}
# What is read of an answer, in bytes of the HTTP body: a model cannot write more than max_tokens tokens, and a
# token is rarely more than a few bytes even JSON-escaped (a long run of spaces, "\u00e9" escapes), so a body
# past this is no answer to our request (a server ignoring max_tokens, or a hostile one). It is cut off
# while it arrives, never read whole. The floor leaves room for the envelope; the cap bounds every check after.
_BYTES_PER_TOKEN = 16
_MIN_ANSWER_BYTES = 64 * 1024
_MAX_ANSWER_BYTES = 4 * 1024 * 1024
# Checks of a longer answer (JSON extraction, schema validation, repetition) run in a worker thread: they are
# linear, but a few megabytes of text still take long enough to hold up an editor's requests.
_OFFLOAD_CHARS = 16 * 1024
_runs: contextvars.ContextVar[tuple[Usage, ...]] = contextvars.ContextVar("margin_llm_runs", default=())
_T = TypeVar("_T")


class _FormatRejected(Exception):
    """The endpoint refused the response_format we sent: try the next structured-output mode."""


class _ChoicesRefused(Exception):
    """The endpoint refused `n` (several choices in one request): ask once per choice."""


@dataclass(frozen=True, slots=True)
class _Call:
    """What every request of one completion shares: where it goes, with which settings, for which request."""

    replicas: Replicas
    config: EndpointConfig
    model: str
    request: Request


@dataclass(frozen=True, slots=True)
class _Answer:
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    others: tuple[tuple[str, str], ...] = ()  # further choices of a request with `n`: (text, finish_reason)


class LLMClient:
    def __init__(self, config: LLMConfig | None = None, cache: ResponseCache | None = None) -> None:
        self.config = config or LLMConfig()
        self.cache = cache
        if self.cache is None and self.config.cache_enabled:
            self.cache = ResponseCache(self.config.cache_path, self.config.cache_max_bytes)
        self.pool = EndpointPool()
        self.usage = Usage()

    async def close(self) -> None:
        await self.pool.close()
        if self.cache is not None:
            self.cache.close()

    # -- accounting ---------------------------------------------------------------------------------------------

    @contextmanager
    def measure(self) -> Iterator[Usage]:
        """Count the calls made inside this block (and in tasks it starts) into a Usage of their own."""
        usage = Usage()
        token = _runs.set((*_runs.get(), usage))
        started = time.perf_counter()
        try:
            yield usage
        finally:
            usage.wall_seconds = time.perf_counter() - started
            _runs.reset(token)

    def _record(self, role: str, completion: Completion | None, error: LLMError | None = None) -> None:
        for usage in (self.usage, *_runs.get()):
            usage.record(role, completion, error)

    def _count(self, field: str) -> None:
        for usage in (self.usage, *_runs.get()):
            setattr(usage, field, getattr(usage, field) + 1)

    # -- the call -----------------------------------------------------------------------------------------------

    async def complete(self, request: Request) -> Completion:
        completion = await self._guarded(request, self._complete(request))
        self._record(request.role, completion)
        return completion

    async def complete_choices(self, request: Request, count: int) -> tuple[list[Completion], list[LLMError]]:
        """`count` answers to one prompt (SWIF2T's k candidate plans): one request with `n` where the endpoint
        honours it, so that the prompt is processed once, else one request per answer; what the endpoint does
        is remembered for its next requests, like its structured-output mode. Returns the usable answers and
        the failures of the others; raises LLMError when nothing answers at the endpoint."""
        completions, failures = await self._guarded(request, self._choices(request, max(1, count)))
        for completion in completions:
            self._record(request.role, completion)
        for failure in failures:
            failure.role = failure.role or request.role
            self._record(request.role, None, failure)
        return completions, failures

    async def _guarded(self, request: Request, work: Awaitable[_T]) -> _T:
        """A call's work, unless its endpoint was found dead a moment ago; its failure recorded and, if it
        means nothing answers there, remembered as an outage."""
        configured = self.config.endpoint_for(request.role).urls
        try:
            outage = self.pool.outage(configured)
            if outage is not None:  # found dead a moment ago: say so again without knocking
                raise outage.repeat(request.role)
            result = await work
        except LLMError as failure:
            failure.role = failure.role or request.role
            self._record(request.role, None, failure)
            if self.pool.note_failure(configured, failure):
                log.warning("%s", failure)
            else:
                log.log(logging.DEBUG if failure.repeated else logging.INFO, "model call failed: %s", failure)
            raise
        finally:
            if inspect.iscoroutine(work):
                work.close()  # not awaited when an outage answered: no "never awaited" warning
        self.pool.note_success(configured)
        return result

    async def context_window(self, role: str) -> int | None:
        """The context length of the model a role uses, in tokens, when the endpoint says (vLLM lists it) or it
        is the embedded model; None when unknown or when nothing answers."""
        config = self.config.endpoint_for(role)
        try:
            replicas = await self.pool.get(config)
            model = await replicas.model_for(config.model)
        except LLMError:
            return None
        return replicas.context_window(model)

    def retry_now(self) -> None:
        """Try endpoints found dead again from the next call on (the user asked for something, or settings
        changed)."""
        self.pool.retry_now()

    async def _complete(self, request: Request) -> Completion:
        config = self.config.endpoint_for(request.role)
        replicas = await self.pool.get(config)
        model = await replicas.model_for(config.model)
        messages = _with_schema(request, replicas.mode)
        parameters = _sampling(request, config, self.config.roles.get(request.role))
        key = cache_key(model, request.role, messages, parameters, request.schema_sent)
        cached = await self._cached(key, request, model, parameters)
        if cached is not None:
            return cached
        call = _Call(replicas, config, model, request)
        answer, mode, data = await self._answer(call, messages, parameters)
        repeated = await _checked(repetition, answer.text)
        if repeated is not None:
            # Small models fall into loops: once more with sampling that discourages repeats, then trim or refuse.
            self._count("repetition_retries")
            log.info(
                "%s answer repeats itself (%s); asking again with repetition penalties",
                request.role,
                repeated,
            )
            discouraged = {
                name: max(float(parameters.get(name) or 0.0), value)
                for name, value in _DISCOURAGE_REPEATS.items()
            }
            retry, mode, data = await self._answer(call, messages, {**parameters, **discouraged})
            answer = replace(
                retry,
                prompt_tokens=retry.prompt_tokens + answer.prompt_tokens,
                completion_tokens=retry.completion_tokens + answer.completion_tokens,
            )
            repeated = await _checked(repetition, answer.text)
            if repeated is not None and request.schema is not None:
                raise LLMError(
                    FailureKind.INVALID_OUTPUT,
                    f"the answer repeats itself ({repeated}), even with repetition penalties",
                    request.role,
                )
            if repeated is not None:
                log.warning(
                    "%s answer still repeats itself (%s); the repeats are removed", request.role, repeated
                )
                answer = replace(answer, text=await _checked(collapse, answer.text))
        completion = _completed(answer, model, request.role, mode, data, repeated or "")
        if self.cache is not None:
            entry = {"text": answer.text, "finish_reason": answer.finish_reason, "model": model}
            await asyncio.to_thread(self.cache.put, key, entry)
        return completion

    async def _choices(self, request: Request, count: int) -> tuple[list[Completion], list[LLMError]]:
        config = self.config.endpoint_for(request.role)
        replicas = await self.pool.get(config)
        model = await replicas.model_for(config.model)
        messages = _with_schema(request, replicas.mode)
        parameters = _sampling(request, config, self.config.roles.get(request.role))
        key = cache_key(model, request.role, messages, {**parameters, "n": count}, request.schema_sent)
        cached = await self._cached_choices(key, request, model, parameters, count)
        if cached is not None:
            return cached, []
        call = _Call(replicas, config, model, request)
        answers: list[tuple[_Answer, StructuredMode | None, Any]] = []
        failures: list[LLMError] = []
        if request.schema is not None and replicas.mode is None:
            async with replicas.negotiation:  # the first request settles the mode; the others then use it
                if replicas.mode is None:
                    try:
                        answers.append(await self._answer(call, messages, parameters))
                    except LLMError as failure:
                        failures.append(failure)  # one answer lost; the others are still asked for
        wanted = count - len(answers) - len(failures)
        if wanted > 1 and replicas.accepts_n is not False:
            try:
                answers.extend(await self._several(call, messages, parameters, wanted, failures))
                wanted = count - len(answers) - len(failures)  # a server that ignores n gave fewer
            except _ChoicesRefused:
                replicas.accepts_n = False
                log.info("%s does not take n; several answers are asked for one by one", replicas.label)
            except LLMError as failure:
                failures.extend([failure] * wanted)  # every answer this request was for
                wanted = 0
        singles = await asyncio.gather(
            *(self._answer(call, messages, parameters) for _ in range(wanted)), return_exceptions=True
        )
        for single in singles:
            if isinstance(single, LLMError):
                failures.append(single)
            elif isinstance(single, BaseException):
                raise single
            else:
                answers.append(single)
        if not answers and any(failure.kind in NO_MODEL_FAILURES for failure in failures):
            raise failures[0]  # nothing answers there: an outage, as for one call
        completions = [_completed(answer, model, request.role, mode, data) for answer, mode, data in answers]
        if self.cache is not None and not failures:
            entry = {"choices": [answer.text for answer, _, _ in answers], "model": model}
            await asyncio.to_thread(self.cache.put, key, entry)
        return completions, failures

    async def _several(
        self,
        call: _Call,
        messages: list[dict[str, str]],
        parameters: dict[str, Any],
        count: int,
        failures: list[LLMError],
    ) -> list[tuple[_Answer, StructuredMode | None, Any]]:
        """Up to `count` answers from one request with `n`; a choice that cannot be used even after its repair
        goes to `failures`. Fewer choices than asked for means the server ignores `n` (llama.cpp's does)."""
        replicas = call.replicas
        mode = replicas.mode if call.request.schema is not None else None
        probing = replicas.accepts_n is None
        answer = await self._send(call, messages, {**parameters, "n": count}, mode, False, probing)
        choices = [(answer.text, answer.finish_reason), *answer.others][:count]
        if probing:
            replicas.accepts_n = len(choices) == count
            if not replicas.accepts_n:
                log.info("%s ignores n; several answers are asked for one by one", replicas.label)
        # The request's tokens go to its first answer: the prompt was processed once.
        read = [
            _Answer(
                text,
                finish,
                answer.prompt_tokens if index == 0 else 0,
                answer.completion_tokens if index == 0 else 0,
            )
            for index, (text, finish) in enumerate(choices)
        ]
        if call.request.schema is None:
            return [(item, None, None) for item in read if item.text.strip()]
        validated = await asyncio.gather(
            *(self._validated(call, messages, parameters, item, mode) for item in read),
            return_exceptions=True,
        )
        usable: list[tuple[_Answer, StructuredMode | None, Any]] = []
        for outcome in validated:
            if isinstance(outcome, LLMError):
                failures.append(outcome)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                usable.append((outcome[0], mode, outcome[1]))
        return usable

    async def _cached_choices(
        self, key: str, request: Request, model: str, parameters: dict[str, Any], count: int
    ) -> list[Completion] | None:
        if self.cache is None:
            return None
        entry = await asyncio.to_thread(self.cache.get, key)
        texts = entry.get("choices") if entry is not None else None
        if not isinstance(texts, list) or len(texts) != count:
            return None
        completions = []
        for text in texts:
            completion = await _from_cache(text, "stop", request, model, parameters)
            if completion is None:
                return None
            completions.append(completion)
        return completions

    async def _answer(
        self, call: _Call, messages: list[dict[str, str]], parameters: dict[str, Any]
    ) -> tuple[_Answer, StructuredMode | None, Any]:
        """One answer: generated, and validated against the schema when there is one."""
        answer, mode, used = await self._generate(call, messages, parameters)
        if call.request.max_answer_chars is not None and len(answer.text) > call.request.max_answer_chars:
            raise LLMError(
                FailureKind.OVERSIZED,
                f"the answer is {len(answer.text)} characters long, more than the {call.request.max_answer_chars} "
                "this request can use; it was discarded",
                call.request.role,
            )
        if call.request.schema is not None:
            # The repair gets the room the answer finally had (doubled if it was cut off once).
            answer, data = await self._validated(call, messages, used, answer, mode)
            return answer, mode, data
        if not answer.text.strip():
            raise LLMError(FailureKind.EMPTY, "the model answered with no text", call.request.role)
        return answer, mode, None

    async def _cached(
        self, key: str, request: Request, model: str, parameters: dict[str, Any]
    ) -> Completion | None:
        if self.cache is None:
            return None
        entry = await asyncio.to_thread(self.cache.get, key)
        if entry is None:
            return None
        return await _from_cache(
            entry.get("text"), str(entry.get("finish_reason", "stop")), request, model, parameters
        )

    async def _generate(
        self,
        call: _Call,
        messages: list[dict[str, str]],
        parameters: dict[str, Any],
    ) -> tuple[_Answer, StructuredMode | None, dict[str, Any]]:
        """One answer, negotiating the structured-output mode with the endpoint if it is not known yet.

        Returns the answer, the mode it came in and the sampling parameters of the final request."""
        if call.request.schema is None:
            answer = await self._plain_text(call, messages, parameters)
            return answer, None, parameters
        refused: set[StructuredMode] = set()
        while True:
            # Another call may settle the mode while this one waits: always start from what is known now.
            if call.replicas.mode is not None and call.replicas.mode not in refused:
                mode = call.replicas.mode
            else:
                untried = [mode for mode in NEGOTIATION_ORDER if mode not in refused]
                if not untried:
                    raise LLMError(
                        FailureKind.REJECTED, f"{call.replicas.label} refused every structured-output mode"
                    )
                mode = untried[0]
            negotiating = call.replicas.mode is None and mode is not StructuredMode.TEXT
            try:
                answer = await self._send(call, messages, parameters, mode, negotiating)
            except _FormatRejected:
                if call.replicas.mode is not None and call.replicas.mode is not mode:
                    continue  # settled meanwhile by another call: use that
                refused.add(mode)
                log.info(
                    "%s does not accept %s output; trying the next mode", call.replicas.label, mode.value
                )
                continue
            break
        if call.replicas.mode is None:
            call.replicas.mode = mode
            log.info("%s accepts %s structured output", call.replicas.label, mode.value)
        if answer.finish_reason == "length":
            # Cut off: one more try with twice the room, counting both attempts' tokens.
            parameters = dict(parameters, max_tokens=int(parameters["max_tokens"]) * 2)
            retry = await self._send(call, messages, parameters, mode, False)
            answer = replace(
                retry,
                prompt_tokens=retry.prompt_tokens + answer.prompt_tokens,
                completion_tokens=retry.completion_tokens + answer.completion_tokens,
            )
            if answer.finish_reason == "length":
                raise LLMError(
                    FailureKind.TRUNCATED,
                    f"the answer was cut off at {parameters['max_tokens']} tokens (raise margin.llm.maxTokens)",
                    call.request.role,
                )
        return answer, mode, parameters

    async def _plain_text(
        self,
        call: _Call,
        messages: list[dict[str, str]],
        parameters: dict[str, Any],
    ) -> _Answer:
        answer = await self._send(call, messages, parameters, None, False)
        parts = [answer.text]
        prompt_tokens, completion_tokens = answer.prompt_tokens, answer.completion_tokens
        for _ in range(_CONTINUATIONS):
            if answer.finish_reason != "length":
                break
            wanted = call.request.max_answer_chars
            if wanted is not None and sum(map(len, parts)) > wanted:
                break  # already longer than the pipeline can use: refused below, without asking for more
            # Cut off by max_tokens: ask the model to go on from where it stopped.
            continued = [
                *messages,
                {"role": "assistant", "content": "".join(parts)},
                {
                    "role": "user",
                    "content": "Continue exactly where you stopped, without repeating anything.",
                },
            ]
            answer = await self._send(call, continued, parameters, None, False)
            parts.append(answer.text)
            prompt_tokens += answer.prompt_tokens
            completion_tokens += answer.completion_tokens
        if answer.finish_reason == "length":
            raise LLMError(
                FailureKind.TRUNCATED, "the answer was still cut off after continuing", call.request.role
            )
        return _Answer("".join(parts), answer.finish_reason, prompt_tokens, completion_tokens)

    async def _validated(
        self,
        call: _Call,
        messages: list[dict[str, str]],
        parameters: dict[str, Any],
        answer: _Answer,
        mode: StructuredMode | None,
    ) -> tuple[_Answer, Any]:
        """Parse and validate; on failure one repair request that quotes the error, then a typed failure."""
        assert call.request.schema is not None
        data, problem = await _checked(parse_answer, answer.text, call.request.schema)
        if problem is None:
            return answer, data
        self._count("repairs")
        log.info("%s answer unusable (%s); asking once for a repair", call.request.role, problem)
        repair = [
            *messages,
            {"role": "assistant", "content": answer.text[:4000]},
            {
                "role": "user",
                "content": f"That answer cannot be used: {problem}. Reply again with only the corrected JSON.",
            },
        ]
        fixed = await self._send(call, repair, parameters, mode, False)
        data, second_problem = await _checked(parse_answer, fixed.text, call.request.schema)
        if second_problem is not None:
            kind = FailureKind.TRUNCATED if fixed.finish_reason == "length" else FailureKind.INVALID_OUTPUT
            raise LLMError(kind, f"{second_problem} (after one repair request)", call.request.role)
        combined = replace(
            fixed,
            prompt_tokens=fixed.prompt_tokens + answer.prompt_tokens,
            completion_tokens=fixed.completion_tokens + answer.completion_tokens,
        )
        return combined, data

    async def _send(
        self,
        call: _Call,
        messages: list[dict[str, str]],
        parameters: dict[str, Any],
        mode: StructuredMode | None,
        negotiating: bool,
        probing_choices: bool = False,
    ) -> _Answer:
        """One HTTP request, with bounded retries and backoff; the limiter slot is not held while waiting.

        Each attempt goes to the least-loaded healthy replica; one that fails rests, and the next attempt goes
        to another replica at once (a pool gives each of its other replicas one more attempt)."""
        arguments: dict[str, Any] = {
            "model": call.model,
            "messages": messages,
            "extra_headers": {ROLE_HEADER: call.request.role},
            **parameters,
        }
        if mode is StructuredMode.JSON_SCHEMA:
            arguments["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": call.request.schema_name,
                    "schema": call.request.schema_sent,
                    "strict": True,
                },
            }
        elif mode is StructuredMode.JSON_OBJECT:
            arguments["response_format"] = {"type": "json_object", "schema": call.request.schema_sent}
        replicas = call.replicas
        # vLLM started with --scheduling-policy priority serves lower values first: a background review then
        # waits behind what the user just asked for on the server too. 0 is every server's default.
        if call.request.priority and replicas.accepts_priority is not False:
            arguments["extra_body"] = {"priority": int(call.request.priority)}
        limit = answer_byte_limit(parameters.get("max_tokens"))
        attempts = self.config.retries + len(replicas.members)
        failed: set[str] = set()  # replicas that failed this request
        attempt = 0
        while True:
            attempt += 1
            replica = replicas.choose(failed)
            delay: float | None = None
            try:
                async with replica.limiter.slot(call.request.priority):
                    self._count("requests")
                    answer = await asyncio.wait_for(
                        _exchange(replica, call, arguments, limit), timeout=call.config.timeout
                    )
                replicas.recovered(replica)
                if "extra_body" in arguments:
                    replicas.accepts_priority = True
                return answer
            except TimeoutError as error:
                failure = LLMError(
                    FailureKind.TIMEOUT, f"no answer within {call.config.timeout:g} s", call.request.role
                )
                failure.__cause__ = error
            except openai.APITimeoutError as error:
                failure = LLMError(
                    FailureKind.TIMEOUT, f"no answer within {call.config.timeout:g} s", call.request.role
                )
                failure.__cause__ = error
            except openai.APIConnectionError as error:
                crash = await self.pool.crash_of(replica)
                if crash is not None:  # a dead process does not come back by asking again
                    raise LLMError(FailureKind.CRASHED, crash, call.request.role, attempt) from error
                if _could_not_connect(error):
                    failure = LLMError(
                        FailureKind.UNAVAILABLE, unavailable_message(replica.base_url), call.request.role
                    )
                else:  # it accepted the request, then dropped it: a fault of this call, not a dead endpoint
                    failure = LLMError(
                        FailureKind.SERVER_ERROR,
                        f"{replica.base_url} closed the connection without answering",
                        call.request.role,
                    )
                failure.__cause__ = error
            except openai.APIStatusError as error:
                status = error.status_code
                if "extra_body" in arguments and _refuses_priority(status, error):
                    # Not started with --scheduling-policy priority (or not vLLM): the same request without it.
                    replicas.accepts_priority = False
                    del arguments["extra_body"]
                    log.info("%s does not schedule by priority; requests go without it", replicas.label)
                    attempt -= 1
                    continue
                if probing_choices and status in _FORMAT_REJECTION_STATUSES:
                    raise _ChoicesRefused from error
                if negotiating and _refuses_format(status, error):
                    raise _FormatRejected from error
                if status == 429:
                    failure = LLMError(
                        FailureKind.RATE_LIMITED, "the endpoint is rate limiting", call.request.role
                    )
                    delay = _retry_after(error)
                elif status >= 500:
                    failure = LLMError(
                        FailureKind.SERVER_ERROR, f"HTTP {status}: {_message(error)}", call.request.role
                    )
                    delay = _retry_after(error)
                else:
                    raise LLMError(
                        FailureKind.REJECTED, f"HTTP {status}: {_message(error)}", call.request.role
                    ) from error
            failure.attempts = attempt
            if attempt >= attempts:
                raise failure
            self._count("retries")
            failed.add(replica.base_url)
            if replicas.rest(replica, delay) and len(failed) < len(replicas.members):
                log.info("%s; retrying on another replica (attempt %d of %d)", failure, attempt + 1, attempts)
                continue
            wait = delay if delay is not None else min(_BACKOFF_CAP, _BACKOFF_BASE * 2 ** (attempt - 1))
            wait *= random.uniform(0.9, 1.1)
            log.info("%s; retrying in %.1f s (attempt %d of %d)", failure, wait, attempt + 1, attempts)
            failed.clear()  # after the wait every replica may be tried again
            await asyncio.sleep(wait)


def _completed(
    answer: _Answer, model: str, role: str, mode: StructuredMode | None, data: Any, repetition: str = ""
) -> Completion:
    return Completion(
        text=answer.text,
        model=model,
        role=role,
        data=data,
        finish_reason=answer.finish_reason,
        prompt_tokens=answer.prompt_tokens,
        completion_tokens=answer.completion_tokens,
        mode=mode,
        repetition=repetition,
    )


async def _from_cache(
    text: Any, finish_reason: str, request: Request, model: str, parameters: dict[str, Any]
) -> Completion | None:
    """A stored answer as a completion, or None when it cannot be served: not text, longer than this request
    could get (stored before answers were bounded), or no longer valid (the schema changed since)."""
    if not isinstance(text, str):
        return None
    longest = min(
        answer_byte_limit(parameters.get("max_tokens")), request.max_answer_chars or _MAX_ANSWER_BYTES
    )
    if len(text) > longest:
        return None
    data = None
    if request.schema is not None:
        data, problem = await _checked(parse_answer, text, request.schema)
        if problem is not None:
            return None
    return Completion(
        text=text, model=model, role=request.role, data=data, finish_reason=finish_reason, cached=True
    )


def _sampling(request: Request, config: EndpointConfig, route: RoleRoute | None) -> dict[str, Any]:
    """Sampling parameters: the role's route first, then the pipeline's request, then the endpoint settings."""

    def pick(name: str, default: float | None) -> float | None:
        chosen = getattr(route, name, None) if route is not None else None
        if chosen is None:
            chosen = getattr(request, name)
        return default if chosen is None else chosen

    parameters: dict[str, Any] = {
        "temperature": pick("temperature", config.temperature),
        "top_p": pick("top_p", config.top_p),
        "max_tokens": request.max_tokens or config.max_tokens,
    }
    penalty = pick("frequency_penalty", None)
    if penalty is not None:  # sent only when asked for, so other requests keep their cache keys
        parameters["frequency_penalty"] = penalty
    return parameters


def _with_schema(request: Request, mode: StructuredMode | None) -> list[dict[str, str]]:
    """The messages to send: the schema instructions join the system prompt, which stays first and stable.

    Where the server constrains decoding (or may: the mode is not known yet), the prompt shows the pipeline's
    own schema, not the decoder's stricter one: that one may list the paragraph's clauses (the reviewer's
    quotes), which would repeat the paragraph in the prompt and make the system prompt differ from paragraph
    to paragraph. A plain-text endpoint enforces nothing, so there the prompt shows the stricter schema."""
    messages = [dict(message) for message in request.messages]
    if request.schema is None:
        return messages
    shown = request.schema_sent if mode is StructuredMode.TEXT else request.schema
    instructions = schema_instructions(shown)
    if messages and messages[0].get("role") == "system":
        messages[0]["content"] = messages[0]["content"].rstrip() + "\n\n" + instructions
    else:
        messages.insert(0, {"role": "system", "content": instructions})
    return messages


def answer_byte_limit(max_tokens: Any) -> int:
    """The most bytes of an HTTP answer read for a request with this max_tokens."""
    tokens = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else 0
    return min(_MAX_ANSWER_BYTES, max(_MIN_ANSWER_BYTES, _BYTES_PER_TOKEN * tokens))


async def _checked(check: Callable[..., _T], text: str, *arguments: Any) -> _T:
    """A check of model text: at once when the text is short, else in a worker thread (off the event loop)."""
    if len(text) <= _OFFLOAD_CHARS:
        return check(text, *arguments)
    return await asyncio.to_thread(check, text, *arguments)


async def _exchange(replica: Endpoint, call: _Call, arguments: dict[str, Any], limit: int) -> _Answer:
    """One chat completion, its body read as it arrives and cut off past `limit` bytes: leaving the response
    closes the connection, which also stops the generation on the server."""
    completions = replica.client.chat.completions.with_streaming_response
    async with completions.create(**arguments) as response:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _oversized(call, f"announces {int(declared)} bytes", limit, arguments.get("max_tokens"))
        body = bytearray()
        try:
            async for chunk in response.iter_bytes():
                body += chunk
                if len(body) > limit:
                    raise _oversized(call, f"went on past {limit} bytes", limit, arguments.get("max_tokens"))
        except LLMError:
            raise
        except Exception as error:  # the body broke off: the same failures as a request that did
            failure = _transport_failure(error, response.http_request)
            if failure is None:
                raise
            raise failure from error
        streamed = "text/event-stream" in response.headers.get("content-type", "")
    if len(body) > _OFFLOAD_CHARS:
        return await asyncio.to_thread(_decoded, replica, call, bytes(body), streamed)
    return _decoded(replica, call, bytes(body), streamed)


def _oversized(call: _Call, what: str, limit: int, max_tokens: Any) -> LLMError:
    return LLMError(
        FailureKind.OVERSIZED,
        f"the endpoint's answer {what}; margin reads at most {limit} bytes of an answer of {max_tokens} tokens, "
        "so it was discarded (a server that ignores max_tokens, or a runaway answer)",
        call.request.role,
    )


def _transport_failure(error: Exception, request: Any) -> openai.APIError | None:
    """The openai error a transport failure while reading a body stands for (by class name: the openai package
    has moved between HTTP libraries with the same names), or None for anything else."""
    names = {kind.__name__ for kind in type(error).__mro__}
    if "TimeoutException" in names:
        return openai.APITimeoutError(request=request)
    if names & {"RequestError", "TransportError", "SSLError", "EndOfStream", "BrokenResourceError"}:
        return openai.APIConnectionError(request=request)
    return None


def _decoded(replica: Endpoint, call: _Call, body: bytes, streamed: bool) -> _Answer:
    """The answer in a chat completion body: one JSON object, or server-sent events from a server that streams
    although it was not asked to."""
    if streamed:
        return _answer_of_events(body)
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as error:
        preview = body[:80].decode("utf-8", "replace")
        raise LLMError(
            FailureKind.SERVER_ERROR,
            f"{replica.base_url} answered with something that is not a chat completion ({preview!r})",
            call.request.role,
        ) from error
    return _answer_of(data)


def _answer_of(data: Any) -> _Answer:
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return _Answer("", "stop", 0, 0)
    read = [_choice(choice) for choice in choices if isinstance(choice, dict)]
    usage = data.get("usage")
    return _Answer(
        text=read[0][0],
        finish_reason=read[0][1],
        prompt_tokens=_tokens(usage, "prompt_tokens"),
        completion_tokens=_tokens(usage, "completion_tokens"),
        others=tuple(read[1:]),
    )


def _choice(choice: dict[str, Any]) -> tuple[str, str]:
    """A choice's text and finish reason."""
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else "", str(choice.get("finish_reason") or "stop")[:40]


def _answer_of_events(body: bytes) -> _Answer:
    """The answer in server-sent chat completion chunks: the first choice's content deltas, joined."""
    parts: list[str] = []
    finish_reason = "stop"
    prompt_tokens = completion_tokens = 0
    for line in body.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        try:
            event = json.loads(payload)
        except (ValueError, RecursionError):
            continue
        if not isinstance(event, dict):
            continue
        choices = event.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            delta = choices[0].get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str):
                parts.append(content)
            if choices[0].get("finish_reason"):
                finish_reason = str(choices[0]["finish_reason"])[:40]
        usage = event.get("usage")
        if isinstance(usage, dict):
            prompt_tokens = _tokens(usage, "prompt_tokens")
            completion_tokens = _tokens(usage, "completion_tokens")
    return _Answer("".join(parts), finish_reason, prompt_tokens, completion_tokens)


def _tokens(usage: Any, name: str) -> int:
    value = usage.get(name) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and value >= 0 else 0


def _could_not_connect(error: openai.APIConnectionError) -> bool:
    """Nothing listens there (refused, unreachable), as opposed to a connection that broke mid-request. By
    class name: the openai package has moved between HTTP libraries (httpx, httpx2) with the same names."""
    names = {kind.__name__ for kind in type(error.__cause__).__mro__} if error.__cause__ else set()
    if names & {"ConnectError", "ConnectTimeout"}:
        return True
    return "TransportError" not in names  # an unknown cause: assume the worst, as before


def _refuses_priority(status: int, error: openai.APIStatusError) -> bool:
    """vLLM without --scheduling-policy priority answers 400 "Got priority 1 but Priority scheduling is not
    enabled."; a server that checks its fields (OpenAI) names the field it does not know."""
    return status in _FORMAT_REJECTION_STATUSES and "priority" in _message(error).lower()


def _refuses_format(status: int, error: openai.APIStatusError) -> bool:
    if status in _FORMAT_REJECTION_STATUSES:
        return True
    return status == 500 and any(word in _message(error).lower() for word in _FORMAT_WORDS)


def _retry_after(error: openai.APIStatusError) -> float | None:
    value = error.response.headers.get("retry-after") if error.response is not None else None
    if value is None:
        return None
    try:
        return max(0.0, min(float(value), _RETRY_AFTER_CAP))
    except ValueError:
        return None


def _message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
    return str(error)[:300]


__all__ = ["Completion", "LLMClient", "LLMError", "Priority", "Request"]

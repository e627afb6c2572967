"""How rewriting agents speak: one call per agent turn, with its role's prompt, recorded in the transcript and
announced as a progress step. Every pipeline of this package talks to models only through `Team.ask`."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.types import Completion, LLMError, Priority, Request
from margin.workflows.prompts import fence, role_prompt

from .transcript import Transcript, Turn
from .types import StepCallback, no_steps


@dataclass(frozen=True, slots=True)
class Sampling:
    """A pipeline's sampling defaults where its paper gives them; None leaves the endpoint settings."""

    temperature: float | None = None
    top_p: float | None = None
    frequency_penalty: float | None = None


def log_turn(who: str, what: str) -> str:
    """One turn of a conversation log that agents read: who spoke (ours), then what they said, fenced (the
    manuscript's words or a model's). Appending turns never changes earlier ones: the log's prefix stays cached."""
    return f"{who}:\n{fence(what)}"


@dataclass
class Team:
    llm: LLMClient
    transcript: Transcript
    on_step: StepCallback = no_steps
    priority: Priority = Priority.INTERACTIVE
    # Words the role prompts are written with ($domain_text, $expert...), so one prompt serves several domains.
    words: Mapping[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    sampling: Sampling = field(default_factory=lambda: Sampling())  # the pipeline's, from its paper

    def system(self, prompt_name: str) -> dict[str, str]:
        return {"role": "system", "content": role_prompt(prompt_name, **self.words)}

    async def ask(
        self,
        role: str,
        user: str,
        *,
        step: str,
        prompt_name: str | None = None,
        schema: dict[str, Any] | None = None,
        schema_name: str = "answer",
        memory: str = "",
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """One agent turn. `memory` (the conversation so far, in natural language) comes after the role prompt
        and before the task, so the stable part of the prompt stays first for vLLM's prefix cache.
        Raises LLMError after recording it; the pipeline decides what a failed turn means."""
        self.on_step(step)
        messages = [self.system(prompt_name or role)]
        if memory:  # its turns are fenced one by one (see log_turn()): a turn cannot pass for another speaker
            messages.append({"role": "user", "content": f"The conversation so far:\n\n{memory}"})
            messages.append({"role": "assistant", "content": "Understood."})
        messages.append({"role": "user", "content": user})
        started = time.monotonic()
        try:
            completion = await self.llm.complete(
                Request(
                    role=role,
                    messages=tuple(messages),
                    schema=schema,
                    schema_name=schema_name,
                    priority=self.priority,
                    temperature=self.sampling.temperature if temperature is None else temperature,
                    top_p=self.sampling.top_p,
                    frequency_penalty=self.sampling.frequency_penalty,
                    max_tokens=max_tokens,
                )
            )
        except LLMError as error:
            self.failures.append(str(error))
            self.transcript.record(
                Turn(role, step, messages, "", failure=str(error), seconds=time.monotonic() - started)
            )
            raise
        self.transcript.record(
            Turn(
                role,
                step,
                messages,
                completion.text,
                model=completion.model,
                cached=completion.cached,
                seconds=time.monotonic() - started,
            )
        )
        return completion

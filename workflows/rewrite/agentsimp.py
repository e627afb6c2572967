"""Simplify a document: AgentSimp (Fang et al.), a team that works like a human simplification desk.

1. Planning: the project director writes a simplification guideline; the article logic analyst an outline.
2. Per paragraph, concurrently: the content simplifier simplifies, the simplify supervisor critiques, the
   simplifier revises; the metaphor analyst explains figurative language; the terminology interpreter explains
   terms. Pipeline communication chains them (each works on the previous one's text); synchronous communication
   runs them side by side on the original and a content integrator fuses their versions.
3. Reconstruction: the article architect smooths the transitions, over the whole document at once (direct) or in
   chunks of `chunk_size` paragraphs that overlap by one (iterative, the paper's Algorithm 2).
4. The proofreader corrects what is left. Each paragraph is then checked for lost citations, math and links.

The paper's best setting is the default: pipeline communication with iterative combination, chunk size 2.
The output keeps one text per input paragraph, so the editor can replace each paragraph in place.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.types import LLMError, Priority
from margin.workflows.prompts import fence
from margin.workflows.registry import AGENTSIMP

# The options (and their enums) live in a module the settings can import cheaply.
from .options import AgentSimpOptions, Combination, Communication
from .safety import TEXT_SCHEMA, clean_text, explained_of, finalize, language_rules
from .team import Sampling, Team
from .transcript import Transcript
from .types import Language, Rewrite, RewriteStatus, StepCallback, no_steps

log = logging.getLogger("margin.rewrite.agentsimp")

# The old names of the enums' members (bench/rewrite_bench.py uses them).
PIPELINE, SYNCHRONOUS = Communication.PIPELINE, Communication.SYNCHRONOUS
ITERATIVE, DIRECT = Combination.ITERATIVE, Combination.DIRECT
AGENTSIMP_SAMPLING = Sampling(temperature=0.6)  # the paper's, for every agent
_PROOFREAD_WINDOW = 6  # paragraphs per proofreader call: one answer per paragraph stays easy to map back


# Token counts are estimated from characters (English runs at about four per token; three leaves room), so that
# each call asks for as many tokens as its answer needs and direct combination is tried only where it fits.
_CHARS_PER_TOKEN = 3
_PROMPT_OVERHEAD_TOKENS = (
    1_000  # the role prompt (with the rule on fenced data), the schema and the instruction
)
_UNKNOWN_CONTEXT_TOKENS = 32_768  # assumed when the server does not say (vLLM does)


def estimated_tokens(text: str) -> int:
    return len(text) // _CHARS_PER_TOKEN + 1


def answer_budget(paragraphs: list[str]) -> int:
    """Tokens for an answer that gives back these paragraphs, lightly edited, as JSON."""
    return int(sum(estimated_tokens(text) for text in paragraphs) * 1.25) + 40 * len(paragraphs) + 128


_OUTLINE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "subheadings": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["title", "subheadings"],
}
_SUGGESTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"suggestions": {"type": "string"}},
    "required": ["suggestions"],
}
_METAPHOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"analysis": {"type": "string"}, **TEXT_SCHEMA["properties"]},
    "required": ["analysis", "text"],
}
_TERMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"terms": {"type": "array", "items": {"type": "string"}}, **TEXT_SCHEMA["properties"]},
    "required": ["terms", "text"],
}
_PARAGRAPHS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"paragraphs": {"type": "array", "items": {"type": "string"}}},
    "required": ["paragraphs"],
}


def _no_change(text: str) -> bool:
    return not text.strip() or text.strip().strip(".\"'").lower() in {"none", "n/a", "no change", "unchanged"}


@dataclass
class _Draft:
    """One paragraph on its way through the desk."""

    index: int
    original: str
    text: str
    explained: dict[str, str]
    failed: str = ""
    failures: list[str] = field(default_factory=list)  # this paragraph's model failures (the run went on)


class _Desk:
    def __init__(
        self,
        team: Team,
        language: Language,
        options: AgentSimpOptions,
        total: int,
    ) -> None:
        self.team = team
        self.language = language
        self.options = options
        self.total = total
        self.guideline = ""
        self.outline = ""

    def _with_guideline(self, body: str) -> str:
        # The guideline and the outline are models' answers about the manuscript: data, fenced like it.
        guideline = f"The guideline:\n{fence(self.guideline)}\n\n" if self.guideline else ""
        outline = f"The outline of the simplified article:\n{fence(self.outline)}\n\n" if self.outline else ""
        return f"{guideline}{outline}{language_rules(self.language)}\n\n{body}"

    # -- 1. planning ----------------------------------------------------------------------------------------------

    async def plan(self, document: str) -> None:
        async def guideline() -> None:
            try:
                reply = await self.team.ask(
                    "director",
                    f"The article:\n{fence(document)}\n\nWrite the simplification guideline.",
                    step="Project director writing the simplification guideline",
                )
                self.guideline = reply.text.strip()
            except LLMError as error:
                self.team.transcript.note(f"no guideline: {error}")

        async def outline() -> None:
            try:
                reply = await self.team.ask(
                    "analyst",
                    f"The article:\n{fence(document)}\n\nGive the title and subheadings.",
                    step="Article logic analyst outlining the article",
                    schema=_OUTLINE_SCHEMA,
                    schema_name="outline",
                )
                headings = "\n".join(f"- {item}" for item in reply.data.get("subheadings") or [])
                self.outline = f"{reply.data.get('title', '')}\n{headings}".strip()
            except LLMError as error:
                self.team.transcript.note(f"no outline: {error}")

        await asyncio.gather(guideline(), outline())

    # -- 2. per paragraph -----------------------------------------------------------------------------------------

    def _label(self, draft: _Draft) -> str:
        return f"Paragraph {draft.index + 1}/{self.total}"

    async def _simplify(self, draft: _Draft, text: str) -> str:
        reply = await self.team.ask(
            "simplifier",
            self._with_guideline(f"The paragraph to simplify:\n{fence(text)}"),
            step=f"{self._label(draft)}: content simplifier",
            prompt_name="content_simplifier",
            schema=TEXT_SCHEMA,
            schema_name="rewrite",
        )
        simplified = clean_text(str(reply.data.get("text", ""))) or text
        draft.explained.update(explained_of(reply.data))
        for round_ in range(1, self.options.supervisor_rounds + 1):
            try:
                critique = await self.team.ask(
                    "supervisor",
                    self._with_guideline(
                        f"The original paragraph:\n{fence(text)}\n\nThe simplified paragraph:\n{fence(simplified)}"
                    ),
                    step=f"{self._label(draft)}: simplify supervisor, round {round_}",
                    schema=_SUGGESTIONS_SCHEMA,
                    schema_name="suggestions",
                )
                suggestions = str(critique.data.get("suggestions", "")).strip()
                if _no_change(suggestions):
                    break
                revised = await self.team.ask(
                    "simplifier",
                    self._with_guideline(
                        f"The paragraph to simplify:\n{fence(text)}\n\nYour simplification:\n{fence(simplified)}"
                        f"\n\nThe supervisor's suggestions:\n{fence(suggestions)}\n\nRevise your simplification."
                    ),
                    step=f"{self._label(draft)}: content simplifier revising",
                    prompt_name="content_simplifier",
                    schema=TEXT_SCHEMA,
                    schema_name="rewrite",
                )
                simplified = clean_text(str(revised.data.get("text", ""))) or simplified
                draft.explained.update(explained_of(revised.data))
            except LLMError as error:
                draft.failures.append(str(error))
                self.team.transcript.note(f"{self._label(draft)}: supervision stopped: {error}")
                break
        return simplified

    async def _metaphors(self, draft: _Draft, text: str) -> str:
        reply = await self.team.ask(
            "metaphor_analyst",
            self._with_guideline(f"The paragraph to analyse:\n{fence(text)}"),
            step=f"{self._label(draft)}: metaphor analyst",
            schema=_METAPHOR_SCHEMA,
            schema_name="metaphors",
        )
        result = clean_text(str(reply.data.get("text", "")))
        if _no_change(result) or _no_change(str(reply.data.get("analysis", ""))):
            return text
        draft.explained.update(explained_of(reply.data))
        return result

    async def _terms(self, draft: _Draft, text: str) -> str:
        reply = await self.team.ask(
            "terminology_interpreter",
            self._with_guideline(f"The paragraph to explain:\n{fence(text)}"),
            step=f"{self._label(draft)}: terminology interpreter",
            schema=_TERMS_SCHEMA,
            schema_name="terms",
        )
        result = clean_text(str(reply.data.get("text", "")))
        if _no_change(result):
            return text
        draft.explained.update(explained_of(reply.data))
        return result

    async def _optional(self, draft: _Draft, stage: Callable[[], Awaitable[str]], fallback: str) -> str:
        """A refining stage whose failure keeps the text it was given."""
        try:
            return await stage()
        except LLMError as error:
            draft.failures.append(str(error))
            self.team.transcript.note(f"{self._label(draft)}: a refining step failed: {error}")
            return fallback

    async def refine(self, draft: _Draft) -> None:
        try:
            if self.options.communication == Communication.SYNCHRONOUS:
                await self._synchronous(draft)
            else:
                basic = await self._simplify(draft, draft.original)
                metaphors = basic
                if self.options.metaphor_analyst:
                    metaphors = await self._optional(draft, lambda: self._metaphors(draft, basic), basic)
                draft.text = metaphors
                if self.options.terminology_interpreter:
                    draft.text = await self._optional(draft, lambda: self._terms(draft, metaphors), metaphors)
        except LLMError as error:
            draft.failed = str(error)
            draft.failures.append(str(error))

    async def _synchronous(self, draft: _Draft) -> None:
        original = draft.original

        async def nothing() -> str:  # an agent left out (an ablation) contributes nothing
            return "(none: this agent is left out)"

        metaphors = (lambda: self._metaphors(draft, original)) if self.options.metaphor_analyst else nothing
        terms = (lambda: self._terms(draft, original)) if self.options.terminology_interpreter else nothing
        side_by_side = [
            asyncio.ensure_future(self._simplify(draft, original)),
            asyncio.ensure_future(self._optional(draft, metaphors, original)),
            asyncio.ensure_future(self._optional(draft, terms, original)),
        ]
        try:
            basic, metaphors, terms = await asyncio.gather(*side_by_side)
        except BaseException:
            for task in side_by_side:  # the basic simplification failed: its partners' work is moot
                task.cancel()
            await asyncio.gather(*side_by_side, return_exceptions=True)
            raise
        draft.text = await self._optional(
            draft,
            lambda: self._integrate(draft, basic, metaphors, terms),
            basic,
        )

    async def _integrate(self, draft: _Draft, basic: str, metaphors: str, terms: str) -> str:
        reply = await self.team.ask(
            "integrator",
            self._with_guideline(
                f"Original paragraph:\n{fence(draft.original)}\n\nBasic simplification:\n{fence(basic)}\n\n"
                f"Metaphors explained:\n{fence(metaphors)}\n\nTerms explained:\n{fence(terms)}\n\n"
                "Fuse them into one paragraph."
            ),
            step=f"{self._label(draft)}: content integrator",
            schema=TEXT_SCHEMA,
            schema_name="rewrite",
        )
        draft.explained.update(explained_of(reply.data))
        return clean_text(str(reply.data.get("text", ""))) or basic

    # -- 3. reconstruction, 4. proofreading -----------------------------------------------------------------------

    async def _rework(self, role: str, drafts: list[_Draft], instruction: str, step: str) -> None:
        """One architect or proofreader call over consecutive paragraphs; its answer replaces them only when it
        has one paragraph per input paragraph (else the drafts stay as they were)."""
        listing = "\n\n".join(f"[{number}]\n{fence(draft.text)}" for number, draft in enumerate(drafts, 1))
        try:
            reply = await self.team.ask(
                role,
                self._with_guideline(f"{instruction}\n\nThe {len(drafts)} paragraphs:\n\n{listing}"),
                step=step,
                max_tokens=max(512, answer_budget([draft.text for draft in drafts])),
                schema={
                    **_PARAGRAPHS_SCHEMA,
                    "properties": {
                        "paragraphs": {
                            "type": "array",
                            "items": {"type": "string"},
                            "minItems": len(drafts),
                            "maxItems": len(drafts),
                        }
                    },
                },
                schema_name="paragraphs",
            )
        except LLMError as error:
            self.team.transcript.note(f"{role} skipped: {error}")
            return
        texts = [clean_text(str(item)) for item in reply.data.get("paragraphs") or []]
        if len(texts) != len(drafts) or not all(texts):
            self.team.transcript.note(
                f"{role} returned {len(texts)} paragraph(s) for {len(drafts)}: kept them as they were"
            )
            return
        for draft, text in zip(drafts, texts, strict=True):
            draft.text = text

    async def combine(self, drafts: list[_Draft]) -> None:
        usable = [draft for draft in drafts if not draft.failed]
        if len(usable) < 2:
            return  # nothing to join
        instruction = (
            "Smooth the transitions and the logic between these consecutive paragraphs. Make only small coherence "
            "changes; keep every paragraph's content, and give back exactly one paragraph per input paragraph, "
            "in order."
        )
        if self.options.combination == Combination.DIRECT:
            needed = await self._direct_fits(usable)
            if needed is None:
                await self._rework(
                    "architect", usable, instruction, "Article architect combining the whole document"
                )
                return
            message = f"the whole document does not fit the architect's context ({needed}): combining it iteratively"
            self.team.transcript.note(message)
            self.team.on_step(f"Article architect: {message}")
        size = max(1, self.options.chunk_size)
        queue = list(usable)
        chunk, queue = queue[:size], queue[size:]
        while True:
            first, last = chunk[0].index + 1, chunk[-1].index + 1
            await self._rework(
                "architect", chunk, instruction, f"Article architect combining paragraphs {first}-{last}"
            )
            if not queue:
                return
            # The last paragraph of each answer opens the next chunk, so each join is seen from both sides.
            chunk, queue = [chunk[-1], *queue[:size]], queue[size:]

    async def _direct_fits(self, drafts: list[_Draft]) -> str | None:
        """None when one architect call can take the whole document and give it back within the model's
        context; else what it would need, against what there is."""
        texts = [draft.text for draft in drafts]
        prompt_tokens = (
            _PROMPT_OVERHEAD_TOKENS
            + estimated_tokens(self.guideline + self.outline)
            + sum(map(estimated_tokens, texts))
        )
        window = await self.team.llm.context_window("architect") or _UNKNOWN_CONTEXT_TOKENS
        needed = prompt_tokens + answer_budget(texts)
        return None if needed <= window else f"about {needed:,} tokens of {window:,}"

    async def proofread(self, drafts: list[_Draft]) -> None:
        usable = [draft for draft in drafts if not draft.failed]
        windows = [
            usable[start : start + _PROOFREAD_WINDOW] for start in range(0, len(usable), _PROOFREAD_WINDOW)
        ]
        await asyncio.gather(
            *(
                self._rework(
                    "proofreader",
                    window,
                    "Correct grammar, spelling, factual slips against the guideline and any passage that is still "
                    "hard to read. If a paragraph needs nothing, give it back unchanged. One paragraph per input "
                    "paragraph, in order.",
                    f"Proofreader checking paragraphs {window[0].index + 1}-{window[-1].index + 1}",
                )
                for window in windows
            )
        )


async def simplify_document(
    sources: list[str],
    language: Language,
    llm: LLMClient,
    options: AgentSimpOptions | None = None,
    *,
    document: str = "",
    transcript: Transcript | None = None,
    on_step: StepCallback = no_steps,
    priority: Priority = Priority.INTERACTIVE,
) -> list[Rewrite]:
    """Simplify paragraphs (their source text) as one document; one Rewrite per paragraph, in order.
    `document` is the manuscript's plain text for the director and the analyst (default: the paragraphs).
    Model failures never raise: a paragraph whose simplification failed keeps its text and says why."""
    options = options or AgentSimpOptions()
    transcript = transcript if transcript is not None else Transcript(AGENTSIMP)
    team = Team(llm, transcript, on_step, priority, sampling=AGENTSIMP_SAMPLING)
    desk = _Desk(team, language, options, len(sources))
    words = (document or "\n\n".join(sources)).split(" ")
    await desk.plan(" ".join(words[: options.document_words]))
    drafts = [_Draft(index, source, source, {}) for index, source in enumerate(sources)]
    await asyncio.gather(*(desk.refine(draft) for draft in drafts))
    if options.architect:
        await desk.combine(drafts)
    if options.proofread:
        await desk.proofread(drafts)

    async def settle(draft: _Draft) -> Rewrite:
        if draft.failed:
            return Rewrite(
                draft.original, draft.original, RewriteStatus.FAILED, draft.failed, failures=[draft.failed]
            )
        return await finalize(
            team,
            draft.original,
            draft.text,
            language,
            role="proofreader",
            explained=draft.explained,
            failures=draft.failures,
        )

    return list(await asyncio.gather(*(settle(draft) for draft in drafts)))

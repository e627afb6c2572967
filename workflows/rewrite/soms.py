"""Simplify a paragraph: the Society of Medical Simplifiers (Lyu and Pergola).

Five agents. Lead agents: the layperson (asks questions about what it does not understand), the language clarifier
(proposes simpler words, phrases and sentence structures) and the redundancy checker (quotes short parts that add
nothing). Function agents: the expert (answers briefly, checks the rewrite's accuracy, vetoes removing essential
content) and the simplifier (keeps and rewrites the whole text). Each lead agent drives an interaction loop; an
agent selector picks the next loop from the conversation so far; each loop is entered at most `loop_limit` times
(the paper: 2) and the run stops when every loop is used up. Memory is natural language (the paper): every agent
but the layperson sees the conversation log.
"""

from __future__ import annotations

import logging
from typing import Any

from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.types import FailureKind, LLMError, Priority
from margin.workflows.prompts import fence
from margin.workflows.registry import SOMS

# The options (and the loops they name) live in a module the settings can import cheaply.
from .options import CLARIFIER, LAYPERSON, REDUNDANCY, SomsOptions
from .options import LOOPS as LOOPS
from .safety import TEXT_SCHEMA, clean_text, explained_of, finalize, language_rules
from .team import Team, log_turn
from .transcript import Transcript
from .types import Language, Rewrite, RewriteStatus, StepCallback, no_steps

log = logging.getLogger("margin.rewrite.soms")

MAX_REMOVAL_WORDS = 5  # the paper's redundancy checker quotes at most five words per removal
_MEMORY_TURNS = 24  # the log the agents see is bounded: the most recent turns
DOMAINS: dict[str, dict[str, str]] = {
    "medical": {
        "domain_text": "medical text",
        "expert": "medical expert",
        "reader": "a casual reader with no medical training",
        "essential": "medical information",
    },
    "science": {
        "domain_text": "scientific text",
        "expert": "expert in the paper's field",
        "reader": "a curious reader with no training in the paper's field",
        "essential": "scientific content (findings, numbers, methods, conditions)",
    },
}


_SELECTOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"next": {"type": "string"}, "reason": {"type": "string"}},
    "required": ["next"],
}
_QUESTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"questions": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
    "required": ["questions"],
}
_ANSWERS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answers": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
                "required": ["question", "answer"],
            },
        }
    },
    "required": ["answers"],
}
_ACCURACY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "accurate": {"type": "boolean"},
        "comments": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["accurate"],
}
_SUGGESTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "suggestions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "original": {"type": "string"},
                    "replacement": {"type": "string"},
                    "kind": {"type": "string"},
                },
                "required": ["original", "replacement"],
            },
        }
    },
    "required": ["suggestions"],
}
_DECISIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "index": {"type": "integer"},
                    "accept": {"type": "boolean"},
                    "reason": {"type": "string"},
                },
                "required": ["index", "accept"],
            },
        },
        **TEXT_SCHEMA["properties"],
    },
    "required": ["decisions", "text"],
}
_REMOVALS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "removals": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"quote": {"type": "string"}, "reason": {"type": "string"}},
                "required": ["quote"],
            },
        }
    },
    "required": ["removals"],
}
_VERDICTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "index": {"type": "integer"},
                    "remove": {"type": "boolean"},
                    "justification": {"type": "string"},
                },
                "required": ["index", "remove"],
            },
        }
    },
    "required": ["verdicts"],
}
_REWRITE_WITH_REASONING: dict[str, Any] = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, **TEXT_SCHEMA["properties"]},
    "required": ["text"],
}


class _Society:
    """One run over one paragraph: the current simplification, the log every agent with memory sees, and how
    often each loop has run."""

    def __init__(self, team: Team, original: str, language: Language, options: SomsOptions) -> None:
        self.team = team
        self.original = original
        self.language = language
        self.options = options
        self.text = original
        self.explained: dict[str, str] = {}
        self.log: list[str] = []
        self.entered = dict.fromkeys(options.loops, 0)
        self.rewrites = 0  # versions the simplifier produced

    @property
    def memory(self) -> str:
        """The log, bounded: the original text (always) and the most recent turns."""
        recent = self.log[1:][-_MEMORY_TURNS:]
        return "\n\n".join([*self.log[:1], *recent])

    def remember(self, who: str, what: str) -> None:
        self.log.append(log_turn(who, what))

    def _task(self, instruction: str) -> str:
        return f"{language_rules(self.language)}\n\nCurrent version of the text:\n{fence(self.text)}\n\n{instruction}"

    def _accept(self, data: Any, who: str) -> bool:
        text = clean_text(str(data.get("text", ""))) if isinstance(data, dict) else ""
        if not text:
            return False
        self.text = text
        self.explained.update(explained_of(data))
        self.rewrites += 1
        self.remember(f"{who} (latest simplification)", text)
        return True

    # -- the agent selector ---------------------------------------------------------------------------------------

    async def choose(self, turn: int, turns: int) -> str:
        available = [loop for loop in self.options.loops if self.entered[loop] < self.options.loop_limit]
        if len(available) == 1:
            return available[0]  # nothing to choose: no call
        try:
            completion = await self.team.ask(
                "selector",
                (
                    f"Loops that may still run: {', '.join(available)}.\n"
                    f"Loops run so far: {', '.join(f'{loop} {count}x' for loop, count in self.entered.items())}.\n"
                    f"Current version of the text:\n{fence(self.text)}\n\nWhich loop should run next?"
                ),
                step=f"Agent selector choosing the next loop ({turn}/{turns})",
                schema={
                    **_SELECTOR_SCHEMA,
                    "properties": {
                        **_SELECTOR_SCHEMA["properties"],
                        "next": {"type": "string", "enum": available},
                    },
                },
                schema_name="choice",
                memory=self.memory,
            )
            choice = str(completion.data.get("next", "")).strip().lower()
        except LLMError:
            choice = ""
        if choice not in available:
            choice = available[0]
            self.team.transcript.note(f"selector gave no usable choice; running the {choice} loop")
        return choice

    # -- the three interaction loops ------------------------------------------------------------------------------

    async def layperson_loop(self, number: int) -> None:
        limit = self.options.loop_limit
        questions_reply = await self.team.ask(
            "layperson",
            f"The text:\n{fence(self.text)}\n\nAsk at least {self.options.min_questions} questions about what you do "
            "not understand in it.",
            step=f"Layperson asking questions, loop {number}/{limit}",
            schema=_QUESTIONS_SCHEMA,
            schema_name="questions",
        )  # the layperson keeps no memory (the paper): it only reads the current text
        questions = [str(item).strip() for item in questions_reply.data["questions"] if str(item).strip()]
        if len(questions) < self.options.min_questions:
            self.team.transcript.note(
                f"the layperson asked {len(questions)} question(s), fewer than asked for"
            )
        numbered = "\n".join(f"{index}. {question}" for index, question in enumerate(questions, 1))
        self.remember("Layperson (my questions)", numbered)
        answers_reply = await self.team.ask(
            "expert",
            self._task(f"The reader's questions:\n{fence(numbered)}\n\nAnswer each question briefly."),
            step=f"Expert answering the layperson, loop {number}/{limit}",
            schema=_ANSWERS_SCHEMA,
            schema_name="answers",
            memory=self.memory,
        )
        answers = "\n".join(
            f"- {item.get('question', '')}: {item.get('answer', '')}"
            for item in answers_reply.data["answers"]
        )
        self.remember("Expert (answers)", answers)
        rewrite = await self.team.ask(
            "simplifier",
            self._task(
                f"The expert's clarifications:\n{fence(answers)}\n\nThink step by step about how each clarification fits "
                'into the text (put this under "reasoning"), then rewrite the whole text in a simpler form that '
                "answers the reader's questions."
            ),
            step=f"Simplifier rewriting with the clarifications, loop {number}/{limit}",
            schema=_REWRITE_WITH_REASONING,
            schema_name="rewrite",
            memory=self.memory,
        )
        if self._accept(rewrite.data, "Simplifier"):
            await self.check_accuracy(number)

    async def check_accuracy(self, number: int) -> None:
        """The expert checks the rewrite against the original; the simplifier corrects what it flags."""
        for round_ in range(1, self.options.accuracy_rounds + 1):
            verdict = await self.team.ask(
                "expert",
                f"Original text:\n{fence(self.original)}\n\nRewritten text:\n{fence(self.text)}\n\n"
                "Is the rewrite accurate? "
                "If not, list what is wrong.",
                step=f"Expert checking accuracy, loop {number}/{self.options.loop_limit}",
                schema=_ACCURACY_SCHEMA,
                schema_name="accuracy",
                memory=self.memory,
            )
            comments = [str(item) for item in verdict.data.get("comments") or [] if str(item).strip()]
            if verdict.data.get("accurate") or not comments:
                self.remember("Expert", "The rewrite is accurate.")
                return
            listing = "\n".join(f"- {comment}" for comment in comments)
            self.remember("Expert (the rewrite is not accurate)", listing)
            corrected = await self.team.ask(
                "simplifier",
                self._task(
                    f"The expert found these inaccuracies:\n{fence(listing)}\n\nCorrect them in the whole text."
                ),
                step=f"Simplifier correcting inaccuracies (round {round_})",
                schema=TEXT_SCHEMA,
                schema_name="rewrite",
                memory=self.memory,
            )
            if not self._accept(corrected.data, "Simplifier"):
                return

    async def clarifier_loop(self, number: int) -> None:
        limit = self.options.loop_limit
        reply = await self.team.ask(
            "clarifier",
            self._task("List your suggestions. Do not rewrite the whole text."),
            step=f"Language clarifier suggesting substitutions, loop {number}/{limit}",
            schema=_SUGGESTIONS_SCHEMA,
            schema_name="suggestions",
            memory=self.memory,
        )
        pending = _suggestions(reply.data)
        for round_ in range(1, self.options.clarifier_rounds + 1):
            if not pending:
                self.remember("Language clarifier", "No (further) substitutions to suggest.")
                return
            listing = "\n".join(
                f'{index}. [{item["kind"]}] "{item["original"]}" -> "{item["replacement"]}"'
                for index, item in enumerate(pending, 1)
            )
            self.remember("Language clarifier (suggested substitutions)", listing)
            review = await self.team.ask(
                "simplifier",
                self._task(
                    f"The language clarifier suggests:\n{fence(listing)}\n\nAccept or reject each suggestion by its number, "
                    "with a reason, and give the whole text with the accepted ones applied."
                ),
                step=f"Simplifier reviewing substitutions, loop {number}/{limit}, round {round_}",
                schema=_DECISIONS_SCHEMA,
                schema_name="decisions",
                memory=self.memory,
            )
            decisions = {
                int(item["index"]): item
                for item in review.data.get("decisions") or []
                if isinstance(item, dict) and isinstance(item.get("index"), int)
            }
            self._accept(review.data, "Simplifier")
            rejected = [
                (item, str(decisions[index].get("reason", "")))
                for index, item in enumerate(pending, 1)
                if index in decisions and not decisions[index].get("accept")
            ]
            if not rejected:
                self.remember("Simplifier", "All substitutions accepted.")
                return
            if round_ == self.options.clarifier_rounds:
                self.team.transcript.note(
                    f"{len(rejected)} substitution(s) still rejected after {round_} rounds"
                )
                return
            reasons = "\n".join(
                f'- "{item["original"]}" -> "{item["replacement"]}": rejected because {reason or "no reason given"}'
                for item, reason in rejected
            )
            self.remember("Simplifier (rejected)", reasons)
            revised = await self.team.ask(
                "clarifier",
                self._task(f"The simplifier rejected these substitutions:\n{fence(reasons)}\n\nRevise them."),
                step=f"Language clarifier revising rejected substitutions, loop {number}/{limit}",
                schema=_SUGGESTIONS_SCHEMA,
                schema_name="suggestions",
                memory=self.memory,
            )
            pending = _suggestions(revised.data)

    async def redundancy_loop(self, number: int) -> None:
        limit = self.options.loop_limit
        reply = await self.team.ask(
            "redundancy_checker",
            self._task(
                f"Quote the redundant parts, each at most {MAX_REMOVAL_WORDS} words, or give an empty list."
            ),
            step=f"Redundancy checker looking for non-essential words, loop {number}/{limit}",
            schema=_REMOVALS_SCHEMA,
            schema_name="removals",
            memory=self.memory,
        )
        removals = []
        for item in reply.data["removals"]:
            quote = str(item.get("quote", "")).strip() if isinstance(item, dict) else ""
            if not quote or len(quote.split()) > MAX_REMOVAL_WORDS or quote not in self.text:
                self.team.transcript.note(
                    f"dropped a removal that is not a short quote of the text: {quote!r}"
                )
                continue
            removals.append((quote, str(item.get("reason", ""))))
        if not removals:
            self.remember("Redundancy checker", "Nothing to remove.")
            return
        listing = "\n".join(
            f'{index}. "{quote}" ({reason})' for index, (quote, reason) in enumerate(removals, 1)
        )
        self.remember("Redundancy checker (proposed removals)", listing)
        verdicts = await self.team.ask(
            "expert",
            self._task(
                f"The redundancy checker proposes removing:\n{fence(listing)}\n\nFor each, by its number, say whether it "
                "can be removed without losing essential content, and why."
            ),
            step=f"Expert vetoing removals of essential content, loop {number}/{limit}",
            schema=_VERDICTS_SCHEMA,
            schema_name="verdicts",
            memory=self.memory,
        )
        allowed = {
            int(item["index"])
            for item in verdicts.data.get("verdicts") or []
            if isinstance(item, dict) and isinstance(item.get("index"), int) and item.get("remove")
        }
        approved = [quote for index, (quote, _) in enumerate(removals, 1) if index in allowed]
        vetoed = len(removals) - len(approved)
        self.remember("Expert", f"Approved {len(approved)} removal(s), vetoed {vetoed}.")
        if not approved:
            return
        listing = "\n".join(f'- "{quote}"' for quote in approved)
        removal = await self.team.ask(
            "simplifier",
            self._task(f"Remove exactly these parts and keep the sentences grammatical:\n{fence(listing)}"),
            step=f"Simplifier removing redundant words, loop {number}/{limit}",
            schema=TEXT_SCHEMA,
            schema_name="rewrite",
            memory=self.memory,
        )
        self._accept(removal.data, "Simplifier")


def _suggestions(data: Any) -> list[dict[str, str]]:
    suggestions = []
    for item in data.get("suggestions") or [] if isinstance(data, dict) else []:
        if not isinstance(item, dict):
            continue
        original, replacement = (
            str(item.get("original", "")).strip(),
            str(item.get("replacement", "")).strip(),
        )
        if original and replacement and original != replacement:
            suggestions.append(
                {"original": original, "replacement": replacement, "kind": str(item.get("kind") or "word")}
            )
    return suggestions


async def simplify_paragraph(
    source: str,
    language: Language,
    llm: LLMClient,
    options: SomsOptions | None = None,
    *,
    transcript: Transcript | None = None,
    on_step: StepCallback = no_steps,
    priority: Priority = Priority.INTERACTIVE,
) -> Rewrite:
    """Simplify one paragraph's source text. Never raises for model failures: a failed loop is recorded and the
    run goes on with the text as it stands; the result is checked for lost citations, math and links."""
    options = options or SomsOptions()
    words = DOMAINS.get(options.domain, DOMAINS["science"])
    transcript = transcript if transcript is not None else Transcript(SOMS)
    team = Team(llm, transcript, on_step, priority, words)
    society = _Society(team, source, language, options)
    society.remember("Original text", source)
    run = {
        LAYPERSON: society.layperson_loop,
        CLARIFIER: society.clarifier_loop,
        REDUNDANCY: society.redundancy_loop,
    }
    turns = len(options.loops) * options.loop_limit
    for turn in range(1, turns + 1):
        loop = await society.choose(turn, turns)
        society.entered[loop] += 1
        try:
            await run[loop](society.entered[loop])
        except LLMError as error:
            transcript.note(f"the {loop} loop stopped: {error}")
            if error.kind in (FailureKind.UNAVAILABLE, FailureKind.CRASHED, FailureKind.TIMEOUT):
                break  # nothing answers (in time): the other loops would wait and fail the same way
    if society.rewrites == 0:
        if not team.failures:
            return Rewrite(source, source, RewriteStatus.UNCHANGED, "the agents found nothing to simplify")
        message = f"no agent produced a rewrite ({team.failures[-1]})"
        return Rewrite(source, source, RewriteStatus.FAILED, message, failures=list(team.failures))
    return await finalize(
        team, source, society.text, language, role="simplifier", explained=society.explained
    )

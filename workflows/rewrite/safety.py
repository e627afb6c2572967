"""The last step of every paragraph rewrite: check that nothing protected was lost, repair once, else refuse."""

from __future__ import annotations

import re
from typing import Any

from margin.workflows.llm.types import LLMError
from margin.workflows.prompts import fence

from .additions import added_elements
from .edits import carry_comments
from .preservation import Element, describe, missing_elements
from .team import Team
from .types import Language, Rewrite, RewriteStatus

# The shape of every agent answer that is a paragraph's new text.
TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "explained": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"element": {"type": "string"}, "words": {"type": "string"}},
                "required": ["element", "words"],
            },
        },
    },
    "required": ["text"],
}
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})[\w-]*\n(.*?)\n?\1\s*$", re.S)  # models echo our fences too
_TITLE = re.compile(
    r"^\s*(?:#+\s*)?\**(?:latest simplification|simplified (?:text|paragraph)|text)\**\s*:?\s*\n", re.I
)


def clean_text(text: str) -> str:
    """A model's rewrite without the wrapping some models add (code fences, a title line)."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(2).strip()
    return _TITLE.sub("", text, count=1).strip()


def explained_of(data: Any) -> dict[str, str]:
    if not isinstance(data, dict):
        return {}
    return {
        str(item.get("element", "")): str(item.get("words", ""))
        for item in data.get("explained") or []
        if isinstance(item, dict)
    }


def language_rules(language: Language) -> str:
    if language is Language.LATEX:
        return (
            "The text is LaTeX source. Keep every \\cite, \\ref, \\label, \\url, math span ($...$) and other "
            "command exactly as written, with its arguments; change only the words around them. Add no command, "
            "environment, link or comment that the text does not already have (\\emph, \\textbf and \\textit "
            "are fine)."
        )
    return (
        "The text is Markdown. Keep every citation (@key), link and its URL, footnote marker, math span ($...$) "
        "and code span exactly as written; change only the words around them. Add no link, image, HTML, code "
        "or LaTeX command that the text does not already have."
    )


# A simplification far longer than its paragraph is no simplification; refusing it also bounds what the checks
# below read by the size of the author's paragraph, whatever a model sends back.
_MAX_GROWTH, _GROWTH_SLACK = 5, 2_000


def _problems(lost: list[Element], added: list[Element]) -> str:
    """'lost 1 citation (\\cite{k}) and added 1 file or shell command (\\input{x})' for the user's message."""
    parts = ([f"lost {describe(lost)}"] if lost else []) + ([f"added {describe(added)}"] if added else [])
    return " and ".join(parts)


def _repair_request(
    original: str, candidate: str, language: Language, lost: list[Element], added: list[Element]
) -> str:
    """What the repair asks for: the lost elements back, the added ones out, nothing else changed."""
    asks = []
    if lost:
        asks.append(f"Your rewrite lost {describe(lost)}. Put each of them back where it belongs.")
    if added:
        asks.append(
            f"Your rewrite added {describe(added)}, which the original does not have. Take each of them out, "
            "keeping only the plain words."
        )
    return (
        f"{language_rules(language)}\n\nOriginal:\n{fence(original)}\n\nYour rewrite:\n{fence(candidate)}\n\n"
        f"{' '.join(asks)} Change nothing else. Answer with the whole repaired text."
    )


async def finalize(
    team: Team,
    original: str,
    candidate: str,
    language: Language,
    *,
    role: str,
    explained: dict[str, str] | None = None,
    failures: list[str] | None = None,
) -> Rewrite:
    """The paragraph rewrite as it may reach the user: `candidate` if it keeps every protected element, else one
    repair by `role`, else a refusal that names what would have been lost. `failures` are this paragraph's own
    (default: all the team met)."""
    candidate = clean_text(candidate)
    failures = list(team.failures if failures is None else failures)
    if not candidate:
        return Rewrite(
            original, original, RewriteStatus.FAILED, "the agents produced no text", failures=failures
        )
    if len(candidate) > _MAX_GROWTH * len(original) + _GROWTH_SLACK:
        message = (
            f"not applied: the rewrite is {len(candidate) // max(len(original), 1)} times as long as the text"
        )
        team.transcript.note(message)
        return Rewrite(original, original, RewriteStatus.REFUSED, message, failures=failures)
    lost = missing_elements(original, candidate, language, explained)
    added = added_elements(original, candidate, language)
    if lost or added:
        team.transcript.note(f"the rewrite {_problems(lost, added)}; asking the {role} to repair it once")
        try:
            repaired = await team.ask(
                role,
                _repair_request(original, candidate, language, lost, added),
                step="Repairing the rewrite",
                prompt_name="repair",
                schema=TEXT_SCHEMA,
                schema_name="rewrite",
            )
            repaired_text = clean_text(str(repaired.data.get("text", "")))
            if repaired_text and len(repaired_text) <= _MAX_GROWTH * len(original) + _GROWTH_SLACK:
                candidate = repaired_text
                explained = {**(explained or {}), **explained_of(repaired.data)}
                lost = missing_elements(original, candidate, language, explained)
                added = added_elements(original, candidate, language)
        except LLMError as error:
            failures.append(str(error))
    if lost or added:
        message = f"not applied: the rewrite would have {_problems(lost, added)}"
        team.transcript.note(message)
        return Rewrite(
            original,
            original,
            RewriteStatus.REFUSED,
            message,
            [str(item) for item in lost],
            failures,
            added=[str(item) for item in added],
        )
    if candidate.strip() == original.strip():
        return Rewrite(
            original,
            original,
            RewriteStatus.UNCHANGED,
            "the agents left the text as it was",
            failures=failures,
        )
    text = carry_comments(original, _keep_outer_space(original, candidate), language)
    return Rewrite(original, text, RewriteStatus.REWRITTEN, failures=failures)


def _keep_outer_space(original: str, text: str) -> str:
    """The rewrite with the original's leading and trailing white space, so the edit keeps the layout around it."""
    leading = original[: len(original) - len(original.lstrip())]
    trailing = original[len(original.rstrip()) :]
    return leading + text.strip() + trailing

"""The last step of every paragraph rewrite: check that nothing protected was lost, repair once, else refuse."""

from __future__ import annotations

import re
from typing import Any

from margin.workflows.llm.types import LLMError

from .edits import carry_comments
from .preservation import describe, missing_elements
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
_FENCE = re.compile(r"^\s*```[\w-]*\n(.*?)\n?```\s*$", re.S)
_TITLE = re.compile(
    r"^\s*(?:#+\s*)?\**(?:latest simplification|simplified (?:text|paragraph)|text)\**\s*:?\s*\n", re.I
)


def clean_text(text: str) -> str:
    """A model's rewrite without the wrapping some models add (code fences, a title line)."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
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
            "command exactly as written, with its arguments; change only the words around them."
        )
    return (
        "The text is Markdown. Keep every citation (@key), link and its URL, footnote marker, math span ($...$) "
        "and code span exactly as written; change only the words around them."
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
    lost = missing_elements(original, candidate, language, explained)
    if lost:
        team.transcript.note(f"the rewrite lost {describe(lost)}; asking the {role} to repair it once")
        try:
            repaired = await team.ask(
                role,
                (
                    f"{language_rules(language)}\n\nOriginal:\n{original}\n\nYour rewrite:\n{candidate}\n\n"
                    f"Your rewrite lost {describe(lost)}. Put each of them back where it belongs and change "
                    "nothing else. Answer with the whole repaired text."
                ),
                step="Repairing the rewrite",
                prompt_name="repair",
                schema=TEXT_SCHEMA,
                schema_name="rewrite",
            )
            candidate = clean_text(str(repaired.data.get("text", "")))
            explained = {**(explained or {}), **explained_of(repaired.data)}
            lost = missing_elements(original, candidate, language, explained) if candidate else lost
        except LLMError as error:
            failures.append(str(error))
    if lost:
        message = f"not applied: the rewrite would have lost {describe(lost)}"
        team.transcript.note(message)
        return Rewrite(
            original, original, RewriteStatus.REFUSED, message, [str(item) for item in lost], failures
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

"""SWIF2T's agents as calls: planner, controller, investigator, reviewer, and an optional plan judge.

Messages put stable text first (the role's instructions, the schema, the examples), then the paragraph, then
what varies per call, so that vLLM's prefix cache serves the common part. Text that is not ours (the paragraph,
passages, other agents' answers) is fenced, and every role's instructions say that fenced text is data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.types import LLMError, Priority, Request
from margin.workflows.prompts import fence, prompt, role_prompt

from .plans import LITERATURE, PAPER, PLAN_SCHEMA, REVIEW, SKIP, Plan, Step
from .quotes import quote_spans
from .retrieval import numbered_context
from .types import Evidence, Passage, Source, WeaknessType

# The reviewer writes its reasoning first, then the quote, the label and the review, as SWIF2T's reviewer does:
# under constrained decoding the verdict then follows the reasoning instead of preceding it.
_FINDING_KEYS = ("reasoning", "quote", "label", "review")
MAX_FINDINGS = 3


def review_schema(spans: list[str] | None = None, max_findings: int = MAX_FINDINGS) -> dict[str, Any]:
    """The reviewer's answer. With `spans`, the strict form a decoder enforces: the quote is one of the
    paragraph's own sentences or clauses and the label one of the five types, so that an invalid finding cannot
    be generated. Without, the lenient form validated on our side (quotes are then located in the paragraph,
    exactly or approximately, and labels parsed as models write them)."""
    quote: dict[str, Any] = {"type": "string"}
    label: dict[str, Any] = {"type": "string"}
    if spans is not None:
        quote = {"type": "string", "enum": spans} if spans else quote
        label = {"type": "string", "enum": [member.value for member in WeaknessType]}
    # No maxLength on the free text: llama.cpp turns one into a grammar repetition it refuses (and then crashes);
    # answers are bounded when read instead (the byte limit, and the lengths in feedback.types).
    finding = {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "quote": quote,
            "label": label,
            "review": {"type": "string"},
        },
        "required": list(_FINDING_KEYS),
    }
    findings: dict[str, Any] = {"type": "array", "items": finding}
    if spans is not None:
        findings["maxItems"] = max_findings
    return {"type": "object", "properties": {"findings": findings}, "required": ["findings"]}


REVIEW_SCHEMA = review_schema()
CONTROLLER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string"},
        "action": {"type": "string", "enum": [PAPER, LITERATURE, REVIEW, SKIP]},
        "question": {"type": "string"},
    },
    "required": ["explanation", "action"],
}
ANSWER_SCHEMA: dict[str, Any] = {  # the answer first, then whether it answers: decided after writing it
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "passages": {"type": "array", "items": {"type": "integer"}},
        "answerable": {"type": "boolean"},
    },
    "required": ["answer", "answerable"],
}
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ratings": {"type": "array", "items": {"type": "number", "minimum": 0, "maximum": 10}}},
    "required": ["ratings"],
}
_UNKNOWN = ("i don't know", "i do not know", "unknown", "not answerable", "cannot be answered")


def _system(name: str, **values: str) -> dict[str, str]:
    return {"role": "system", "content": role_prompt(name, **values)}


def _user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def _paragraph(paragraph: str) -> str:
    return f"Paragraph:\n{fence(paragraph)}"


def _one_line(text: str) -> str:
    """A model's question on one line, where the prompt's shape needs it there (numbered steps, the last line):
    with no line break it cannot start a heading or a section of its own."""
    return " ".join(text.split())


async def plans(
    llm: LLMClient, paragraph: str, candidates: int, priority: Priority
) -> tuple[list[Plan], list[LLMError]]:
    """The candidate plans: one prompt sampled `candidates` times (one request with `n` where the endpoint takes
    it, so the prompt is processed once), and the failures of those that could not be used."""
    completions, failures = await llm.complete_choices(
        Request(
            role="planner",
            messages=(_system("planner"), _user(f"{_paragraph(paragraph)}\n\nWrite your plan.")),
            schema=PLAN_SCHEMA,
            schema_name="plan",
            priority=priority,
            temperature=0.7 if candidates > 1 else None,  # samples that differ, for the scorer to choose from
        ),
        candidates,
    )
    return [Plan.from_json(completion.data) for completion in completions], failures


async def judge(llm: LLMClient, paragraph: str, plans: list[Plan], priority: Priority) -> list[float]:
    """Ratings from 0 to 1 for each plan, by the judge model (an optional complement to the heuristics)."""
    listing = "\n\n".join(
        f"Plan {number}:\n"
        + "\n".join(f"{i}. [{s.action}] {_one_line(s.question)}" for i, s in enumerate(p.steps, 1))
        for number, p in enumerate(plans, 1)
    )
    completion = await llm.complete(
        Request(
            role="judge",
            messages=(
                _system("judge"),
                _user(f"{_paragraph(paragraph)}\n\nThe plans:\n{fence(listing)}\n\nRate each plan in order."),
            ),
            schema=JUDGE_SCHEMA,
            schema_name="ratings",
            priority=priority,
        )
    )
    ratings = [float(value) / 10 for value in completion.data["ratings"]]
    return (ratings + [0.0] * len(plans))[: len(plans)]


@dataclass(frozen=True, slots=True)
class Decision:
    action: str
    question: str
    explanation: str


async def control(
    llm: LLMClient, paragraph: str, evidence: list[Evidence], remaining: list[Step], priority: Priority
) -> Decision:
    progress = "\n".join(f"- Q: {item.question}\n  A: {item.answer}" for item in evidence) or "(nothing yet)"
    # One line per step: its question cannot open a section of the prompt. (The steps stay unfenced: step 1 is
    # what the message asks about, right under its heading.)
    steps = "\n".join(
        f"{number}. [{step.action}] {_one_line(step.question)}" for number, step in enumerate(remaining, 1)
    )
    completion = await llm.complete(
        Request(
            role="controller",
            messages=(
                _system("controller"),
                _user(
                    f"{_paragraph(paragraph)}\n\nWhat has been learned so far:\n{fence(progress)}\n\n"
                    f"Remaining planned steps:\n{steps}\n\nDecide what to do about step 1 of the remaining steps."
                ),
            ),
            schema=CONTROLLER_SCHEMA,
            schema_name="decision",
            priority=priority,
        )
    )
    data = completion.data
    return Decision(str(data["action"]), str(data.get("question") or "").strip(), str(data["explanation"]))


async def investigate(
    llm: LLMClient, question: str, passages: list[Passage], source: Source, priority: Priority
) -> Evidence | None:
    """The answer to a question from the given passages, or None when they do not answer it."""
    if not passages:
        return None
    where = (
        "this manuscript" if source is Source.PAPER else "the literature (cited works, the author's library)"
    )
    completion = await llm.complete(
        Request(
            role="investigator",
            messages=(
                _system("investigator", source=where),
                _user(f"Passages:\n{fence(numbered_context(passages))}\n\nQuestion: {_one_line(question)}"),
            ),
            schema=ANSWER_SCHEMA,
            schema_name="answer",
            priority=priority,
        )
    )
    data = completion.data
    answer = str(data.get("answer", "")).strip()
    if not data.get("answerable") or not answer or answer.lower().replace("’", "'").rstrip(".!") in _UNKNOWN:
        return None  # "does not know" answers are dropped, as in the paper
    cited = [
        passages[n - 1] for n in data.get("passages") or [] if isinstance(n, int) and 0 < n <= len(passages)
    ]
    return Evidence(question, answer, source, tuple(cited or passages))


def review_messages(paragraph: str, context: str, max_findings: int = 1) -> list[dict[str, str]]:
    how_many = (
        "Report only the most important weakness"
        if max_findings == 1
        else f"Report at most {max_findings} weaknesses, the most important first"
    )
    system = (
        role_prompt("reviewer", how_many=how_many)
        + "\n\nExamples of findings, written the way yours should be:\n\n"
        + prompt("reviewer_examples")
    )
    body = _paragraph(paragraph)
    if context:
        body += f"\n\nContext gathered from the rest of the paper and the literature:\n{fence(context)}"
    return [{"role": "system", "content": system}, _user(body)]


def review_request(
    paragraph: str, messages: list[dict[str, str]], max_findings: int, priority: Priority
) -> Request:
    return Request(
        role="reviewer",
        messages=tuple(messages),
        schema=REVIEW_SCHEMA,
        decoding_schema=review_schema(quote_spans(paragraph), max_findings),
        schema_name="review",
        priority=priority,
    )


async def review(
    llm: LLMClient, paragraph: str, messages: list[dict[str, str]], max_findings: int, priority: Priority
) -> tuple[list[Any], str]:
    """The reviewer's raw findings and its answer text (kept for a repair request)."""
    completion = await llm.complete(review_request(paragraph, messages, max_findings, priority))
    return list(completion.data.get("findings", [])), completion.text


def evidence_context(evidence: list[Evidence]) -> str:
    lines = []
    for item in evidence:
        origin = "from the paper" if item.source is Source.PAPER else "from the literature"
        lines.append(f"Q ({origin}): {item.question}\nA: {item.answer}")
    return "\n\n".join(lines)

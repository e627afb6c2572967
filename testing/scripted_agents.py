"""Scripted answers for every rewriting role (SoMS, AgentSimp, JRE-L), for tests, benchmarks and demos.

Each answer is derived from the prompt the agent got, the way a (very literal) model would: the simplifier swaps a
few formal words for plain ones and keeps all markup, the layperson asks four questions, the journalist writes short
sentences from the paper's words. Deterministic, so runs are reproducible and cacheable.
"""

from __future__ import annotations

import json
import re
from typing import Any

from margin.workflows.prompts import fenced_after

from .scripted_endpoint import RecordedRequest, Reply, Rule

PLAIN_WORDS = {
    "approximately": "about",
    "utilize": "use",
    "demonstrate": "show",
    "demonstrates": "shows",
    "substantially": "much",
    "consequently": "so",
    "eventually": "in the end",
    "however": "but",
    "in order to": "to",
    "numerous": "many",
    "additionally": "also",
    "nevertheless": "still",
    "therefore": "so",
    "furthermore": "also",
    "noticeably": "clearly",
    "promises": "offers",
    "discard": "drop",
    "insufficient": "too little",
    "predominantly": "mostly",
}
_TEXT_MARKERS = (
    "Current version of the text:\n",
    "The paragraph to simplify:\n",
    "The paragraph to analyse:\n",
    "The paragraph to explain:\n",
    "Your rewrite:\n",
    "The simplified paragraph:\n",
    "Basic simplification:\n",
)


def _last_user(request: RecordedRequest) -> str:
    users = [str(m.get("content", "")) for m in request.body.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users else ""


def _block_after(prompt: str, marker: str) -> str | None:
    """The fenced block after the last `marker` (texts are fenced in prompts); else up to a blank line."""
    fenced = fenced_after(prompt, marker)
    if fenced is not None:
        return fenced.strip()
    start = prompt.rfind(marker)
    if start < 0:
        return None
    rest = prompt[start + len(marker) :]
    end = rest.find("\n\n")
    return (rest if end < 0 else rest[:end]).strip()


def text_in(prompt: str) -> str:
    for marker in _TEXT_MARKERS:
        found = _block_after(prompt, marker)
        if found:
            return found
    return ""


def plainer(text: str) -> str:
    """`text` with formal words swapped for plain ones, outside LaTeX commands; unchanged if none occur."""
    for formal, plain in PLAIN_WORDS.items():
        pattern = re.compile(rf"(?<![\\\w]){re.escape(formal)}\b", re.I)
        match = pattern.search(text)
        if match:
            replacement = plain.capitalize() if match.group(0)[0].isupper() else plain
            return text[: match.start()] + replacement + text[match.end() :]
    return text


def _suggestions(text: str) -> list[dict[str, str]]:
    for formal, plain in PLAIN_WORDS.items():
        match = re.search(rf"(?<![\\\w]){re.escape(formal)}\b", text, re.I)
        if match:
            return [{"original": match.group(0), "replacement": plain, "kind": "word"}]
    return []


def _numbered(prompt: str) -> list[str]:
    return re.findall(r"^\d+\. (.+)$", prompt, re.M)


def _respond(request: RecordedRequest) -> Reply:
    role = request.role or ""
    prompt = _last_user(request)
    text = text_in(prompt)
    answer: Any
    if role == "selector":
        loops = re.search(r"Loops that may still run: ([^.]+)\.", prompt)
        answer = {
            "next": loops.group(1).split(", ")[0] if loops else "layperson",
            "reason": "first open loop",
        }
    elif role == "layperson":
        answer = {
            "questions": [
                "What does the main term mean?",
                "What did the authors find?",
                "Why does the number matter?",
                "What are the limits of this?",
            ]
        }
    elif role == "expert":
        if "Is the rewrite accurate" in prompt:
            answer = {"accurate": True, "comments": []}
        elif "proposes removing" in prompt:
            answer = {
                "verdicts": [{"index": i, "remove": True, "justification": "filler"} for i in range(1, 9)]
            }
        else:
            answer = {
                "answers": [
                    {"question": q, "answer": "It means what the text says, in plain words."}
                    for q in _numbered(prompt)
                ]
            }
    elif role == "simplifier" and "Accept or reject each suggestion" in prompt:
        listing = re.findall(r'^(\d+)\. \[\w+\] "(.*?)" -> "(.*?)"$', prompt, re.M)
        new = text
        for _, original, replacement in listing:
            new = new.replace(original, replacement, 1)
        answer = {
            "decisions": [{"index": int(n), "accept": True, "reason": "simpler"} for n, _, _ in listing],
            "text": new,
        }
    elif role == "simplifier" and "Remove exactly these parts" in prompt:
        new = text
        for quote in re.findall(r'^- "(.*?)"$', prompt, re.M):
            new = re.sub(r"\s{2,}", " ", new.replace(quote, "", 1))
        answer = {"text": new}
    elif role in ("simplifier", "proofreader") and (
        "Your rewrite lost" in prompt or "Your rewrite added" in prompt
    ):
        original = _block_after(prompt, "Original:\n") or text
        answer = {"text": original}
    elif role == "simplifier":
        answer = {"reasoning": "Swap formal words for plain ones.", "text": plainer(text)}
    elif role == "clarifier":
        answer = {"suggestions": _suggestions(text)}
    elif role == "redundancy_checker":
        match = re.search(r"\b(?:very|actually|basically|in fact|of course)\b", text, re.I)
        answer = {"removals": [{"quote": match.group(0), "reason": "filler"}] if match else []}
    elif role == "director":
        return Reply(
            content="1. Summary: the paper's main points.\n2. Style and tone: academic.\n3. Target audience: adults who left school at 16.\n4. Key terms: the paper's terms.\n5. Main arguments: as stated.\n6. Context: none.\n7. Attitudes: cautious."
        )
    elif role == "analyst":
        answer = {
            "title": "What the paper found",
            "subheadings": ["The problem", "The method", "The results"],
        }
    elif role == "supervisor":
        answer = {"suggestions": "none"}
    elif role == "metaphor_analyst":
        answer = {"analysis": "none", "text": "none"}
    elif role == "terminology_interpreter":
        answer = {"terms": [], "text": plainer(text)}
    elif role == "integrator":
        answer = {"text": plainer(_block_after(prompt, "Basic simplification:\n") or text)}
    elif role in ("architect", "proofreader"):
        listing = prompt.split("paragraphs:\n\n", 1)[-1]
        count = len(re.findall(r"^\[\d+\]\n", listing, re.M))
        blocks = [_block_after(listing, f"[{number}]\n") or "" for number in range(1, count + 1)]
        answer = {"paragraphs": blocks}
    elif role == "journalist":
        sentences = re.findall(r"[A-Z][^.?!]{20,140}[.?!]", prompt)[:4]
        body = " ".join(sentences) or "Researchers studied a problem and found a simple answer."
        if "Your article:" in prompt:
            previous = _block_after(prompt, "Your article:\n") or body
            shorter = ". ".join(part for part in previous.split(". ")[:-1]) or previous
            return Reply(
                content=f"## Improvement\nUse shorter sentences.\n\n## Revised Article\n{plainer(shorter)}"
            )
        return Reply(content=f"## Article\n{body}")
    elif role == "reader":
        return Reply(
            content="## Extraction\n1. index: in the first sentence\n\n## Explanation\n1. index: a list that helps find things"
        )
    elif role == "editor":
        return Reply(
            content="## Evaluation of the reader's notes\n- Content accuracy: good\n\n## Advice\n1. Explain the main term.\n2. Use shorter sentences."
        )
    else:
        answer = {"text": text}
    return Reply(content=json.dumps(answer))


def rewrite_rules() -> list[Rule]:
    """One rule answering every rewriting role."""
    return [Rule(respond=_respond)]

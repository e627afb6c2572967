"""Structured output on our side: tolerant JSON extraction and schema validation with readable errors."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)


def schema_instructions(schema: dict[str, Any]) -> str:
    """The text that tells a model the shape of its answer (kept stable, so it sits in the cached prefix)."""
    # In the schema's own key order: a model writes the keys in the order it is shown them, and the pipelines
    # order them on purpose (reasoning before a verdict, an answer before its "answerable" flag).
    return (
        "Answer with one JSON value and nothing else: no prose before or after it, no code fences. "
        "It must match this JSON Schema:\n" + json.dumps(schema, indent=1, ensure_ascii=False)
    )


def _balanced(text: str, start: int) -> str | None:
    """The JSON object or array that opens at text[start], found by bracket matching outside strings."""
    opener = text[start]
    closer = "}" if opener == "{" else "]"
    depth = 0
    in_string = False
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return text[start : index + 1] if char == closer else None
    return None


def json_candidates(text: str) -> Iterator[Any]:
    """Every JSON value a model's answer may mean, most likely first: the whole answer, fenced blocks, then
    each balanced object or array in the prose (a citation like [3] is one, so callers check the schema)."""
    stripped = text.strip()
    if not stripped:
        return
    seen: set[str] = set()
    candidates = [stripped, *(match.group(1).strip() for match in _FENCE.finditer(text))]
    for match in re.finditer(r"[{\[]", text):
        block = _balanced(text, match.start())
        if block is not None:
            candidates.append(block)
    for candidate in candidates:
        if candidate in seen:
            continue
        seen.add(candidate)
        try:
            yield json.loads(candidate)
        except ValueError:
            continue


def extract_json(text: str) -> Any:
    """The first JSON value in a model's answer, even when wrapped in prose or fences. Raises ValueError."""
    if not text.strip():
        raise ValueError("the answer is empty")
    for data in json_candidates(text):
        return data
    raise ValueError("the answer contains no parseable JSON")


def validation_error(data: Any, schema: dict[str, Any]) -> str | None:
    """A one-line description of how `data` breaks `schema`, or None when it conforms."""
    error = best_match(Draft202012Validator(schema).iter_errors(data))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "the top level"
    return f"at {where}: {error.message}"

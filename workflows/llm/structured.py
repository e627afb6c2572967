"""Structured output on our side: tolerant JSON extraction and schema validation with readable errors.

Everything here reads model output, which may be hostile: every step is linear in the answer's size (bracket
matching runs on a C-level tokenizer, the search for embedded JSON has a fixed budget), and values nested or
sized past what any schema needs are refused before a validator walks them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

# Our schemas nest four or five levels and hold a few hundred values at most (a rewrite's paragraphs); these
# bounds leave room for wrappers and chatty models while keeping a validator's walk short.
MAX_JSON_DEPTH = 32
MAX_JSON_VALUES = 20_000
_MAX_CANDIDATES = 16  # parsed values offered to the schema: the right one is among the first few
_MAX_ATTEMPTS = 64  # openers tried as the start of embedded JSON
_MAX_PROBLEM = 300  # characters of a validation message (they quote the offending value)

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)
_OPENER = re.compile(r"[{\[]")
# One bracket, or one whole string (escapes included, to its closing quote or the end of the text). Possessive:
# a string token cannot fail, so matching never backtracks.
_TOKEN = re.compile(r'[{}\[\]]|"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.S)
_CLOSER = {"{": "}", "[": "]"}


class ShapeError(ValueError):
    """A JSON value nested or sized past what margin reads."""


def schema_instructions(schema: dict[str, Any]) -> str:
    """The text that tells a model the shape of its answer (kept stable, so it sits in the cached prefix)."""
    # In the schema's own key order: a model writes the keys in the order it is shown them, and the pipelines
    # order them on purpose (reasoning before a verdict, an answer before its "answerable" flag).
    # Compact JSON: indentation is whitespace tokens the model pays for on every request and reads no better.
    return (
        "Answer with one JSON value and nothing else: no prose before or after it, no code fences. "
        "It must match this JSON Schema:\n" + json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
    )


def _balanced(text: str, start: int) -> tuple[int | None, int]:
    """Where the JSON object or array that opens at text[start] ends (bracket matching outside strings), or
    None; and how many characters were scanned to find out. Gives up past MAX_JSON_DEPTH."""
    expected: list[str] = []
    for match in _TOKEN.finditer(text, start):
        char = text[match.start()]
        if char == '"':
            continue
        if char in _CLOSER:
            expected.append(_CLOSER[char])
            if len(expected) > MAX_JSON_DEPTH:
                return None, match.end() - start
        elif expected.pop() != char:
            return None, match.end() - start  # a mismatched bracket: no JSON value ends here
        elif not expected:
            return match.end(), match.end() - start
    return None, len(text) - start


def check_shape(data: Any) -> None:
    """Raise ShapeError for a value nested deeper than MAX_JSON_DEPTH or holding more than MAX_JSON_VALUES
    values (keys and items). Iterative, and stops at the first excess: linear in what it visits."""
    pending: list[tuple[Any, int]] = [(data, 1)]
    values = 0
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise ShapeError(f"the JSON is nested more than {MAX_JSON_DEPTH} levels deep")
        values += len(value)
        if values > MAX_JSON_VALUES:
            raise ShapeError(f"the JSON holds more than {MAX_JSON_VALUES} values")
        pending.extend((child, depth + 1) for child in children)


def _loads(candidate: str) -> Any:
    """json.loads within the shape bounds. Raises ValueError (ShapeError for an excess)."""
    try:
        data = json.loads(candidate)
    except RecursionError as error:  # the C decoder's own guard: far deeper than we accept
        raise ShapeError(f"the JSON is nested more than {MAX_JSON_DEPTH} levels deep") from error
    check_shape(data)
    return data


def _candidate_texts(text: str) -> Iterator[str]:
    """The texts that may hold the answer's JSON, most likely first: the whole answer, fenced blocks, then
    balanced objects and arrays in the prose (a citation like [3] is one, so callers check the schema). The
    bracket search scans at most a few times the text, however the brackets nest or fail to close."""
    stripped = text.strip()
    yield stripped
    for match in _FENCE.finditer(text):
        yield match.group(1).strip()
    budget = 4 * len(text) + 4096
    for attempt, match in enumerate(_OPENER.finditer(text)):
        if attempt >= _MAX_ATTEMPTS or budget <= 0:
            return
        end, scanned = _balanced(text, match.start())
        budget -= scanned
        if end is not None:
            yield text[match.start() : end]


def _parsed_candidates(text: str) -> Iterator[tuple[Any, str | None]]:
    """Each candidate as (value, None), or (None, why it was refused) for one past the shape bounds."""
    if not text.strip():
        return
    seen: set[str] = set()
    offered = 0
    for candidate in _candidate_texts(text):
        if candidate in seen:
            continue
        seen.add(candidate)
        try:
            data = _loads(candidate)
        except ShapeError as error:
            yield None, str(error)
            continue
        except ValueError:
            continue
        yield data, None
        offered += 1
        if offered >= _MAX_CANDIDATES:
            return


def validation_error(data: Any, schema: dict[str, Any]) -> str | None:
    """A one-line description of how `data` breaks `schema`, or None when it conforms; short, although
    jsonschema's messages quote the offending value."""
    error = best_match(Draft202012Validator(schema).iter_errors(data))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "the top level"
    return _short(f"at {where}: {error.message}")


def parse_answer(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """The first JSON value in the answer that fits the schema; else the reason the best one does not."""
    if not text.strip():
        return None, "the answer is empty"
    first_problem: str | None = None
    for data, shape_problem in _parsed_candidates(text):
        if shape_problem is not None:
            first_problem = first_problem or shape_problem
            continue
        problem = validation_error(data, schema)
        if problem is None:
            return data, None
        first_problem = first_problem or f"the JSON does not match the schema {problem}"
    return None, first_problem or "the answer contains no parseable JSON"


def _short(message: str) -> str:
    """The message with its middle left out when long: jsonschema's start with the value and end with the
    rule it breaks ("… is not of type 'object'")."""
    if len(message) <= _MAX_PROBLEM:
        return message
    return message[: _MAX_PROBLEM * 2 // 3] + " … " + message[-(_MAX_PROBLEM // 3) :]

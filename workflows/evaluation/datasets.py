"""Evaluation examples: margin's JSONL format, and adapters for the public samples in shared/data.

One JSON object a line; `id` is required and unique. Per method:
- lay (JRE-L):           {"id", "title"?, "paper": "abstract and key sections", "reference"?: "a lay summary"}
- soms (Society of Medical Simplifiers): {"id", "source": "a technical paragraph", "references": ["simple version", ...],
                         "domain"?: "medical" | "science" (default: the simplify.domain setting; Cochrane: medical)}
- agentsimp (AgentSimp): {"id", "source": ["paragraph", ...], "references": ["simplified document", ...]}
- feedback (SWIF2T):     {"id", "paragraph", "paper"?: "the rest of the paper", "review": "a human review",
                          "label": "Replicability" | "Originality" | ..., "literature"?: "a folder of PDFs",
                          "bib"?: "a .bib file"} (either of the last two may be a list; paths are relative to the
                          dataset file). Literature questions about the example rank the PDFs' passages and all
                          the .bib entries (cited or not: the example's reference list) with BM25, as `margin
                          review --literature` does.
A folder given as the dataset is read by an adapter: Cochrane pairs (val.source / val.target / val.doi, Devaraj et al.
2021) or eLife/PLOS lay-summary JSONL (Goldsack et al. 2022).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.workflows.registry import AGENTSIMP, FEEDBACK, LAY, SOMS

# The pipelines' evaluation ids (margin.workflows.registry), in the order `margin eval --help` lists them.
METHODS = (LAY, SOMS, AGENTSIMP, FEEDBACK)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")
_SPACED_PUNCTUATION = re.compile(r"\s+([,.;:!?)\]])|([(\[])\s+")
SENTENCES_PER_PARAGRAPH = 3  # how a one-paragraph source becomes a small document for AgentSimp


class DatasetError(Exception):
    """A dataset that cannot be used; the message says which line and why."""


@dataclass(frozen=True)
class Example:
    id: str
    fields: dict[str, Any] = field(hash=False)

    def text(self, key: str) -> str:
        value = self.fields.get(key, "")
        return " ".join(value) if isinstance(value, list) else str(value)

    def texts(self, key: str) -> list[str]:
        value = self.fields.get(key, [])
        return [str(item) for item in value] if isinstance(value, list) else [str(value)]


_REQUIRED = {
    LAY: ("paper",),
    SOMS: ("source", "references"),
    AGENTSIMP: ("source", "references"),
    FEEDBACK: ("paragraph", "review", "label"),
}


def load_examples(path: Path, method: str) -> list[Example]:
    """The examples of a JSONL file or of a folder an adapter understands, checked for what `method` needs."""
    records = list(_adapted(path, method)) if path.is_dir() else list(_jsonl(path))
    examples: list[Example] = []
    seen: set[str] = set()
    for number, record in enumerate(records, 1):
        identifier = str(record.get("id", "")).strip()
        if not identifier:
            raise DatasetError(f"{path}: example {number} has no id")
        if identifier in seen:
            raise DatasetError(f"{path}: id {identifier!r} appears twice")
        missing = [key for key in _REQUIRED[method] if not record.get(key)]
        if missing:
            raise DatasetError(
                f"{path}: example {identifier!r} lacks {', '.join(missing)} (needed by {method})"
            )
        seen.add(identifier)
        if method == FEEDBACK:
            record = _with_literature_paths(record, path, identifier)
        examples.append(Example(identifier, record))
    return examples


_LITERATURE_KEYS = {"literature": "folder", "bib": "file"}


def _with_literature_paths(record: dict[str, Any], dataset: Path, identifier: str) -> dict[str, Any]:
    """The example's "literature" folders and "bib" files as absolute paths (written relative to the dataset),
    checked now: a mistyped path would otherwise quietly give a review without its literature."""
    base = dataset if dataset.is_dir() else dataset.parent
    resolved = dict(record)
    for key, kind in _LITERATURE_KEYS.items():
        value = record.get(key)
        if value is None:
            continue
        names = value if isinstance(value, list) else [value]
        if not all(isinstance(name, str) and name.strip() for name in names):
            raise DatasetError(f"{dataset}: example {identifier!r}: {key} must be a path or a list of paths")
        paths = [(base / Path(name).expanduser()).resolve() for name in names]
        for found in paths:
            exists = found.is_dir() if kind == "folder" else found.is_file()
            if not exists:
                raise DatasetError(
                    f"{dataset}: example {identifier!r}: its {key} {kind} {found} does not exist"
                )
        resolved[key] = [str(found) for found in paths]
    return resolved


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise DatasetError(f"cannot read {path}: {error}") from error
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            raise DatasetError(f"{path}:{number}: not JSON ({error})") from error
        if not isinstance(record, dict):
            raise DatasetError(f"{path}:{number}: each line must be a JSON object")
        yield record


def _adapted(folder: Path, method: str) -> Iterator[dict[str, Any]]:
    if (folder / "val.source").is_file():
        yield from cochrane(folder, method)
    elif list(folder.glob("*.jsonl")):
        yield from lay_summaries(folder, method)
    else:
        raise DatasetError(f"{folder}: neither Cochrane pairs (val.source) nor lay-summary JSONL files")


def cochrane(folder: Path, method: str) -> Iterator[dict[str, Any]]:
    """Cochrane abstracts and their plain-language summaries, one pair a line (Devaraj et al. 2021)."""
    sources = (folder / "val.source").read_text(encoding="utf-8").splitlines()
    targets = (folder / "val.target").read_text(encoding="utf-8").splitlines()
    doi_file = folder / "val.doi"
    dois = doi_file.read_text(encoding="utf-8").splitlines() if doi_file.is_file() else []
    if len(sources) != len(targets):
        raise DatasetError(f"{folder}: val.source has {len(sources)} lines, val.target {len(targets)}")
    for index, (source, target) in enumerate(zip(sources, targets, strict=True)):
        identifier = dois[index] if index < len(dois) and dois[index].strip() else f"cochrane-{index + 1}"
        if method == LAY:
            yield {"id": identifier, "paper": source, "reference": target}
        elif method == AGENTSIMP:
            yield {"id": identifier, "source": paragraphs_of(source), "references": [target]}
        else:  # medical abstracts: SoMS runs with the paper's medical prompts
            yield {"id": identifier, "source": source, "references": [target], "domain": "medical"}


def lay_summaries(folder: Path, method: str) -> Iterator[dict[str, Any]]:
    """eLife and PLOS articles with their lay summaries (Goldsack et al. 2022); the same article rated by two
    annotators appears once."""
    seen: set[str] = set()
    for path in sorted(folder.glob("*.jsonl")):
        for record in _jsonl(path):
            identifier = str(record.get("id", ""))
            if not identifier or identifier in seen:
                continue
            seen.add(identifier)
            abstract = detokenize(" ".join(record.get("abstract") or []))
            summary = detokenize(" ".join(record.get("lay summary") or []))
            if method == LAY:
                yield {"id": identifier, "paper": abstract, "reference": summary}
            elif method == AGENTSIMP:
                yield {"id": identifier, "source": paragraphs_of(abstract), "references": [summary]}
            else:
                yield {"id": identifier, "source": abstract, "references": [summary]}


def detokenize(text: str) -> str:
    """'word , word ( x )' as the corpus stores it -> 'word, word (x)'."""
    return _SPACED_PUNCTUATION.sub(lambda m: m.group(1) or m.group(2), text).strip()


def paragraphs_of(text: str, sentences: int = SENTENCES_PER_PARAGRAPH) -> list[str]:
    """A one-paragraph text as a small document: groups of `sentences` sentences."""
    split = [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]
    return [" ".join(split[start : start + sentences]) for start in range(0, len(split), sentences)] or [text]

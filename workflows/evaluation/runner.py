"""Run a pipeline over evaluation examples: concurrently, resumably (finished examples are kept in a JSONL file
and never recomputed), never stopping for one example's failure."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.workflows import readability
from margin.workflows.feedback.literature import Literature, WebSearch
from margin.workflows.feedback.pipeline import ReviewContext, ReviewOptions, review_paragraph
from margin.workflows.feedback.scholarly import ScholarlySearch
from margin.workflows.feedback.types import Mode
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.config import LLMConfig
from margin.workflows.llm.types import Priority
from margin.workflows.manuscript.markdown.parse import MarkdownProject
from margin.workflows.manuscript.source import SourceFile
from margin.workflows.registry import AGENTSIMP, FEEDBACK, LAY, SOMS
from margin.workflows.rewrite import agentsimp, jrel, soms
from margin.workflows.rewrite.output import append_line
from margin.workflows.rewrite.types import Language

from .datasets import Example

log = logging.getLogger("margin.evaluation")

Progress = Callable[[int, int], None]


@dataclass
class EvalOptions:
    soms: soms.SomsOptions = field(default_factory=soms.SomsOptions)
    agentsimp: agentsimp.AgentSimpOptions = field(default_factory=agentsimp.AgentSimpOptions)
    lay: jrel.LayOptions = field(default_factory=jrel.LayOptions)
    review: ReviewOptions = field(default_factory=lambda: ReviewOptions(mode=Mode.FULL, min_words=1))
    concurrency: int = 4  # examples in flight; the LLM layer's limiter bounds the requests
    web: WebSearch | None = None  # the online searches the user opted in to, as for `margin review`
    scholarly: ScholarlySearch | None = None


def run_key(method: str, llm: LLMConfig, options: EvalOptions) -> str:
    """What produced a prediction: the method, the model settings and the pipeline's options. A resumed run keeps
    only the examples finished under the same key, so that one report never mixes two settings or models."""
    endpoints = {"default": llm.default, **{role: llm.endpoint_for(role) for role in sorted(llm.roles)}}
    described = {
        "method": method,
        "endpoints": {
            role: {
                "url": endpoint.base_url,
                "model": endpoint.model,
                "temperature": endpoint.temperature,
                "top_p": endpoint.top_p,
                "max_tokens": endpoint.max_tokens,
                "structured": endpoint.structured_mode.value,
            }
            for role, endpoint in endpoints.items()
        },
        "options": _plain(  # spelled as before: a resumed run compares this key
            {
                SOMS: options.soms,
                AGENTSIMP: options.agentsimp,
                LAY: options.lay,
                "review": options.review,
            }
        ),
        "online": {  # where literature questions may read: it changes what the reviewer is told
            "web": options.web.url if options.web else None,
            "scholarly": [options.scholarly.service, options.scholarly.base_url]
            if options.scholarly
            else None,
        },
    }
    text = json.dumps(described, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _plain(value: Any) -> Any:
    """Settings as JSON: dataclass fields and plain values, nothing that prints an object's address."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {item.name: _plain(getattr(value, item.name)) for item in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return type(value).__name__  # e.g. the plan scorer: its kind, not its identity


class ResultStore:
    """predictions.jsonl in the output folder: one finished example a line, appended and flushed as each one
    ends, so a run that stops (or is stopped) resumes where it was. With `key` (run_key), only examples
    finished under the same settings and model count as done."""

    def __init__(self, folder: Path, key: str = "") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "predictions.jsonl"
        self.key = key
        self.records: dict[str, dict[str, Any]] = {}
        self.other_settings = 0  # examples finished under other settings, left out
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut short when a run was killed: that example runs again
                if not isinstance(record, dict) or "id" not in record:
                    continue
                if key and record.get("run") != key:
                    self.other_settings += 1
                    continue
                self.records[str(record["id"])] = record

    def done(self, identifier: str) -> bool:
        """Finished: a failed example (its model calls failed) runs again on the next run, and is not scored."""
        record = self.records.get(identifier)
        return record is not None and record.get("status") != "failed"

    def failed(self) -> list[str]:
        return [identifier for identifier, record in self.records.items() if record.get("status") == "failed"]

    def add(self, record: dict[str, Any]) -> None:
        if self.key:
            record = {**record, "run": self.key}
        self.records[str(record["id"])] = record
        append_line(
            self.path, json.dumps(record, ensure_ascii=False) + "\n"
        )  # one write, never through a link


async def predict(method: str, example: Example, llm: LLMClient, options: EvalOptions) -> dict[str, Any]:
    """One example through one pipeline: what it produced, its status and what else the metrics need."""
    if method == SOMS:
        # An example may name its domain: the Cochrane pairs are medical, which the paper's own prompts are for.
        domain = str(example.fields.get("domain") or options.soms.domain)
        rewrite = await soms.simplify_paragraph(
            example.text("source"),
            Language.MARKDOWN,
            llm,
            dataclasses.replace(options.soms, domain=domain),
            priority=Priority.BACKGROUND,
        )
        return {"prediction": rewrite.text, "status": rewrite.status.value, "failures": rewrite.failures}
    if method == AGENTSIMP:
        paragraphs = example.texts("source")
        rewrites = await agentsimp.simplify_document(
            paragraphs,
            Language.MARKDOWN,
            llm,
            options.agentsimp,
            document="\n\n".join(paragraphs),
            priority=Priority.BACKGROUND,
        )
        statuses = sorted({rewrite.status.value for rewrite in rewrites})
        failures = [failure for rewrite in rewrites for failure in rewrite.failures]
        return {
            "prediction": "\n\n".join(rewrite.text for rewrite in rewrites),
            "status": ",".join(statuses),
            "failures": failures,
        }
    if method == LAY:
        article = await jrel.write_lay_article_from(
            example.text("title"), example.text("paper"), llm, options.lay, priority=Priority.BACKGROUND
        )
        return {
            "prediction": article.text,
            "status": "written" if article.ok else "failed",
            "failures": article.failures,
            "iterations": [
                {"iteration": version.iteration, **_scores(version.scores)} for version in article.versions
            ],
            "kept": article.versions[article.chosen].iteration if article.ok else None,
        }
    if method == FEEDBACK:
        return await _review(example, llm, options)
    raise ValueError(f"unknown method {method!r}")


def _scores(scores: readability.Readability) -> dict[str, float]:
    return {"fkgl": scores.fkgl, "cli": scores.cli, "dcrs": scores.dcrs}


async def _review(example: Example, llm: LLMClient, options: EvalOptions) -> dict[str, Any]:
    """SWIF2T on the example's paragraph, with the rest of the paper (if given) as the manuscript around it."""
    paragraph_text = " ".join(example.text("paragraph").split())
    paper = example.text("paper").strip()
    text = f"{paper}\n\n{paragraph_text}\n" if paper else f"{paragraph_text}\n"
    manuscript = MarkdownProject().parse([SourceFile(f"untitled:eval/{example.id}.md", text)])
    paragraph = next((p for p in reversed(manuscript.paragraphs) if p.text.strip() == paragraph_text), None)
    if paragraph is None and manuscript.paragraphs:
        paragraph = manuscript.paragraphs[-1]
    if paragraph is None:
        return {
            "prediction": "",
            "label": None,
            "status": "failed",
            "failures": ["the paragraph has no prose"],
        }
    # The same literature as `margin review --literature`: the example's PDF folders, and its .bib files (read for
    # every literature question: the example's paragraph names its works in prose, not by citation key).
    literature = await Literature.gather(
        manuscript,
        [Path(folder) for folder in example.texts("literature")],
        options.web,
        scholarly=options.scholarly,
        bib_files=[Path(bib) for bib in example.texts("bib")],
    )
    context = await ReviewContext.build(manuscript, literature)
    review = await review_paragraph(paragraph, context, llm, options.review)
    first = review.findings[0] if review.findings else None
    return {
        "prediction": first.review if first else "",
        "label": first.label.value if first else None,
        "findings": [{"quote": f.quote, "label": f.label.value, "review": f.review} for f in review.findings],
        "status": "reviewed" if review.completed else "failed",
        "failures": review.failures,
    }


async def run(
    method: str,
    examples: list[Example],
    llm: LLMClient,
    store: ResultStore,
    options: EvalOptions | None = None,
    progress: Progress | None = None,
) -> int:
    """Predict every example not already in `store`; returns how many ran now."""
    options = options or EvalOptions()
    todo = [example for example in examples if not store.done(example.id)]
    total, finished = len(examples), len(examples) - len(todo)
    if progress:
        progress(finished, total)
    gate = asyncio.Semaphore(max(1, options.concurrency))

    async def one(example: Example) -> None:
        nonlocal finished
        async with gate:
            started = time.perf_counter()
            try:
                result = await predict(method, example, llm, options)
            except Exception as error:  # one example's bug must not end a long run; it is recorded instead
                log.exception("example %s failed", example.id)
                result = {
                    "prediction": "",
                    "status": "failed",
                    "failures": [f"{type(error).__name__}: {error}"],
                }
            store.add({"id": example.id, **result, "seconds": round(time.perf_counter() - started, 3)})
            finished += 1
            if progress:
                progress(finished, total)

    await asyncio.gather(*(one(example) for example in todo))
    return len(todo)

"""The pipelines and the LLM client, imported off the event loop the first time the server needs them.

Importing them (the OpenAI client, BM25, PDF and BibTeX readers, JSON Schema) takes about half a second: at the
server's start that would delay `initialize` and the first diagnostics, and on the event loop it would stall
every request. The server imports them, and the application layer built on them, in a worker thread when a
review or a rewrite first runs; afterwards the features import names from them at no cost.
"""

from __future__ import annotations

import asyncio
import importlib

MODULES = (
    "margin.workflows.llm.client",
    "margin.workflows.feedback.literature",
    "margin.workflows.feedback.pipeline",
    "margin.workflows.rewrite.simplify",
    "margin.workflows.rewrite.jrel",
    "margin.server.application.review",
    "margin.server.application.rewrite",
)
_loaded = False


def load() -> None:
    global _loaded
    for name in MODULES:
        importlib.import_module(name)
    _loaded = True


async def ready() -> None:
    """Return once the pipelines are imported, importing them in a worker thread the first time."""
    if not _loaded:
        await asyncio.to_thread(load)

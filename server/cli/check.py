"""`margin check`: the readability of every paragraph, in text, JSON or a self-contained HTML page, without a
model.

It imports the manuscript parsers and the readability scorer, and nothing of the LSP or the models.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from margin.workflows.manuscript.discovery import load_paths
from margin.workflows.readability import ReadabilityCache

from ..reading import command_line_loader
from ..render import as_json, as_text, check
from . import exit_status
from .destination import check_destination, deliver, html_page, refuse_sources, source_paths
from .shared import settings_for

if TYPE_CHECKING:
    from margin.workflows.manuscript.model import Manuscript

    from ..render import CheckedParagraph


def run(arguments: argparse.Namespace) -> int:
    settings = settings_for(arguments)
    check_destination(arguments)
    loaded = load_paths(command_line_loader(settings, arguments.files), arguments.files)
    for message in (*loaded.errors, *loaded.notes):
        print(f"margin: {message}", file=sys.stderr)
    refuse_sources(arguments.output, source_paths([manuscript for _, manuscript in loaded.manuscripts]))
    scores = ReadabilityCache()
    results: list[tuple[Manuscript, list[CheckedParagraph]]] = [
        (manuscript, check(manuscript, settings, scores)) for _, manuscript in loaded.manuscripts
    ]
    errors = loaded.errors
    if arguments.format == "json":
        text = as_json(results, errors)
    elif arguments.format == "html":
        from ..report import ReportManuscript

        entries = [ReportManuscript(manuscript, items) for manuscript, items in results]
        text = html_page(entries, settings, ["readability only: no model was called"])
    else:
        text = "\n\n".join(as_text(manuscript, items, settings) for manuscript, items in results)
    delivered = deliver(
        text.rstrip("\n") + "\n", arguments, f"check.{arguments.format}", "the readability report"
    )
    status = exit_status.UNREADABLE if errors else exit_status.OK
    return status if delivered else exit_status.worst(status, exit_status.NOT_WRITTEN)

"""Where the report of `margin check` or `margin review` goes: stdout, or the file named with -o (checked before
any work, so a review the models paid for is never lost to a bad path, and never replacing a file without
--force); and the HTML page both commands build."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from margin.workflows.manuscript.source import uri_to_path
from margin.workflows.rewrite.output import check_output

from .output import print_or_keep, write_or_keep
from .usage import UsageError, output_checks

if TYPE_CHECKING:
    from margin.workflows.manuscript.model import Manuscript

    from ..report import ReportManuscript
    from ..settings import Settings


# What a report file is called; `margin review --out` takes a folder, and one named like this is a slip for -o.
REPORT_SUFFIXES = (".html", ".htm", ".json", ".jsonl", ".sarif", ".txt")


def check_destination(arguments: argparse.Namespace) -> None:
    """A usage error now for an -o that cannot be written, that is one of the manuscripts named, or that cannot
    take the format; and for an --out that names a report file rather than a folder."""
    store: Path | None = getattr(arguments, "out", None)
    if store is not None and store.suffix.lower() in REPORT_SUFFIXES and not store.is_dir():
        raise UsageError(
            f"--out names a folder for the run's store, not the report; to write the report to {store}, use -o"
        )
    if arguments.output is None:
        return
    refuse_sources(arguments.output, [path for path in arguments.files if path.is_file()])
    if arguments.format == "jsonl":
        raise UsageError(
            "-o does not take --format jsonl, whose lines go to stdout as each review ends; redirect stdout, "
            "or use --out DIR to keep the findings across runs"
        )
    with output_checks():
        check_output(arguments.output, arguments.force)


def refuse_sources(output: Path | None, sources: Sequence[Path]) -> None:
    """A usage error if -o is one of the manuscript's own files (once loaded, a folder's files are known too):
    not even --force may put the report in place of the manuscript."""
    if output is None:
        return
    target = output.resolve()
    for source in sources:
        if source.resolve() == target:
            raise UsageError(f"-o {output} is a file of the manuscript; name a new file for the report")


def source_paths(manuscripts: Sequence[Manuscript]) -> list[Path]:
    """Every file the manuscripts were read from."""
    paths = (uri_to_path(source.uri) for manuscript in manuscripts for source in manuscript.files)
    return [path for path in paths if path is not None]


def deliver(text: str, arguments: argparse.Namespace, name: str, what: str) -> bool:
    """Print the report, or write it to -o (saying where on stderr). False when it could not go there (it was
    then kept elsewhere, and stderr says where)."""
    if arguments.output is None:
        return print_or_keep(text, name, what)
    written = write_or_keep(text, arguments.output, what, force=arguments.force)
    if written is not None:
        print(f"margin: {what} written to {written}", file=sys.stderr)
    return written is not None


def html_page(entries: Sequence[ReportManuscript], settings: Settings, details: Sequence[str]) -> str:
    from .. import __version__
    from ..report import ReportOptions, html_report

    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    options = ReportOptions(
        threshold=settings.readability_threshold,
        min_words=settings.readability_min_words,
        flags_hard=settings.readability_enabled,
        details=[*details, f"margin {__version__}", generated],
        version=__version__,
    )
    return html_report(entries, options)

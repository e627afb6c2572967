"""The `margin` command's exit statuses, the one table of them (the README's is checked against DOCUMENTED), and
the one rule every command that calls models follows.

A run whose model calls failed never exits 0: it says how many failed, of which kind, and the first failure's
message (for a crashed embedded server, that is the crash with the end of its log), on stderr.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from margin.workflows.llm.types import Usage

OK = 0
UNREADABLE = 1  # a file could not be read (the others were still handled)
USAGE = 2  # wrong arguments, or an output location that cannot be used (checked before any model call)
NO_MODEL = 3  # no model answered at all: nothing listens at the endpoint, or the model server crashed
NOT_REWRITTEN = 4  # simplify or lay: nothing was rewritten, and nothing written
MISSING_DATA = 5  # eval: the dataset or the metric libraries are not there
MODEL_CALLS_FAILED = 6  # some model calls failed: the output is incomplete
NOT_WRITTEN = 7  # the output could not be written where asked; the generated text was kept elsewhere

# The README's exit status table, word for word (tests/test_readme.py).
DOCUMENTED = {
    OK: "everything ran, and every model call was answered",
    UNREADABLE: "a file could not be read (the others were still handled)",
    USAGE: "wrong arguments, or an output location that cannot be used (a missing or read-only folder, a file "
    "that exists without --force), found before any model call",
    NO_MODEL: "no model answered: nothing listens at the endpoint, or the model server crashed",
    NOT_REWRITTEN: "simplify or lay: nothing was rewritten, so nothing was written",
    MISSING_DATA: "eval: the dataset or the metric libraries are missing",
    MODEL_CALLS_FAILED: "some model calls failed, so the output is incomplete (stderr says which and why)",
    NOT_WRITTEN: "the output could not be written where asked (the disk filled up, the folder went away); the "
    "generated text was saved beside it or in the user cache folder, and stderr says where",
}


def model_status(usage: Usage) -> int:
    """OK, or the status for the model calls that failed in this run, after saying so on stderr."""
    if not usage.failures:
        return OK
    kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(usage.failure_kinds.items()))
    if usage.no_model_answered:
        print(
            f"margin: no model answered ({usage.failures} call(s) failed): {usage.first_failure}",
            file=sys.stderr,
        )
        return NO_MODEL
    total = usage.failures + usage.answered
    print(
        f"margin: {usage.failures} of {total} model call(s) failed ({kinds}); the output is incomplete. "
        f"First: {usage.first_failure}",
        file=sys.stderr,
    )
    return MODEL_CALLS_FAILED


def worst(*statuses: int) -> int:
    """The status to exit with when several apply: a missing model explains the rest."""
    order = (NO_MODEL, UNREADABLE, NOT_REWRITTEN, MISSING_DATA, NOT_WRITTEN, MODEL_CALLS_FAILED, USAGE, OK)
    for status in order:
        if status in statuses:
            return status
    return OK

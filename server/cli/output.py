"""Writing what the models produced, after the model work: a write or a print that fails then (the disk filled
up, the folder went away, stdout is a full disk) keeps the text elsewhere and says where on stderr, rather than
losing what the models were paid for."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_keep(text: str, path: Path, what: str, force: bool = False, beside: bool = False) -> Path | None:
    """Write `what` to `path` (with `beside`: there or to a numbered name beside it). If that fails now, after
    the model work (the disk filled up, the folder went away), keep the text elsewhere, say where and the OS's
    reason on stderr, and return None."""
    from margin.workflows.rewrite.output import create_beside, reason, rescue, write_output

    try:
        return create_beside(path, text) if beside else write_output(path, text, force=force)
    except OSError as error:
        kept = rescue(text, path, error)
        if kept.saved is not None:
            print(
                f"margin: cannot write {what} to {path}: {reason(error)}; saved to {kept.saved} instead",
                file=sys.stderr,
            )
            return None
        print(
            f"margin: cannot write {what} to {path}: {reason(error)}, nor anywhere else; it follows on stdout",
            file=sys.stderr,
        )
        print_or_keep(text, path.name, what)
        return None


def print_or_keep(text: str, name: str, what: str) -> bool:
    """Print `text` on stdout; False (after saying where it went instead, and why) when stdout cannot take it."""
    from margin.workflows.rewrite.output import print_or_rescue, reason

    kept = print_or_rescue(text, name)
    if kept is None:
        return True
    where = f"saved to {kept.saved} instead" if kept.saved is not None else "it could not be saved anywhere"
    print(f"margin: cannot print {what}: {reason(kept.error)}; {where}", file=sys.stderr)
    return False

"""The one usage error of the command line: wrong arguments, or an output location that cannot be used, found
before any model call. `main` says it on stderr ("margin: ...") and exits with exit_status.USAGE."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class UsageError(Exception):
    pass


@contextmanager
def output_checks() -> Iterator[None]:
    """Checks of output locations (margin.workflows.rewrite.output's OutputProblem) inside are usage errors."""
    from margin.workflows.rewrite.output import OutputProblem

    try:
        yield
    except OutputProblem as problem:
        raise UsageError(str(problem)) from problem

"""The `margin` command: check manuscripts in a terminal or CI, review and rewrite them with models, evaluate the
pipelines, or serve the language server.

Every command starts here, so what every command imports (this module, parser, usage, exit_status, and shared
for the settings) is only what parsing arguments and settings needs. Each command's module (check, review,
rewrite, eval, doctor, serve) is imported when that command runs, and imports its own work: the parsers for
`check`, the application layer (margin.server.application, which imports the pipelines and the OpenAI client) for
the model commands, pygls for `serve`.

Modules: parser (the arguments), shared (settings from --settings and flags; running a command that calls
models), exit_status (the one table of exit statuses), usage (the one usage error), progress (the progress
protocol on a terminal), output (writing or printing generated text without losing it).
"""

from __future__ import annotations

import importlib
import sys

from . import exit_status
from .parser import build_parser
from .usage import UsageError

# The module of margin.server.cli that runs each command: its run(arguments) returns the exit status.
COMMANDS = {
    "check": "check",
    "review": "review",
    "simplify": "rewrite",
    "lay": "rewrite",
    "eval": "eval",
    "doctor": "doctor",
    "serve": "serve",
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        arguments = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if arguments.command not in COMMANDS:
        parser.print_usage(sys.stderr)
        return exit_status.USAGE
    command = importlib.import_module(f"{__name__}.{COMMANDS[arguments.command]}")
    try:
        status: int = command.run(arguments)
    except UsageError as error:
        print(f"margin: {error}", file=sys.stderr)
        return exit_status.USAGE
    return status

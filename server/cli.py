"""The `margin` command: check manuscripts in a terminal or CI, or serve the language server."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

# Every command starts here, so this module imports only what parsing arguments and settings needs; each command
# imports its own work (the parsers for `check`, the pipelines and the OpenAI client for the model commands,
# pygls for `serve`) when it runs.
from . import exit_status
from .render import render_doctor  # light: the LLM layer's report type is only a type there
from .settings import parse_settings

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from margin.workflows.manuscript.model import Manuscript

    from .render import CheckedParagraph
    from .settings import Settings


EXIT_OK, EXIT_UNREADABLE, EXIT_USAGE, EXIT_NO_MODEL = (
    exit_status.OK,
    exit_status.UNREADABLE,
    exit_status.USAGE,
    exit_status.NO_MODEL,
)
T = TypeVar("T")


class _Version(argparse.Action):
    """`--version`, with the version read from package metadata only when asked (see margin.server)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show program's version number and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from . import __version__

        print(f"margin {__version__}")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="margin",
        description="A careful scientific reviewer and a science journalist for your manuscript.",
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check_command = commands.add_parser("check", help="readability of every paragraph, no model needed")
    check_command.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help=".tex/.md file or content/ folder"
    )
    check_command.add_argument("--format", choices=("text", "json"), default="text")
    check_command.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="Flesch-Kincaid grade above which a paragraph is flagged",
    )
    check_command.add_argument(
        "--settings", type=Path, help="JSON file with margin settings (the editor's keys)"
    )

    review = commands.add_parser("review", help="focused feedback on every paragraph (calls an LLM)")
    review.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help=".tex/.md file or content/ folder"
    )
    review.add_argument("--mode", choices=("full", "fast", "single"), default=None)
    review.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    review.add_argument("--stats", action="store_true", help="print calls, tokens, cache hits and time")
    review.add_argument("--literature", type=Path, action="append", default=[], help="folder of PDFs to read")
    _llm_options(review)

    from .eval_cli import add_command as add_eval  # light: the pipelines are imported when a command runs
    from .rewrite_cli import add_commands

    add_commands(commands, _llm_options)
    add_eval(commands, _llm_options)

    doctor = commands.add_parser("doctor", help="check which LLM endpoints and models answer, and the cache")
    _llm_options(doctor)

    serve = commands.add_parser("serve", help="run the language server (stdio unless --tcp or --socket)")
    listen = serve.add_mutually_exclusive_group()
    listen.add_argument(
        "--tcp",
        action="store_true",
        help="serve one client on 127.0.0.1; it must send the token as initializationOptions.marginToken",
    )
    listen.add_argument(
        "--socket", type=Path, metavar="PATH", help="serve one client on a Unix socket (0600, private folder)"
    )
    serve.add_argument("--port", type=int, default=2087, help="TCP port; 0 picks a free one (printed)")
    serve.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="with --tcp: read the token from FILE (mode 600) instead of $MARGIN_TOKEN or a new random one",
    )
    serve.add_argument(
        "--stdio", action="store_true", help="accepted for editors that pass it; stdio is the default"
    )
    return parser


def _llm_options(command: argparse.ArgumentParser) -> None:
    group = command.add_argument_group("models")
    group.add_argument("--settings", type=Path, help="JSON file with margin settings (the editor's keys)")
    group.add_argument("--endpoint", help='OpenAI-compatible base URL, or "auto"')
    group.add_argument("--model", help="model name (default: the first the endpoint lists)")
    group.add_argument("--no-cache", action="store_true", help="neither read nor write the model cache")


class UsageError(Exception):
    pass


def _settings(arguments: argparse.Namespace) -> Settings:
    """Settings for a CLI run: a settings file, then flags on top. Unusable values are reported on stderr."""
    raw: dict[str, object] = {}
    path: Path | None = getattr(arguments, "settings", None)
    if path is not None:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise UsageError(f"cannot read settings file {path}: {error}") from error
        if not isinstance(loaded, dict):
            raise UsageError(f"settings file {path} must hold a JSON object")
        raw.update(loaded.get("margin", loaded))
    flags = {
        "llm.endpoint": getattr(arguments, "endpoint", None),
        "llm.model": getattr(arguments, "model", None),
        "readability.threshold": getattr(arguments, "threshold", None),
    }
    raw.update({key: value for key, value in flags.items() if value is not None})
    if getattr(arguments, "no_cache", False):
        raw["cache.enabled"] = False
    settings, problems = parse_settings(raw)
    for problem in problems:
        print(f"margin: {problem}", file=sys.stderr)
    return settings


def _with_models(work: Coroutine[Any, Any, T]) -> T:
    """Run a command that calls models; the embedded model server, if it had to start, stops with the command."""
    import asyncio  # not at the top: it imports ssl, which `check` and `--version` do not need

    from margin.workflows.llm.embedded import stop_shared_server

    try:
        return asyncio.run(work)
    finally:
        stop_shared_server()


def _review(arguments: argparse.Namespace) -> int:
    from .review_cli import run_review

    return _with_models(run_review(arguments, _settings(arguments)))


def _rewrite(arguments: argparse.Namespace) -> int:
    from .rewrite_cli import run_lay, run_simplify

    settings = _settings(arguments)
    if getattr(arguments, "iterations", None) is not None and not 0 <= arguments.iterations <= 10:
        raise UsageError("--iterations must be from 0 to 10")
    try:
        return _with_models(
            (run_simplify if arguments.command == "simplify" else run_lay)(arguments, settings)
        )
    except FileExistsError as error:
        print(f"margin: {error}", file=sys.stderr)
        return EXIT_USAGE


def _evaluate(arguments: argparse.Namespace) -> int:
    from .eval_cli import run_eval

    return _with_models(run_eval(arguments, _settings(arguments)))


def _doctor(arguments: argparse.Namespace) -> int:
    from margin.workflows.llm.doctor import diagnose

    report = _with_models(diagnose(_settings(arguments).llm_config()))
    print(render_doctor(report))
    if not report.ok:
        reason = report.endpoints[0].error if report.endpoints else "no endpoint configured"
        print(f"margin: no usable LLM endpoint: {reason}", file=sys.stderr)
        return EXIT_NO_MODEL
    return EXIT_OK


def _check(arguments: argparse.Namespace) -> int:
    # The manuscript parsers and the readability scorer: what `check` needs, and nothing of the LSP or models.
    from margin.workflows.manuscript.discovery import load_paths
    from margin.workflows.readability import ReadabilityCache

    from .reading import command_line_loader
    from .render import as_json, as_text, check

    settings = _settings(arguments)
    loaded = load_paths(command_line_loader(settings, arguments.files), arguments.files)
    for message in (*loaded.errors, *loaded.notes):
        print(f"margin: {message}", file=sys.stderr)
    scores = ReadabilityCache()
    results: list[tuple[Manuscript, list[CheckedParagraph]]] = [
        (manuscript, check(manuscript, settings, scores)) for _, manuscript in loaded.manuscripts
    ]
    errors = loaded.errors
    if arguments.format == "json":
        print(as_json(results, errors))
    else:
        print("\n\n".join(as_text(manuscript, items, settings) for manuscript, items in results))
    return EXIT_UNREADABLE if errors else EXIT_OK


def _serve(arguments: argparse.Namespace) -> int:
    from . import logs
    from .lsp import serve_stdio, serve_tcp, server  # the server's imports are not needed for `margin check`
    from .transport import ServeError, serve_unix

    if arguments.token_file is not None and not arguments.tcp:
        print("margin: --token-file is for --tcp", file=sys.stderr)
        return EXIT_USAGE
    try:
        if arguments.tcp:
            return serve_tcp(arguments.port, arguments.token_file)
        if arguments.socket is not None:
            logs.configure()
            return serve_unix(server, arguments.socket)
        return serve_stdio()  # 0 after shutdown then exit, 1 if the session ended without shutdown (LSP)
    except ServeError as error:
        print(f"margin: {error}", file=sys.stderr)
        return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        arguments = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        if arguments.command == "check":
            return _check(arguments)
        if arguments.command == "review":
            return _review(arguments)
        if arguments.command == "doctor":
            return _doctor(arguments)
        if arguments.command in ("simplify", "lay"):
            return _rewrite(arguments)
        if arguments.command == "eval":
            return _evaluate(arguments)
    except UsageError as error:
        print(f"margin: {error}", file=sys.stderr)
        return EXIT_USAGE
    if arguments.command == "serve":
        return _serve(arguments)
    parser.print_usage(sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":  # python -m margin.server.cli, as the console script
    raise SystemExit(main())

"""The `margin` command's arguments: every command and its options, in the order `margin --help` lists them.

Every command parses here, so this module imports only what parsing needs; each command imports its own work
when it runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from margin.workflows.evaluation.datasets import METHODS  # light: the metric libraries load when eval runs


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
        from .. import __version__

        print(f"margin {__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="margin",
        description="A careful scientific reviewer and a science journalist for your manuscript.",
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _check(commands)
    _review(commands)
    _rewrite(commands)
    _eval(commands)
    doctor = commands.add_parser("doctor", help="check which LLM endpoints and models answer, and the cache")
    _llm_options(doctor)
    _serve(commands)
    return parser


Commands = argparse._SubParsersAction  # type: ignore[type-arg]


def _llm_options(command: argparse.ArgumentParser) -> None:
    group = command.add_argument_group("models")
    group.add_argument("--settings", type=Path, help="JSON file with margin settings (the editor's keys)")
    group.add_argument(
        "--endpoint",
        action="append",
        help='OpenAI-compatible base URL, or "auto"; repeat it for the replicas of a pool',
    )
    group.add_argument("--model", help="model name (default: the first the endpoint lists)")
    group.add_argument("--no-cache", action="store_true", help="neither read nor write the model cache")


def _check(commands: Commands) -> None:
    check = commands.add_parser("check", help="readability of every paragraph, no model needed")
    check.add_argument("files", nargs="+", type=Path, metavar="FILE", help=".tex/.md file or content/ folder")
    check.add_argument(
        "--format",
        choices=("text", "json", "html"),
        default="text",
        help="html: one self-contained page, each paragraph tinted by its grade, with a chart per section",
    )
    check.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="Flesch-Kincaid grade above which a paragraph is flagged",
    )
    check.add_argument("--settings", type=Path, help="JSON file with margin settings (the editor's keys)")
    _report_output(check)


def _review(commands: Commands) -> None:
    review = commands.add_parser("review", help="focused feedback on every paragraph (calls an LLM)")
    review.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help=".tex/.md file or content/ folder"
    )
    review.add_argument("--mode", choices=("full", "fast", "single"), default=None)
    review.add_argument(
        "--format",
        choices=("text", "json", "sarif", "jsonl", "html"),
        default="text",
        help="jsonl: one line per finding, printed as its paragraph's review ends; html: one self-contained "
        "page with the findings as margin notes beside the words they quote",
    )
    _report_output(review)
    review.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the run's store (predictions.jsonl, as margin eval): a second run with the same "
        "folder reviews only the paragraphs not reviewed yet",
    )
    review.add_argument("--stats", action="store_true", help="print calls, tokens, cache hits and time")
    review.add_argument("--literature", type=Path, action="append", default=[], help="folder of PDFs to read")
    _llm_options(review)


def _report_output(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "-o", "--output", type=Path, metavar="OUT", help="write the report to OUT instead of stdout"
    )
    command.add_argument("--force", action="store_true", help="replace OUT if it exists")


def _rewrite(commands: Commands) -> None:
    simplify = commands.add_parser("simplify", help="simplify paragraphs or a whole file (calls an LLM)")
    simplify.add_argument("file", type=Path, metavar="FILE", help=".tex or .md file")
    which = simplify.add_mutually_exclusive_group()
    which.add_argument("--paragraph", type=int, metavar="N", help="only the N-th paragraph of FILE (from 1)")
    which.add_argument("--line", type=int, metavar="L", help="only the paragraph on line L")
    which.add_argument("--all", action="store_true", help="every paragraph of FILE (the default)")
    simplify.add_argument(
        "--method",
        choices=("soms", "agentsimp"),
        help="default: agentsimp for a file, the setting for one paragraph",
    )
    simplify.add_argument(
        "-o", "--output", type=Path, metavar="OUT", help="write the simplified file here (default: stdout)"
    )
    lay = commands.add_parser("lay", help="write a lay article about the paper (calls an LLM)")
    lay.add_argument("file", type=Path, metavar="FILE", help=".tex/.md file or content/ folder")
    lay.add_argument(
        "-o", "--output", type=Path, metavar="OUT", help="default: FILE-lay-article.md beside FILE"
    )
    lay.add_argument(
        "--iterations", type=int, metavar="N", help="reader-editor-journalist rounds (default 3)"
    )
    for command in (simplify, lay):
        command.add_argument(
            "--force", action="store_true", help="replace OUT (or the transcript) if it exists"
        )
        command.add_argument(
            "--transcript", type=Path, metavar="PATH", help="save the agents' conversation as JSON"
        )
        command.add_argument("--stats", action="store_true", help="print calls, tokens, cache hits and time")
        _llm_options(command)


def _eval(commands: Commands) -> None:
    evaluate = commands.add_parser(
        "eval", help="run a pipeline over a dataset and report the papers' metrics"
    )
    evaluate.add_argument("method", choices=METHODS, metavar="METHOD", help=" | ".join(METHODS))
    evaluate.add_argument(
        "--dataset",
        type=Path,
        required=True,
        help="JSONL file, or a folder of Cochrane pairs or eLife/PLOS lay summaries",
    )
    evaluate.add_argument("--limit", type=int, metavar="N", help="only the first N examples")
    evaluate.add_argument("--out", type=Path, metavar="DIR", help="default: eval-out/METHOD-DATASET")
    evaluate.add_argument(
        "--concurrency", type=int, metavar="N", help="examples in flight (default: llm.maxConcurrency)"
    )
    _llm_options(evaluate)


def _serve(commands: Commands) -> None:
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

"""`margin simplify` and `margin lay`: the rewriting pipelines in a terminal or CI."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from margin.workflows.manuscript.source import Position, UnreadableFile, normalize_uri, path_to_uri

from . import exit_status

# The pipelines and the OpenAI client are imported by the commands when they run: `margin`'s argument parser
# imports this module for add_commands, and every other command would pay for them.
if TYPE_CHECKING:
    from margin.workflows.manuscript.model import Manuscript
    from margin.workflows.rewrite.edits import Target
    from margin.workflows.rewrite.transcript import Transcript

    from .settings import Settings

EXIT_NOT_REWRITTEN = exit_status.NOT_REWRITTEN
DOCUMENT_MIN_WORDS = 8


class UsageProblem(Exception):
    pass


class StepLine:
    """The current agent step on one terminal line of stderr (nothing when stderr is not a terminal)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.enabled = sys.stderr.isatty()
        self.steps = 0

    def __call__(self, step: str) -> None:
        self.steps += 1
        if self.enabled:
            sys.stderr.write(f"\r\033[K{self.label} [{self.steps}] {step}"[:200])
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.steps:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _load(path: Path, settings: Settings) -> Manuscript:
    from margin.workflows.manuscript.loader import ManuscriptLoader
    from margin.workflows.manuscript.sources import SourceProvider

    manuscript, warnings = ManuscriptLoader(SourceProvider(max_bytes=settings.max_file_bytes)).load_path(path)
    for warning in warnings:
        print(f"margin: {warning}", file=sys.stderr)
    return manuscript


def _chosen(manuscript: Manuscript, path: Path, arguments: argparse.Namespace) -> tuple[list[Target], bool]:
    """The paragraphs to simplify and whether the user picked a single one."""
    from margin.workflows.rewrite.edits import REWRITTEN_KINDS, target_of, targets_in

    uri = path_to_uri(path)
    key = normalize_uri(uri)
    in_file = [
        target_of(paragraph)
        for paragraph in manuscript.paragraphs
        if normalize_uri(paragraph.uri) == key and paragraph.kind in REWRITTEN_KINDS
    ]
    if arguments.paragraph is not None:
        if not 1 <= arguments.paragraph <= len(in_file):
            raise UsageProblem(
                f"{path} has {len(in_file)} paragraphs; --paragraph must be from 1 to {len(in_file)}"
            )
        return [in_file[arguments.paragraph - 1]], True
    if arguments.line is not None:
        paragraph = manuscript.paragraph_at(uri, Position(arguments.line - 1, 0))
        if paragraph is None:
            # a position inside the line, not only its start, may be in a paragraph
            paragraph = next(
                (
                    t.paragraph
                    for t in in_file
                    if t.paragraph.range.start.line <= arguments.line - 1 <= t.paragraph.range.end.line
                ),
                None,
            )
        if paragraph is None:
            raise UsageProblem(f"no paragraph of {path} is on line {arguments.line}")
        return [target_of(paragraph)], True
    return targets_in(manuscript, uri, DOCUMENT_MIN_WORDS), False


def _method(arguments: argparse.Namespace, single: bool, settings: Settings) -> str:
    from margin.workflows.rewrite.simplify import AGENTSIMP

    if arguments.method:
        return str(arguments.method)
    return settings.values["simplify.paragraphMethod"] if single else AGENTSIMP


def _taken_outputs(arguments: argparse.Namespace) -> Path | None:
    """An output the user named that exists and may not be replaced: checked before any model call."""
    if arguments.force:
        return None
    for path in (arguments.output, arguments.transcript):
        if path is not None and path.exists():
            return path
    return None


def _save_transcript(transcript: Transcript, arguments: argparse.Namespace) -> None:
    from margin.workflows.rewrite.output import write_output

    if arguments.transcript is None:
        return
    text = json.dumps(transcript.to_json(), indent=2, ensure_ascii=False) + "\n"
    written = write_output(arguments.transcript, text, force=arguments.force)
    print(f"margin: transcript written to {written}", file=sys.stderr)


async def run_simplify(arguments: argparse.Namespace, settings: Settings) -> int:
    from margin.workflows.llm.client import LLMClient
    from margin.workflows.rewrite.edits import apply_rewrites
    from margin.workflows.rewrite.output import write_output
    from margin.workflows.rewrite.simplify import simplify_targets
    from margin.workflows.rewrite.transcript import Transcript
    from margin.workflows.rewrite.types import RewriteStatus

    path: Path = arguments.file
    try:
        manuscript = _load(path, settings)
        targets, single = _chosen(manuscript, path.resolve(), arguments)
    except UnreadableFile as error:
        print(f"margin: {error}", file=sys.stderr)
        return exit_status.UNREADABLE
    except UsageProblem as error:
        print(f"margin: {error}", file=sys.stderr)
        return exit_status.USAGE
    taken = _taken_outputs(arguments)
    if taken:
        print(f"margin: {taken} exists; choose another name or pass --force to replace it", file=sys.stderr)
        return exit_status.USAGE
    if not targets:
        print(f"margin: {path} has no paragraphs to simplify", file=sys.stderr)
        return EXIT_NOT_REWRITTEN
    method = _method(arguments, single, settings)
    transcript = Transcript(method, settings.section("simplify"))
    llm = LLMClient(settings.llm_config())
    steps = StepLine(f"{path.name} ({method})")
    try:
        with llm.measure() as usage:
            rewrites = await simplify_targets(
                targets,
                method,
                manuscript,
                llm,
                soms_options=settings.soms_options(),
                agentsimp_options=settings.agentsimp_options(),
                transcript=transcript,
                on_step=steps,
            )
    finally:
        steps.close()
        await llm.close()
    said: set[str] = set()
    for target, rewrite in zip(targets, rewrites, strict=True):
        if rewrite.status in (RewriteStatus.REFUSED, RewriteStatus.FAILED):
            line = target.paragraph.range.start.line + 1
            message = "the same as above" if rewrite.message in said else rewrite.message
            said.add(rewrite.message)
            print(f"margin: {path.name}:{line}: {rewrite.status.value}: {message}", file=sys.stderr)
    changed = [
        (target.start, target.end, rewrite.text)
        for target, rewrite in zip(targets, rewrites, strict=True)
        if rewrite.changed
    ]
    gave_up = not changed and any(r.status in (RewriteStatus.REFUSED, RewriteStatus.FAILED) for r in rewrites)
    if gave_up:
        nothing = "no output written" if arguments.output is not None else "nothing printed"
        print(f"margin: nothing was simplified; {nothing}", file=sys.stderr)
    elif single and arguments.output is None:
        print(rewrites[0].text.strip())
    else:
        text = apply_rewrites(targets[0].paragraph.source.text, changed)
        if arguments.output is not None:
            written = write_output(arguments.output, text, force=arguments.force)
            print(
                f"margin: {len(changed)} of {len(targets)} paragraph(s) simplified; written to {written}",
                file=sys.stderr,
            )
        else:
            sys.stdout.write(text)
    _save_transcript(transcript, arguments)
    if arguments.stats:
        print(f"margin: {usage.summary()}", file=sys.stderr)
    return exit_status.worst(
        EXIT_NOT_REWRITTEN if gave_up else exit_status.OK, exit_status.model_status(usage)
    )


async def run_lay(arguments: argparse.Namespace, settings: Settings) -> int:
    from margin.workflows.llm.client import LLMClient
    from margin.workflows.rewrite import jrel
    from margin.workflows.rewrite.output import create_beside, write_output
    from margin.workflows.rewrite.transcript import Transcript

    path: Path = arguments.file
    try:
        manuscript = _load(path, settings)
    except UnreadableFile as error:
        print(f"margin: {error}", file=sys.stderr)
        return exit_status.UNREADABLE
    taken = _taken_outputs(arguments)
    if taken:
        print(f"margin: {taken} exists; choose another name or pass --force to replace it", file=sys.stderr)
        return exit_status.USAGE
    options = settings.lay_options()
    if arguments.iterations is not None:
        options.iterations = arguments.iterations
    transcript = Transcript("jrel", {"iterations": options.iterations, "keep": options.keep})
    llm = LLMClient(settings.llm_config())
    steps = StepLine(f"{path.name} (lay article)")
    try:
        with llm.measure() as usage:
            article = await jrel.write_lay_article(
                manuscript, llm, options, transcript=transcript, on_step=steps
            )
    finally:
        steps.close()
        await llm.close()
    _save_transcript(transcript, arguments)
    if arguments.stats:
        print(f"margin: {usage.summary()}", file=sys.stderr)
    if not article.ok:
        reason = article.failures[-1] if article.failures else "no draft"
        print(f"margin: no lay article was written: {reason}", file=sys.stderr)
        return exit_status.worst(EXIT_NOT_REWRITTEN, exit_status.model_status(usage))
    for warning in article.warnings:
        print(f"margin: warning: {warning}", file=sys.stderr)
    text = jrel.render_article(article, path.name)
    if arguments.output is not None:
        written = write_output(arguments.output, text, force=arguments.force)
    else:
        written = create_beside(jrel.article_path(path), text)
    for version in article.versions:
        marker = "*" if version.iteration == article.versions[article.chosen].iteration else " "
        scores = version.scores
        print(
            f"margin: {marker} iteration {version.iteration}: FKGL {scores.fkgl:.1f}  CLI {scores.cli:.1f}  "
            f"DCRS {scores.dcrs:.1f}  (mean {version.difficulty:.2f})",
            file=sys.stderr,
        )
    print(written)
    return exit_status.model_status(usage)


def add_commands(commands: argparse._SubParsersAction, llm_options: object) -> None:  # type: ignore[type-arg]
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
        llm_options(command)  # type: ignore[operator]

"""`margin simplify` and `margin lay`: the rewriting pipelines in a terminal or CI."""

from __future__ import annotations

import argparse
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
    from .reading import command_line_loader

    manuscript, warnings = command_line_loader(settings, [path]).load_path(path)
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


# A write that fails after the model work: the text was kept elsewhere, and stderr says where.
EXIT_NOT_WRITTEN = exit_status.NOT_WRITTEN


def _check_outputs(arguments: argparse.Namespace, default: Path | None = None) -> None:
    """Every file this run will write, checked before any model call (OutputProblem): a bad output found after
    the model work would lose it. `default` is the file written beside the input when no -o is given."""
    from margin.workflows.rewrite.output import OutputProblem, check_folder, check_output

    named = [path for path in (arguments.output, arguments.transcript) if path is not None]
    if len(named) == 2 and named[0].resolve() == named[1].resolve():
        raise OutputProblem(f"-o and --transcript both name {named[0]}; give them different files")
    for path in named:
        check_output(path, arguments.force)
    if default is not None and arguments.output is None:
        check_folder(default.parent, create=True, target=default)


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


def _save_transcript(transcript: Transcript, arguments: argparse.Namespace) -> int:
    if arguments.transcript is None:
        return exit_status.OK
    written = write_or_keep(transcript.text(), arguments.transcript, "the transcript", force=arguments.force)
    if written is None:
        return EXIT_NOT_WRITTEN
    print(f"margin: transcript written to {written}", file=sys.stderr)
    return exit_status.OK


async def run_simplify(arguments: argparse.Namespace, settings: Settings) -> int:
    from margin.workflows.llm.client import LLMClient
    from margin.workflows.rewrite.edits import apply_rewrites
    from margin.workflows.rewrite.output import OutputProblem
    from margin.workflows.rewrite.simplify import simplify_targets
    from margin.workflows.rewrite.transcript import Transcript
    from margin.workflows.rewrite.types import RewriteStatus

    path: Path = arguments.file
    try:
        manuscript = _load(path, settings)
        targets, single = _chosen(manuscript, path.resolve(), arguments)
        _check_outputs(arguments)
    except UnreadableFile as error:
        print(f"margin: {error}", file=sys.stderr)
        return exit_status.UNREADABLE
    except (UsageProblem, OutputProblem) as error:
        print(f"margin: {error}", file=sys.stderr)
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
    written_status = exit_status.OK
    # What stdout cannot take is kept as a file named after the input (paper-simplified.unsaved-XXXX.tex).
    kept_name = f"{path.stem}-simplified{path.suffix}"
    if gave_up:
        nothing = "no output written" if arguments.output is not None else "nothing printed"
        print(f"margin: nothing was simplified; {nothing}", file=sys.stderr)
    elif single and arguments.output is None:
        if not print_or_keep(rewrites[0].text.strip() + "\n", kept_name, "the simplified paragraph"):
            written_status = EXIT_NOT_WRITTEN
    else:
        text = apply_rewrites(targets[0].paragraph.source.text, changed)
        if arguments.output is not None:
            written = write_or_keep(text, arguments.output, "the simplified file", force=arguments.force)
            if written is None:
                written_status = EXIT_NOT_WRITTEN
            else:
                print(
                    f"margin: {len(changed)} of {len(targets)} paragraph(s) simplified; written to {written}",
                    file=sys.stderr,
                )
        elif not print_or_keep(text, kept_name, "the simplified file"):
            written_status = EXIT_NOT_WRITTEN
    written_status = exit_status.worst(written_status, _save_transcript(transcript, arguments))
    if arguments.stats:
        print(f"margin: {usage.summary()}", file=sys.stderr)
    return exit_status.worst(
        EXIT_NOT_REWRITTEN if gave_up else exit_status.OK, exit_status.model_status(usage), written_status
    )


async def run_lay(arguments: argparse.Namespace, settings: Settings) -> int:
    from margin.workflows.llm.client import LLMClient
    from margin.workflows.rewrite import jrel
    from margin.workflows.rewrite.output import OutputProblem
    from margin.workflows.rewrite.transcript import Transcript

    path: Path = arguments.file
    try:
        manuscript = _load(path, settings)
        _check_outputs(arguments, default=jrel.article_path(path))
    except UnreadableFile as error:
        print(f"margin: {error}", file=sys.stderr)
        return exit_status.UNREADABLE
    except OutputProblem as error:
        print(f"margin: {error}", file=sys.stderr)
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
    if not article.ok:
        transcript_status = _save_transcript(transcript, arguments)
        if arguments.stats:
            print(f"margin: {usage.summary()}", file=sys.stderr)
        reason = article.failures[-1] if article.failures else "no draft"
        print(f"margin: no lay article was written: {reason}", file=sys.stderr)
        return exit_status.worst(EXIT_NOT_REWRITTEN, exit_status.model_status(usage), transcript_status)
    for warning in article.warnings:
        print(f"margin: warning: {warning}", file=sys.stderr)
    text = jrel.render_article(article, path.name)
    # The article before the transcript: a transcript that cannot be written must not cost the article.
    if arguments.output is not None:
        written = write_or_keep(text, arguments.output, "the lay article", force=arguments.force)
    else:
        written = write_or_keep(text, jrel.article_path(path), "the lay article", beside=True)
    written_status = exit_status.worst(
        exit_status.OK if written is not None else EXIT_NOT_WRITTEN, _save_transcript(transcript, arguments)
    )
    if arguments.stats:
        print(f"margin: {usage.summary()}", file=sys.stderr)
    for version in article.versions:
        marker = "*" if version.iteration == article.versions[article.chosen].iteration else " "
        scores = version.scores
        print(
            f"margin: {marker} iteration {version.iteration}: FKGL {scores.fkgl:.1f}  CLI {scores.cli:.1f}  "
            f"DCRS {scores.dcrs:.1f}  (mean {version.difficulty:.2f})",
            file=sys.stderr,
        )
    if written is not None:
        print(written)
    return exit_status.worst(exit_status.model_status(usage), written_status)


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

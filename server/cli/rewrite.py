"""`margin simplify` and `margin lay`: the rewrites of the application layer the editor uses
(margin.server.application.rewrite) in a terminal or CI, with the current agent step on stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from margin.workflows.llm.client import LLMClient
from margin.workflows.manuscript.source import Position, UnreadableFile, path_to_uri
from margin.workflows.rewrite.edits import REWRITTEN_KINDS, Target, apply_rewrites, target_of
from margin.workflows.rewrite.output import check_folder, check_output
from margin.workflows.rewrite.types import RewriteStatus

from ..application.rewrite import document_targets, lay_article, lay_article_path, simplify, simplify_method
from ..reading import command_line_loader
from . import exit_status
from .output import print_or_keep, write_or_keep
from .progress import TerminalProgress
from .shared import settings_for, with_models
from .usage import UsageError, output_checks

if TYPE_CHECKING:
    from margin.workflows.manuscript.model import Manuscript
    from margin.workflows.rewrite.transcript import Transcript

    from ..settings import Settings

MAX_ITERATIONS = 10


def run(arguments: argparse.Namespace) -> int:
    settings = settings_for(arguments)
    if getattr(arguments, "iterations", None) is not None and not 0 <= arguments.iterations <= MAX_ITERATIONS:
        raise UsageError(f"--iterations must be from 0 to {MAX_ITERATIONS}")
    try:
        return with_models(
            (run_simplify if arguments.command == "simplify" else run_lay)(arguments, settings)
        )
    except FileExistsError as error:
        print(f"margin: {error}", file=sys.stderr)
        return exit_status.USAGE


def _load(path: Path, settings: Settings) -> Manuscript:
    manuscript, warnings = command_line_loader(settings, [path]).load_path(path)
    for warning in warnings:
        print(f"margin: {warning}", file=sys.stderr)
    return manuscript


def _chosen(manuscript: Manuscript, path: Path, arguments: argparse.Namespace) -> tuple[list[Target], bool]:
    """The paragraphs to simplify and whether the user picked a single one."""
    uri = path_to_uri(path)
    in_file = [
        target_of(paragraph)
        for paragraph in manuscript.paragraphs_in(uri)
        if paragraph.kind in REWRITTEN_KINDS
    ]
    if arguments.paragraph is not None:
        if not 1 <= arguments.paragraph <= len(in_file):
            raise UsageError(
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
            raise UsageError(f"no paragraph of {path} is on line {arguments.line}")
        return [target_of(paragraph)], True
    return document_targets(manuscript, uri), False


def _check_outputs(arguments: argparse.Namespace, default: Path | None = None) -> None:
    """Every file this run will write, checked before any model call (a usage error): a bad output found after
    the model work would lose it. `default` is the file written beside the input when no -o is given."""
    with output_checks():
        named = [path for path in (arguments.output, arguments.transcript) if path is not None]
        if len(named) == 2 and named[0].resolve() == named[1].resolve():
            raise UsageError(f"-o and --transcript both name {named[0]}; give them different files")
        for path in named:
            check_output(path, arguments.force)
        if default is not None and arguments.output is None:
            check_folder(default.parent, create=True, target=default)


def _save_transcript(transcript: Transcript, arguments: argparse.Namespace) -> int:
    if arguments.transcript is None:
        return exit_status.OK
    written = write_or_keep(transcript.text(), arguments.transcript, "the transcript", force=arguments.force)
    if written is None:
        return exit_status.NOT_WRITTEN
    print(f"margin: transcript written to {written}", file=sys.stderr)
    return exit_status.OK


async def run_simplify(arguments: argparse.Namespace, settings: Settings) -> int:
    path: Path = arguments.file
    try:
        manuscript = _load(path, settings)
        targets, single = _chosen(manuscript, path.resolve(), arguments)
        _check_outputs(arguments)
    except UnreadableFile as error:
        print(f"margin: {error}", file=sys.stderr)
        return exit_status.UNREADABLE
    if not targets:
        print(f"margin: {path} has no paragraphs to simplify", file=sys.stderr)
        return exit_status.NOT_REWRITTEN
    method = simplify_method(settings, single, arguments.method)
    llm = LLMClient(settings.llm_config())
    steps = TerminalProgress()
    await steps.begin(f"{path.name} ({method})")
    try:
        with llm.measure() as usage:
            simplified = await simplify(manuscript, targets, method, settings, llm, steps.step)
    finally:
        steps.end("simplified")
        await llm.close()
    said: set[str] = set()
    for target, rewrite in zip(simplified.targets, simplified.rewrites, strict=True):
        if rewrite.status in (RewriteStatus.REFUSED, RewriteStatus.FAILED):
            line = target.paragraph.range.start.line + 1
            message = "the same as above" if rewrite.message in said else rewrite.message
            said.add(rewrite.message)
            print(f"margin: {path.name}:{line}: {rewrite.status.value}: {message}", file=sys.stderr)
    changed = [(target.start, target.end, rewrite.text) for target, rewrite in simplified.changed]
    gave_up = simplified.gave_up
    written_status = exit_status.OK
    # What stdout cannot take is kept as a file named after the input (paper-simplified.unsaved-XXXX.tex).
    kept_name = f"{path.stem}-simplified{path.suffix}"
    if gave_up:
        nothing = "no output written" if arguments.output is not None else "nothing printed"
        print(f"margin: nothing was simplified; {nothing}", file=sys.stderr)
    elif single and arguments.output is None:
        if not print_or_keep(
            simplified.rewrites[0].text.strip() + "\n", kept_name, "the simplified paragraph"
        ):
            written_status = exit_status.NOT_WRITTEN
    else:
        text = apply_rewrites(targets[0].paragraph.source.text, changed)
        if arguments.output is not None:
            written = write_or_keep(text, arguments.output, "the simplified file", force=arguments.force)
            if written is None:
                written_status = exit_status.NOT_WRITTEN
            else:
                print(
                    f"margin: {len(changed)} of {len(targets)} paragraph(s) simplified; written to {written}",
                    file=sys.stderr,
                )
        elif not print_or_keep(text, kept_name, "the simplified file"):
            written_status = exit_status.NOT_WRITTEN
    written_status = exit_status.worst(written_status, _save_transcript(simplified.transcript, arguments))
    if arguments.stats:
        print(f"margin: {usage.summary()}", file=sys.stderr)
    return exit_status.worst(
        exit_status.NOT_REWRITTEN if gave_up else exit_status.OK,
        exit_status.model_status(usage),
        written_status,
    )


async def run_lay(arguments: argparse.Namespace, settings: Settings) -> int:
    path: Path = arguments.file
    try:
        manuscript = _load(path, settings)
        _check_outputs(arguments, default=lay_article_path(path))
    except UnreadableFile as error:
        print(f"margin: {error}", file=sys.stderr)
        return exit_status.UNREADABLE
    llm = LLMClient(settings.llm_config())
    steps = TerminalProgress()
    await steps.begin(f"{path.name} (lay article)")
    try:
        with llm.measure() as usage:
            lay = await lay_article(manuscript, settings, llm, steps.step, iterations=arguments.iterations)
    finally:
        steps.end("lay article written")
        await llm.close()
    article = lay.article
    if not article.ok:
        transcript_status = _save_transcript(lay.transcript, arguments)
        if arguments.stats:
            print(f"margin: {usage.summary()}", file=sys.stderr)
        reason = article.failures[-1] if article.failures else "no draft"
        print(f"margin: no lay article was written: {reason}", file=sys.stderr)
        return exit_status.worst(
            exit_status.NOT_REWRITTEN, exit_status.model_status(usage), transcript_status
        )
    for warning in article.warnings:
        print(f"margin: warning: {warning}", file=sys.stderr)
    text = lay.text(path.name)
    # The article before the transcript: a transcript that cannot be written must not cost the article.
    if arguments.output is not None:
        written = write_or_keep(text, arguments.output, "the lay article", force=arguments.force)
    else:
        written = write_or_keep(text, lay_article_path(path), "the lay article", beside=True)
    written_status = exit_status.worst(
        exit_status.OK if written is not None else exit_status.NOT_WRITTEN,
        _save_transcript(lay.transcript, arguments),
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

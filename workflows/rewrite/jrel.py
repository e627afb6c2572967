"""Generate a lay article: JRE-L (journalist, reader, editor), after its Algorithm 1.

The journalist writes an article for the general public from the paper (title, abstract, key sections). Then, for
n iterations (the paper: 3): the reader - meant to be a smaller model, routed by the `reader` role - takes notes
(technical terms, where they appear, and what they mean); the editor judges the notes for accuracy, complexity
and conveyance and advises the journalist; the journalist revises. A weak reader's notes expose what the article
fails to explain. Readability (FKGL, Coleman-Liau, Dale-Chall) is kept for every version; the last or the most
readable one is returned.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from margin.workflows import readability
from margin.workflows.llm.client import LLMClient
from margin.workflows.llm.types import LLMError, Priority
from margin.workflows.manuscript.model import Manuscript, Paragraph, ParagraphKind
from margin.workflows.prompts import fence
from margin.workflows.registry import JREL

from .additions import neutralize
from .options import Keep, LayOptions  # a module the settings import cheaply
from .preservation import describe
from .team import Sampling, Team
from .transcript import Transcript
from .types import StepCallback, no_steps

log = logging.getLogger("margin.rewrite.jrel")

LAST, MOST_READABLE = Keep.LAST, Keep.MOST_READABLE  # the old names of Keep's members
_KEY_SECTIONS = re.compile(r"introduc|background|conclu|discussion|summary|results|findings|overview", re.I)
_PLACEHOLDERS = re.compile(r"\s*\[(?:citation|reference|url|code)\]")
_ARTICLE_HEADING = re.compile(
    r"^\s*(?:#+\s*)?(?:\*\*)?\s*(revised\s+article|article)\s*:?\s*(?:\*\*)?\s*:?\s*$", re.I | re.M
)
_OTHER_HEADING = re.compile(
    r"^\s*(?:#+\s*)?(?:\*\*)?\s*(improvement|notes?|advice)\s*:?\s*(?:\*\*)?\s*:?\s*$", re.I | re.M
)


ABLATIONS = ("", "no_reader", "no_editor", "no_collaboration")
# The paper's sampling (its implementation details): top_p 0.4, frequency penalty 1 (repetition penalty 1 is
# no penalty), the temperature left at its default.
JREL_SAMPLING = Sampling(top_p=0.4, frequency_penalty=1.0)


@dataclass
class Version:
    """One version of the article: iteration 0 is the first draft."""

    iteration: int
    article: str
    scores: readability.Readability
    notes: str = ""  # the reader's notes on the previous version (what led to this one)
    advice: str = ""  # the editor's advice that this version answers

    @property
    def difficulty(self) -> float:
        """The paper's summary figure: the mean of CLI, FKGL and DCRS (lower is easier)."""
        return (self.scores.cli + self.scores.fkgl + self.scores.dcrs) / 3


@dataclass
class LayArticle:
    title: str
    versions: list[Version] = field(default_factory=list)
    chosen: int = -1
    failures: list[str] = field(default_factory=list)
    models: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # what the user should know about how it was written
    keep: str = LAST

    @property
    def ok(self) -> bool:
        return 0 <= self.chosen < len(self.versions)

    @property
    def text(self) -> str:
        return self.versions[self.chosen].article if self.ok else ""


def paper_summary(manuscript: Manuscript, words: int = 1_500) -> tuple[str, str]:
    """The title and what the journalist reads: the abstract, then the key sections (introduction, results,
    discussion, conclusion), then whatever else fits, within `words`."""
    title = manuscript.title or ""
    prose = [p for p in manuscript.paragraphs if p.kind in (ParagraphKind.PARAGRAPH, ParagraphKind.LIST_ITEM)]
    abstract = [p for p in manuscript.abstract] or [
        p for p in prose if p.section and "abstract" in p.section[0].lower()
    ]
    key = [p for p in prose if p not in abstract and any(_KEY_SECTIONS.search(title) for title in p.section)]
    rest = [p for p in prose if p not in abstract and p not in key]
    budget = words
    chosen: list[Paragraph] = []
    for paragraph in [*abstract, *key, *rest]:
        count = len(paragraph.text.split())
        if count > budget:
            continue
        chosen.append(paragraph)
        budget -= count
    order = {id(paragraph): index for index, paragraph in enumerate(manuscript.paragraphs)}
    chosen.sort(key=lambda paragraph: order.get(id(paragraph), 0))
    parts: list[str] = []
    heading: tuple[str, ...] = ()
    for paragraph in chosen:
        if paragraph.section != heading and paragraph.section:
            parts.append(f"## {paragraph.section[-1]}")
            heading = paragraph.section
        parts.append(_PLACEHOLDERS.sub("", paragraph.text))
    return title, "\n\n".join(parts)


def article_of(text: str) -> str:
    """The article in the journalist's Markdown answer: the text under its last "Article" or "Revised Article"
    heading, up to another section; the whole answer when it has no such heading (weak models)."""
    headings = list(_ARTICLE_HEADING.finditer(text))
    body = text[headings[-1].end() :] if headings else text
    if not headings:
        improvement = _OTHER_HEADING.search(body)
        if improvement is not None and improvement.start() == len(body) - len(body.lstrip()):
            return ""  # only an "Improvement" section: no article
    following = _OTHER_HEADING.search(body)
    if following is not None and headings:
        body = body[: following.start()]
    return body.strip()


async def write_lay_article(
    manuscript: Manuscript,
    llm: LLMClient,
    options: LayOptions | None = None,
    *,
    transcript: Transcript | None = None,
    on_step: StepCallback = no_steps,
    priority: Priority = Priority.INTERACTIVE,
) -> LayArticle:
    """A lay article about a manuscript: its title, abstract and key sections go to the journalist."""
    options = options or LayOptions()
    title, paper = paper_summary(manuscript, options.paper_words)
    return await write_lay_article_from(
        title, paper, llm, options, transcript=transcript, on_step=on_step, priority=priority
    )


async def write_lay_article_from(
    title: str,
    paper: str,
    llm: LLMClient,
    options: LayOptions | None = None,
    *,
    transcript: Transcript | None = None,
    on_step: StepCallback = no_steps,
    priority: Priority = Priority.INTERACTIVE,
) -> LayArticle:
    """Write, read, edit, revise. Never raises for model failures: a failed step ends the iterations and the best
    version so far is kept; with no first draft the result is not `ok` and `failures` says why."""
    options = options or LayOptions()
    transcript = transcript if transcript is not None else Transcript(JREL)
    team = Team(llm, transcript, on_step, priority, sampling=JREL_SAMPLING)
    source = f"# {title}\n\n{paper}" if title else paper  # all of it the manuscript's words: fenced as data
    paper_block = f"The paper:\n{fence(source)}"
    result = LayArticle(title=title, keep=options.keep)
    total = options.iterations
    try:
        draft = await team.ask(
            "journalist",
            f"{paper_block}\n\nWrite the article.",
            step="Journalist writing the first draft",
        )
        article = _plain(article_of(draft.text), source, "the first draft", result)
        problem = "" if article else "the journalist's answer held no article"
        if draft.repetition:
            result.warnings.append(
                f"the first draft repeated itself ({draft.repetition}); the repeats were removed"
            )
    except LLMError as error:
        article, problem = "", str(error)
    if problem:
        transcript.note(f"no first draft: {problem}")
        result.failures = list(dict.fromkeys([*team.failures, problem]))
        result.models = transcript.models()
        return result
    result.versions.append(Version(0, article, readability.score(article)))
    for iteration in range(1, total + 1):
        previous = result.versions[-1].article
        try:
            notes = advice = ""
            if options.ablation not in ("no_reader", "no_collaboration"):
                notes = (
                    await team.ask(
                        "reader",
                        f"The article:\n{fence(previous)}\n\nTake your notes.",
                        step=f"Reader taking notes, iteration {iteration}/{total}",
                    )
                ).text
            if options.ablation not in ("no_editor", "no_collaboration"):
                read = (
                    f"The reader's notes:\n{fence(notes)}\n\nEvaluate the notes, then give your advice."
                    if notes
                    else ("Give your advice on how to make the article easier for a general reader.")
                )
                advice = (
                    await team.ask(
                        "editor",
                        f"{paper_block}\n\nThe popular science article:\n{fence(previous)}\n\n{read}",
                        step=f"Editor advising the journalist, iteration {iteration}/{total}",
                    )
                ).text
            revision = await team.ask(
                "journalist",
                f"{paper_block}\n\nYour article:\n{fence(previous)}\n\n{_revision_input(advice, notes)}",
                step=f"Journalist revising, iteration {iteration}/{total}",
            )
        except LLMError as error:
            transcript.note(f"iteration {iteration} stopped: {error}")
            break
        revised = _plain(article_of(revision.text), source, f"revision {iteration}", result)
        if revision.repetition:
            result.warnings.append(
                f"revision {iteration} repeated itself ({revision.repetition}); the repeats were removed"
            )
        if not revised:
            transcript.note(f"iteration {iteration}: the revision held no article; stopping")
            break
        result.versions.append(
            Version(
                iteration,
                revised,
                readability.score(revised),
                notes=notes.strip(),
                advice=advice.strip(),
            )
        )
    result.failures = list(team.failures)
    result.models = transcript.models()
    if options.keep == MOST_READABLE:
        result.chosen = min(range(len(result.versions)), key=lambda index: result.versions[index].difficulty)
    else:
        result.chosen = len(result.versions) - 1
    return result


def _plain(article: str, paper: str, which: str, result: LayArticle) -> str:
    """The article with the markup the paper lacks made plain text: links, images, HTML, TeX commands, code. The
    article is a file the user opens in a Markdown preview or converts with pandoc (which passes raw TeX on),
    and the journalist is told to add none of it; refusing a whole version would lose the work, so what was
    changed is said instead. Empty if something could not be made plain (then there is no article)."""
    plain = neutralize(paper, article) if article else (article, [])
    if plain is None:
        result.warnings.append(f"{which} held markup that could not be made plain text; it was left out")
        return ""
    text, changed = plain
    if changed:
        result.warnings.append(
            f"{which} added {describe(changed)} that the paper does not have; they were made plain text"
        )
    return text


def _revision_input(advice: str, notes: str) -> str:
    """What the journalist revises from: the editor's advice, else the reader's notes, else nothing but its own
    draft (the ablations without the editor, or without any collaboration)."""
    if advice:
        return (
            f"The editor's advice:\n{fence(advice)}\n\nChoose and refine the most useful advice, then rewrite the "
            "article."
        )
    if notes:
        return (
            f"A general reader's notes on your article:\n{fence(notes)}\n\nWhere the notes show the reader "
            "misunderstood or missed something, make the article clearer. Rewrite the article."
        )
    return "Revise your article so that a general reader finds it easier to read. Rewrite the article."


def _version() -> str:
    try:
        return metadata.version("margin")
    except metadata.PackageNotFoundError:
        return "unknown"


def render_article(article: LayArticle, source_name: str) -> str:
    """The article as a Markdown file: a short provenance header (YAML front matter), the title, the text."""
    chosen = article.versions[article.chosen]
    how = "the most readable" if article.keep == MOST_READABLE else "the last"
    lines = [
        "---",
        f"title: {json.dumps(article.title or 'Lay article', ensure_ascii=False)}",
        f"generator: {json.dumps(f'margin {_version()} (JRE-L: journalist, reader, editor)')}",
        f"source: {json.dumps(source_name, ensure_ascii=False)}",
        "models: {"
        + ", ".join(f"{role}: {json.dumps(model)}" for role, model in sorted(article.models.items()))
        + "}",
        f"iterations: {len(article.versions) - 1}",
        f"kept: {chosen.iteration}  # {how} version",
        "readability:  # per version, lower is easier (0 = first draft)",
    ]
    for version in article.versions:
        scores = version.scores
        lines.append(
            f"  - {{iteration: {version.iteration}, fkgl: {scores.fkgl:.2f}, cli: {scores.cli:.2f}, "
            f"dcrs: {scores.dcrs:.2f}, mean: {version.difficulty:.2f}}}"
        )
    lines += ["---", ""]
    if article.title:
        lines += [f"# {article.title}", ""]
    lines.append(chosen.article.strip())
    return "\n".join(lines) + "\n"


def article_path(manuscript_path: Path) -> Path:
    """Where the article goes by default: beside the manuscript (a numeric suffix if that name is taken)."""
    return manuscript_path.with_name(f"{manuscript_path.stem}-lay-article.md")

"""Where rewrites go: the source span of each paragraph, which paragraphs may be rewritten, and the new text of a
file once rewrites are applied. Editor-agnostic; the server turns these spans into a versioned WorkspaceEdit."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from margin.workflows.manuscript.model import Manuscript, Paragraph, ParagraphKind

from .preservation import html_comment_spans, latex_comments
from .types import Language

# Footnotes sit inside their paragraph's span: rewriting both would overlap. They change with their paragraph.
REWRITTEN_KINDS = frozenset({ParagraphKind.PARAGRAPH, ParagraphKind.LIST_ITEM, ParagraphKind.QUOTE})


@dataclass(frozen=True, slots=True)
class Target:
    """A paragraph to rewrite: its exact source span and the source text there."""

    paragraph: Paragraph
    start: int
    end: int

    @property
    def source(self) -> str:
        return self.paragraph.source.text[self.start : self.end]

    @property
    def language(self) -> Language:
        return Language.of(self.paragraph.file)


def target_of(paragraph: Paragraph) -> Target:
    start, end = paragraph.source_span
    return Target(paragraph, start, end)


def targets_in(manuscript: Manuscript, uri: str, min_words: int = 1) -> list[Target]:
    """The paragraphs of one file that a document rewrite changes, in order, never overlapping."""
    targets: list[Target] = []
    for paragraph in manuscript.paragraphs_in(uri):
        if paragraph.kind not in REWRITTEN_KINDS:
            continue
        if len(paragraph.text.split()) < min_words:
            continue
        target = target_of(paragraph)
        if targets and target.start < targets[-1].end:
            continue
        targets.append(target)
    return sorted(targets, key=lambda item: item.start)


def apply_rewrites(text: str, replacements: Iterable[tuple[int, int, str]]) -> str:
    """`text` with each (start, end) span replaced; spans must not overlap."""
    pieces: list[str] = []
    position = 0
    for start, end, new in sorted(replacements):
        if start < position:
            raise ValueError("overlapping rewrites")
        pieces += [text[position:start], new]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def carry_comments(original: str, rewrite: str, language: Language) -> str:
    """The rewrite, followed by each comment of the original that it dropped: a comment is the author's, and
    a rewrite must not lose it (models do not see a reason to keep them)."""
    if language is Language.LATEX:
        comments = latex_comments(original)
    else:
        comments = [original[start:end] for start, end in html_comment_spans(original)]
    dropped = [comment for comment in comments if comment not in rewrite]
    if not dropped:
        return rewrite
    body = rewrite.rstrip()
    trailing = rewrite[len(body) :]
    return body + "".join(f"\n{comment}" for comment in dropped) + trailing

"""What a rewrite must keep: every citation, cross-reference, label, math span, macro and link of the original.

A rewrite may explain an element instead of keeping it (a math span or a macro said in words) only when it says
so explicitly; citations, references, labels and links can never be explained away. The check compares the
original source with the rewrite's source, so it works on what the user's file will hold.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from .types import Language

HIDDEN = "hidden"  # text a rewrite turned into a comment
CITATION, REFERENCE, LABEL, MATH, MACRO, LINK, FOOTNOTE, CODE = (
    "citation",
    "reference",
    "label",
    "math",
    "macro",
    "link",
    "footnote",
    "code",
)
EXPLAINABLE = frozenset({MATH, MACRO, CODE})

# A % starts a comment after an even number of backslashes (\\% is a line break, then a comment).
_LATEX_COMMENT = re.compile(r"(?<!\\)((?:\\\\)*)(%[^\n]*)")
_LATEX_CITE = re.compile(
    r"\\(?P<name>[a-zA-Z]*[Cc]ite[a-zA-Z]*|nocite)\*?\s*(?:\[[^\]]*\]\s*){0,2}\{(?P<keys>[^{}]*)\}"
)
_LATEX_REF = re.compile(
    r"\\(?P<name>ref|eqref|autoref|cref|Cref|crefrange|pageref|nameref|vref|Vref|cpageref|labelcref|subref)"
    r"\*?\s*\{(?P<keys>[^{}]*)\}"
)
_LATEX_LABEL = re.compile(r"\\label\s*\{(?P<keys>[^{}]*)\}")
_LATEX_URL = re.compile(r"\\(?:url|href)\s*\{(?P<keys>[^{}]*)\}")
_LATEX_MATH = re.compile(
    r"(?<!\\)\$\$(?:[^$]|\\\$)+?(?<!\\)\$\$|(?<!\\)\$(?:[^$]|\\\$)+?(?<!\\)\$|\\\((?:.|\n)+?\\\)|\\\[(?:.|\n)+?\\\]"
)
_LATEX_ENVIRONMENT = re.compile(r"\\(begin|end)\s*\{([^{}]*)\}")
_LATEX_MACRO = re.compile(r"\\([a-zA-Z]+)\*?")
# Handled above, or harmless for a rewrite to drop (spacing and line breaks).
_LATEX_NOT_MACROS = frozenset(
    {"begin", "end", "label", "url", "href", "nocite", "par", "newline", "linebreak"}
)

_MD_CODE = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_MD_MATH = re.compile(r"(?<![\\$])\$(?!\s)([^$\n]+?)(?<![\s\\])\$(?!\d)|\$\$(.+?)\$\$", re.S)
# Possessive (*+, ++): giving characters back could never produce the "]", ")", space or ">" that must come next,
# and without them a hostile text ("![a](" repeated) takes cubic time.
_MD_IMAGE_OR_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\]]*+\])*+\]\(\s*+<?([^)\s>]++)>?(?:\s+[\"'(][^)]*[\"')])?\s*\)"
)
_MD_REFERENCE_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])+\]\[([^\]]+)\]")
_MD_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^>\s]+)>")
_MD_BARE_URL = re.compile(r"(?<!\]\()(?<![<\[])\bhttps?://[^\s)>\]]*[^\s)>\].,;:!?]")
_MD_FOOTNOTE = re.compile(r"\[\^([^\]\s]+)\]")
_MD_CITATION = re.compile(r"(?<![\w@.])-?@\{?([A-Za-z0-9_](?:[\w:.#$%&+?<>~/-]*\w)?)\}?")
_CROSSREF_PREFIXES = ("fig:", "tbl:", "sec:", "eq:", "lst:")
_WHITESPACE = re.compile(r"\s+")
_NOUNS = {MATH: "math span", CODE: "code span", HIDDEN: "passage hidden by an unescaped %"}
_PLURALS = {"trailing backslash": "trailing backslashes"}


@dataclass(frozen=True, slots=True)
class Element:
    kind: str
    text: str  # as the user would recognise it (\cite{smith20}, $p<0.05$, \gls)
    key: str  # what the rewrite must contain (a citation key, a label, normalized math, a macro name)

    def __str__(self) -> str:
        return f"{self.kind} {self.text}"


def _squash(text: str) -> str:
    return _WHITESPACE.sub("", text)


def _keys(match: re.Match[str]) -> list[str]:
    return [key.strip() for key in match.group("keys").split(",") if key.strip()]


def latex_comments(source: str) -> list[str]:
    """The comments of LaTeX source, in order ("% ..." up to the end of the line), not counting a % inside
    \\url or \\href (percent-encoding) or an escaped \\%."""
    return [match.group(2) for match in _LATEX_COMMENT.finditer(_mask_urls(source))]


def _mask_urls(source: str) -> str:
    # Same length, so offsets hold; a % in a URL is percent-encoding, not a comment.
    return _LATEX_URL.sub(lambda match: match.group(0).replace("%", "\x00"), source)


def without_comments(source: str, language: Language) -> str:
    if language is Language.MARKDOWN:
        return " ".join(source[start:end] for start, end in _outside(source, html_comment_spans(source)))
    return _LATEX_COMMENT.sub(lambda match: match.group(1), _mask_urls(source)).replace("\x00", "%")


def _latex_elements(source: str) -> list[Element]:
    text = without_comments(source, Language.LATEX)
    elements: list[Element] = []
    for match in _LATEX_CITE.finditer(text):
        elements += [Element(CITATION, f"\\{match.group('name')}{{{key}}}", key) for key in _keys(match)]
    for match in _LATEX_REF.finditer(text):
        elements += [Element(REFERENCE, f"\\{match.group('name')}{{{key}}}", key) for key in _keys(match)]
    for match in _LATEX_LABEL.finditer(text):
        elements += [Element(LABEL, f"\\label{{{key}}}", key) for key in _keys(match)]
    for match in _LATEX_URL.finditer(text):
        elements += [Element(LINK, match.group(0), key) for key in _keys(match)]
    without_math = text
    for match in _LATEX_MATH.finditer(text):
        elements.append(Element(MATH, match.group(0), _squash(match.group(0))))
        without_math = without_math.replace(match.group(0), " ", 1)
    for match in _LATEX_ENVIRONMENT.finditer(without_math):
        elements.append(Element(MACRO, match.group(0), f"\\{match.group(1)}{{{match.group(2).strip()}}}"))
    handled = {m.group("name") for m in _LATEX_CITE.finditer(text)} | {
        m.group("name") for m in _LATEX_REF.finditer(text)
    }
    for match in _LATEX_MACRO.finditer(without_math.replace("\\\\", "  ")):  # \\\\ is a line break
        name = match.group(1)
        if name not in _LATEX_NOT_MACROS and name not in handled:
            elements.append(Element(MACRO, f"\\{name}", f"\\{name}"))
    return elements


def _markdown_elements(source: str) -> list[Element]:
    elements: list[Element] = []
    text = without_comments(source, Language.MARKDOWN)
    for match in _MD_CODE.finditer(text):
        elements.append(Element(CODE, match.group(0), _squash(match.group(0))))
    text = _MD_CODE.sub(" ", text)
    for match in _MD_MATH.finditer(text):
        elements.append(Element(MATH, match.group(0), _squash(match.group(0))))
    text = _MD_MATH.sub(" ", text)
    for match in _MD_IMAGE_OR_LINK.finditer(text):
        elements.append(Element(LINK, match.group(1), match.group(1)))
    for match in _MD_REFERENCE_LINK.finditer(text):
        elements.append(Element(LINK, f"[{match.group(1)}]", f"[{match.group(1)}]"))
    for match in _MD_AUTOLINK.finditer(text):
        elements.append(Element(LINK, match.group(1), match.group(1)))
    for match in _MD_BARE_URL.finditer(_MD_IMAGE_OR_LINK.sub(" ", _MD_AUTOLINK.sub(" ", text))):
        elements.append(Element(LINK, match.group(0), match.group(0)))
    for match in _MD_FOOTNOTE.finditer(text):
        elements.append(Element(FOOTNOTE, match.group(0), match.group(0)))
    for match in _MD_CITATION.finditer(_MD_IMAGE_OR_LINK.sub(" ", text)):
        key = match.group(1)
        kind = REFERENCE if key.startswith(_CROSSREF_PREFIXES) else CITATION
        elements.append(Element(kind, f"@{key}", key))
    return elements


def protected_elements(source: str, language: Language) -> list[Element]:
    """The elements of a paragraph's source that a rewrite must keep, in order, with repeats."""
    return _latex_elements(source) if language is Language.LATEX else _markdown_elements(source)


def _present(elements: list[Element]) -> Counter[tuple[str, str]]:
    return Counter((element.kind, element.key) for element in elements)


def missing_elements(
    original: str,
    rewrite: str,
    language: Language,
    explained: Mapping[str, str] | None = None,
) -> list[Element]:
    """Elements of `original` that `rewrite` lost; each distinct element must survive at least once (a rewrite
    may merge two citations of one key). A math span, macro or code span also counts as kept when `explained`
    maps its text to words that the rewrite contains: it was deliberately said in words."""
    explained = explained or {}
    kept = _present(protected_elements(rewrite, language))
    squashed_rewrite = _squash(rewrite).casefold()
    lost: list[Element] = []
    seen: set[tuple[str, str]] = set()
    for element in protected_elements(original, language):
        identity = (element.kind, element.key)
        if identity in seen:
            continue
        seen.add(identity)
        if kept[identity] > 0:
            continue
        words = explained.get(element.text, "")
        if element.kind in EXPLAINABLE and words.strip() and _squash(words).casefold() in squashed_rewrite:
            continue
        lost.append(element)
    if language is Language.LATEX:
        # A % the rewrite left unescaped ("10%") comments out the rest of its line: that text would vanish.
        known = set(latex_comments(original))
        lost += [
            Element(HIDDEN, comment, comment) for comment in latex_comments(rewrite) if comment not in known
        ]
    return lost


def describe(lost: list[Element]) -> str:
    """'2 citations (\\cite{a}, \\cite{b}) and 1 math span ($x$)' for messages to users and repair prompts.
    Each text is shown on one line: a message is one line, and a repair prompt's list cannot grow headings."""
    groups: dict[str, list[str]] = {}
    for element in lost:
        groups.setdefault(element.kind, []).append(" ".join(element.text.split()))
    parts = []
    for kind, texts in groups.items():
        shown = ", ".join(texts[:4]) + (", ..." if len(texts) > 4 else "")
        noun = _NOUNS.get(kind, kind)
        noun = noun if len(texts) == 1 else _PLURALS.get(noun, noun + "s")
        parts.append(f"{len(texts)} {noun} ({shown})")
    return " and ".join(parts) if len(parts) < 3 else ", ".join(parts[:-1]) + " and " + parts[-1]


def html_comment_spans(text: str) -> list[tuple[int, int]]:
    """Where each closed <!-- ... --> is. Linear: a lazy regex rescans to the end from every unclosed "<!--"."""
    spans: list[tuple[int, int]] = []
    position = 0
    while (start := text.find("<!--", position)) >= 0:
        end = text.find("-->", start + 4)
        if end < 0:
            break  # no "-->" after this one, so none after any later "<!--" either
        spans.append((start, end + 3))
        position = end + 3
    return spans


def _outside(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The stretches of `text` between `spans` (sorted, not overlapping)."""
    pieces, position = [], 0
    for start, end in spans:
        pieces.append((position, start))
        position = end
    pieces.append((position, len(text)))
    return pieces

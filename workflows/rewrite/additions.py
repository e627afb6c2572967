"""What a rewrite must not add: markup that the original text does not have.

The preservation check (preservation.py) catches what a rewrite loses; this module catches what it adds. A model,
or a manuscript that talks a model into it, can slip `\\immediate\\write18{...}`, `\\input{/etc/passwd}`, a
`<script>` tag or a link to anywhere into a "simpler" paragraph, and the editor would apply it. A rewrite may add
words, a few harmless formatting commands (ADDABLE) and escapes of special characters; every other command,
environment, include, link, HTML tag, code span or raw-output attribute must already be in the original.

The rules, for LaTeX and for Markdown alike (pandoc passes raw TeX in Markdown, math included, on to LaTeX):
- a command may be added when it is in ADDABLE (LaTeX only) or is an escape (a backslash and a punctuation mark);
- a text command of TEXT_COMMANDS (\\footnote, \\textsc, \\cite...) may be used again, with other words, when the
  original uses it; citation, reference, label and link keys are checked on their own;
- a command of SENSITIVE (files, the shell, definitions, catcodes) may appear only as often as in the original,
  each time followed by the same text: it can be kept, never added or changed;
- any other command may be kept or repeated only with the arguments it has in the original;
- no `^^` character codes (TeX reads `^^5c` as a backslash), no trailing lone backslash (it would join the
  character after the paragraph, e.g. turn the author's `%` comment into text), and in LaTeX the braces must
  balance as the original's do;
- no link whose target the original lacks (\\url, \\href, [..](..), images, autolinks, bare URLs);
- Markdown: no HTML tag or comment, code span or fence, raw-output attribute ({=latex}) or metadata line (---)
  that the original lacks.

Text that TeX or Markdown never reads as markup (comments, \\verb bodies, code spans) is skipped only where the
original has the very same text: a comment the rewrite invents is read like any other text, so a mistaken idea of
where a comment ends can only make the check stricter. Every scan is one pass over the text; each pattern looks at
most a bounded distance ahead or stops at the next bracket: the checks are linear in the size of the text.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from .preservation import CITATION, CODE, FOOTNOTE, LABEL, LINK, REFERENCE, Element, protected_elements
from .types import Language

COMMAND, ENVIRONMENT, FILE_ACCESS, DEFINITION = (
    "command",
    "environment",
    "file or shell command",
    "definition or catcode change",
)
HTML, ATTRIBUTE, METADATA = "HTML tag", "raw-output attribute", "metadata block"
CHARACTER_CODE, BRACE, BACKSLASH = "^^ character code", "unbalanced brace", "trailing backslash"
# Additions of words or keys the author did not write; the other kinds can run code, read files, load something
# from the network or hide text.
CONTENT_KINDS = frozenset({CITATION, REFERENCE, LABEL, FOOTNOTE})

# Built into LaTeX (no package, so no compile error), typographic only, and their one argument is typeset text,
# which is checked like the rest. Not \footnote: it moves words out of the paragraph, where the user does not
# look for them, and margin treats footnotes as paragraphs of their own.
ADDABLE = frozenset({"emph", "textbf", "textit", "ldots", "dots"})
# Escapes (\% \& \_), spacing (\, \; \ ), accents (\' \" \^), \\ and \-: no file, no definition, no link.
_ADDABLE_SYMBOLS = frozenset(" \t\r\n%$&#_{},;:!/-@\\'\"`^~=.")
_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \t\r\n")  # Markdown's backslash escapes
# Commands whose arguments are running text or keys: a rewrite simplifies that text, so once the original uses
# one of them, a rewrite may use it with other words. (Keys and link targets are compared on their own.)
TEXT_COMMANDS = frozenset(
    {
        *ADDABLE,
        *("footnote", "textsc", "texttt", "textrm", "textsf", "textup", "textsl", "textmd", "textnormal"),
        *("underline", "mbox", "text", "enquote", "item", "url", "href", "label"),
        *("ref", "eqref", "autoref", "cref", "Cref", "pageref", "nameref", "vref", "Vref", "cpageref"),
        *("labelcref", "subref", "crefrange", "nocite"),
    }
)
_CITATION_COMMAND = re.compile(r"[a-zA-Z]*[Cc]ite[a-zA-Z]*")
FILE_COMMANDS = frozenset(
    {
        *("input", "include", "includeonly", "InputIfFileExists", "IfFileExists", "import", "subimport"),
        *("inputfrom", "includefrom", "subinputfrom", "subincludefrom", "endinput"),
        *("openin", "openout", "read", "readline", "write", "immediate", "closein", "closeout"),
        *("newwrite", "newread", "special", "directlua", "latelua", "luadirect", "luaexec", "ShellEscape"),
        *("includegraphics", "includepdf", "includesvg", "includestandalone", "lstinputlisting"),
        *("verbatiminput", "VerbatimInput", "inputminted", "bibliography", "addbibresource"),
        *("externaldocument", "pdfximage", "pdffiledump", "pdfobj", "pdfannot"),
    }
)
DEFINITION_COMMANDS = frozenset(
    {
        *("def", "edef", "gdef", "xdef", "let", "futurelet", "global", "long", "outer", "protected"),
        *("csname", "endcsname", "expandafter", "noexpand", "scantokens", "lowercase", "uppercase"),
        *("catcode", "lccode", "uccode", "sfcode", "mathcode", "delcode", "makeatletter", "makeatother"),
        *("newcommand", "renewcommand", "providecommand", "DeclareRobustCommand", "NewDocumentCommand"),
        *("RenewDocumentCommand", "ProvideDocumentCommand", "DeclareDocumentCommand", "newenvironment"),
        *("renewenvironment", "NewDocumentEnvironment", "RenewDocumentEnvironment", "usepackage"),
        *("RequirePackage", "documentclass", "LoadClass", "ExplSyntaxOn", "ExplSyntaxOff", "everypar"),
        *("everyeof", "everyjob", "everymath", "everydisplay", "afterassignment", "aftergroup"),
    }
)
SENSITIVE = FILE_COMMANDS | DEFINITION_COMMANDS
_VERBATIM = frozenset({"verb", "Verb", "lstinline", "path"})  # \verb|...|: the body is never markup
_URL_ARGUMENT = frozenset({"url", "href", "nolinkurl"})  # a % in their first argument is part of the address

_CONTEXT = 200  # characters after a SENSITIVE command that must be the original's
_SHOWN = 80  # characters of an addition shown to the user
_VERBATIM_REACH = 1_000  # how far a \verb body may reach for its closing delimiter

# Possessive quantifiers (*+, {m,n}+) never give back what they matched: no backtracking, no quadratic cases.
_LATEX_TOKEN = re.compile(r"\\(?:([A-Za-z@]++)|(.)|\Z)|(%)|([{}])", re.S)
_MARKDOWN_TOKEN = re.compile(r"\\(?:([A-Za-z@]++)|(.)|\Z)|(<!--)|(`++)|^([ \t]{0,3}+~{3,}+)", re.S | re.M)
_GROUP = r"\{(?:[^{}]{1,200}+|\{[^{}]{0,200}+\}){0,8}+\}"
_ARGUMENTS = re.compile(r"\*?(?:\s{0,20}+(?:\[[^\[\]{}]{0,200}+\]|" + _GROUP + r")){0,4}+")
_ARGUMENT_AHEAD = re.compile(r"\s{0,20}+[\[{]")
_SHOWN_TAIL = re.compile(
    r"\*?(?:[ \t]{0,3}+[\w/.:~=`'\\%-]{1,40}+)?(?:[ \t]{0,3}+(?:\[[^\]\n]{0,60}+\]|\{[^{}\n]{0,60}+\})){0,3}+"
)
_VERBATIM_DELIMITER = re.compile(r"\*?(?:\[[^\]\n]{0,100}+\])?([^\sA-Za-z*])")
_URL_BRACED = re.compile(r"\s{0,20}+\{[^{}\n]{0,2000}+\}")
_LATEX_LINK = re.compile(r"\\(?:url|href|nolinkurl)\s{0,20}+\{([^{}\n]{0,2000}+)\}")
_CARETS = re.compile(r"\^\^")
_WHITESPACE = re.compile(r"\s+")

_HTML_TAG = re.compile(r"<(?:[A-Za-z][A-Za-z0-9-]*+(?=[\s/>]|\Z)|/[A-Za-z][A-Za-z0-9-]*+|!|\?)[^<>]*+>?")
_AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}+:[^\s<>]*+)>")
_BRACKET = re.compile(r"\\.|[\[\]]", re.S)
_DESTINATION_CHARS = r"[^\s()<>\[\]]"
_LINK_TAIL = re.compile(
    r"\(\s{0,20}+(<[^<>\n]{0,2000}+>|"
    + _DESTINATION_CHARS
    + r"{0,2000}+(?:\("
    + _DESTINATION_CHARS
    + r"{0,200}+\)"
    + _DESTINATION_CHARS
    + r"{0,2000}+){0,3}+)"
    + r"(?:\s{1,20}+(?:\"[^\"\n]{0,300}+\"|'[^'\n]{0,300}+'|\([^()\n]{0,300}+\)))?\s{0,20}+\)"
)
_REFERENCE_DEFINITION = re.compile(
    r"^[ ]{0,3}+\[[^\[\]\n]{1,300}+\]:[ \t]{0,20}+\n?[ \t]{0,20}+(<[^<>\n]{0,2000}+>|[^\s<>]{1,2000}+)[^\n]{0,500}+",
    re.M,
)
_BARE_URL = re.compile(r"(?:\b(?:https?|ftp|file)://|\bwww\.)[^\s<>\"'{}\\`\[\]]++", re.I)
_ATTRIBUTE = re.compile(
    r"\{\s{0,20}+(?:=[A-Za-z]|[.#][A-Za-z_]|[A-Za-z_][\w-]{0,100}+\s{0,20}+=)[^{}\n]{0,300}+\}"
)
_METADATA_LINE = re.compile(r"^[ \t]*+---[ \t]*+$", re.M)
_FENCE_LINE = re.compile(r"^[ \t]{0,3}+(~{3,}+)", re.M)
_URL_TRAILER = ".,;:!?'\"*_~"


@dataclass(frozen=True, slots=True)
class Addition:
    """Something a rewrite added: what the user is told, where it is in the rewrite, and the text that makes it
    inert there (None: it cannot be made inert in place)."""

    kind: str
    text: str  # as the user would recognise it: \input{/etc/passwd}, <script>, http://...
    start: int
    end: int
    inert: str | None = None

    def element(self) -> Element:
        return Element(self.kind, self.text, self.text)


@dataclass(frozen=True, slots=True)
class _Command:
    name: str  # "input", or the character of a control symbol
    word: bool  # a control word (\input), not a control symbol (\%)
    start: int
    end: int  # after the name
    signature: str  # the name with its arguments, as compared with the original's
    context: str  # for SENSITIVE commands: the name and the text after it


@dataclass
class _Scan:
    """One text, read the way TeX (or Markdown) reads it."""

    text: str
    commands: list[_Command] = field(default_factory=list)
    inert: list[tuple[int, int]] = field(default_factory=list)  # spans never read as markup, in order
    # Markdown code spans and fences: where each is, and what it holds.
    code: list[tuple[int, int, str]] = field(default_factory=list)
    escapes: list[tuple[int, int]] = field(default_factory=list)  # Markdown backslash escapes: never markup
    depth: int = 0  # LaTeX braces opened minus closed at the end, and the lowest that value was on the way
    lowest: int = 0

    def active(self) -> str:
        """The text with its inert spans blanked (the same length, so positions hold)."""
        return _blanked(self.text, self.inert)

    def markup(self) -> str:
        """The active text with backslash escapes blanked too: where Markdown looks for tags and links."""
        return _blanked(self.text, self.inert + self.escapes)

    def inert_texts(self) -> set[str]:
        return {self.text[start:end] for start, end in self.inert}


def _blanked(text: str, spans: list[tuple[int, int]]) -> str:
    pieces, position = [], 0
    for start, end in sorted(spans):
        if start < position:
            continue
        pieces += [text[position:start], re.sub(r"[^\n]", " ", text[start:end])]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def _squash(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _clip(text: str) -> str:
    text = _squash(text)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _command(text: str, start: int, end: int, name: str, word: bool) -> _Command:
    if word and not name.strip("@"):
        name, word = "@", False  # \@ is spacing after punctuation (a control symbol), not a name
    signature, context = f"\\{name}", ""
    if word:
        arguments = _ARGUMENTS.match(text, end)
        after = arguments.end() if arguments else end
        signature += _squash(text[end:after])
        if _ARGUMENT_AHEAD.match(text, after):  # an argument too long or too nested to parse: compare it raw
            signature += "\x00" + _squash(text[after : after + _CONTEXT])
        if name in SENSITIVE:
            context = f"\\{name}\x00" + _squash(text[end : end + _CONTEXT])
    return _Command(name, word, start, end, signature, context)


def _shown(text: str, start: int, end: int) -> str:
    tail = _SHOWN_TAIL.match(text, end)
    return _clip(text[start : tail.end() if tail else end])


# -- reading LaTeX ------------------------------------------------------------------------------------------------


def _scan_latex(text: str, kept: set[str] | None) -> _Scan:
    """Commands, braces, comments and \\verb bodies. `kept`: the comment and \\verb texts that stay inert (the
    original's); None: all of them (reading the original itself)."""
    scan = _Scan(text)
    position, literal_until = 0, -1  # before `literal_until` a % is a character, not a comment
    while (match := _LATEX_TOKEN.search(text, position)) is not None:
        start, position = match.span()
        word, symbol, percent, brace = match.groups()
        if word is not None or symbol is not None:
            scan.commands.append(_command(text, start, position, word or symbol, word is not None))
            if word in _VERBATIM:
                position = _skip_verbatim(text, position, scan, kept)
            elif word in _URL_ARGUMENT and (braced := _URL_BRACED.match(text, position)):
                literal_until = max(literal_until, braced.end())
        elif percent is not None and start >= literal_until:
            line_end = text.find("\n", start)
            line_end = len(text) if line_end < 0 else line_end
            if kept is None or text[start:line_end] in kept:
                scan.inert.append((start, line_end))
                position = line_end
            else:
                literal_until = line_end  # a comment the original lacks: read what it holds like any text
        elif brace is not None:
            scan.depth += 1 if brace == "{" else -1
            scan.lowest = min(scan.lowest, scan.depth)
    return scan


def _skip_verbatim(text: str, position: int, scan: _Scan, kept: set[str] | None) -> int:
    """After \\verb: skip its body when it closes on the same line and may stay inert."""
    delimiter = _VERBATIM_DELIMITER.match(text, position)
    if delimiter is None:
        return position
    closing = "}" if delimiter.group(1) == "{" else delimiter.group(1)
    body = delimiter.end()
    reach = min(len(text), body + _VERBATIM_REACH)
    line_end = text.find("\n", body, reach)
    end = text.find(closing, body, reach if line_end < 0 else line_end)
    if end < 0 or (kept is not None and text[body:end] not in kept):
        return position
    scan.inert.append((body, end))
    return end + 1


# -- reading Markdown ---------------------------------------------------------------------------------------------


def _scan_markdown(text: str, kept: set[str] | None) -> _Scan:
    """Raw TeX commands (pandoc passes them on) and the spans Markdown never reads as markup: code spans, tilde
    fences and HTML comments. `kept` as for LaTeX."""
    scan = _Scan(text)
    runs: dict[int, list[int]] = defaultdict(list)  # backtick runs by length: where each starts
    for run in re.finditer(r"`++", text):
        runs[run.end() - run.start()].append(run.start())
    fences: dict[int, list[int]] = defaultdict(list)  # tilde fence lines by their number of tildes
    for line in _FENCE_LINE.finditer(text):
        fences[len(line.group(1))].append(line.start())
    closers: set[int] = set()  # runs and fence lines that close a span: never an opening
    comment_end: tuple[int, int] | None = None  # the last search for "-->": from where, and what it found
    # Inside a span that is read as text (the original lacks it) no other span starts, as in Markdown: spans
    # never overlap, so each is sliced and compared once.
    position, plain_until = 0, -1
    while (match := _MARKDOWN_TOKEN.search(text, position)) is not None:
        start, position = match.span()
        word, symbol, comment, backticks, tildes = match.groups()
        span: tuple[int, int] | None = None
        if word is not None or symbol is not None:
            scan.commands.append(_command(text, start, position, word or symbol, word is not None))
            if symbol is not None and symbol in _PUNCTUATION:
                scan.escapes.append((start, position))
        elif start < plain_until or start in closers:
            continue
        elif comment is not None:
            # A later "<!--" before the "-->" found last ends there too: each character is searched once.
            if comment_end is None or not (comment_end[1] < 0 or position <= comment_end[1]):
                comment_end = (position, text.find("-->", position))
            found = comment_end[1]
            span = (start, len(text) if found < 0 else found + 3)
        elif backticks is not None or tildes is not None:
            length = len(backticks) if backticks is not None else len(tildes.strip(" \t"))
            same = runs[length] if backticks is not None else fences[length]
            index = bisect.bisect_right(same, start)
            if index < len(same):
                closer = same[index]
                closers.add(closer)
                end = closer + length if backticks is not None else _line_end(text, closer)
                body_start = position if backticks is not None else _line_end(text, start) + 1
                scan.code.append((start, end, text[body_start:closer]))
                span = (start, end)
        if span is not None and (kept is None or text[span[0] : span[1]] in kept):
            scan.inert.append(span)
            position = span[1]
        elif span is not None:
            plain_until = span[1]
    return scan


def _line_end(text: str, position: int) -> int:
    end = text.find("\n", position)
    return len(text) if end < 0 else end


def _scan(text: str, language: Language, kept: set[str] | None) -> _Scan:
    return _scan_latex(text, kept) if language is Language.LATEX else _scan_markdown(text, kept)


# -- the rules ----------------------------------------------------------------------------------------------------


def _kind(name: str) -> str:
    if name in ("begin", "end"):
        return ENVIRONMENT
    if name in FILE_COMMANDS:
        return FILE_ACCESS
    if name in DEFINITION_COMMANDS:
        return DEFINITION
    return COMMAND


def _command_additions(before: _Scan, after: _Scan, language: Language) -> list[Addition]:
    names = {command.name for command in before.commands}
    signatures = {command.signature for command in before.commands}
    contexts = Counter(command.context for command in before.commands if command.context)
    used: Counter[str] = Counter()
    found: list[Addition] = []
    for command in after.commands:
        name = command.name
        if not command.word:
            allowed = (
                name in (_ADDABLE_SYMBOLS if language is Language.LATEX else _PUNCTUATION) or name in names
            )
        elif name in SENSITIVE:
            used[command.context] += 1  # kept as it was, and no more often than in the original
            allowed = used[command.context] <= contexts[command.context]
        else:
            addable = language is Language.LATEX and name in ADDABLE
            reused = name in names and (
                name in TEXT_COMMANDS or _CITATION_COMMAND.fullmatch(name) is not None
            )
            allowed = addable or reused or command.signature in signatures
        if not allowed:  # a doubled backslash is a plain backslash in Markdown: the command becomes text
            shown = _shown(after.text, command.start, command.end)
            found.append(Addition(_kind(name), shown, command.start, command.start + 1, "\\\\"))
    return found


def _dangling(text: str) -> int:
    """Where a lone backslash ends the text (it would pair with whatever follows the paragraph), or -1."""
    body = text.rstrip()
    backslashes = len(body) - len(body.rstrip("\\"))
    return len(body) - 1 if backslashes % 2 else -1


def _structure_additions(original: str, before: _Scan, after: _Scan, language: Language) -> list[Addition]:
    known = len(_CARETS.findall(before.active()))
    found = [
        Addition(CHARACTER_CODE, "^^", match.start(), match.end(), "\\^\\^")
        for match in list(_CARETS.finditer(after.active()))[known:]
    ]
    dangling = _dangling(after.text)
    if dangling >= 0 and _dangling(original) < 0:
        found.append(Addition(BACKSLASH, "\\", dangling, dangling + 1, ""))
    floor = min(before.lowest, 0)
    if language is Language.LATEX and (after.depth != before.depth or after.lowest < floor):
        brace = "}" if after.lowest < floor or after.depth < before.depth else "{"
        found.append(Addition(BRACE, brace, 0, 0))
    return found


def _url(raw: str) -> str:
    url = raw.strip().removeprefix("<").removesuffix(">").rstrip(_URL_TRAILER)
    while url.endswith(")") and url.count(")") > url.count("("):
        url = url[:-1].rstrip(_URL_TRAILER)
    return url


@dataclass(frozen=True, slots=True)
class _Link:
    start: int  # at "[", or at "!" for an image
    end: int  # after ")"
    words: str  # what the link shows (an image: its description)
    target: str


def _markdown_links(text: str) -> list[_Link]:
    """Inline links and images, [words](target "title"): brackets paired on one stack, so in one pass."""
    links: list[_Link] = []
    openers: list[int] = []
    for match in _BRACKET.finditer(text):
        if match.group(0) == "[":
            openers.append(match.start())
        elif match.group(0) == "]" and openers:
            opening = openers.pop()
            tail = _LINK_TAIL.match(text, match.end())
            if tail is not None:
                start = opening - 1 if opening and text[opening - 1] == "!" else opening
                links.append(_Link(start, tail.end(), text[opening + 1 : match.start()], _url(tail.group(1))))
    return links


def _urls(text: str, language: Language) -> set[str]:
    """Every link target of `text`, wherever it is (comments included: the author wrote them)."""
    found = {_url(match.group(0)) for match in _BARE_URL.finditer(text)}
    if language is Language.LATEX:
        return found | {_url(match.group(1)) for match in _LATEX_LINK.finditer(text)}
    found |= {link.target for link in _markdown_links(text)}
    found |= {_url(match.group(1)) for match in _REFERENCE_DEFINITION.finditer(text)}
    return found | {_url(match.group(1)) for match in _AUTOLINK.finditer(text)}


def _link_additions(original: str, markup: str, language: Language) -> list[Addition]:
    """Links whose target the original lacks. Made inert (Markdown): a link or image becomes its words, a
    reference definition goes, an autolink or bare URL becomes a note that a link was removed."""
    known = _urls(original, language)
    found: list[Addition] = []
    spans: list[tuple[int, int]] = []  # links already judged: their URLs are not bare URLs
    if language is Language.LATEX:
        for match in _LATEX_LINK.finditer(markup):
            spans.append(match.span())
            if _url(match.group(1)) not in known:
                found.append(Addition(LINK, _clip(match.group(1)), *match.span()))
    else:
        for link in _markdown_links(markup):
            spans.append((link.start, link.end))
            if link.target not in known:
                found.append(
                    Addition(LINK, _clip(link.target or "(empty)"), link.start, link.end, link.words)
                )
        for pattern, inert in ((_REFERENCE_DEFINITION, ""), (_AUTOLINK, "(link removed)")):
            for match in pattern.finditer(_blanked(markup, spans)):
                spans.append(match.span())
                if _url(match.group(1)) not in known:
                    found.append(Addition(LINK, _clip(_url(match.group(1))), *match.span(), inert))
    for match in _BARE_URL.finditer(_blanked(markup, spans)):
        url = _url(match.group(0))
        if url not in known:
            found.append(
                Addition(LINK, _clip(url), match.start(), match.start() + len(url), "(link removed)")
            )
    return found


def _markdown_additions(original: str, before: _Scan, after: _Scan, markup: str) -> list[Addition]:
    found: list[Addition] = []
    known_tags = Counter(_squash(match.group(0)) for match in _HTML_TAG.finditer(before.markup()))
    seen: Counter[str] = Counter()
    for match in _HTML_TAG.finditer(markup):
        tag = _squash(match.group(0))
        seen[tag] += 1
        if seen[tag] > known_tags[tag]:  # "&lt;" shows a "<" that starts no tag
            found.append(Addition(HTML, _clip(tag), match.start(), match.start() + 1, "&lt;"))
    kept = before.inert_texts()
    for start, end, body in after.code:
        if after.text[start:end] not in kept:
            found.append(Addition(CODE, _clip(after.text[start:end]), start, end, body.strip()))
    known_attributes = {_squash(match.group(0)) for match in _ATTRIBUTE.finditer(original)}
    for match in _ATTRIBUTE.finditer(markup):
        if _squash(match.group(0)) not in known_attributes:  # "\{" is a plain brace in Markdown
            found.append(Addition(ATTRIBUTE, _clip(match.group(0)), match.start(), match.start() + 1, "\\{"))
    extra = list(_METADATA_LINE.finditer(markup))[len(_METADATA_LINE.findall(original)) :]
    found += [Addition(METADATA, "---", *match.span(), "***") for match in extra]  # *** is only a rule
    return found


def _key_additions(original: str, rewrite: str, language: Language) -> list[Addition]:
    """Citations, references, labels and footnotes the original does not have: the rewrite made them up."""
    known = {(element.kind, element.key) for element in protected_elements(original, language)}
    return [
        Addition(element.kind, element.text, 0, 0)
        for element in protected_elements(rewrite, language)
        if element.kind in CONTENT_KINDS and (element.kind, element.key) not in known
    ]


def additions(original: str, rewrite: str, language: Language, *, keys: bool = True) -> list[Addition]:
    """Everything `rewrite` adds to `original` that it may not add. `keys`: also made-up citations, references,
    labels and footnotes (compared with preservation's extraction, which is not linear on hostile text; callers
    bound the text's size first)."""
    before = _scan(original, language, None)
    after = _scan(rewrite, language, before.inert_texts())
    markup = after.markup()  # LaTeX: the active text (it has no escapes in this sense)
    found = _command_additions(before, after, language)
    found += _structure_additions(original, before, after, language)
    found += _link_additions(original, markup, language)
    if language is Language.MARKDOWN:
        found += _markdown_additions(original, before, after, markup)
    return found + (_key_additions(original, rewrite, language) if keys else [])


def added_elements(original: str, rewrite: str, language: Language) -> list[Element]:
    """What `rewrite` added that the original lacks, each distinct thing once, for messages and repair prompts."""
    elements: dict[tuple[str, str], Element] = {}
    for addition in additions(original, rewrite, language):
        elements.setdefault((addition.kind, addition.text), addition.element())
    return list(elements.values())


def neutralize(original: str, text: str, *, rounds: int = 4) -> tuple[str, list[Element]] | None:
    """Markdown `text` with every risky addition made inert: a link or image becomes its words, a URL a note,
    an HTML tag or a TeX command plain text, a code span its words. For text that margin writes as a new file
    (the lay article), where refusing would throw the whole text away. Returns the text and what was changed,
    or None if something is left after `rounds` (each round only escapes or unwraps, so one or two suffice:
    a second is needed when a link's words themselves hold markup)."""
    changed: dict[tuple[str, str], Element] = {}
    for _ in range(rounds):
        found = additions(original, text, Language.MARKDOWN, keys=False)  # made-up keys run nothing
        if not found:
            return text, list(changed.values())
        for item in found:
            changed.setdefault((item.kind, item.text), item.element())
        text = _replace(text, found)
    return None


def _replace(text: str, found: list[Addition]) -> str:
    """`text` with each addition's span replaced by its inert form; of overlapping spans the first one wins."""
    pieces: list[str] = []
    position = 0
    for item in sorted(found, key=lambda item: (item.start, -item.end)):
        if item.inert is None or item.start < position:
            continue
        pieces += [text[position : item.start], item.inert]
        position = item.end
    pieces.append(text[position:])
    return "".join(pieces)

"""What LaTeX macros and environments mean for prose extraction.

Our own tables say how margin treats the macros that matter for a paper (citations, references, sectioning,
floats); pylatexenc's databases supply argument shapes and text for the long tail (accents, symbols, logos).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from pylatexenc import latex2text, latexwalker

SECTION_LEVELS: dict[str, int] = {
    "part": 0,
    "chapter": 1,
    "section": 2,
    "subsection": 3,
    "subsubsection": 4,
    "paragraph": 5,
    "subparagraph": 6,
}

CITATION_MACROS = frozenset(
    [
        "cite",
        "citep",
        "citet",
        "citealp",
        "citealt",
        "citeauthor",
        "citeyear",
        "citeyearpar",
        "citenum",
        "parencite",
        "textcite",
        "autocite",
        "footcite",
        "smartcite",
        "supercite",
        "fullcite",
        "Cite",
        "Citep",
        "Citet",
        "Parencite",
        "Textcite",
        "Autocite",
        "cites",
        "parencites",
        "textcites",
        "autocites",
        "citepalias",
        "citetalias",
    ]
)
REFERENCE_MACROS = frozenset(
    ["ref", "eqref", "cref", "Cref", "autoref", "pageref", "nameref", "vref", "Vref", "labelcref", "hyperref"]
)
# Macros whose (last mandatory) argument is prose to keep.
TEXT_MACROS = frozenset(
    [
        "emph",
        "textbf",
        "textit",
        "texttt",
        "textsc",
        "textrm",
        "textsf",
        "textsl",
        "textup",
        "textmd",
        "textnormal",
        "underline",
        "uline",
        "mbox",
        "fbox",
        "text",
        "textsuperscript",
        "textsubscript",
        "enquote",
        "foreignlanguage",
        "hbox",
        "makebox",
        "framebox",
        "colorbox",
        "textcolor",
        "highlight",
        "hl",
        "sout",
        "st",
        "ul",
    ]
)
# Macros that produce nothing in prose; their arguments are consumed by their pylatexenc shape or ours.
DROPPED_MACROS = frozenset(
    [
        "label",
        "vspace",
        "hspace",
        "includegraphics",
        "centering",
        "raggedright",
        "raggedleft",
        "noindent",
        "indent",
        "newpage",
        "clearpage",
        "cleardoublepage",
        "pagebreak",
        "linebreak",
        "nolinebreak",
        "maketitle",
        "tableofcontents",
        "listoffigures",
        "listoftables",
        "bibliographystyle",
        "bibliography",
        "printbibliography",
        "addbibresource",
        "usepackage",
        "RequirePackage",
        "documentclass",
        "setlength",
        "addtolength",
        "setcounter",
        "addtocounter",
        "index",
        "nocite",
        "pagestyle",
        "thispagestyle",
        "phantomsection",
        "addcontentsline",
        "todo",
        "hypersetup",
        "graphicspath",
        "newcommand",
        "renewcommand",
        "providecommand",
        "DeclareRobustCommand",
        "DeclareMathOperator",
        "newenvironment",
        "renewenvironment",
        "def",
        "let",
        "newtheorem",
        "small",
        "footnotesize",
        "scriptsize",
        "tiny",
        "large",
        "Large",
        "LARGE",
        "huge",
        "Huge",
        "normalsize",
        "bfseries",
        "itshape",
        "ttfamily",
        "sffamily",
        "rmfamily",
        "scshape",
        "mdseries",
        "upshape",
        "em",
        "bf",
        "it",
        "tt",
        "sf",
        "rm",
        "sc",
        "appendix",
        "frontmatter",
        "mainmatter",
        "backmatter",
        "smallskip",
        "medskip",
        "bigskip",
        "vfill",
        "hfill",
        "par",
        "relax",
        "protect",
        "null",
        "ignorespaces",
        "selectfont",
        "fontsize",
        "color",
        "definecolor",
        "captionsetup",
        "subcaption",
        "marginpar",
        "author",
        "affiliation",
        "address",
        "email",
        "thanks",
        "date",
        "keywords",
        "acknowledgments",
        "orcid",
        "institute",
        "icmltitle",
        "icmlauthor",
        "icmlaffiliation",
        "icmlcorrespondingauthor",
        "icmlkeywords",
        "printAffiliationsAndNotice",
    ]
)
# Definitions: TeX primitives and LaTeX declarations that define or set something and never typeset prose, in the
# preamble or the body. The \def family and \let have parameter forms of their own; the rest take _ARGSPECS shapes.
TEX_DEFINITIONS = frozenset(["def", "edef", "gdef", "xdef"])
LET_DEFINITIONS = frozenset(["let", "futurelet"])
DEFINITION_MACROS = (
    TEX_DEFINITIONS
    | LET_DEFINITIONS
    | frozenset(
        [
            "newcommand",
            "renewcommand",
            "providecommand",
            "DeclareRobustCommand",
            "NewDocumentCommand",
            "RenewDocumentCommand",
            "ProvideDocumentCommand",
            "DeclareDocumentCommand",
            "newenvironment",
            "renewenvironment",
            "NewDocumentEnvironment",
            "RenewDocumentEnvironment",
            "DeclareMathOperator",
            "newtheorem",
            "theoremstyle",
            "numberwithin",
            "newcounter",
            "setcounter",
            "stepcounter",
            "refstepcounter",
            "addtocounter",
            "newlength",
            "setlength",
            "addtolength",
            "settowidth",
            "settoheight",
            "settodepth",
            "newif",
            "makeatletter",
            "makeatother",
        ]
    )
)
# Front matter after \begin{document} (article, AASTeX, revtex, LNCS, A&A, elsarticle): not paragraphs. \title gives
# the manuscript's title; \keywords is dropped as before (a list of terms, not prose).
FRONT_MATTER_MACROS = frozenset(
    [
        "title",
        "author",
        "affiliation",
        "altaffiliation",
        "noaffiliation",
        "affil",
        "altaffilmark",
        "altaffiltext",
        "address",
        "institute",
        "inst",
        "email",
        "homepage",
        "thanks",
        "date",
        "maketitle",
        "orcid",
        "orcidlink",
        "correspondingauthor",
        "collaboration",
        "nocollaboration",
        "keywords",
        "pacs",
        "preprint",
        "received",
        "revised",
        "accepted",
        "published",
        "submitjournal",
        "shorttitle",
        "shortauthors",
        "slugcomment",
        "titlerunning",
        "authorrunning",
    ]
)
# Text-producing macros that pylatexenc's text database leaves out.
NAMED_TEXT: dict[str, str] = {
    "LaTeX": "LaTeX", "TeX": "TeX", "LaTeXe": "LaTeX2e", "BibTeX": "BibTeX", "XeLaTeX": "XeLaTeX",
    "LuaLaTeX": "LuaLaTeX", "eg": "e.g.", "ie": "i.e.", "etal": "et al.", "etc": "etc.", "vs": "vs.",
    "S": "§", "P": "¶", "textellipsis": "…", "slash": "/",
}  # fmt: skip
INCLUDE_MACROS = frozenset(
    ["input", "include", "subfile", "import", "subimport", "inputfrom", "includefrom", "subinputfrom"]
)

# Environments whose whole content is not prose and may be passed over by searching for their \end.
SKIPPED_ENVIRONMENTS = frozenset(
    [
        "verbatim",
        "Verbatim",
        "lstlisting",
        "minted",
        "comment",
        "filecontents",
        "tabular",
        "tabular*",
        "tabularx",
        "tabulary",
        "longtable",
        "array",
        "tikzpicture",
        "pgfpicture",
        "algorithmic",
        "thebibliography",
        "picture",
        "displaymath",
        "lstinputlisting",
        "alltt",
        "spverbatim",
        "BVerbatim",
        "LVerbatim",
    ]
)
# Display math: a placeholder in the paragraph it sits in (a sentence may run through an equation).
MATH_ENVIRONMENTS = frozenset(
    [
        "equation",
        "equation*",
        "align",
        "align*",
        "alignat",
        "alignat*",
        "gather",
        "gather*",
        "multline",
        "multline*",
        "flalign",
        "flalign*",
        "eqnarray",
        "eqnarray*",
        "math",
        "displaymath",
        "dmath",
        "dmath*",
        "subequations",
    ]
)
# Floats: only their captions are prose.
FLOAT_ENVIRONMENTS = frozenset(
    [
        "figure",
        "figure*",
        "table",
        "table*",
        "wrapfigure",
        "wraptable",
        "sidewaysfigure",
        "sidewaystable",
        "algorithm",
        "algorithm*",
        "subfigure",
        "subtable",
        "listing",
    ]
)
LIST_ENVIRONMENTS = frozenset(
    ["itemize", "enumerate", "description", "compactitem", "compactenum", "inparaenum"]
)
QUOTE_ENVIRONMENTS = frozenset(["quote", "quotation", "verse"])
# Arguments that environments take after \begin{name}, beyond the optional ones we skip anyway.
ENVIRONMENT_ARGUMENTS: dict[str, str] = {
    "minipage": "[[[{",
    "wrapfigure": "[{[{",
    "wraptable": "[{[{",
    "multicols": "{[",
    "subfigure": "[{",
    "subtable": "[{",
    "tabular": "[{",
    "tabularx": "{[{",
    "thebibliography": "{",
    "otherlanguage": "{",
}

# Argument shapes we know better than (or that are missing from) pylatexenc's default database.
_ARGSPECS: dict[str, str] = {
    "href": "[{{",
    "url": "{",
    "todo": "[{",
    "textcolor": "{{",
    "colorbox": "{{",
    "foreignlanguage": "[{{",
    "captionof": "*{[{",
    "caption": "*[{",
    "footnote": "[{",
    "footnotetext": "[{",
    "subfile": "{",
    "import": "*{{",
    "subimport": "*{{",
    "includegraphics": "*[[{",
    "affiliation": "[{",
    "author": "[{",
    "thanks": "{",
    "keywords": "{",
    "email": "[{",
    "institute": "{",
    "orcid": "{",
    # Front matter ('g' is a brace group read only if one follows: \collaboration{Name} or {N}{Name}).
    "altaffiliation": "[{",
    "affil": "[{",
    "altaffilmark": "{",
    "altaffiltext": "{{",
    "address": "[{",
    "inst": "{",
    "homepage": "[{",
    "orcidlink": "{",
    "correspondingauthor": "{",
    "collaboration": "{g",
    "nocollaboration": "g",
    "pacs": "{",
    "preprint": "{",
    "received": "{",
    "revised": "{",
    "accepted": "{",
    "published": "{",
    "submitjournal": "{",
    "shorttitle": "{",
    "shortauthors": "{",
    "slugcomment": "{",
    "titlerunning": "{",
    "authorrunning": "{",
    # Definitions (see DEFINITION_MACROS).
    "newcounter": "{[",
    "stepcounter": "{",
    "refstepcounter": "{",
    "newlength": "{",
    "settowidth": "{{",
    "settoheight": "{{",
    "settodepth": "{{",
    "newif": "{",
    "theoremstyle": "{",
    "numberwithin": "[{{",
    "NewDocumentCommand": "{{{",
    "RenewDocumentCommand": "{{{",
    "ProvideDocumentCommand": "{{{",
    "DeclareDocumentCommand": "{{{",
    "NewDocumentEnvironment": "{{{{",
    "RenewDocumentEnvironment": "{{{{",
    "makeatletter": "",
    "makeatother": "",
    "icmltitle": "{",
    "icmlauthor": "{{",
    "icmlaffiliation": "{{",
    "icmlcorrespondingauthor": "{{",
    "icmlkeywords": "{",
    "printAffiliationsAndNotice": "{",
    "definecolor": "{{{",
    "captionsetup": "[{",
    "newtheorem": "*{[{[",
    "hyperref": "[{",
    "textsuperscript": "{",
    "textsubscript": "{",
    "highlight": "{",
    "hl": "{",
    "sout": "{",
    "st": "{",
    "ul": "{",
    "abstract": "{",
    "title": "[{",
    "inputfrom": "{{",
    # Dropped macros whose arguments pylatexenc does not know: without a shape their arguments would read as prose.
    "index": "{",
    "nocite": "{",
    "bibliographystyle": "{",
    "bibliography": "{",
    "addbibresource": "[{",
    "printbibliography": "[",
    "thispagestyle": "{",
    "pagestyle": "{",
    "graphicspath": "{",
    "addtocounter": "{{",
    "setcounter": "{{",
    "setlength": "{{",
    "addtolength": "{{",
    "usepackage": "[{[",
    "RequirePackage": "[{[",
    "documentclass": "[{[",
    "hypersetup": "{",
    "marginpar": "[{",
    "fontsize": "{{",
    "color": "[{",
    "label": "{",
    "vspace": "*{",
    "hspace": "*{",
    "newenvironment": "*{[[{{",
    "renewenvironment": "*{[[{{",
    "DeclareMathOperator": "*{{",
    "newcommand": "*{[[{",
    "renewcommand": "*{[[{",
    "providecommand": "*{[[{",
    "DeclareRobustCommand": "*{[[{",
    "date": "{",
    "includefrom": "{{",
    "subinputfrom": "{{",
}

_WALKER_DB = latexwalker.get_default_latex_context_db()
_TEXT_DB = latex2text.get_default_latex_context_db()
_TO_TEXT = latex2text.LatexNodes2Text(math_mode="remove", strict_latex_spaces=True)
_CONTROL_SYMBOL_TEXT = {
    "%": "%", "&": "&", "#": "#", "$": "$", "_": "_", "{": "{", "}": "}",
    " ": " ", ",": " ", ";": " ", ":": " ", ">": " ", "\n": " ", "\t": " ",
    "!": "", "-": "", "/": "", "@": "",
}  # fmt: skip


def control_symbol_text(name: str) -> str | None:
    """Text of a one-character control symbol such as \\% or \\, (None if it is not one we know)."""
    return _CONTROL_SYMBOL_TEXT.get(name)


@lru_cache(maxsize=4096)
def argument_spec(name: str) -> str:
    """The argument shape of a macro in pylatexenc's notation ('*' star, '[' optional, '{' mandatory)."""
    base = name.rstrip("*")
    if base in _ARGSPECS:
        return _ARGSPECS[base]
    if base in SECTION_LEVELS:
        return "*[{"
    spec = _WALKER_DB.get_macro_spec(base)
    parser = getattr(spec, "args_parser", None)
    argspec = getattr(parser, "argspec", None)
    return argspec if isinstance(argspec, str) else ""


@lru_cache(maxsize=4096)
def is_known_to_pylatexenc(name: str) -> bool:
    return _TEXT_DB.get_macro_spec(name) is not None


@lru_cache(maxsize=8192)
def snippet_text(snippet: str) -> str:
    """Plain text of a small self-contained piece of LaTeX (an accent, a symbol), by pylatexenc."""
    try:
        return _TO_TEXT.latex_to_text(snippet)
    except Exception:
        # pylatexenc is best-effort on odd input; a macro we cannot render contributes nothing.
        return ""


@dataclass(frozen=True, slots=True)
class UserMacro:
    """A macro the manuscript defines with \\newcommand or \\def: its parameter count, default and body."""

    name: str
    parameters: int
    default: str | None
    body: str


# Characters of macro bodies that parsing may expand. A chunk may expand up to CHUNK_EXPANSION_BUDGET (self-similar
# macros grow without end otherwise), drawn from a pool per macro table that every chunk parsed adds a quarter of
# its length to, up to EXPANSION_POOL. A real manuscript never runs the pool dry; thousands of tiny chunks that
# each expand a long macro do, and then expansion costs a fraction of what the text that asks for it costs (else a
# 10-byte chunk could ask for 20,000 characters of work, and a megabyte of such chunks for an hour).
CHUNK_EXPANSION_BUDGET = 20_000
EXPANSION_POOL = 200_000
EXPANSION_EARNED_PER_CHARACTER = 0.25


class MacroTable:
    """The user macros of a manuscript, and the user environments that typeset math (their \\newenvironment
    opens a math environment); hashable by content so it can be part of a cache key. It also keeps the pool of
    expansion budget its chunks draw on, which is not part of its value."""

    __slots__ = ("_hash", "_macros", "_pool", "math_environments")

    def __init__(
        self, macros: dict[str, UserMacro] | None = None, math_environments: frozenset[str] = frozenset()
    ) -> None:
        self._macros = dict(macros or {})
        self.math_environments = math_environments
        self._pool = EXPANSION_POOL
        self._hash = hash(
            (
                tuple(sorted((m.name, m.parameters, m.default, m.body) for m in self._macros.values())),
                tuple(sorted(math_environments)),
            )
        )

    def get(self, name: str) -> UserMacro | None:
        return self._macros.get(name)

    def expansion_allowance(self, text_length: int) -> int:
        """The characters of macro bodies that a chunk of `text_length` characters, about to be parsed, may
        expand; report what it used with spend_expansion."""
        self._pool = min(EXPANSION_POOL, self._pool + int(text_length * EXPANSION_EARNED_PER_CHARACTER))
        return max(0, min(CHUNK_EXPANSION_BUDGET, self._pool))

    def spend_expansion(self, characters: int) -> None:
        self._pool -= characters

    def __len__(self) -> int:
        return len(self._macros)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, MacroTable)
            and self._hash == other._hash
            and self._macros == other._macros
            and self.math_environments == other.math_environments
        )

    def merged(self, other: MacroTable) -> MacroTable:
        return MacroTable({**self._macros, **other._macros}, self.math_environments | other.math_environments)


_DEFINITION = re.compile(
    r"\\(?:(?:re)?newcommand|providecommand|DeclareRobustCommand)\*?\s*(?:\{\s*\\([A-Za-z@]+)\s*\}|\\([A-Za-z@]+))"
    r"|\\g?def\s*\\([A-Za-z@]+)\s*((?:#\d)*)\s*(?=\{)"
)
_MAX_MACRO_BODY = 2000


_BLANKS = re.compile(r"[ \t\n]*")
_BRACE_OR_ESCAPE = re.compile(r"\\[\\{}]|[{}]")  # a backslash escapes the character after it


class _BraceGroups:
    """Reads the brace groups of definitions' bodies, for reads in increasing order. One pass over the braces
    of the text pairs them, going only as far as the reads need (the preamble, as a rule): scanning afresh up to
    _MAX_MACRO_BODY characters for every one of many definitions that never close made a file of them slow."""

    __slots__ = ("_braces", "_closes", "_opened", "_scanned", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._braces = _BRACE_OR_ESCAPE.finditer(text)
        self._opened: list[int] = []
        self._closes: dict[int, int] = {}
        self._scanned = 0  # braces before this offset are paired

    def read(self, start: int) -> tuple[str, int] | None:
        """The content of the brace group opening at text[start] (after white space), and the index after it;
        None if there is none or it does not close within _MAX_MACRO_BODY characters."""
        text = self.text
        blanks = _BLANKS.match(text, start)
        index = blanks.end() if blanks is not None else start
        if index >= len(text) or text[index] != "{":
            return None
        self._pair_until(index + _MAX_MACRO_BODY)
        close = self._closes.get(index)
        if close is None or close >= index + _MAX_MACRO_BODY:
            return None
        return text[index + 1 : close], close + 1

    def _pair_until(self, limit: int) -> None:
        while self._scanned < limit:
            match = next(self._braces, None)
            if match is None:
                self._scanned = len(self.text)
                return
            self._scanned = match.end()
            brace = match.group()
            if brace == "{":
                self._opened.append(match.start())
            elif brace == "}" and self._opened:
                self._closes[self._opened.pop()] = match.start()


def _read_bracket(text: str, start: int) -> tuple[str, int] | None:
    index = start
    while index < len(text) and text[index] in " \t":
        index += 1
    if index >= len(text) or text[index] != "[":
        return None
    end = text.find("]", index, index + 200)
    if end < 0:
        return None
    return text[index + 1 : end], end + 1


class CommentFinder:
    """Whether offsets of one text are inside comments (after a % on their line that is not \\%).

    Each line is examined once, as long as the offsets asked about move forward: working each answer out afresh
    scans back to the start of the line, so many matches on one long line made a quadratic loop.
    """

    __slots__ = ("_line", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._line = (0, -1, -1)  # the current line's start, end and first comment (-1: none)

    def is_commented(self, offset: int) -> bool:
        start, end, percent = self._line  # one tuple, so a finder used from two threads stays consistent
        if not start <= offset <= end:
            text = self.text
            start = text.rfind("\n", end if 0 <= end < offset else 0, offset) + 1
            end = text.find("\n", offset)
            if end < 0:
                end = len(text)
            percent = text.find("%", start, end)
            while percent > 0 and text[percent - 1] == "\\":
                percent = text.find("%", percent + 1, end)
            self._line = (start, end, percent)
        return 0 <= percent < offset


_recent_finders: list[CommentFinder] = []  # the last text asked about, as callers loop over its matches


def is_commented(text: str, offset: int) -> bool:
    """Whether the character at offset is inside a comment (a % earlier on its line that is not \\%)."""
    finder = _recent_finders[-1] if _recent_finders else None
    if finder is None or finder.text is not text:
        finder = CommentFinder(text)
        _recent_finders[:] = [finder]
    return finder.is_commented(offset)


_ENVIRONMENT_DEFINITION = re.compile(r"\\(?:re)?newenvironment\*?\s*\{\s*([A-Za-z@*]+)\s*\}")


def _math_opener() -> re.Pattern[str]:
    """\\begin{name} or \\name for a math environment, each name matched whole (\\align, not \\aligned or
    \\align* when only align is one). One search in C: nested definitions give bodies that overlap, and a loop
    over every macro of every body made a file of them slow."""
    names = sorted(MATH_ENVIRONMENTS, key=len, reverse=True)
    whole = "|".join(re.escape(name) + ("" if name.endswith("*") else r"(?![A-Za-z*])") for name in names)
    exact = "|".join(re.escape(name) for name in names)
    return re.compile(r"\\(?:begin\s*\{\s*(?:" + exact + r")\s*\}|(?:" + whole + "))")


_MATH_OPENER = _math_opener()


def _opens_math(code: str) -> bool:
    """Whether an environment's begin code opens a math environment (\\begin{align}, \\align, \\[, $$)."""
    return "\\[" in code or "$$" in code or _MATH_OPENER.search(code) is not None


def _math_environments(text: str) -> frozenset[str]:
    names = set()
    comments = CommentFinder(text)
    groups = _BraceGroups(text)
    for match in _ENVIRONMENT_DEFINITION.finditer(text):
        if comments.is_commented(match.start()):
            continue
        position = match.end()
        for _ in range(2):  # [number of arguments] and [default]
            bracket = _read_bracket(text, position)
            if bracket is not None:
                position = bracket[1]
        group = groups.read(position)
        if group is not None and _opens_math(group[0]):
            names.add(match.group(1))
    return frozenset(names)


def collect_user_macros(text: str) -> MacroTable:
    """Find the simple macro definitions in a file (\\newcommand and friends, \\def and \\gdef without delimiters)."""
    macros: dict[str, UserMacro] = {}
    comments = CommentFinder(text)
    groups = _BraceGroups(text)
    for match in _DEFINITION.finditer(text):
        if comments.is_commented(match.start()):
            continue
        name = match.group(1) or match.group(2) or match.group(3)
        position = match.end()
        parameters = 0
        default: str | None = None
        if match.group(3) is not None:
            parameters = len(match.group(4) or "") // 2
        else:
            bracket = _read_bracket(text, position)
            if bracket is not None:
                try:
                    parameters = int(bracket[0].strip())
                except ValueError:
                    continue
                position = bracket[1]
                optional = _read_bracket(text, position)
                if optional is not None:
                    default, position = optional
        group = groups.read(position)
        if group is None or not name:
            continue
        macros[name] = UserMacro(name, min(parameters, 9), default, group[0])
    return MacroTable(macros, _math_environments(text) if "newenvironment" in text else frozenset())

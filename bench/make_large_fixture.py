"""Build large benchmark manuscripts from the prose of the small hand-written fixtures.

Run from the repository root::

    python bench/make_large_fixture.py

The script reads the LaTeX paper under ``fixtures/latex/paper`` and the Markdown papers under
``fixtures/markdown``, splits their prose paragraphs into sentences, and recombines those sentences into
two large single-file manuscripts:

* ``fixtures/large/large.tex``: a preamble plus 25 sections with paragraphs, display math, figures,
  tables, lists, footnotes, comments, an algorithm, a listing and an ignored ``% margin: off`` region;
* ``fixtures/large/large.md``: pandoc-style Markdown with the same mix (front matter, citations,
  footnotes, math, pipe tables, fenced code, lists, block quotes, HTML comments).

Every generated paragraph is unique: sentences are rotated and mixed between source paragraphs, decimal
numbers are shifted, and each paragraph carries a sentence that names its own section. A content cache
therefore cannot make the benchmark unrealistically cheap. The output depends only on the fixture sources
and ``SEED``, so repeated runs write byte-identical files.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "fixtures"
DEFAULT_OUT_DIR = FIXTURES / "large"

LATEX_PAPER = FIXTURES / "latex" / "paper"
LATEX_SOURCES: tuple[Path, ...] = (
    LATEX_PAPER / "main.tex",
    LATEX_PAPER / "sections" / "introduction.tex",
    LATEX_PAPER / "sections" / "method.tex",
    LATEX_PAPER / "sections" / "experiments.tex",
    LATEX_PAPER / "sections" / "discussion.tex",
    LATEX_PAPER / "sections" / "appendix.tex",
)
MARKDOWN_SOURCES: tuple[Path, ...] = (
    FIXTURES / "markdown" / "paper.md",
    *(
        FIXTURES / "markdown" / "manubot" / "content" / name
        for name in (
            "01.abstract.md",
            "02.introduction.md",
            "03.methods.md",
            "04.results.md",
            "05.discussion.md",
        )
    ),
)
# Paths written into the outputs, relative to fixtures/large/.
LATEX_BIB = "../latex/paper/references"
MARKDOWN_BIB = "../markdown/references.bib"

SEED = 20240611
MIN_LINES = 1600
LATEX_WIDTH = 100

# (title, label slug) for the 25 top-level sections of both large manuscripts.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("Introduction", "intro"),
    ("Background", "background"),
    ("Related work", "related"),
    ("Problem formulation", "problem"),
    ("Method", "method"),
    ("Priors from domain knowledge", "priors"),
    ("Budget allocation and pruning", "pruning"),
    ("Training procedure", "training"),
    ("Implementation", "implementation"),
    ("Data", "data"),
    ("Evaluation protocol", "protocol"),
    ("Baselines", "baselines"),
    ("Main results", "results"),
    ("Ablations", "ablations"),
    ("Sensitivity analysis", "sensitivity"),
    ("Effect of the input formulation", "inputs"),
    ("Error analysis", "errors"),
    ("Efficiency", "efficiency"),
    ("Interpretability", "interpretability"),
    ("A small user study", "users"),
    ("Transfer to new settings", "transfer"),
    ("Discussion", "discussion"),
    ("Limitations", "limitations"),
    ("Broader impact", "impact"),
    ("Conclusion", "conclusion"),
)
SUBSECTIONS: tuple[str, ...] = (
    "Setup",
    "Observations",
    "Design choices",
    "Quantitative comparison",
    "Qualitative examples",
    "Failure cases",
    "Robustness",
    "Practical notes",
)
# Sentences that tie a generated paragraph to its section. {ref} is a cross-reference to the section,
# {pct} a percent sign in the target syntax, {topic} the lower-cased section title.
ANCHORS: tuple[str, ...] = (
    "In the setting of {ref}, we repeated this comparison on {n} further cases and saw a median change "
    "of {x} points.",
    "The runs summarized in {ref} used {n} held-out inputs, and the spread between them stayed below "
    "{x}{pct}.",
    "For the {topic} analysis in {ref}, the same trend held in {n} of {m} cases.",
    "We return to this observation in {ref}, where a budget of {n} units changed the outcome by about "
    "{x} points.",
    "When the experiment of {ref} was rerun with {n} examples per batch, the estimate moved by only "
    "{x}{pct}.",
    "A closer look at the {topic} results in {ref} suggests that roughly {x}{pct} of the difference "
    "comes from {n} unusual cases.",
    "Nothing in {ref} changes this picture, although the {n} additional runs there widen the interval "
    "to {x} points.",
    "The {topic} experiments of {ref} were not designed to test this directly, and only {n} of {m} "
    "configurations bear on it.",
)
FOOTNOTES: tuple[str, ...] = (
    "The value reported here was fixed before the test data of {ref} were inspected. Later "
    "adjustments are listed separately.",
    "An earlier version of {ref} used {n} cases instead. The conclusions did not change.",
    "We thank a colleague for suggesting this check. It took about {n} minutes of compute per run.",
    "Numbers in {ref} are rounded to one decimal. Unrounded values are in the supplementary files.",
)
FIGURE_CAPTIONS: tuple[str, ...] = (
    "Distribution of scores for the {topic} experiments. Each panel shows one of {n} held-out cases, "
    "and the dashed line marks the median.",
    "Performance as a function of the budget in the {topic} setting. Shaded bands span the range over "
    "{n} configurations.",
    "Qualitative examples for the {topic} analysis. The highlighted regions carry most of the weight in "
    "{n} of the cases we inspected.",
)
LATEX_TABLE_METHODS: tuple[str, ...] = ("BM25", "Logistic regression", "LSR-topk", "\\method{} (ours)")
MARKDOWN_TABLE_METHODS: tuple[str, ...] = ("GP emulator", "CNN surrogate", "Graph 1-step", "Graph roll-out")
EQUATIONS: tuple[tuple[str, str], ...] = (
    # (LaTeX body, Markdown body); {n} is replaced with a section-specific integer.
    (
        r"s_{{n}}(q, d) = \sum_{t \in V} w_q(t)\, w_d(t)",
        r"s_{{n}}(q, d) = \sum_{t \in V} w_q(t)\, w_d(t)",
    ),
    (
        r"\mathrm{WSS}@r = \frac{\mathrm{TN} + \mathrm{FN}}{N} - (1 - r), \qquad r = 0.{n}",
        r"\mathrm{WSS}@r = \frac{\mathrm{TN} + \mathrm{FN}}{N} - (1 - r), \qquad r = 0.{n}",
    ),
    (
        r"\pi_j(t) = \frac{c_j(t) + \alpha}{\sum_{u \in V} c_j(u) + {n}\,\alpha}",
        r"\pi_j(t) = \frac{c_j(t) + \alpha}{\sum_{u \in V} c_j(u) + {n}\,\alpha}",
    ),
    (
        r"\mathcal{R}(\theta) = \lambda_1 \sum_{t \in V} \bar{w}(t)^2"
        r" + \lambda_2 \sum_{j=1}^{{n}} \norm{w^{(j)} - \pi_j}_2^2",
        r"\mathcal{R}(\theta) = \lambda_1 \sum_{t \in V} \bar{w}(t)^2"
        r" + \lambda_2 \sum_{j=1}^{{n}} \lVert w^{(j)} - \pi_j \rVert_2^2",
    ),
    (
        r"h_i^{(\ell+1)} = h_i^{(\ell)} + \phi\Bigl(h_i^{(\ell)}, \sum_{j \in \mathcal{N}(i)}"
        r" \psi\bigl(h_i^{(\ell)}, h_j^{(\ell)}\bigr)\Bigr), \quad \ell < {n}",
        r"h_i^{(\ell+1)} = h_i^{(\ell)} + \phi\Big(h_i^{(\ell)}, \sum_{j \in \mathcal{N}(i)}"
        r" \psi\big(h_i^{(\ell)}, h_j^{(\ell)}\big)\Big), \quad \ell < {n}",
    ),
)

# Environments whose content is never prose (or, for lists and quotes, not paragraph prose).
_STARRED_ENVS = ("equation", "align", "gather", "multline", "figure", "table")
_OTHER_SKIPPED_ENVS = ("tabular", "algorithm", "algorithmic", "lstlisting", "verbatim")
_LIST_ENVS = ("itemize", "enumerate", "description", "quote", "quotation")
LATEX_SKIP_ENVS = frozenset(
    {f"{env}{star}" for env in _STARRED_ENVS for star in ("", "*")}.union(_OTHER_SKIPPED_ENVS, _LIST_ENVS)
)
LATEX_STRUCTURAL = re.compile(
    r"\\(?:documentclass|usepackage|begin|end|part|chapter|section|subsection|subsubsection|label|input"
    r"|include|subfile|bibliography|bibliographystyle|appendix|maketitle|title|author|date|newcommand"
    r"|renewcommand|def|DeclareMathOperator|item|caption|centering|includegraphics|and)\b"
)
LATEX_BEGIN = re.compile(r"\\begin\{([^}]+)\}")
LATEX_END = re.compile(r"\\end\{([^}]+)\}")
LATEX_RUN_IN_HEADING = re.compile(r"^\\paragraph\*?\{[^}]*\}\s*")
LATEX_PREAMBLE_LINE = re.compile(r"^\\(?:documentclass|usepackage|newcommand|def|DeclareMathOperator)\b")
LATEX_REF = re.compile(r"\\(?:ref|eqref|cref|Cref|autoref|pageref)\{([^}]+)\}")
LATEX_LABEL = re.compile(r"\\label\{([^}]+)\}|label=\{([^}]+)\}")
LATEX_CITE = re.compile(r"\\cite[a-z]*\*?(?:\[[^\]]*\]){0,2}\{([^}]+)\}")
BIB_KEY = re.compile(r"^@\w+\{([^,\s]+),", re.MULTILINE)
MARGIN_OFF_TEX = re.compile(r"^%\s*margin:\s*off\b")
MARGIN_ON_TEX = re.compile(r"^%\s*margin:\s*on\b")

MD_BLOCK_START = re.compile(
    r"^(?:#{1,6}\s|[-+*]\s|\d+[.)]\s|>|\||Table:|!\[|\[\^[^\]]+\]:|<[A-Za-z/]|\{[%#{])"
)
MD_FOOTNOTE_REF = re.compile(r"\[\^[^\]]+\]")
MD_CROSSREF = re.compile(r"@((?:fig|tbl|eq|sec):[\w-]+)")
MD_ANCHOR = re.compile(r"\{#((?:fig|tbl|eq|sec):[\w-]+)")
# A wrapped Markdown line must not start with something that would turn it into a block construct.
MD_UNSAFE_LINE_START = re.compile(r"^(?:#{1,6}(?:\s|$)|[-+*](?:\s|$)|\d+[.)](?:\s|$)|>|\||={3,}|Table:)")

ABBREVIATIONS = frozenset(
    {"al", "e.g", "i.e", "cf", "vs", "etc", "Fig", "Figs", "Eq", "Eqs", "Sec", "Tab", "p", "pp", "approx"}
)
FOOTNOTE_AFTER_STOP = re.compile(r"[.!?]\\footnote\{\Z")
DECIMAL = re.compile(r"(?<![\w.:/^{-])(\d{1,3})\.(\d{1,2})(?![\w.])")


# ---------------------------------------------------------------------------------------------------------
# Reading prose out of the fixtures
# ---------------------------------------------------------------------------------------------------------


def strip_latex_comment(line: str) -> str:
    """Return ``line`` without its ``%`` comment (an escaped ``\\%`` is kept)."""
    i = 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        if line[i] == "%":
            return line[:i]
        i += 1
    return line


def split_sentences(text: str, *, latex: bool) -> list[str]:
    """Split prose into sentences without cutting through groups, math or abbreviations.

    In LaTeX a sentence may also end after a footnote that follows its full stop (``end.\\footnote{...}``).
    """
    opening, closing = ("{", "}") if latex else ("[", "]")
    sentences: list[str] = []
    start = depth = group_start = i = 0
    in_math = False

    def next_sentence(end: int) -> int | None:
        """Index where the next sentence starts if the text from ``end`` on begins a new sentence."""
        nxt = end
        while nxt < len(text) and text[nxt] == " ":
            nxt += 1
        if nxt > end and nxt < len(text) and (text[nxt].isupper() or text[nxt] in "\\`@*_"):
            return nxt
        return None

    while i < len(text):
        ch = text[i]
        cut: tuple[int, int] | None = None  # (end of this sentence, start of the next)
        if ch == "\\":
            if latex and text[i + 1 : i + 2] in ("(", ")"):
                in_math = text[i + 1] == "("
            i += 2
            continue
        if ch == "$":
            in_math = not in_math
        elif ch == opening:
            if depth == 0:
                group_start = i
            depth += 1
        elif ch == closing:
            depth = max(0, depth - 1)
            if latex and depth == 0 and FOOTNOTE_AFTER_STOP.search(text, start, group_start + 1):
                nxt = next_sentence(i + 1)
                cut = (i + 1, nxt) if nxt is not None else None
        elif ch in ".!?" and depth == 0 and not in_math:
            end = i + 1
            while end < len(text) and text[end] in "'\")":
                end += 1
            word_match = re.search(r"([A-Za-z.]+)$", text[start:i])
            word = word_match.group(1) if word_match else ""
            nxt = next_sentence(end)
            if nxt is not None and word not in ABBREVIATIONS and not (len(word) == 1 and word.isupper()):
                cut = (end, nxt)
        if cut is not None:
            sentences.append(text[start : cut[0]].strip())
            start = i = cut[1]
            continue
        i += 1
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def _clean_fragment(sentences: list[str], *, latex: bool) -> list[str]:
    """Drop a leading continuation (after display math) and a trailing lead-in (before it)."""
    opener = (
        re.compile(r"[A-Z]|\\(?:method|citet|citeauthor|emph|textbf|textit)\b")
        if latex
        else re.compile(r"[A-Z@]")
    )
    if sentences and not opener.match(sentences[0]):
        sentences = sentences[1:]
    if sentences and not re.search(r"[.!?]['\")}]*$", sentences[-1]):
        sentences = sentences[:-1]
    return sentences


def latex_paragraphs(text: str) -> list[list[str]]:
    """Prose paragraphs of a LaTeX source, each as a list of sentences."""
    paragraphs: list[list[str]] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            sentences = _clean_fragment(split_sentences(" ".join(current), latex=True), latex=True)
            if len(sentences) >= 2 and sum(map(len, sentences)) >= 150:
                paragraphs.append(sentences)
            current.clear()

    skip_depth = 0
    in_display = margin_off = False
    for raw in text.splitlines():
        stripped = raw.strip()
        if MARGIN_OFF_TEX.match(stripped):
            flush()
            margin_off = True
            continue
        if MARGIN_ON_TEX.match(stripped):
            margin_off = False
            continue
        if margin_off:
            continue
        line = strip_latex_comment(raw).strip()
        begins = [name for name in LATEX_BEGIN.findall(line) if name in LATEX_SKIP_ENVS]
        ends = [name for name in LATEX_END.findall(line) if name in LATEX_SKIP_ENVS]
        if skip_depth or in_display:
            skip_depth = max(0, skip_depth + len(begins) - len(ends))
            if in_display and "\\]" in line:
                in_display = False
            continue
        if not line:
            if not stripped:  # a comment-only line does not end a LaTeX paragraph
                flush()
            continue
        if line.startswith("\\["):
            flush()
            in_display = "\\]" not in line[2:]
            continue
        if begins:
            flush()
            skip_depth = max(0, len(begins) - len(ends))
            continue
        if LATEX_STRUCTURAL.match(line):
            flush()
            continue
        current.append(LATEX_RUN_IN_HEADING.sub("", line))
    flush()
    return paragraphs


def markdown_paragraphs(text: str) -> list[list[str]]:
    """Prose paragraphs of a pandoc Markdown source, each as a list of sentences."""
    paragraphs: list[list[str]] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            joined = MD_FOOTNOTE_REF.sub("", " ".join(current))
            sentences = _clean_fragment(split_sentences(joined, latex=False), latex=False)
            if len(sentences) >= 2 and sum(map(len, sentences)) >= 120:
                paragraphs.append(sentences)
            current.clear()

    lines = text.splitlines()
    index = 0
    if lines and lines[0].strip() == "---":  # YAML front matter
        index = 1
        while index < len(lines) and lines[index].strip() not in ("---", "..."):
            index += 1
        index += 1
    fence = ""
    in_math = in_comment = margin_off = in_block = in_acknowledgements = False
    for line in lines[index:]:
        stripped = line.strip()
        if margin_off:
            margin_off = stripped != "<!-- margin: on -->"
            continue
        if stripped == "<!-- margin: off -->":
            flush()
            margin_off = True
            continue
        if fence:
            if stripped.startswith(fence):
                fence = ""
            continue
        if stripped.startswith(("```", "~~~")):
            flush()
            fence = stripped[:3]
            continue
        if in_math:
            in_math = not stripped.startswith("$$")
            continue
        if stripped.startswith("$$"):
            flush()
            in_math = stripped.count("$$") < 2
            continue
        if in_comment:
            in_comment = "-->" not in stripped
            continue
        if stripped.startswith("<!--"):
            flush()
            in_comment = "-->" not in stripped
            continue
        if not stripped:
            flush()
            in_block = False
            continue
        if stripped.startswith("#"):
            # Acknowledgements are not research prose; leave them out of the pool.
            in_acknowledgements = "acknowledg" in stripped.lower()
        if in_block or MD_BLOCK_START.match(stripped):
            flush()
            in_block = True
            continue
        if not in_acknowledgements:
            current.append(stripped)
    flush()
    return paragraphs


def read_pool(paths: Iterable[Path], *, latex: bool) -> list[list[str]]:
    pool: list[list[str]] = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        pool.extend(latex_paragraphs(text) if latex else markdown_paragraphs(text))
    if len(pool) < 8:
        raise SystemExit(f"only {len(pool)} prose paragraphs found in the fixtures; expected at least 8")
    return pool


# ---------------------------------------------------------------------------------------------------------
# Mixing sentences into unique paragraphs
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Syntax:
    """The few spellings that differ between the LaTeX and the Markdown output."""

    percent: str
    latex: bool

    def section_ref(self, label: str, number: int) -> str:
        if self.latex:
            return f"Section~\\ref{{{label}}}"
        return f"Section {number}"


def shift_numbers(sentence: str, rng: random.Random) -> str:
    """Move every decimal number in ``sentence`` by a small deterministic amount."""

    def replace(match: re.Match[str]) -> str:
        digits = len(match.group(2))
        value = float(match.group(0))
        if value < 1:
            new = min(0.99, max(0.01, value + rng.uniform(-0.06, 0.06)))
        else:
            new = max(0.1, value + rng.uniform(-2.5, 2.5))
        return f"{new:.{digits}f}"

    return DECIMAL.sub(replace, sentence)


def _normalize(text: str) -> str:
    return " ".join(text.split()).lower()


class ProseMixer:
    """Produce an endless stream of distinct paragraphs from a pool of source paragraphs."""

    def __init__(self, pool: Sequence[Sequence[str]], syntax: Syntax, rng: random.Random) -> None:
        self.pool = [list(paragraph) for paragraph in pool]
        self.sentences = [sentence for paragraph in self.pool for sentence in paragraph]
        self.syntax = syntax
        self.rng = rng
        self.count = 0
        self.seen: set[str] = set()

    def sentence(self) -> str:
        """One pool sentence with shifted numbers (used for list items and quotes)."""
        return shift_numbers(self.rng.choice(self.sentences), self.rng)

    def anchor(self, section: int, label: str, topic: str) -> str:
        n = self.rng.randint(3, 60)
        return self.rng.choice(ANCHORS).format(
            ref=self.syntax.section_ref(label, section),
            n=n,
            m=n + self.rng.randint(2, 30),
            x=f"{self.rng.uniform(0.2, 9.9):.1f}",
            pct=self.syntax.percent,
            topic=topic,
        )

    def paragraph(self, section: int, label: str, topic: str) -> list[str]:
        """A new paragraph as a list of sentences; never returns the same text twice."""
        for attempt in range(50):
            base = self.pool[self.count % len(self.pool)]
            rotation = (self.count // len(self.pool) + attempt) % len(base)
            sentences = (base[rotation:] + base[:rotation])[: self.rng.randint(3, 6)]
            if self.rng.random() < 0.6:
                candidates = [s for s in self.sentences if s not in sentences]
                position = self.rng.randrange(len(sentences))
                sentences[position] = self.rng.choice(candidates)
            sentences = [shift_numbers(s, self.rng) for s in sentences]
            sentences.insert(self.rng.randrange(1, len(sentences) + 1), self.anchor(section, label, topic))
            key = _normalize(" ".join(sentences))
            if key not in self.seen:
                self.seen.add(key)
                self.count += 1
                return sentences
        raise RuntimeError("could not produce a unique paragraph; the prose pool is too small")


# ---------------------------------------------------------------------------------------------------------
# Label bookkeeping
# ---------------------------------------------------------------------------------------------------------


class Labels:
    """Hands out the labels that pool sentences refer to, so that every reference resolves."""

    def __init__(self, referenced: Iterable[str], section_labels: Iterable[str]) -> None:
        taken = set(section_labels)
        self.pending: dict[str, list[str]] = {}
        for label in sorted(set(referenced) - taken):
            kind = label.split(":", 1)[0]
            self.pending.setdefault(kind, []).append(label)
        self.counter: dict[str, int] = {}

    def take(self, kind: str) -> str:
        queue = self.pending.get(kind)
        if queue:
            return queue.pop(0)
        self.counter[kind] = self.counter.get(kind, 0) + 1
        return f"{kind}:gen-{self.counter[kind]}"


# ---------------------------------------------------------------------------------------------------------
# LaTeX output
# ---------------------------------------------------------------------------------------------------------


def wrap_latex(text: str) -> list[str]:
    wrapper = textwrap.TextWrapper(width=LATEX_WIDTH, break_long_words=False, break_on_hyphens=False)
    return wrapper.wrap(text)


def indent_wrapped(text: str) -> list[str]:
    """Wrap ``text`` for use inside an environment: two spaces, four on continuation lines."""
    first, *rest = wrap_latex(text)
    return [f"  {first}", *(f"    {line}" for line in rest)]


class LatexWriter:
    def __init__(self, pool: Sequence[Sequence[str]], preamble: Sequence[str], bib_keys: set[str]) -> None:
        self.rng = random.Random(SEED)
        self.mixer = ProseMixer(pool, Syntax(percent="\\%", latex=True), self.rng)
        self.preamble = list(preamble)
        self.bib_keys = bib_keys
        section_labels = [f"sec:{slug}" for _, slug in SECTIONS]
        referenced: set[str] = set()
        for sentence in self.mixer.sentences:
            for group in LATEX_REF.findall(sentence):
                referenced.update(part.strip() for part in group.split(","))
        self.labels = Labels(referenced, section_labels)
        self.out: list[str] = []
        self.footnotes = 0

    def emit(self, *lines: str) -> None:
        self.out.extend(lines)

    def prose(self, section: int, label: str, topic: str, *, footnote: bool = False) -> None:
        sentences = self.mixer.paragraph(section, label, topic)
        if footnote:
            self.footnotes += 1
            note = self.rng.choice(FOOTNOTES).format(
                ref=f"Section~\\ref{{{label}}}", n=self.rng.randint(2, 90)
            )
            sentences[0] = f"{sentences[0]}\\footnote{{{note}}}"
        lines = wrap_latex(" ".join(sentences))
        if self.rng.random() < 0.25 and len(lines) > 2:
            row = self.rng.randrange(len(lines) - 1)
            lines[row] += f" % TODO: recheck against the run log ({label})"
        self.emit(*lines, "")

    def equation(self, section: int, label: str) -> None:
        body = EQUATIONS[section % len(EQUATIONS)][0].replace("{n}", str(section + 1))
        lead = f"The quantity examined throughout Section~\\ref{{{label}}} is"
        self.emit(
            lead,
            "\\begin{equation}",
            f"  {body},",
            f"  \\label{{{self.labels.take('eq')}}}",
            "\\end{equation}",
            f"where every symbol keeps the meaning it had in Section~\\ref{{sec:{SECTIONS[4][1]}}} and the "
            f"constant is set to {section + 1}.",
            "",
        )

    def align(self, section: int, label: str) -> None:
        k = 32 * (1 + section % 8)
        self.emit(
            f"For the budget used in Section~\\ref{{{label}}}, $K = {k}$, the per-section shares expand to",
            "\\begin{align*}",
            "  k_1 + k_2 + k_3 &= \\lfloor \\rho_1 K \\rfloor + \\lfloor \\rho_2 K \\rfloor"
            " + \\lfloor \\rho_3 K \\rfloor \\\\",
            f"  &\\le {k},",
            "\\end{align*}",
            "so no report can exceed the global budget even when the shares are learned.",
            "",
        )

    def figure(self, section: int, topic: str) -> None:
        caption = self.rng.choice(FIGURE_CAPTIONS).format(topic=topic, n=self.rng.randint(4, 40))
        self.emit(
            "\\begin{figure}[t]",
            "  \\centering",
            f"  \\includegraphics[width=0.9\\linewidth]{{figs/section-{section:02d}.pdf}}",
            *indent_wrapped(f"\\caption{{{caption}}}"),
            f"  \\label{{{self.labels.take('fig')}}}",
            "\\end{figure}",
            "",
        )

    def table(self, section: int, topic: str) -> None:
        self.emit(
            "\\begin{table}[t]",
            "  \\centering",
            *indent_wrapped(
                f"\\caption{{Results for the {topic} experiments. All values are percentages averaged over "
                f"{self.rng.randint(5, 48)} cases.}}"
            ),
            f"  \\label{{{self.labels.take('tab')}}}",
            "  \\begin{tabular}{lcccc}",
            "    \\hline",
            "    & \\multicolumn{2}{c}{Benchmark A} & \\multicolumn{2}{c}{Benchmark B} \\\\",
            "    Method & WSS@95 & R@100 & WSS@95 & R@100 \\\\",
            "    \\hline",
        )
        for method in LATEX_TABLE_METHODS:
            cells = " & ".join(f"{self.rng.uniform(35, 75):.1f}" for _ in range(4))
            self.emit(f"    {method} & {cells} \\\\")
        self.emit("    \\hline", "  \\end{tabular}", "\\end{table}", "")

    def item_list(self, section: int, variant: int) -> None:
        env = ("itemize", "enumerate", "description")[variant % 3]
        self.emit("% Items are full sentences so that readability checks see real prose.")
        self.emit(f"\\begin{{{env}}}")
        for index in range(3):
            text = self.mixer.sentence()
            if env == "description":
                head = f"\\item[Observation {section}.{index + 1}.]"
            elif env == "enumerate":
                head = f"\\item[({'abc'[index]})]"
            else:
                head = "\\item"
            lines = wrap_latex(f"{head} {text}")
            self.emit(f"  {lines[0]}", *(f"    {line}" for line in lines[1:]))
        self.emit(f"\\end{{{env}}}", "")

    def algorithm(self) -> None:
        self.emit(
            "\\begin{algorithm}[t]",
            "  \\caption{Section-aware pruning, repeated here for reference.}",
            f"  \\label{{{self.labels.take('alg')}}}",
            "  \\begin{algorithmic}[1]",
            "    \\Require section vectors $w^{(1)}, \\dots, w^{(m)}$, budget $K$, shares $\\rho$",
            "    \\For{$j = 1$ \\textbf{to} $m$}",
            "      \\State $k_j \\gets \\lfloor \\rho_j K \\rfloor$",
            "      \\State $T_j \\gets$ indices of the $k_j$ largest entries of $w^{(j)}$",
            "    \\EndFor",
            "    \\State \\Return $\\sum_j w^{(j)}[T_j]$",
            "  \\end{algorithmic}",
            "\\end{algorithm}",
            "",
        )

    def listing(self) -> None:
        self.emit(
            f"\\begin{{lstlisting}}[language=Python, caption={{Index construction.}}, "
            f"label={{{self.labels.take('lst')}}}]",
            "# The % sign below belongs to a format string; it is not a LaTeX comment.",
            'index = SpareIndex(budget=256, shares="learned")',
            "",
            'for report in load_reports("trials.jsonl"):',
            "    index.add(report.id, encoder.encode_sections(report))",
            'print("kept %.1f%% of all weights" % (100 * index.density()))',
            "\\end{lstlisting}",
            "",
        )

    def quote(self) -> None:
        self.emit("\\begin{quote}", *wrap_latex(f"{self.mixer.sentence()} {self.mixer.sentence()}"))
        self.emit("\\end{quote}", "")

    def ignored_region(self) -> None:
        self.emit(
            "% margin: off",
            "Scratch text kept in the source on purpose. It must never reach a diagnostic, and it repeats",
            "itself, repeats itself, repeats itself so that a leak would be obvious at a glance.",
            "% margin: on",
            "",
        )

    def build(self) -> str:
        self.emit("% Generated by bench/make_large_fixture.py -- do not edit by hand.")
        self.emit(*self.preamble, "")
        self.emit(
            "\\title{A Large Benchmark Manuscript Assembled from the \\method{} Fixture}",
            "\\author{Generated Fixture\\thanks{Sentences are recombined from the hand-written fixture "
            "paper.}}",
            "\\date{}",
            "",
            "\\begin{document}",
            "\\maketitle",
            "",
            "\\begin{abstract}",
        )
        self.prose(0, "sec:intro", "overview")
        self.prose(0, "sec:conclusion", "overview")
        self.emit("\\end{abstract}", "")
        for number, (title, slug) in enumerate(SECTIONS, start=1):
            label = f"sec:{slug}"
            topic = title.lower()
            self.emit(f"% ---- Section {number}: {title} " + "-" * max(4, 80 - len(title)), "")
            self.emit(f"\\section{{{title}}}", f"\\label{{{label}}}", "")
            self.prose(number, label, topic)
            self.prose(number, label, topic, footnote=number % 2 == 0)
            if number % 2:
                self.equation(number, label)
            else:
                self.align(number, label)
            for sub in range(2):
                sub_title = SUBSECTIONS[(number + sub) % len(SUBSECTIONS)]
                sub_label = self.labels.take("sec") if self.labels.pending.get("sec") else None
                self.emit(f"\\subsection{{{sub_title}}}")
                if sub_label:
                    self.emit(f"\\label{{{sub_label}}}")
                self.emit("")
                self.prose(number, label, topic, footnote=sub == 1 and number % 3 == 0)
                self.prose(number, label, topic)
                if sub == 0:
                    if number % 3 == 1:
                        self.figure(number, topic)
                    elif number % 3 == 2:
                        self.table(number, topic)
                    else:
                        self.item_list(number, number)
                else:
                    self.prose(number, label, topic)
                    if number % 4 == 0:
                        self.item_list(number, number + 1)
                    if number % 5 == 0:
                        self.quote()
            if number == 7:
                self.algorithm()
            if number == 9:
                self.listing()
            if number == 12:
                self.ignored_region()
        self.emit("\\bibliographystyle{plainnat}", f"\\bibliography{{{LATEX_BIB}}}", "", "\\end{document}")
        return "\n".join(self.out) + "\n"


# ---------------------------------------------------------------------------------------------------------
# Markdown output
# ---------------------------------------------------------------------------------------------------------


def markdown_lines(sentences: Sequence[str]) -> list[str]:
    """One sentence per line (semantic line breaks), never starting a line with block syntax."""
    lines: list[str] = []
    for sentence in sentences:
        if lines and MD_UNSAFE_LINE_START.match(sentence):
            lines[-1] = f"{lines[-1]} {sentence}"
        else:
            lines.append(sentence)
    return lines


class MarkdownWriter:
    def __init__(self, pool: Sequence[Sequence[str]]) -> None:
        self.rng = random.Random(SEED + 1)
        self.mixer = ProseMixer(pool, Syntax(percent="%", latex=False), self.rng)
        section_labels = [f"sec:{slug}" for _, slug in SECTIONS]
        referenced = {ref for sentence in self.mixer.sentences for ref in MD_CROSSREF.findall(sentence)}
        self.labels = Labels(referenced, section_labels)
        self.out: list[str] = []
        self.footnotes = 0

    def emit(self, *lines: str) -> None:
        self.out.extend(lines)

    def prose(self, section: int, label: str, topic: str, *, footnote: bool = False) -> None:
        sentences = self.mixer.paragraph(section, label, topic)
        note = ""
        if footnote:
            self.footnotes += 1
            ident = f"n{self.footnotes}"
            sentences[0] = f"{sentences[0]}[^{ident}]"
            text = self.rng.choice(FOOTNOTES).format(ref=f"Section {section}", n=self.rng.randint(2, 90))
            note = f"[^{ident}]: {text}"
        self.emit(*markdown_lines(sentences), "")
        if note:
            self.emit(note, "")

    def equation(self, section: int) -> None:
        body = EQUATIONS[section % len(EQUATIONS)][1].replace("{n}", str(section + 1))
        self.emit(
            f"The quantity examined throughout Section {section} is",
            "",
            "$$",
            body,
            f"$$ {{#{self.labels.take('eq')}}}",
            "",
            f"where every symbol keeps the meaning it had in the {SECTIONS[4][0].lower()} section and the "
            f"constant is set to {section + 1}.",
            "",
        )

    def figure(self, section: int, topic: str) -> None:
        caption = self.rng.choice(FIGURE_CAPTIONS).format(topic=topic, n=self.rng.randint(4, 40))
        self.emit(
            f'![{caption}](figs/section-{section:02d}.png){{#{self.labels.take("fig")} width="80%"}}', ""
        )

    def table(self, topic: str) -> None:
        self.emit(
            "| Method            | Case A (m) | Case B (m) | Regional (m) | Time (s) |",
            "|:------------------|-----------:|-----------:|-------------:|---------:|",
        )
        for method in MARKDOWN_TABLE_METHODS:
            values = [f"{self.rng.uniform(0.05, 1.9):.2f}" for _ in range(3)]
            time = f"{self.rng.uniform(0.4, 420):.1f}"
            self.emit(f"| {method:<17} | {values[0]:>10} | {values[1]:>10} | {values[2]:>12} | {time:>8} |")
        self.emit(
            "",
            f"Table: Errors and run times for the {topic} experiments, averaged over "
            f"{self.rng.randint(5, 200)} held-out runs. {{#{self.labels.take('tbl')}}}",
            "",
        )

    def item_list(self, section: int) -> None:
        for index in range(3):
            marker = f"{index + 1}." if section % 2 else "-"
            lines = markdown_lines([self.mixer.sentence()])
            self.emit(f"{marker} {lines[0]}")
        self.emit("")

    def code(self, section: int) -> None:
        self.emit(
            "```python",
            f"# Section {section}: one roll-out step with a fixed horizon.",
            "horizon = schedule(epoch)",
            "",
            "loss = rollout_loss(model, batch, horizon=horizon)",
            "loss.backward()",
            "```",
            "",
        )

    def quote(self) -> None:
        self.emit(f"> {self.mixer.sentence()}", f"> {self.mixer.sentence()}", "")

    def build(self) -> str:
        self.emit(
            "---",
            'title: "A Large Benchmark Manuscript Assembled from the Markdown Fixtures"',
            "author:",
            "  - Generated Fixture",
            "date: 2024-06-11",
            f"bibliography: {MARKDOWN_BIB}",
            "keywords:",
            "  - benchmark",
            "  - surrogate modelling",
            "---",
            "",
            "<!-- Generated by bench/make_large_fixture.py -- do not edit by hand. -->",
            "",
        )
        for number, (title, slug) in enumerate(SECTIONS, start=1):
            label = f"sec:{slug}"
            topic = title.lower()
            self.emit(f"# {title} {{#{label}}}", "")
            self.prose(number, label, topic)
            self.prose(number, label, topic, footnote=number % 2 == 0)
            self.prose(number, label, topic)
            if number % 2:
                self.equation(number)
            for sub in range(2):
                self.emit(f"## {SUBSECTIONS[(number + sub) % len(SUBSECTIONS)]}", "")
                self.prose(number, label, topic)
                if sub == 0:
                    self.prose(number, label, topic, footnote=number % 3 == 0)
                    if number % 3 == 1:
                        self.figure(number, topic)
                    elif number % 3 == 2:
                        self.table(topic)
                    else:
                        self.item_list(number)
                else:
                    self.emit(f"### Notes on {topic}", "")
                    self.prose(number, label, topic)
                    self.prose(number, label, topic, footnote=number % 5 == 1)
                    self.prose(number, label, topic)
                    if number % 4 == 0:
                        self.code(number)
                    if number % 5 == 0:
                        self.quote()
            if number % 6 == 0:
                self.emit(f"<!-- TODO: section {number} still needs a figure with the final numbers. -->", "")
            if number == 12:
                self.emit(
                    "<!-- margin: off -->",
                    "Scratch text kept in the source on purpose, which must never reach a diagnostic.",
                    "It repeats itself, repeats itself, repeats itself so that a leak would be obvious.",
                    "<!-- margin: on -->",
                    "",
                )
            if number == 24:
                self.emit(
                    "We thank the R&amp;D group of Example Hydro for computing time.",
                    "Cells marked with \\* in the released files were dry in the reference simulation",
                    "and are excluded throughout.",
                    "",
                )
        return "\n".join(self.out).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------------------------
# Checks and entry point
# ---------------------------------------------------------------------------------------------------------


def check_latex(text: str, bib_keys: set[str]) -> None:
    defined = {a or b for a, b in LATEX_LABEL.findall(text)}
    referenced = {part.strip() for group in LATEX_REF.findall(text) for part in group.split(",")}
    cited = {part.strip() for group in LATEX_CITE.findall(text) for part in group.split(",")}
    problems = [f"undefined reference {label}" for label in sorted(referenced - defined)]
    problems += [f"unknown citation key {key}" for key in sorted(cited - bib_keys)]
    begins = LATEX_BEGIN.findall(text)
    ends = LATEX_END.findall(text)
    if sorted(begins) != sorted(ends):
        problems.append("unbalanced \\begin/\\end")
    depth = 0
    for line in text.splitlines():
        for ch in re.sub(r"\\.", "", strip_latex_comment(line)):
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if depth < 0:
                problems.append(f"unbalanced braces near: {line[:60]}")
                depth = 0
    if depth:
        problems.append("unclosed brace at end of file")
    if problems:
        raise SystemExit("large.tex failed its checks:\n  " + "\n  ".join(problems))


def check_markdown(text: str) -> None:
    defined = set(MD_ANCHOR.findall(text))
    referenced = set(MD_CROSSREF.findall(text))
    missing = sorted(referenced - defined)
    if missing:
        raise SystemExit(f"large.md has undefined cross-references: {', '.join(missing)}")


def latex_preamble(main_tex: Path) -> list[str]:
    lines = [
        line for line in main_tex.read_text(encoding="utf-8").splitlines() if LATEX_PREAMBLE_LINE.match(line)
    ]
    if not lines or not lines[0].startswith("\\documentclass"):
        raise SystemExit(f"no preamble found in {main_tex}")
    return lines


def write(path: Path, text: str, name: str) -> None:
    lines = text.count("\n")
    if lines < MIN_LINES:
        raise SystemExit(f"{name} has only {lines} lines; expected at least {MIN_LINES}")
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path} ({lines} lines)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR, help="where to write the outputs")
    args = parser.parse_args(argv)
    out_dir: Path = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)

    bib_keys = set(BIB_KEY.findall((LATEX_PAPER / "references.bib").read_text(encoding="utf-8")))
    latex = LatexWriter(read_pool(LATEX_SOURCES, latex=True), latex_preamble(LATEX_SOURCES[0]), bib_keys)
    latex_text = latex.build()
    check_latex(latex_text, bib_keys)
    write(out_dir / "large.tex", latex_text, "large.tex")

    markdown_text = MarkdownWriter(read_pool(MARKDOWN_SOURCES, latex=False)).build()
    check_markdown(markdown_text)
    write(out_dir / "large.md", markdown_text, "large.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

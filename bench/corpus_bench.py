"""How margin reads real papers: `python bench/corpus_bench.py [FOLDER]` (default fixtures/real).

For every manuscript in the folder (LaTeX roots, Markdown files, Manubot content folders), as `margin check
--format json` reports it: the paragraphs, how many are anchored (their first and last words are in the source
range they map to, or in a macro definition of the manuscript), how many carry markup (a backslash command,
`[@`, `{%`, `{#` or `<!--`), how many come from a preamble or front matter, whether every included file was read, and
the parse time. tests/test_real_corpus.py requires every rate to be perfect; this prints them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from margin.workflows.manuscript.discovery import manuscripts_in
from margin.workflows.manuscript.loader import ManuscriptLoader
from margin.workflows.manuscript.model import Manuscript, Paragraph
from margin.workflows.manuscript.source import uri_to_path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fixtures" / "real"
MARKUP = re.compile(r"\\[A-Za-z@]+|\[@|\{[%#]|<!--")
_WORD = re.compile(r"[^\W\d_]{2,}")  # words of letters: placeholders like [math] are skipped below
_PLACEHOLDER = re.compile(r"\[(?:math|citation|reference|url|code)\]")
_DEFINITION = re.compile(r"\\(?:re)?newcommand|\\def\b|\\providecommand|\\DeclareRobustCommand")
_INCLUDE = re.compile(r"^[^%\n]*\\(?:input|include|subfile)\s*\{([^}\n]+)\}", re.M)
_BEGIN_DOCUMENT = re.compile(r"^[^%\n]*\\begin\s*\{document\}", re.M)
_ACCENT = re.compile(r"\\[\"'`^~=.]|\\[uvHckr](?=[{ ])")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n.*?\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)


@dataclass
class Audit:
    manuscript: str
    files: int
    paragraphs: int
    parse_ms: float
    unanchored: list[str] = field(default_factory=list)
    with_markup: list[str] = field(default_factory=list)
    from_front_matter: list[str] = field(default_factory=list)
    unread_includes: list[str] = field(default_factory=list)

    @property
    def anchored_rate(self) -> float:
        return 1 - len(self.unanchored) / max(1, self.paragraphs)

    @property
    def markup_rate(self) -> float:
        return len(self.with_markup) / max(1, self.paragraphs)


def entries(folder: Path = CORPUS) -> list[Path]:
    return manuscripts_in(folder).entries


def audit(entry: Path, loader: ManuscriptLoader | None = None) -> Audit:
    loader = loader or ManuscriptLoader()
    started = time.perf_counter()
    manuscript, _ = loader.load_path(entry)
    elapsed = (time.perf_counter() - started) * 1000
    result = Audit(
        str(entry.relative_to(ROOT)) if entry.is_relative_to(ROOT) else str(entry),
        len(manuscript.files),
        len(manuscript.paragraphs),
        round(elapsed, 1),
    )
    definitions = _macro_definitions(manuscript)
    for paragraph in manuscript.paragraphs:
        label = f"{Path(paragraph.file).name}:{paragraph.range.start.line + 1}: {paragraph.text[:60]!r}"
        if not _anchored(paragraph, definitions):
            result.unanchored.append(label)
        if MARKUP.search(paragraph.text):
            result.with_markup.append(label)
        if _before_the_body(paragraph):
            result.from_front_matter.append(label)
    result.unread_includes = _unread_includes(manuscript)
    return result


def _macro_definitions(manuscript: Manuscript) -> str:
    """The text of every macro definition line of the manuscript (a paragraph's words may come from there)."""
    lines = []
    for source in manuscript.files:
        lines.extend(line for line in source.text.splitlines() if _DEFINITION.search(line))
    return _folded("\n".join(lines))


def _folded(text: str) -> str:
    """Letters without accents, and LaTeX accent commands and braces removed: "Na\\"ively" and "Naïvely" match."""
    text = _ACCENT.sub("", text).replace("{", "").replace("}", "")
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char)).casefold()


def _anchored(paragraph: Paragraph, definitions: str) -> bool:
    words = _WORD.findall(_PLACEHOLDER.sub(" ", paragraph.text))
    if not words:
        return True
    start, end = paragraph.source_span
    source = _folded(paragraph.source.text[start:end])
    return all(_folded(word) in source or _folded(word) in definitions for word in (words[0], words[-1]))


def _before_the_body(paragraph: Paragraph) -> bool:
    text = paragraph.source.text
    start, _ = paragraph.source_span
    if paragraph.source.display_name.lower().endswith(".tex"):
        begin = _BEGIN_DOCUMENT.search(text)
        return begin is not None and start < begin.start()
    front = _FRONT_MATTER.match(text)
    return front is not None and start < front.end()


def _unread_includes(manuscript: Manuscript) -> list[str]:
    """Files a LaTeX file includes that exist on disk but are not among the manuscript's files."""
    read = {uri_to_path(source.uri) for source in manuscript.files}
    missing = []
    for source in manuscript.files:
        path = source.path
        if path is None or path.suffix.lower() != ".tex":
            continue
        body = source.text
        begin = _BEGIN_DOCUMENT.search(body)
        if begin is not None:
            body = body[begin.end() :]  # a preamble's includes hold macros: read for those, not for prose
        for match in _INCLUDE.finditer(body):
            name = match.group(1).strip()
            for base in (
                path.parent,
                uri_to_path(manuscript.root_uri).parent if uri_to_path(manuscript.root_uri) else None,
            ):
                if base is None:
                    continue
                for candidate in (base / name, base / f"{name}.tex"):
                    if (
                        candidate.is_file()
                        and candidate.suffix == ".tex"
                        and candidate.resolve() not in {item.resolve() for item in read if item is not None}
                    ):
                        missing.append(f"{source.display_name}: {name}")
    return sorted(set(missing))


def run(folder: Path = CORPUS) -> list[Audit]:
    loader = ManuscriptLoader()
    return [audit(entry, loader) for entry in entries(folder)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path, nargs="?", default=CORPUS)
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args(argv)
    audits = run(arguments.folder)
    if arguments.json:
        print(json.dumps([asdict(item) for item in audits], indent=2))
        return 0
    print(
        "| manuscript | files | paragraphs | anchored | with markup | from front matter | includes not read | parse ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    total: dict[str, Any] = {"paragraphs": 0, "unanchored": 0, "markup": 0}
    for item in audits:
        total["paragraphs"] += item.paragraphs
        total["unanchored"] += len(item.unanchored)
        total["markup"] += len(item.with_markup)
        print(
            f"| {item.manuscript} | {item.files} | {item.paragraphs} | {item.anchored_rate:.1%} | "
            f"{item.markup_rate:.1%} | {len(item.from_front_matter)} | {len(item.unread_includes)} | {item.parse_ms} |"
        )
    paragraphs = max(1, total["paragraphs"])
    print(
        f"\n{len(audits)} manuscripts, {total['paragraphs']} paragraphs: "
        f"{1 - total['unanchored'] / paragraphs:.1%} anchored, {total['markup'] / paragraphs:.1%} with markup"
    )
    for item in audits:
        for label in (*item.unanchored, *item.with_markup, *item.from_front_matter, *item.unread_includes)[
            :5
        ]:
            print(f"  {item.manuscript}: {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

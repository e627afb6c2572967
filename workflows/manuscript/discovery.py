"""Which manuscripts a folder holds, and which files on a command line are one manuscript.

A folder is searched for LaTeX root files (a `\\documentclass` and a `\\begin{document}`, not a subfile or a file
that names another root), Manubot `content/` folders (one manuscript each) and other Markdown manuscripts; what
is none of these is listed as skipped, with the reason, so that a command says what it did not read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .loader import ManuscriptLoader, is_latex, is_markdown
from .model import Manuscript
from .source import UnreadableFile

_DOCUMENTCLASS = re.compile(r"^[ \t]*\\documentclass\b(?![^\n]*\{subfiles\})", re.M)
_BEGIN_DOCUMENT = re.compile(r"^[^%\n]*\\begin[ \t]*\{document\}", re.M)
_MAGIC_ROOT = re.compile(r"^[ \t]*%[ \t]*!TEX[ \t]+root[ \t]*=", re.M | re.I)
# Markdown files that describe a repository rather than being a manuscript.
_NOT_MANUSCRIPTS = (
    *("readme", "changelog", "changes", "license", "licence", "contributing", "code_of_conduct", "source"),
    "authors",
)
_SKIPPED_FOLDERS = frozenset(
    {".git", ".margin", "node_modules", "__pycache__", ".venv", "venv", "build", "_build"}
)
_MAX_FILES = 5_000  # a folder with more is not read past this: say so rather than stall
_HEAD_BYTES = 512 * 1024  # where \documentclass and \begin{document} must be found


@dataclass
class Found:
    """What a folder holds: manuscript entry points (files, or Manubot content folders), and what was skipped."""

    entries: list[Path] = field(default_factory=list)
    skipped: dict[str, list[Path]] = field(default_factory=dict)  # reason -> files

    def skip(self, reason: str, path: Path) -> None:
        self.skipped.setdefault(reason, []).append(path)

    def summary(self, folder: Path) -> str | None:
        """One line that says what was not read, with a few names; None when nothing was skipped."""
        if not self.skipped:
            return None
        parts = []
        for reason, files in self.skipped.items():
            names = ", ".join(str(path.relative_to(folder)) for path in files[:3])
            more = f" and {len(files) - 3} more" if len(files) > 3 else ""
            parts.append(f"{len(files)} {reason} ({names}{more})")
        return f"{folder}: skipped " + "; ".join(parts)


def is_latex_root(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(_HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    if _MAGIC_ROOT.search(head[:4000]):
        return False  # it names its root: it is part of another manuscript
    return bool(_DOCUMENTCLASS.search(head) and _BEGIN_DOCUMENT.search(head))


def manuscripts_in(folder: Path) -> Found:
    """The manuscripts in `folder` and below, in path order; only regular files are considered."""
    found = Found()
    manubot: set[Path] = set()
    files = sorted(_files(folder, found))
    for path in files:
        if is_latex(path.name):
            if is_latex_root(path):
                found.entries.append(path)
            else:
                found.skip("LaTeX file(s) that are not a root (included by one, or a fragment)", path)
        elif is_markdown(path.name):
            if path.parent.name == "content" and re.match(r"^\d+\.", path.name):
                if path.parent not in manubot:
                    manubot.add(path.parent)
                    found.entries.append(path.parent)
            elif path.stem.lower().replace("-", "_").startswith(_NOT_MANUSCRIPTS):
                found.skip("repository file(s) such as a README", path)
            else:
                found.entries.append(path)
        else:
            found.skip("file(s) that are neither LaTeX nor Markdown", path)
    return found


def _files(folder: Path, found: Found) -> list[Path]:
    files: list[Path] = []
    pending = [folder]
    while pending:
        current = pending.pop()
        try:
            children = sorted(current.iterdir())
        except OSError:
            continue
        for child in children:
            if child.is_symlink():
                continue  # a link may lead outside the folder, or in a circle
            if child.is_dir():
                if child.name not in _SKIPPED_FOLDERS and not child.name.startswith("."):
                    pending.append(child)
            elif child.is_file():
                if len(files) >= _MAX_FILES:
                    found.skip(f"file(s) past the first {_MAX_FILES:,}", child)
                    continue
                files.append(child)
    return files


def distinct_manuscripts(
    manuscripts: Sequence[Manuscript],
) -> tuple[list[Manuscript], list[tuple[Manuscript, Manuscript]]]:
    """Each manuscript once: one whose files are all part of another (an included file given beside its root,
    every file of a Manubot folder) is dropped in favour of the larger one. Returns the kept manuscripts in their
    order, and (dropped, kept instead) pairs."""
    files = [frozenset(file.uri for file in manuscript.files) for manuscript in manuscripts]
    kept: list[Manuscript] = []
    dropped: list[tuple[Manuscript, Manuscript]] = []
    for index, manuscript in enumerate(manuscripts):
        covering = next(
            (
                other
                for other_index, other in enumerate(manuscripts)
                if other_index != index
                and files[index] <= files[other_index]
                and (files[index] < files[other_index] or other_index < index)
            ),
            None,
        )
        if covering is None:
            kept.append(manuscript)
        else:
            dropped.append((manuscript, covering))
    return kept, dropped


@dataclass
class Loaded:
    """Manuscripts loaded for a command line: each once, with what to tell the user."""

    manuscripts: list[tuple[Path, Manuscript]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # warnings and what was skipped, for stderr
    errors: list[str] = field(default_factory=list)  # what could not be read


def load_paths(loader: ManuscriptLoader, paths: Sequence[Path]) -> Loaded:
    """The manuscripts that files and folders on a command line name, each once: a folder is searched for its
    manuscripts (a Manubot content/ folder is one), and files of one manuscript are read under their root."""
    from .markdown.parse import manubot_files

    result = Loaded()
    loaded: list[tuple[Path, Manuscript]] = []
    for path in paths:
        targets = [path]
        if path.is_dir() and not manubot_files(path):
            found = manuscripts_in(path)
            summary = found.summary(path)
            if not found.entries:
                result.errors.append(
                    f"{path}: no LaTeX root file or Markdown manuscript in this folder"
                    + (f" ({summary})" if summary else "")
                )
                continue
            if summary:
                result.notes.append(summary)
            targets = found.entries
        for target in targets:
            try:
                manuscript, warnings = loader.load_path(target)
            except UnreadableFile as error:
                result.errors.append(str(error))
                continue
            result.notes.extend(warnings)
            loaded.append((target, manuscript))
    kept, dropped = distinct_manuscripts([manuscript for _, manuscript in loaded])
    kept_ids = {id(manuscript) for manuscript in kept}
    result.manuscripts = [(path, manuscript) for path, manuscript in loaded if id(manuscript) in kept_ids]
    if dropped:
        roots = sorted({_name(covering) for _, covering in dropped})
        result.notes.append(
            f"{len(dropped)} of the files given are part of a manuscript read once, under {', '.join(roots)}"
        )
    return result


def _name(manuscript: Manuscript) -> str:
    root = manuscript.files[0] if manuscript.files else None
    return root.display_name if root is not None else manuscript.root_uri

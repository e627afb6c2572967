"""One entry point from a file to its whole manuscript, whatever the format."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .model import Manuscript, Problem, Severity
from .source import SourceFile, UnreadableFile
from .sources import SourceProvider

# Each format's parser is imported when a file of that format is first loaded: `margin check paper.md` never
# imports the LaTeX parser (nor pylatexenc), and the server starts without either.
if TYPE_CHECKING:
    from .latex.project import LatexProject
    from .markdown.parse import MarkdownProject

# The one table of manuscript file suffixes (lower case): parsing, rewriting and folder searches all read it.
LATEX_SUFFIXES = frozenset({".tex", ".ltx", ".latex"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd", ".qmd", ".rmd"})


def is_latex(name: str) -> bool:
    """Whether a file name, path or URI has a LaTeX suffix (any case)."""
    return Path(name).suffix.lower() in LATEX_SUFFIXES


def is_markdown(name: str) -> bool:
    """Whether a file name, path or URI has a Markdown suffix (any case)."""
    return Path(name).suffix.lower() in MARKDOWN_SUFFIXES


def manuscript_format(name: str) -> str | None:
    """The format of a file by its suffix: "latex", "markdown", or None for any other file."""
    if is_latex(name):
        return "latex"
    if is_markdown(name):
        return "markdown"
    return None


class ManuscriptLoader:
    """Keeps the parsers (and so their caches) for a process: the server and the CLI each hold one."""

    def __init__(self, provider: SourceProvider | None = None) -> None:
        self.provider = provider or SourceProvider()
        self._latex: LatexProject | None = None
        self._markdown_project: MarkdownProject | None = None

    @property
    def latex(self) -> LatexProject:
        if self._latex is None:
            from .latex.project import LatexProject

            self._latex = LatexProject(self.provider)
        return self._latex

    @property
    def markdown(self) -> MarkdownProject:
        if self._markdown_project is None:
            from .markdown.parse import MarkdownProject

            self._markdown_project = MarkdownProject()
        return self._markdown_project

    def load(self, source: SourceFile, language: str | None = None) -> Manuscript:
        """The manuscript `source` belongs to: its LaTeX root, its Manubot folder, or the file alone."""
        kind = language or manuscript_format(source.display_name) or "latex"
        if kind == "markdown":
            return self._markdown(source)
        from .latex.project import find_root, root_declaration

        root = find_root(source, self.provider)
        if root is not None:
            try:
                root_source, _warning = self.provider.load(root)
            except UnreadableFile as error:
                # Parsed alone, and the user told why its root was not followed (outside the workspace...).
                manuscript = self.latex.parse(source)
                start, end = root_declaration(source)
                message = f"The root file this file names was not read: {error}"
                manuscript.problems.append(
                    Problem(source.uri, source.range(start, end), message, Severity.WARNING)
                )
                return manuscript
            manuscript = self.latex.parse(root_source)
            if any(file.uri == source.uri for file in manuscript.files):
                return manuscript
        return self.latex.parse(source)

    def load_path(self, path: Path) -> tuple[Manuscript, list[str]]:
        """Load from disk: a file, or a Manubot content/ folder. Raises UnreadableFile; returns warnings."""
        if path.is_dir():
            from .markdown.parse import manubot_files

            files = manubot_files(path) or sorted(p for p in path.glob("*") if is_markdown(p.name))
            if not files:
                raise UnreadableFile(f"{path} is a folder with no Markdown files")
            sources: list[SourceFile] = []
            warnings: list[str] = []
            for file in files:
                try:  # one unreadable part (a device, a link outside the project) is skipped, not fatal
                    source, warning = self.provider.load(file)
                except UnreadableFile as error:
                    warnings.append(f"skipped: {error}")
                    continue
                sources.append(source)
                if warning:
                    warnings.append(warning)
            if not sources:
                raise UnreadableFile(
                    f"{path}: none of its Markdown files can be read ({'; '.join(warnings)})"
                )
            return self.markdown.parse(sources), warnings
        source, warning = self.provider.load(path)
        manuscript = self.load(source)
        return manuscript, [warning] if warning else []

    def _markdown(self, source: SourceFile) -> Manuscript:
        from .markdown.parse import manubot_files

        path = source.path
        files = manubot_files(path) if path is not None else None
        if not files:
            return self.markdown.parse([source])
        sources: list[SourceFile] = []
        for file in files:
            try:
                sources.append(self.provider.load(file)[0])
            except UnreadableFile:
                continue
        if not any(item.uri == source.uri for item in sources):
            sources = [source]
        manuscript = self.markdown.parse(sources)
        return manuscript


__all__ = [
    "LATEX_SUFFIXES",
    "MARKDOWN_SUFFIXES",
    "ManuscriptLoader",
    "Severity",
    "is_latex",
    "is_markdown",
    "manuscript_format",
]

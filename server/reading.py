"""How the command line reads manuscripts: bounded files, and only inside each manuscript's project folder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from margin.workflows.manuscript.boundary import ReadBoundary, project_folder
from margin.workflows.manuscript.loader import ManuscriptLoader
from margin.workflows.manuscript.sources import SourceProvider

from .settings import Settings


def command_line_boundary(settings: Settings, paths: Sequence[Path]) -> ReadBoundary:
    """What a command line run may read: the project folders of `paths` (their git work tree, else their folder)
    and the user's allowedFolders."""
    return ReadBoundary((project_folder(path) for path in paths), settings.allowed_folders)


def command_line_loader(settings: Settings, paths: Sequence[Path]) -> ManuscriptLoader:
    """A loader that follows includes and roots only inside the command line boundary of `paths`."""
    boundary = command_line_boundary(settings, paths)
    return ManuscriptLoader(SourceProvider(max_bytes=settings.max_file_bytes, boundary=boundary))

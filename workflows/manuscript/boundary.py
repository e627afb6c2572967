"""Which folders margin may read a manuscript's other files from.

A manuscript names other files (\\input, \\include, `% !TEX root`, literature folders in its settings); a hostile
one names /etc/passwd, ../../.ssh/id_rsa or a link to them, and whatever margin reads may go to a model. Files are
read only inside the workspace folders (the editor's) or the manuscript's project folder (the CLI's), plus the
folders the user allows in their own settings. Links are followed to where they lead before the check.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .source import UnreadableFile

ALLOW_SETTING = "margin.allowedFolders"


class OutsideWorkspace(UnreadableFile):
    """A file outside the folders margin may read; the message says which and how to allow it."""


def _real(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return Path(os.path.abspath(path))


def project_folder(path: Path) -> Path:
    """The folder a manuscript given on the command line lives in: its git work tree, else its own folder.

    The work tree lets `chapters/intro.tex` reach its `% !TEX root = ../main.tex`; a work tree that is the home
    folder or the file-system root (dotfiles kept in git) is too wide and is not used.
    """
    start = _real(path)
    folder = start if start.is_dir() else start.parent
    home = _real(Path.home())
    for candidate in (folder, *folder.parents):
        if candidate == home or candidate.parent == candidate:
            break
        if (candidate / ".git").exists():
            return candidate
    return folder


class ReadBoundary:
    """The folders files may be read from. Empty means nothing beyond the files given explicitly."""

    def __init__(self, folders: Iterable[Path] = (), allowed: Iterable[Path] = ()) -> None:
        self.folders = tuple(dict.fromkeys(_real(folder) for folder in folders))
        self.allowed = tuple(dict.fromkeys(_real(folder) for folder in allowed))

    def allows(self, path: Path) -> bool:
        real = _real(path)
        return any(real.is_relative_to(folder) for folder in (*self.folders, *self.allowed))

    def check(self, path: Path) -> None:
        """Raise OutsideWorkspace unless `path` (after following links) is inside an allowed folder."""
        if self.allows(path):
            return
        real = _real(path)
        shown = f"{path} (a link to {real})" if real != Path(os.path.abspath(path)) else str(path)
        where = ", ".join(str(folder) for folder in self.folders) or "none"
        raise OutsideWorkspace(
            f"the file {shown} is outside the workspace ({where}); margin does not read it. "
            f"To allow it, add its folder to {ALLOW_SETTING} in your user settings"
        )

    def with_folders(self, folders: Iterable[Path]) -> ReadBoundary:
        return ReadBoundary((*self.folders, *folders), self.allowed)

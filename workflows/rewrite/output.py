"""Files margin writes: always new ones. An existing file is never overwritten unless the user forces it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_MAX_SUFFIX = 10_000


def _write_exclusively(path: Path, text: str) -> None:
    """Create `path` with `text`; FileExistsError if it exists (O_EXCL: no race with another writer)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def numbered(path: Path, number: int) -> Path:
    return path if number == 1 else path.with_name(f"{path.stem}-{number}{path.suffix}")


def create_beside(path: Path, text: str) -> Path:
    """Write `text` to `path`, or to `stem-2.ext`, `stem-3.ext`... when that exists. Returns the path written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for number in range(1, _MAX_SUFFIX):
        candidate = numbered(path, number)
        try:
            _write_exclusively(candidate, text)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"no free file name like {path}")


def write_output(path: Path, text: str, force: bool = False) -> Path:
    """Write an output file the user named. Without `force` an existing file is an error, never replaced; with
    it the file is replaced atomically (a temporary file renamed over it)."""
    if not force:
        try:
            _write_exclusively(path, text)
        except FileExistsError:
            raise FileExistsError(
                f"{path} exists; choose another name or pass --force to replace it"
            ) from None
        return path
    # An unpredictable name, created with O_EXCL (mkstemp) in the target folder: a link planted at a known
    # temporary name cannot redirect the write; the rename then replaces `path` itself, never what it links to.
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".margin-tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path

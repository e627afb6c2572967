"""Files margin writes: always new ones. An existing file is never overwritten unless the user forces it.

Every file margin writes (simplified files, lay articles, transcripts, evaluation reports, the dismissals file)
goes through `_staged`: the bytes first go to an unpredictable temporary file created with O_EXCL (`_create_new`)
in the target folder, which is then linked (a new file) or renamed (a forced replacement) onto the target name. So
a write is atomic (nobody sees half a file), a link planted at a predictable name is never followed (link and
rename act on the name itself), and without force an existing name is never replaced (link fails with EEXIST).

`check_output` and `check_folder` tell a command, before any model call, that an output location is unusable;
`rescue` keeps generated text that could not be written after all (the disk filled up meanwhile).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

_MAX_SUFFIX = 10_000
TEMPORARY_SUFFIX = ".margin-tmp"
# link() is not supported everywhere (FAT and exFAT, some network shares): then the new file is created with
# O_EXCL instead, which keeps "never overwrite" and "never follow a link" but is not atomic.
_NO_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS, errno.EXDEV}
# New files: never through a link, binary (no newline translation on Windows), not inherited by children.
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
_NEW |= getattr(os, "O_CLOEXEC", 0)
# 0o644 less the user's umask, applied by the kernel (mkstemp's 0o600 would make every output private).
_MODE = 0o644


class OutputProblem(Exception):
    """An output location that cannot be used, said in one line (the CLI exits with its usage status)."""


@dataclass
class Rescue:
    """Where text went when writing it where asked failed: `saved` is None when no file could take it."""

    error: OSError
    saved: Path | None


def reason(error: OSError) -> str:
    """The OS's own words for a failed write, e.g. "[Errno 28] No space left on device"."""
    if error.errno is not None and error.strerror:
        return f"[Errno {error.errno}] {error.strerror}"
    return str(error) or type(error).__name__


# -- new files, and the checks before any model call -------------------------------------------------------


def _create_new(folder: Path, prefix: str, suffix: str) -> tuple[int, Path]:
    """A new file with an unpredictable name in `folder` (what mkstemp does, with the usual permissions): O_EXCL,
    so never an existing file nor a link planted there."""
    for _ in range(100):
        path = folder / f"{prefix}{secrets.token_hex(6)}{suffix}"
        try:
            return os.open(path, _NEW, _MODE), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(folder))


def _probe(folder: Path, target: Path) -> None:
    """Create and remove a file in `folder`: the only test that also catches read-only file systems, ACLs and
    root (for whom the permission bits say nothing)."""
    try:
        descriptor, name = _create_new(folder, ".margin-probe-", "")
    except OSError as error:
        raise OutputProblem(f"cannot write {target}: {reason(error)} in {folder}") from None
    os.close(descriptor)
    with contextlib.suppress(OSError):
        name.unlink()


def check_folder(folder: Path, create: bool = False, target: Path | None = None) -> None:
    """OutputProblem unless margin can create files in `folder` (with `create`: in the folder it would make)."""
    target = target or folder
    if not folder.exists():
        if not create:
            raise OutputProblem(f"cannot write {target}: the folder {folder} does not exist")
        ancestor = folder.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if ancestor.exists() and not ancestor.is_dir():
            raise OutputProblem(f"cannot write {target}: {ancestor} is a file, not a folder")
        _probe(ancestor, target)
        return
    if not folder.is_dir():
        raise OutputProblem(f"cannot write {target}: {folder} is a file, not a folder")
    _probe(folder, target)


def check_output(path: Path, force: bool = False) -> None:
    """OutputProblem unless `write_output(path, ..., force)` can succeed: a file in an existing, writable folder,
    and an existing one only with `force` and only if it is a regular file (never a folder, device or pipe)."""
    if path.is_dir():
        raise OutputProblem(f"{path} is a folder; name a file to write")
    if os.path.lexists(path):
        if not force:
            raise OutputProblem(f"{path} exists; choose another name or pass --force to replace it")
        if path.exists() and not path.is_file():
            raise OutputProblem(f"{path} is not a regular file; margin replaces only files")
    check_folder(path.parent, target=path)


# -- writing -------------------------------------------------------------------------------------------------


def _write_all(descriptor: int, data: bytes) -> None:
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())  # the rename or link below must not publish a file still empty on disk


@contextlib.contextmanager
def _staged(
    path: Path, data: bytes | Callable[[Path], object], suffix: str = TEMPORARY_SUFFIX
) -> Iterator[Path]:
    """`data` (or what `data(temporary)` writes) in a new temporary file beside `path`, removed on the way out
    unless it was renamed. An unpredictable name made with O_EXCL: a link planted there cannot redirect it."""
    descriptor, temporary = _create_new(path.parent, f".{path.name}.", suffix)
    try:
        if callable(data):
            os.close(descriptor)
            data(temporary)
        else:
            _write_all(descriptor, data)
        yield temporary
    finally:
        temporary.unlink(missing_ok=True)


def _write_exclusively(path: Path, data: bytes) -> None:
    """Create `path` with `data`; FileExistsError if the name is taken, even by a link (O_EXCL, O_NOFOLLOW)."""
    descriptor = os.open(path, _NEW, _MODE)
    try:
        _write_all(descriptor, data)
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def _link_new(temporary: Path, path: Path) -> None:
    """Give the finished `temporary` the name `path`, atomically; FileExistsError if the name is taken."""
    try:
        os.link(temporary, path)
    except OSError as error:
        if error.errno not in _NO_LINKS:
            raise
        _write_exclusively(path, temporary.read_bytes())


def _encoded(text: str) -> bytes:
    return text.encode("utf-8")  # exactly these characters and newlines, on every platform


def numbered(path: Path, number: int) -> Path:
    return path if number == 1 else path.with_name(f"{path.stem}-{number}{path.suffix}")


def create_beside(path: Path, text: str) -> Path:
    """Write `text` to `path`, or to `stem-2.ext`, `stem-3.ext`... when that exists. Returns the path written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _staged(path, _encoded(text)) as temporary:
        for number in range(1, _MAX_SUFFIX):
            candidate = numbered(path, number)
            try:
                _link_new(temporary, candidate)
            except FileExistsError:
                continue
            return candidate
    raise FileExistsError(f"no free file name like {path}")


def write_output(path: Path, text: str, force: bool = False) -> Path:
    """Write an output file the user named. Without `force` an existing file is an error, never replaced; with
    it the file is replaced atomically (a temporary file renamed over it; a link there is replaced, not
    followed)."""
    return write_file(path, _encoded(text), force)


def write_file(path: Path, data: bytes | Callable[[Path], object], force: bool = False) -> Path:
    """`write_output` for bytes, or for a writer that needs a file name (`data(path)`, e.g. a plot's savefig:
    the temporary file keeps `path`'s suffix so that the writer picks the right format)."""
    suffix = TEMPORARY_SUFFIX if not callable(data) else TEMPORARY_SUFFIX + path.suffix
    with _staged(path, data, suffix) as temporary:
        if force:
            os.replace(temporary, path)
            return path
        try:
            _link_new(temporary, path)
        except FileExistsError:
            raise FileExistsError(
                f"{path} exists; choose another name or pass --force to replace it"
            ) from None
    return path


def append_line(path: Path, line: str) -> None:
    """Append one line to a log margin keeps (an evaluation's predictions): one write, never through a link."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    descriptor = os.open(path, flags, _MODE)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(_encoded(line))


# -- when writing failed after the work was done -------------------------------------------------------------


def unsaved_folder() -> Path:
    """Where text that could not be written goes when its own folder cannot take it either."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("margin", appauthor=False)) / "unsaved"


def rescue(text: str, path: Path, error: OSError) -> Rescue:
    """Keep `text`, which could not be written to `path` because of `error`: in a new, uniquely named file
    beside `path`, else in margin's cache folder. Never over anything (O_EXCL, an unpredictable name)."""
    stem, suffix = path.stem or "output", path.suffix
    cache = unsaved_folder()
    for folder in (path.parent, cache):
        try:
            if folder == cache:  # never recreate the user's folder that went away: only margin's own
                folder.mkdir(parents=True, exist_ok=True)
            descriptor, name = _create_new(folder, f"{stem}.unsaved-", suffix)
        except OSError:
            continue
        try:
            _write_all(descriptor, _encoded(text))
        except OSError:
            name.unlink(missing_ok=True)
            continue
        return Rescue(error, name)
    return Rescue(error, None)


def print_or_rescue(text: str, name: str) -> Rescue | None:
    """Print `text` on stdout; if stdout cannot take it (a redirection to a full disk, a closed pipe), keep it
    in margin's cache folder as `name`-unsaved-XXXX and say why. None when it was printed."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as error:
        # Python would try the same buffered text again at exit and complain: point stdout at nothing first.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())
            os.close(null)
        return rescue(text, unsaved_folder() / name, error)
    return None

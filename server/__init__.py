"""Editor-facing side of margin: the language server, the CLI and output rendering."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    # __version__ is read from package metadata on first use: importing importlib.metadata costs every command
    # ~25 ms, and only `margin --version` and the server's initialize answer need the version.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("margin")
    except PackageNotFoundError:  # running from a source tree that is not installed
        found = "0.0.0"
    globals()["__version__"] = found
    return found

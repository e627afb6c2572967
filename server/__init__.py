"""Editor-facing side of margin: the language server, the CLI and output rendering."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("margin")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"

"""`python -m margin.server.cli`, as the console script."""

from __future__ import annotations

from . import main

if __name__ == "__main__":
    raise SystemExit(main())

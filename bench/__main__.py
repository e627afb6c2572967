"""`python -m bench`: the whole system's speed and cost in one table (`--json` for machine output).

Importing the package (bench/__init__.py, run before this module) put the bench folder on sys.path."""

from __future__ import annotations

import sys

from system_bench import main

if __name__ == "__main__":  # the test endpoint's child process imports this module too (spawn)
    sys.exit(main())

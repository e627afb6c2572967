"""margin's benchmarks: `python -m bench` prints the whole system's figures in one table (see system_bench).

The scripts here also run alone (`python bench/parse_bench.py ...`) and import each other as top-level modules
(`from stand_in import ...`), so importing this package puts its folder on sys.path; the test endpoint's child
process inherits that path and finds its rules module ("review_bench:scripted_rules") the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path

FOLDER = str(Path(__file__).resolve().parent)
if FOLDER not in sys.path:
    sys.path.insert(0, FOLDER)

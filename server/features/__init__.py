"""The editor's features, in the order their diagnostics and code actions are listed. Adding a feature is one
module in this package and one entry here (see base.py for the hooks a feature may use)."""

from __future__ import annotations

from .base import Command, Feature
from .grades import ParagraphGrades
from .readability import Readability
from .review import Review
from .rewrites import Rewrites
from .status import Status

FEATURES: tuple[type[Feature], ...] = (Readability, Review, Rewrites, Status, ParagraphGrades)

__all__ = ["FEATURES", "Command", "Feature"]

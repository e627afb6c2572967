"""Reports a person reads: a review or a readability check as one self-contained HTML page."""

from __future__ import annotations

from .html import ReportManuscript, ReportOptions, html_report

__all__ = ["ReportManuscript", "ReportOptions", "html_report"]

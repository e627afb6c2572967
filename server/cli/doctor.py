"""`margin doctor`: which LLM endpoints and models answer, and the cache."""

from __future__ import annotations

import argparse
import sys

from margin.workflows.llm.doctor import diagnose

from ..render import render_doctor
from . import exit_status
from .shared import settings_for, with_models


def run(arguments: argparse.Namespace) -> int:
    report = with_models(diagnose(settings_for(arguments).llm_config()))
    print(render_doctor(report))
    if not report.ok:
        reason = report.endpoints[0].error if report.endpoints else "no endpoint configured"
        print(f"margin: no usable LLM endpoint: {reason}", file=sys.stderr)
        return exit_status.NO_MODEL
    return exit_status.OK

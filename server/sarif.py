"""Findings as SARIF 2.1.0, one rule per weakness type, so they show in code-scanning tools."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import quote

from margin.workflows.feedback.types import WeaknessType

from . import __version__

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

_RULE_TEXT = {
    WeaknessType.REPLICABILITY: "The work could not be reproduced from what is written.",
    WeaknessType.ORIGINALITY: "The contribution or its relation to prior work is not clear.",
    WeaknessType.SOUNDNESS: "A claim is not supported by the evidence or the reasoning.",
    WeaknessType.COMPARISON: "A relevant comparison is missing or unfair.",
    WeaknessType.SUBSTANCE: "The text lacks depth or detail where it matters.",
}


def rules() -> list[dict[str, Any]]:
    return [
        {
            "id": label.code,
            "name": label.value.replace(" ", ""),
            "shortDescription": {"text": label.value},
            "fullDescription": {"text": _RULE_TEXT[label]},
            "defaultConfiguration": {"level": "warning"},
        }
        for label in WeaknessType
    ]


def sarif_log(findings: list[dict[str, Any]]) -> dict[str, Any]:
    """`findings` are the CLI's JSON findings (file, range with zero-based UTF-16 positions, label, ...)."""
    results = []
    for finding in findings:
        label = WeaknessType(finding["label"])
        start, end = finding["range"]["start"], finding["range"]["end"]
        fingerprint = hashlib.sha256(
            f"{finding['paragraph_id']}\x1f{label.value}\x1f{finding['quote']}".encode()
        ).hexdigest()
        results.append(
            {
                "ruleId": label.code,
                "level": "warning",
                "message": {"text": finding["review"]},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": quote(finding["file"].replace("\\", "/"))},
                            "region": {
                                "startLine": start["line"] + 1,
                                "startColumn": start["character"] + 1,
                                "endLine": end["line"] + 1,
                                "endColumn": end["character"] + 1,
                                "snippet": {"text": finding["quote"]},
                            },
                        }
                    }
                ],
                "partialFingerprints": {"marginFinding/v1": fingerprint},
                "properties": {"reasoning": finding["reasoning"]},
            }
        )
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "margin",
                        "version": __version__,
                        "informationUri": "https://pypi.org/project/margin/",
                        "rules": rules(),
                    }
                },
                "columnKind": "utf16CodeUnits",
                "results": results,
            }
        ],
    }

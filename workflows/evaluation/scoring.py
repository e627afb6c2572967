"""The papers' metrics over a run's predictions, per method."""

from __future__ import annotations

from statistics import mean
from typing import Any

from margin.workflows.feedback.types import WeaknessType
from margin.workflows.registry import AGENTSIMP, FEEDBACK, LAY, SOMS

from . import metrics
from .datasets import Example

# How SWIF2T's Table 5 names the weakness types in its F1 columns.
F1_KEYS = {
    WeaknessType.SOUNDNESS.value: "f1_soundness",
    WeaknessType.COMPARISON.value: "f1_meaningful_comparison",
    WeaknessType.REPLICABILITY.value: "f1_replicability",
    WeaknessType.ORIGINALITY.value: "f1_originality",
    WeaknessType.SUBSTANCE.value: "f1_substance",
}
LOWER_IS_BETTER = frozenset({"fkgl", "ari", "cli", "dcrs", "average"})


def score(method: str, examples: list[Example], records: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Aggregate metrics over the examples that have a record (a failed example counts with its output: the
    source text for a rewrite that was not made, nothing for an article or review that was not written)."""
    scored = [example for example in examples if example.id in records]
    if not scored:
        return {}
    predictions = [str(records[example.id].get("prediction") or "") for example in scored]
    if method == LAY:
        return _readability(predictions)
    if method == SOMS:
        sources = [example.text("source") for example in scored]
        references = [example.texts("references") for example in scored]
        parts = metrics.sari(sources, predictions, references)
        # The keep / delete / add parts, as the SoMS paper's Table 2 and Figure 2b report them.
        result = {"sari": parts["sari"], "sari_keep": parts["keep"], "sari_delete": parts["delete"]}
        result["sari_add"] = parts["add"]
        result.update(_pick(metrics.readability(predictions), "fkgl", "ari"))
        result["bleu"] = metrics.bleu(predictions, references)
        # Against every reference, as BLEU and SARI are: the best-scoring one counts per example.
        result.update(_pick(metrics.rouge(predictions, references), "rouge1", "rouge2"))
        return result
    if method == AGENTSIMP:
        sources = ["\n\n".join(example.texts("source")) for example in scored]
        references = [example.texts("references") for example in scored]
        return {
            "sari": metrics.sari(sources, predictions, references)["sari"],
            "d_sari": metrics.d_sari(sources, predictions, references)["d_sari"],
            "fkgl": metrics.readability(predictions)["fkgl"],
        }
    if method == FEEDBACK:
        gold = [_label(example.text("label")) for example in scored]
        predicted = [_label(str(records[example.id].get("label") or "")) for example in scored]
        labels = list(F1_KEYS)
        labelled = metrics.label_scores(gold, predicted, labels)
        result = {"label_accuracy": labelled["accuracy"]}
        result.update({F1_KEYS[label]: value for label, value in labelled["f1"].items()})
        reviews = [example.text("review") for example in scored]
        result["meteor"] = metrics.meteor(predictions, reviews)
        result["bleu4"] = metrics.bleu(predictions, [[review] for review in reviews])
        result["rougeL"] = metrics.rouge(predictions, reviews)["rougeL"]
        return result
    raise ValueError(f"unknown method {method!r}")


def _label(value: str) -> str | None:
    parsed = WeaknessType.parse(value) if value else None
    return parsed.value if parsed else None


def _pick(values: dict[str, float], *keys: str) -> dict[str, float]:
    return {key: values[key] for key in keys}


def _readability(texts: list[str]) -> dict[str, float]:
    written = [text for text in texts if text.strip()]
    if not written:
        return {}
    values = metrics.readability(written)
    result = _pick(values, "cli", "fkgl", "dcrs")
    result["average"] = mean(result.values())
    return result


def readability_by_iteration(records: dict[str, dict[str, Any]]) -> dict[int, dict[str, float]]:
    """JRE-L's Figure 4: mean readability of the articles at each iteration (0 = first draft)."""
    by_iteration: dict[int, list[dict[str, float]]] = {}
    for record in records.values():
        for entry in record.get("iterations") or []:
            by_iteration.setdefault(int(entry["iteration"]), []).append(entry)
    return {
        iteration: {key: mean(float(entry[key]) for entry in entries) for key in ("fkgl", "cli", "dcrs")}
        for iteration, entries in sorted(by_iteration.items())
    }

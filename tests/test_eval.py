"""The evaluation harness: adapters on the shared samples, and `margin eval` end to end on the scripted endpoint
(metrics computed, papers' figures beside them, outputs written, a second run resumes without model calls)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from margin.server.cli import main
from margin.server.cli.exit_status import NO_MODEL
from margin.testing.scripted_agents import rewrite_rules
from margin.testing.scripted_endpoint import Reply, Rule, ScriptedEndpoint
from margin.workflows.evaluation.datasets import (
    AGENTSIMP,
    FEEDBACK,
    LAY,
    SOMS,
    DatasetError,
    detokenize,
    load_examples,
    paragraphs_of,
)

from conftest import SCRIPTED_MODEL, ScriptedFactory

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
COCHRANE, LAYSUMM = SHARED / "cochrane", SHARED / "laysumm"
needs_shared = pytest.mark.skipif(not COCHRANE.is_dir(), reason="../shared/data is not beside the repository")


# -- adapters -----------------------------------------------------------------------------------------------------


@needs_shared
def test_cochrane_pairs_become_simplification_examples_keyed_by_doi() -> None:
    examples = load_examples(COCHRANE, SOMS)
    assert all(example.fields["domain"] == "medical" for example in examples)  # the paper's medical prompts
    assert len(examples) == 411
    first = examples[0]
    assert first.id == "10.1002/14651858.CD000370"
    assert first.text("source").startswith("Fifty-four trials enrolling 6545 patients were included.")
    [reference] = first.texts("references")
    assert reference and reference != first.text("source")


@needs_shared
def test_cochrane_sources_are_split_into_paragraphs_for_document_simplification() -> None:
    example = load_examples(COCHRANE, AGENTSIMP)[0]
    paragraphs = example.texts("source")
    assert len(paragraphs) > 1
    assert " ".join(paragraphs) == " ".join(load_examples(COCHRANE, SOMS)[0].text("source").split())


@needs_shared
def test_lay_summaries_are_read_once_per_article_and_detokenized() -> None:
    examples = load_examples(LAYSUMM, LAY)
    assert len(examples) == 20  # 10 eLife + 10 PLOS, each rated by two annotators
    assert sum(example.id.startswith("elife") for example in examples) == 10
    paper = examples[0].text("paper")
    assert " ," not in paper and "( " not in paper
    assert examples[0].text("reference")


def test_detokenize_and_paragraphs() -> None:
    assert detokenize("protein ( FAP ) , in vivo .") == "protein (FAP), in vivo."
    assert paragraphs_of("One. Two. Three. Four.", 3) == ["One. Two. Three.", "Four."]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "a", "source": "x"}'], "lacks references"),
        (['{"id": "a", "source": "x", "references": ["y"]}'] * 2, "appears twice"),
        (["not json"], ":1: not JSON"),
        (['{"source": "x", "references": ["y"]}'], "has no id"),
    ],
)
def test_bad_datasets_are_refused_with_the_line_and_the_reason(
    tmp_path: Path, lines: list[str], message: str
) -> None:
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=message):
        load_examples(dataset, SOMS)


# -- margin eval end to end ---------------------------------------------------------------------------------------


def run_eval(endpoint: ScriptedEndpoint, *arguments: str) -> int:
    return main(
        ["eval", *arguments, "--endpoint", endpoint.base_url, "--model", SCRIPTED_MODEL, "--no-cache"]
    )


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


SIMPLIFICATION = [
    {
        "id": "s1",
        "source": "However, the intervention substantially reduced mortality in numerous trials.",
        "references": ["But the treatment cut deaths a lot in many trials."],
    },
    {
        "id": "s2",
        "source": "Consequently, clinicians should utilize the drug with caution in older patients.",
        "references": ["So doctors should use the drug carefully in older people."],
    },
]


def test_soms_eval_reports_the_papers_metrics_beside_table_1_and_resumes(
    scripted: ScriptedFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = scripted(*rewrite_rules())
    dataset = write_jsonl(tmp_path / "pairs.jsonl", SIMPLIFICATION)
    out = tmp_path / "out"

    assert run_eval(endpoint, SOMS, "--dataset", str(dataset), "--out", str(out)) == 0

    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["completed"] == 2 and summary["examples"] == 2
    assert set(summary["metrics"]) == {
        *("sari", "sari_keep", "sari_delete", "sari_add"),
        *("fkgl", "ari", "bleu", "rouge1", "rouge2"),
    }
    metrics = summary["metrics"]
    parts = (metrics["sari_keep"] + metrics["sari_delete"] + metrics["sari_add"]) / 3
    assert abs(parts - metrics["sari"]) < 0.02  # SARI is the mean of its parts
    assert 0 < summary["metrics"]["sari"] <= 100
    assert summary["paper"]["rows"]["Society of Medical Simplifiers"]["sari"] == 40.04
    records = [
        json.loads(line) for line in (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert {record["id"] for record in records} == {"s1", "s2"}
    assert (
        records[0]["prediction"] != SIMPLIFICATION[0]["source"]
        or records[1]["prediction"] != SIMPLIFICATION[1]["source"]
    )
    table = capsys.readouterr().out
    assert "| margin (this run) |" in table and "| Society of Medical Simplifiers (paper) | 40.04" in table
    assert (out / "report.md").read_text(encoding="utf-8") in table + "\n"

    calls = len(endpoint.calls())
    assert run_eval(endpoint, SOMS, "--dataset", str(dataset), "--out", str(out)) == 0
    assert len(endpoint.calls()) == calls  # finished examples are not recomputed
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["resumed"] == 2


def test_an_example_cut_short_by_a_killed_run_is_run_again(scripted: ScriptedFactory, tmp_path: Path) -> None:
    endpoint = scripted(*rewrite_rules())
    out = tmp_path / "out"
    first = write_jsonl(tmp_path / "first.jsonl", SIMPLIFICATION[:1])
    assert run_eval(endpoint, SOMS, "--dataset", str(first), "--out", str(out)) == 0
    with (out / "predictions.jsonl").open("a", encoding="utf-8") as predictions:
        predictions.write('{"id": "s2", "predi')  # the run was killed while writing s2
    before = len(endpoint.calls())
    dataset = write_jsonl(tmp_path / "pairs.jsonl", SIMPLIFICATION)

    assert run_eval(endpoint, SOMS, "--dataset", str(dataset), "--out", str(out)) == 0

    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (summary["completed"], summary["resumed"]) == (2, 1)
    prompts = [request.prompt for request in endpoint.calls()[before:]]
    assert prompts and not any("reduced mortality" in prompt for prompt in prompts)  # s1 was kept
    assert any("older patients" in prompt for prompt in prompts)  # s2 ran again


def test_an_example_that_names_the_medical_domain_gets_the_papers_medical_prompts(
    scripted: ScriptedFactory, tmp_path: Path
) -> None:
    endpoint = scripted(*rewrite_rules())
    medical = [{**SIMPLIFICATION[0], "domain": "medical"}]
    dataset = write_jsonl(tmp_path / "pairs.jsonl", medical)
    assert run_eval(endpoint, SOMS, "--dataset", str(dataset), "--out", str(tmp_path / "out")) == 0
    prompts = [request.prompt for request in endpoint.calls()]
    assert any("medical text" in prompt for prompt in prompts)
    assert not any("scientific text" in prompt for prompt in prompts)


def test_a_resumed_run_with_other_settings_runs_every_example_again(
    scripted: ScriptedFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = scripted(*rewrite_rules())
    dataset = write_jsonl(tmp_path / "pairs.jsonl", SIMPLIFICATION)
    out = tmp_path / "out"
    assert run_eval(endpoint, SOMS, "--dataset", str(dataset), "--out", str(out)) == 0
    calls = len(endpoint.calls())
    capsys.readouterr()

    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"margin": {"llm": {"temperature": 0.9}}}), encoding="utf-8")
    assert (
        run_eval(endpoint, SOMS, "--dataset", str(dataset), "--out", str(out), "--settings", str(settings))
        == 0
    )
    assert "2 earlier prediction(s)" in capsys.readouterr().err
    assert len(endpoint.calls()) > calls  # recomputed under the new settings, not mixed into one report
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (summary["completed"], summary["resumed"]) == (2, 0)


def test_the_table_says_where_a_figure_is_not_comparable_with_the_papers(
    scripted: ScriptedFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = scripted(*rewrite_rules())
    dataset = write_jsonl(tmp_path / "pairs.jsonl", SIMPLIFICATION)
    assert run_eval(endpoint, SOMS, "--dataset", str(dataset), "--out", str(tmp_path / "out")) == 0
    table = capsys.readouterr().out
    assert "| bleu† ↑ |" in table
    assert "† Not comparable with the paper's bleu: corpus sacreBLEU here" in table


def test_a_run_whose_model_is_down_exits_3_scores_nothing_and_is_retried_next_time(
    scripted: ScriptedFactory, tmp_path: Path, dead_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = write_jsonl(tmp_path / "pairs.jsonl", SIMPLIFICATION)
    out = tmp_path / "out"
    arguments = ["eval", SOMS, "--dataset", str(dataset), "--out", str(out), "--model", SCRIPTED_MODEL]
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"margin": {"llm": {"retries": 0}}}), encoding="utf-8")

    assert main([*arguments, "--endpoint", dead_url, "--no-cache", "--settings", str(settings)]) == NO_MODEL
    err = capsys.readouterr().err
    assert "no model answered" in err and "2 of 2 example(s) failed and are not scored" in err
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["completed"] == 0

    endpoint = scripted(*rewrite_rules())  # the model is back: the failed examples run now
    assert run_eval(endpoint, *arguments[1:6]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (summary["completed"], summary["resumed"]) == (2, 0)
    assert endpoint.calls()


def test_lay_eval_reports_readability_and_plots_it_per_iteration(
    scripted: ScriptedFactory, tmp_path: Path
) -> None:
    endpoint = scripted(*rewrite_rules())
    dataset = write_jsonl(
        tmp_path / "papers.jsonl",
        [
            {
                "id": "p1",
                "title": "Sparse retrieval for trial screening",
                "paper": "Screening randomized controlled trial reports is one of the slowest steps in evidence "
                "synthesis. We introduce a sparse retriever that allocates its vocabulary budget per section. "
                "It improves work saved over sampling by 6.8 points over the strongest sparse baseline.",
            }
        ],
    )
    out = tmp_path / "out"

    assert run_eval(endpoint, LAY, "--dataset", str(dataset), "--out", str(out), "--limit", "1") == 0

    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert set(summary["metrics"]) == {"cli", "fkgl", "dcrs", "average"}
    [record] = [
        json.loads(line) for line in (out / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert [entry["iteration"] for entry in record["iterations"]] == [0, 1, 2, 3]
    assert (out / "readability_by_iteration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_agentsimp_eval_reports_sari_d_sari_and_fkgl(scripted: ScriptedFactory, tmp_path: Path) -> None:
    endpoint = scripted(*rewrite_rules())
    dataset = write_jsonl(
        tmp_path / "documents.jsonl",
        [
            {
                "id": "d1",
                "source": ["However, the results were substantially better.", "Therefore, we recommend it."],
                "references": ["But the results were much better. So we recommend it."],
            }
        ],
    )
    assert run_eval(endpoint, AGENTSIMP, "--dataset", str(dataset), "--out", str(tmp_path / "out")) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert set(summary["metrics"]) == {"sari", "d_sari", "fkgl"}


def test_feedback_eval_scores_labels_and_review_similarity(scripted: ScriptedFactory, tmp_path: Path) -> None:
    paragraph = "We tuned the threshold on the test set and report results for a single random seed only."
    reviewer = Rule(
        role="reviewer",
        replies=[
            Reply(
                json={
                    "findings": [
                        {
                            "quote": "tuned the threshold on the test set",
                            "label": "Replicability",
                            "review": "Tune the threshold on a validation set and report several seeds.",
                            "reasoning": "Test-set tuning inflates the results.",
                        }
                    ]
                }
            )
        ],
    )
    endpoint = scripted(reviewer)
    dataset = write_jsonl(
        tmp_path / "reviews.jsonl",
        [
            {
                "id": "r1",
                "paragraph": paragraph,
                "review": "Report results over several random seeds.",
                "label": "Replicability",
            },
            {
                "id": "r2",
                "paragraph": paragraph,
                "review": "Compare with a tuned baseline.",
                "label": "Meaningful Comparison",
            },
        ],
    )
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"review": {"mode": "single"}}), encoding="utf-8")
    out = tmp_path / "out"
    assert (
        run_eval(
            endpoint, FEEDBACK, "--dataset", str(dataset), "--out", str(out), "--settings", str(settings)
        )
        == 0
    )
    metrics = json.loads((out / "summary.json").read_text(encoding="utf-8"))["metrics"]
    assert metrics["label_accuracy"] == 50.0
    assert metrics["f1_replicability"] > 0 and metrics["f1_meaningful_comparison"] == 0
    assert {"meteor", "bleu4", "rougeL"} <= set(metrics)


def test_a_bad_dataset_is_a_usage_error_without_model_calls(
    scripted: ScriptedFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = scripted(*rewrite_rules())
    dataset = write_jsonl(tmp_path / "bad.jsonl", [{"id": "x", "source": "only a source"}])
    assert run_eval(endpoint, SOMS, "--dataset", str(dataset)) == 2
    assert "lacks references" in capsys.readouterr().err
    assert endpoint.calls() == []

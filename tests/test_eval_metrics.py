"""Evaluation metrics against published and hand-worked values, and proof that none of them downloads anything."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import textstat

from margin.workflows.evaluation.metrics import (
    bleu,
    bleu4,
    d_sari,
    label_scores,
    meteor,
    readability,
    rouge,
    sari,
)

# ---------------------------------------------------------------------------------------------------------------
# SARI

# The example in HuggingFace evaluate's SARI documentation (from Xu et al. 2016), with its published score.
SARI_SOURCE = "About 95 species are currently accepted."
SARI_PREDICTION = "About 95 you now get in."
SARI_REFERENCES = [
    "About 95 species are currently known.",
    "About 95 species are now accepted.",
    "95 species are now accepted.",
]

# A small case worked by hand below: 13a tokens "cats eat fish daily ." and "cats eat meat .".
SOURCE = "Cats eat fish daily."
REFERENCE = "Cats eat meat."


def test_sari_matches_the_huggingface_documentation_example() -> None:
    result = sari([SARI_SOURCE], [SARI_PREDICTION], [SARI_REFERENCES])
    assert result["sari"] == pytest.approx(26.953601953601954, abs=1e-9)
    assert (result["keep"] + result["delete"] + result["add"]) / 3 == pytest.approx(result["sari"])


def test_sari_of_the_reference_itself_is_100() -> None:
    # Kept, deleted and added n-grams are all exactly the reference's; where an order has none of one kind
    # (no 3-gram is kept), evaluate's convention 0/0 = 1 applies.
    result = sari([SOURCE], [REFERENCE], [[REFERENCE]])
    assert result == pytest.approx({"sari": 100.0, "keep": 100.0, "delete": 100.0, "add": 100.0})


def test_sari_of_the_unchanged_source() -> None:
    # keep F1 by order: n=1 P 3/5 R 3/3 -> 0.75; n=2 P 1/4 R 1/1 -> 0.4; n=3 and n=4 P 0 -> 0.
    # Nothing deleted: precision 0/0 = 1 at every order. Nothing added while "meat" should be: F1 0.
    result = sari([SOURCE], [SOURCE], [[REFERENCE]])
    keep = (0.75 + 0.4) / 4
    assert result["keep"] == pytest.approx(100 * keep)
    assert result["delete"] == pytest.approx(100.0)
    assert result["add"] == pytest.approx(0.0)
    assert result["sari"] == pytest.approx(100 * (keep + 1) / 3)  # 42.916...


def test_sari_of_an_empty_prediction() -> None:
    # Keep: n=1 and n=2 have keepable n-grams and none kept (F1 0); n=3 and n=4 have none to keep, so 0/0 = 1.
    # Delete (everything): n=1 2/5 wrong-to-keep ("fish", "daily"), n=2 3/4, n=3 and n=4 all 1. Add: 0.
    result = sari([SOURCE], [""], [[REFERENCE]])
    assert result["keep"] == pytest.approx(50.0)
    assert result["delete"] == pytest.approx(100 * (0.4 + 0.75 + 1 + 1) / 4)
    assert result["add"] == pytest.approx(0.0)
    assert result["sari"] == pytest.approx(100 * (0.5 + 0.7875) / 3)


def test_sari_lowercases_and_averages_sentences_over_the_corpus() -> None:
    shouted = sari([SOURCE.upper()], [REFERENCE.upper()], [[REFERENCE]])
    assert shouted["sari"] == pytest.approx(100.0)
    corpus = sari([SOURCE, SARI_SOURCE], [REFERENCE, SARI_PREDICTION], [[REFERENCE], SARI_REFERENCES])
    assert corpus["sari"] == pytest.approx((100 + 26.953601953601954) / 2)


def test_sari_rejects_inputs_that_are_not_parallel() -> None:
    with pytest.raises(ValueError, match="lengths differ"):
        sari([SOURCE], [SOURCE, SOURCE], [[REFERENCE]])
    with pytest.raises(ValueError, match="at least one reference"):
        sari([SOURCE], [SOURCE], [[]])
    with pytest.raises(ValueError, match="nothing to score"):
        sari([], [], [])


# ---------------------------------------------------------------------------------------------------------------
# D-SARI, worked by hand with Xu's conventions (0/0 = 0, keep recall a mean of per-n-gram ratios)


def test_d_sari_without_penalties() -> None:
    # Input "cats eat fish daily ." (I=5); output = reference = "cats eat meat ." (O=R=4); one sentence each,
    # so LP1 = LP2 = SLP = 1. Kept n-grams exist only for n=1 and n=2 (keep 1, 1, 0, 0); something is deleted
    # and something correctly added at every order (1 each).
    result = d_sari([SOURCE], [REFERENCE], [[REFERENCE]])
    assert result == pytest.approx({"d_sari": 100 * 2.5 / 3, "keep": 50.0, "delete": 100.0, "add": 100.0})


def test_d_sari_penalizes_an_output_longer_than_the_reference() -> None:
    # Output = input (O=5 > R=4): LP2 = exp((4 - 5) / max(5 - 4, 1)) = exp(-1) on keep and delete.
    # keep F1: n=1 P 3/5, R 1 -> 0.75; n=2 P 1/4, R 1 -> 0.4; n=3, n=4 -> 0. Nothing deleted or added: 0.
    result = d_sari([SOURCE], [SOURCE], [[REFERENCE]])
    keep = (0.75 + 0.4) / 4 * math.exp(-1)
    assert result == pytest.approx({"d_sari": 100 * keep / 3, "keep": 100 * keep, "delete": 0.0, "add": 0.0})


def test_d_sari_penalizes_a_short_output_with_too_few_sentences() -> None:
    source = "Cats eat fish. Dogs bark loudly."  # cats eat fish . dogs bark loudly .   I = 8
    reference = "Cats eat fish. Dogs woof."  # cats eat fish . dogs woof .          R = 7, 2 sentences
    prediction = "Cats woof."  # cats woof .                          O = 3, 1 sentence
    brevity = math.exp((3 - 7) / 3)  # LP1, on add
    sentences = math.exp(-1 / 2)  # SLP = exp(-|2 - 1| / max(2, 1)), on keep; LP2 = 1
    # keep: n=1 kept {cats, .}, all right: P 1; keepable cats 1, eat 1, fish 1, ". " 2, dogs 1: R (1 + 1/2) / 5.
    #       n>=2 nothing kept: 0.
    keep = 2 * 1 * 0.3 / 1.3 / 4
    # delete: n=1 deleted eat, fish, one ".", dogs, bark, loudly; only bark and loudly are not in the reference.
    #         n=2 3/7 (dogs bark, bark loudly, loudly .); n=3 3/6; n=4 3/5.
    delete = (2 / 6 + 3 / 7 + 3 / 6 + 3 / 5) / 4
    # add: n=1 {woof}: F1 1; n=2 {cats woof, woof .} against {dogs woof, woof .}: P = R = 1/2; n=3 wrong; n=4 none.
    add = (1 + 0.5) / 4
    result = d_sari([source], [prediction], [[reference]])
    assert result["keep"] == pytest.approx(100 * keep * sentences)
    assert result["delete"] == pytest.approx(100 * delete)
    assert result["add"] == pytest.approx(100 * add * brevity)
    assert result["d_sari"] == pytest.approx(100 * (keep * sentences + delete + add * brevity) / 3)


def test_d_sari_reproduces_the_authors_example() -> None:
    # The example in the main() of the authors' D_SARI.py; expected values are what that script prints when its
    # nltk.sent_tokenize (which needs the downloadable Punkt model) is given the offline splitter used here.
    source = (
        "marengo is a town in and the county seat of iowa county , iowa , united states . it has served as the "
        "county seat since august 1845 , even though it was not incorporated until july 1859 . the population "
        "was 2,528 in the 2010 census , a decline from 2,535 in 2000 ."
    )
    reference = "marengo is a city in iowa in the US . the population was 2,528 in 2010 ."
    outputs_and_scores = [
        ("in the US . 2,528 in 2010 .", 42.80200653372474),
        (
            "marengo is a town in iowa , united states . in 2010 , the population was 2,528 .",
            48.69255617475009,
        ),
    ]
    for output, expected in outputs_and_scores:
        assert d_sari([source], [output], [[reference]])["d_sari"] == pytest.approx(expected, abs=1e-9)


def test_d_sari_truncates_the_mean_reference_length_and_survives_empty_texts() -> None:
    # References of 4 and 5 tokens: R = int(4.5) = 4 = O, so LP1 = 1 (with R = 4.5 it would be exp(-1/8)).
    # add F1 by order, every added n-gram right (P = 1), recall over the references' new n-grams:
    # n=1 1/2 ("meat" of meat, some), n=2 2/4, n=3 2/5, n=4 1/3.
    result = d_sari([SOURCE], [REFERENCE], [[REFERENCE, "Cats eat some meat."]])
    add = (2 / 3 + 2 / 3 + 4 / 7 + 1 / 2) / 4
    assert result["add"] == pytest.approx(100 * add)
    empty = d_sari([""], [""], [[""]])  # no sentences anywhere: SLP is 1, not a division by zero
    assert all(math.isfinite(value) for value in empty.values())


# ---------------------------------------------------------------------------------------------------------------
# BLEU, ROUGE, METEOR


def test_bleu_of_identical_texts_is_100() -> None:
    texts = ["The cat sat on the mat.", "It was warm and the dog slept nearby."]
    assert bleu(texts, [[text] for text in texts]) == pytest.approx(100.0)
    assert bleu(texts, texts) == pytest.approx(100.0)  # one reference may be given as a plain string
    assert bleu4 is bleu


def test_bleu_matches_the_sacrebleu_readme_example() -> None:
    # sacrebleu's README: BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ...) for these two reference streams.
    predictions = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]
    references = [
        ["The dog bit the man.", "The dog had bit the man."],
        ["It was not unexpected.", "No one was surprised."],
        ["The man bit him first.", "The man had bitten the dog."],
    ]
    assert round(bleu(predictions, references), 2) == 48.53


def test_bleu_takes_a_different_number_of_references_per_prediction() -> None:
    predictions = ["The dog bit the man.", "It was warm."]
    ragged = [["Something else entirely.", "The dog bit the man."], ["It was warm."]]
    assert bleu(predictions, ragged) == pytest.approx(100.0)


def test_rouge_of_identical_texts_is_100() -> None:
    text = "The cat sat on the mat."
    assert rouge([text], [text]) == pytest.approx({"rouge1": 100.0, "rouge2": 100.0, "rougeL": 100.0})


def test_rouge_worked_by_hand() -> None:
    # Six words each, five shared (the x2, cat, on, mat); bigrams shared: "the cat", "on the", "the mat" of 5;
    # longest common subsequence "the cat on the mat", 5 words.
    result = rouge(["the cat sat on the mat"], ["the cat lay on the mat"])
    assert result == pytest.approx({"rouge1": 500 / 6, "rouge2": 60.0, "rougeL": 500 / 6})
    # Porter stemming: cats/cat and running/runs match.
    assert rouge(["cats running"], ["cat runs"])["rouge2"] == pytest.approx(100.0)
    # Against two references the better one counts; examples are averaged.
    two = rouge(["the cat sat on the mat", "x"], [["a dog", "the cat sat on the mat"], "y"])
    assert two["rouge1"] == pytest.approx(50.0)


def test_meteor_of_identical_texts_is_nearly_100() -> None:
    # P = R = 1, one chunk over six matches: penalty 0.5 * (1/6)^3.
    assert meteor(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(
        100 * (1 - 0.5 / 216)
    )


def test_meteor_worked_by_hand() -> None:
    # Exact matches: 3 of 3 predicted, 3 of 6 reference words, one chunk.
    # Fmean = P R / (0.9 P + 0.1 R) = 0.5 / 0.95; penalty 0.5 * (1/3)^3.
    partial = meteor(["the cat sat"], ["the cat sat on a mat"])
    assert partial == pytest.approx(100 * 0.5 / 0.95 * (1 - 0.5 / 27))
    # "cats" matches "cat" by Porter stem: four matches in one chunk.
    assert meteor(["The cats sat."], ["the cat sat."]) == pytest.approx(100 * (1 - 0.5 / 64))
    # No WordNet: "big" and "large" do not match, leaving 2 of 3 words in 2 chunks: (2/3) * (1 - 0.5).
    assert meteor(["the big dog"], ["the large dog"]) == pytest.approx(100 / 3)


# ---------------------------------------------------------------------------------------------------------------
# Readability and labels

EASY = "The cat sat on the mat. It was warm. We liked it."
HARD = (
    "Notwithstanding the aforementioned methodological considerations, heterogeneous computational "
    "infrastructures necessitate systematically operationalised multidimensional evaluation frameworks."
)


def test_readability_is_the_mean_of_textstat_scores() -> None:
    result = readability([EASY, HARD])
    expected = {
        "fkgl": textstat.flesch_kincaid_grade,
        "ari": textstat.automated_readability_index,
        "cli": textstat.coleman_liau_index,
        "dcrs": textstat.dale_chall_readability_score,
    }
    for name, formula in expected.items():
        assert result[name] == pytest.approx((formula(EASY) + formula(HARD)) / 2), name
    assert result["average"] == pytest.approx((result["cli"] + result["fkgl"] + result["dcrs"]) / 3)
    assert readability([EASY])["fkgl"] < readability([HARD])["fkgl"]


def test_readability_leaves_out_texts_without_words() -> None:
    assert readability([EASY, "", "[math] [citation]"]) == pytest.approx(readability([EASY]))
    assert all(math.isnan(value) for value in readability(["", "  "]).values())


def test_label_scores_worked_by_hand() -> None:
    gold = ["clarity", "method", "clarity", "novelty", "method"]
    predicted = ["clarity", None, "method", "novelty", "method"]
    result = label_scores(gold, predicted, ["clarity", "method", "novelty", "ethics"])
    assert result["accuracy"] == pytest.approx(60.0)  # 3 of 5; the None counts as wrong
    # F1 = 2TP / (gold + predicted instances): clarity 2*1/(2+1), method 2*1/(2+2), novelty 2/2, ethics none.
    assert result["f1"] == pytest.approx(
        {"clarity": 200 / 3, "method": 50.0, "novelty": 100.0, "ethics": 0.0}
    )


def test_label_scores_rejects_unequal_lengths() -> None:
    with pytest.raises(ValueError, match="lengths differ"):
        label_scores(["a", "b"], ["a"], ["a", "b"])


# ---------------------------------------------------------------------------------------------------------------
# Nothing downloads

_SITECUSTOMIZE = """
import socket

def _refuse(*args, **kwargs):
    raise OSError("network access is disabled in this test")

socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
socket.create_connection = _refuse
socket.getaddrinfo = _refuse

import nltk

def _no_download(*args, **kwargs):
    raise RuntimeError("nltk.download was called")

nltk.download = _no_download
"""

_CHILD = """
import json, socket, sys
try:
    socket.create_connection(("127.0.0.1", 9), timeout=1)
except OSError:
    pass
else:
    sys.exit("the network block is not in effect")
from margin.workflows.evaluation import metrics
print(json.dumps(metrics.{call}))
"""

_OFFLINE_CALLS = {
    "sari": (sari, ([SARI_SOURCE], [SARI_PREDICTION], [SARI_REFERENCES])),
    "d_sari": (
        d_sari,
        (["Dr. Smith wrote it. It was long."], ["Dr. Smith wrote it."], [["Smith wrote it."]]),
    ),
    "bleu": (bleu, (["The cat sat on the mat."], [["The cat lay on the mat."]])),
    "rouge": (rouge, (["The cats sat on the mat."], [["The cat lay on the mat."]])),
    "meteor": (meteor, (["The cats sat on the big mat."], [["The cat lay on the large mat."]])),
    "readability": (readability, ([EASY, HARD],)),
    "label_scores": (label_scores, (["a", "b"], ["a", None], ["a", "b"])),
}


def _offline_environment(tmp_path: Path) -> dict[str, str]:
    home, nltk_data, site = tmp_path / "home", tmp_path / "nltk_data_empty", tmp_path / "site"
    for folder in (home, nltk_data, site):
        folder.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(_SITECUSTOMIZE), encoding="utf-8")
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HTTP", "HTTPS", "NLTK", "PYTHON", "XDG", "HF_"))
        and key.lower() != "all_proxy"
    }
    environment.update(
        HOME=str(home),
        NLTK_DATA=str(nltk_data),
        PYTHONPATH=str(site),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
    )
    return environment


def _flat(result: object, prefix: str = "") -> dict[str, object]:
    """A metric's result as one flat mapping ("f1/a" for nested keys), which pytest.approx can compare."""
    if not isinstance(result, dict):
        return {prefix: result}
    flat: dict[str, object] = {}
    for key, value in result.items():
        flat.update(_flat(value, f"{prefix}/{key}" if prefix else key))
    return flat


@pytest.mark.parametrize("name", sorted(_OFFLINE_CALLS))
def test_every_metric_runs_with_the_network_blocked_and_no_nltk_data(name: str, tmp_path: Path) -> None:
    function, arguments = _OFFLINE_CALLS[name]
    call = f"{name}(*{arguments!r})"
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD.format(call=call)],
        env=_offline_environment(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr
    # Approximately: SARI sums over sets, whose order changes with each process's hash seed.
    assert _flat(json.loads(completed.stdout)) == pytest.approx(_flat(function(*arguments)))
    nltk_data = tmp_path / "nltk_data_empty"
    assert list(nltk_data.iterdir()) == []
    created = [path for path in tmp_path.rglob("*") if "nltk" in path.name.lower() and path != nltk_data]
    assert created == []

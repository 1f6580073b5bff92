"""∞Bench's scoring for En.QA, Zh.QA, En.MC and En.Sum (OpenBMB/InfiniteBench ``src/compute_scores.py``).

An item is scored against every label and the best counts, as the reference does (``qa_f1_score`` takes the
max over ``ground_truths``; En.MC tests membership in the label list ``[option text, letter]``, which a max
over the two answers reproduces branch by branch; ``evaluate``'s ROUGE takes the best reference).
"""
from __future__ import annotations

import functools
from typing import Sequence

from experiments.scoring.registry import metric
from experiments.tasks.longbench.metrics import _normalize_zh, _token_f1, qa_f1

_CHOICE_PUNCT = ("\n", '"', "'", ".", ",", "?", "!", "{", "}")
_CHOICE_PREFIXES = ("answer is:", "answer:", "answer is", "option is")


@metric("infinitebench_qa_f1", reference="InfiniteBench src/compute_scores.py qa_f1_score (longbook_qa_eng)")
def infinitebench_qa_f1(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """∞Bench ``qa_f1_score``: SQuAD normalisation (lowercase, no punctuation or articles), word F1.

    The same definition as LongBench's ``qa_f1`` (the parity tests check both on the same pairs).
    """
    return qa_f1(prediction, ground_truth)


@metric("infinitebench_qa_f1_zh", reference="InfiniteBench src/compute_scores.py qa_f1_score_zh (longbook_qa_chn)")
def infinitebench_qa_f1_zh(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """∞Bench ``qa_f1_score_zh``: ``normalize_zh_answer`` on the whole string (lowercase, no Chinese or ASCII
    punctuation, no whitespace), then F1 over single characters (LongBench's ``qa_f1_zh`` uses jieba words)."""
    return _token_f1(list(_normalize_zh(prediction)), list(_normalize_zh(ground_truth)))


@metric("infinitebench_choice", reference="InfiniteBench src/compute_scores.py get_score_one_longbook_choice_eng")
def infinitebench_choice(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """∞Bench En.MC, one label at a time (the answers are ``(option text, letter)``):

    the stripped prediction's first character when it is A-D; else the whole prediction equal to the label;
    else, after replacing ``\\n " ' . , ? ! { }`` by spaces and squeezing double spaces, the text after the
    first of ``answer is:``, ``answer:``, ``answer is``, ``option is`` found (only that one is tried); else
    the first word that is a substring of ``ABCD``.
    """
    pred = prediction.strip()
    if pred == "":
        return 0.0
    if pred[0] in "ABCD":
        return float(pred[0] == ground_truth)
    if pred == ground_truth:
        return 1.0
    for ch in _CHOICE_PUNCT:
        pred = pred.replace(ch, " ")
    while "  " in pred:
        pred = pred.replace("  ", " ")
    for prefix in _CHOICE_PREFIXES:
        idx = pred.find(prefix)
        if idx == -1:
            continue
        if len(pred) < idx + len(prefix) + 1:
            return 0.0
        return float(pred[idx + len(prefix) + 1:].startswith(ground_truth))
    for word in pred.split():
        if word in "ABCD":
            return float(word == ground_truth)
    return 0.0


@functools.lru_cache(maxsize=None)
def _lsum_scorer():
    from rouge_score import rouge_scorer  # lazy; what the `evaluate` ROUGE metric wraps

    return rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=False)


@metric("infinitebench_rouge_lsum", reference="InfiniteBench src/compute_scores.py get_score_one_longbook_sum_eng")
def infinitebench_rouge_lsum(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """∞Bench En.Sum: ``evaluate.load("rouge")``'s ``rougeLsum`` F-measure (rouge_score, no stemmer; sentences
    are the lines of each text)."""
    return float(_lsum_scorer().score(ground_truth, prediction)["rougeLsum"].fmeasure)

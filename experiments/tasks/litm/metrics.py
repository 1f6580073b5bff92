"""Lost in the Middle's metrics (nelson-liu/lost-in-the-middle ``metrics.py`` and ``scripts/evaluate_*``)."""
from __future__ import annotations

from typing import Sequence

from experiments.scoring.registry import metric
from indexes.text import normalize_answer


@metric("best_subspan_em", reference="Lost in the Middle metrics.py best_subspan_em")
def best_subspan_em(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """Lost in the Middle ``best_subspan_em``: 1 when the normalised answer is a substring of the normalised prediction."""
    return float(normalize_answer(ground_truth) in normalize_answer(prediction))


@metric("litm_qa_em", reference="Lost in the Middle scripts/evaluate_qa_responses.py")
def litm_qa_em(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """Lost in the Middle ``scripts/evaluate_qa_responses.py``: ``best_subspan_em`` of ``prediction.split('\\n')[0].strip()``.

    Unlike LongBench's first-line rule, leading newlines are not skipped: an
    answer that starts with a blank line is scored on that empty line, as in
    the paper's script.
    """
    return best_subspan_em(prediction.split("\n")[0].strip(), ground_truth)


@metric("litm_kv_accuracy", reference="Lost in the Middle scripts/evaluate_kv_responses.py")
def litm_kv_accuracy(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """Lost in the Middle ``scripts/evaluate_kv_responses.py``: the value, lowercased, occurs in the whole lowercased answer.

    No first-line cut and no SQuAD normalisation (the value is a UUID).
    """
    return float(ground_truth.lower() in prediction.lower())

"""LongBench v2's answer extraction, accuracy and results table (THUDM/LongBench ``pred.py``, ``result.py``).

- ``extract_answer`` (``pred.py``): drop every ``*``, then the first ``The correct answer is (X)``,
  else the first ``The correct answer is X``, X one of A-D; otherwise no answer.
- ``longbench_v2_acc``: ``pred.py``'s ``judge``, 1 when the extracted letter is the answer, else 0 (no
  answer counts 0).
- ``longbench_v2_acc_compensated``: ``result.py`` with ``compensated = True``: a prediction with no
  extractable answer counts 0.25 (a random guess among four), a named option because the released script
  keeps it off.
- ``results_table``: ``result.py``'s Overall / Easy / Hard / Short / Medium / Long, each ``round(100 * acc /
  n, 1)``; a difficulty other than ``easy`` counts as hard, a length other than ``short`` or ``medium`` as long
  (the script's if/else chains).
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from experiments.scoring.registry import metric

_PAREN = re.compile(r"The correct answer is \(([A-D])\)")
_BARE = re.compile(r"The correct answer is ([A-D])")
COLUMNS = ("Overall", "Easy", "Hard", "Short", "Medium", "Long")
NO_ANSWER_CREDIT = 0.25


def extract_answer(response: str) -> str | None:
    """LongBench v2 ``pred.py`` ``extract_answer``: the option letter, or ``None`` when neither pattern matches."""
    response = response.replace("*", "")
    match = _PAREN.search(response) or _BARE.search(response)
    return match.group(1) if match else None


@metric("longbench_v2_acc", reference="LongBench v2 pred.py extract_answer + judge")
def longbench_v2_acc(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """LongBench v2 accuracy: 1 when ``extract_answer(prediction)`` is the answer letter (no answer scores 0)."""
    return float(extract_answer(prediction) == ground_truth)


@metric("longbench_v2_acc_compensated", reference="LongBench v2 result.py compensated=True")
def longbench_v2_acc_compensated(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """LongBench v2 accuracy with ``result.py``'s compensation: a response with no extractable answer counts 0.25."""
    pred = extract_answer(prediction)
    return NO_ANSWER_CREDIT if pred is None else float(pred == ground_truth)


def results_table(items: Iterable[tuple[float, str, str]]) -> dict[str, float]:
    """``result.py``'s row from (item score, difficulty, length) triples, in its column order.

    Item scores are the metric's (0/1, or 0.25 for a missing answer when compensated); a column
    with no items is NaN where the script would divide by zero.
    """
    sums: dict[str, float] = dict.fromkeys(COLUMNS, 0.0)
    counts: dict[str, int] = dict.fromkeys(COLUMNS, 0)
    for score, difficulty, length in items:
        level = "Easy" if difficulty == "easy" else "Hard"
        size = "Short" if length == "short" else "Medium" if length == "medium" else "Long"
        for column in ("Overall", level, size):
            sums[column] += score
            counts[column] += 1
    return {c: round(100 * sums[c] / counts[c], 1) if counts[c] else math.nan for c in COLUMNS}


def results_rows(groups: Mapping[str, Iterable[tuple[float, str, str]]]) -> list[list[str]]:
    """One ``result.py`` row per group (e.g. per arm), values formatted as the script prints them."""
    return [[name, *(str(v) if v == v else "—" for v in results_table(items).values())]
            for name, items in groups.items()]


__all__ = ["COLUMNS", "NO_ANSWER_CREDIT", "extract_answer", "results_rows", "results_table"]

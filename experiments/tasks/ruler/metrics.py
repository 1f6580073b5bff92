"""RULER's string-match scoring (NVIDIA/RULER ``scripts/eval/synthetic/constants.py``, ``scripts/eval/evaluate.py``).

A prediction is first cleaned as ``evaluate.py``'s ``postprocess_pred`` does (strip, every control
character ``\\x00-\\x1f`` becomes a newline, strip again).  Then, case-insensitively:

- ``string_match_all`` (needles, variable tracking, common and frequent words): the share of the
  references found in the prediction;
- ``string_match_part`` (QA): 1 when any reference is found.

A task's score is ``round(100 * mean, 2)``, which is the project's one aggregation.
"""
from __future__ import annotations

import re
from typing import Sequence

from experiments.scoring.registry import metric

_CONTROL = re.compile(r"[\x00-\x1f]")


def postprocess_pred(prediction: str) -> str:
    """RULER ``postprocess_pred``: strip, control characters to newlines, strip."""
    return _CONTROL.sub("\n", prediction.strip()).strip()


def _found(prediction: str, reference: str) -> float:
    return float(reference.lower() in prediction.lower())


def match_all(prediction: str, references: Sequence[str]) -> float:
    """One item of RULER ``string_match_all``: the share of ``references`` in the cleaned prediction."""
    pred = postprocess_pred(prediction)
    return sum(_found(pred, r) for r in references) / len(references) if references else 0.0


def match_part(prediction: str, references: Sequence[str]) -> float:
    """One item of RULER ``string_match_part``: 1 when any reference is in the cleaned prediction."""
    pred = postprocess_pred(prediction)
    return max((_found(pred, r) for r in references), default=0.0)


@metric("ruler_match_all", reference="RULER scripts/eval/synthetic/constants.py string_match_all", item=match_all)
def ruler_match_all(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """RULER ``string_match_all`` for one reference (an item scores the share of its references found)."""
    return _found(postprocess_pred(prediction), ground_truth)


@metric("ruler_match_part", reference="RULER scripts/eval/synthetic/constants.py string_match_part", item=match_part)
def ruler_match_part(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """RULER ``string_match_part`` for one reference (an item scores 1 when any reference is found)."""
    return _found(postprocess_pred(prediction), ground_truth)

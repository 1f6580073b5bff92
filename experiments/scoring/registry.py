"""Metrics as registered objects, and the one aggregation of item scores (LongBench's eval.py).

A metric scores one (prediction, ground truth) pair in [0, 1]; an item's
score is the max over its answers, starting from 0; a dataset's score is
``round(100 * sum / n, 2)`` with a sequential sum (``score_predictions``).
A metric that reports named parts (L-Eval's ROUGE-1/2/L) may set its own
dataset aggregate from the part means (``aggregate_parts``).

A new metric is one file: decorate a function with ``@metric("name",
reference=...)`` and name the module in its benchmark's ``metrics`` (or register it under the entry-point group
``ctxcomp.metrics``, or import it before the run).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from core.registry import Registry

LONGBENCH_E_BUCKETS = ("0-4k", "4-8k", "8k+")
PartsFn = Callable[[str, str], Mapping[str, float]]
ItemFn = Callable[[str, Sequence[str]], float]


@dataclass(frozen=True)
class Metric:
    """One metric: ``score(prediction, ground_truth, *, all_classes=())`` in [0, 1], and where it comes from.

    ``parts``: named sub-scores per pair (each maxed over answers separately,
    as L-Eval does); ``aggregate_parts``: the dataset score in [0, 1] from the
    mean of each part.  Without them a dataset score is the mean item score.
    ``item``: where a reference scores an item on all its answers at once
    (RULER's share of the answers found), ``item(prediction, answers)``
    replaces the max over answers.  ``uses_classes``: the metric reads the example's class list
    (``all_classes``), which lives in the data, not in a prediction line.
    """

    name: str
    score: Callable[..., float]
    reference: str = ""
    parts: PartsFn | None = None
    aggregate_parts: Callable[[Mapping[str, float]], float] | None = None
    doc: str = field(default="", compare=False)
    item: ItemFn | None = None
    uses_classes: bool = False

    def __call__(self, prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
        return self.score(prediction, ground_truth, all_classes=all_classes)


def _benchmark_metrics() -> None:
    """Each benchmark registers its own metrics (``experiments/tasks/<benchmark>/metrics.py``) when it is found."""
    from experiments.tasks.benchmark import benchmarks

    benchmarks()


METRICS: Registry[Metric] = Registry("metrics", Metric, discover=_benchmark_metrics)


def metric(name: str, *, reference: str, parts: PartsFn | None = None,
           aggregate_parts: Callable[[Mapping[str, float]], float] | None = None,
           item: ItemFn | None = None, uses_classes: bool = False) -> Callable[[Callable[..., float]], Metric]:
    """Register a scoring function as the metric ``name``; the decorated name becomes the ``Metric``."""

    def wrap(fn: Callable[..., float]) -> Metric:
        made = Metric(name, fn, reference, parts, aggregate_parts, (fn.__doc__ or "").strip().split("\n")[0], item,
                      uses_classes)
        METRICS.add(name, made)
        return made

    return wrap


def get_metric(name: str) -> Metric:
    """A metric by name; ``UnknownComponentError`` with close names on a typo.

    The built-in metrics register when ``experiments.scoring`` is imported,
    which importing this module already does.
    """
    return METRICS.get(name)


@dataclass(frozen=True)
class ItemScore:
    """One item's score in [0, 1] and, for metrics with parts, each part (max over answers)."""

    value: float
    parts: Mapping[str, float] = field(default_factory=dict)


def first_line(prediction: str) -> str:
    """LongBench eval.py for trec/triviaqa/samsum/lsht: ``prediction.lstrip('\\n').split('\\n')[0]``."""
    return prediction.lstrip("\n").split("\n")[0]


def score_item(prediction: str, answers: Sequence[str], *, metric: str, all_classes: Sequence[str] = (),
               first_line_only: bool = False) -> ItemScore:
    """Max over answers, starting from 0 (so an item without answers scores 0), as LongBench's scorer."""
    fn = get_metric(metric)
    if first_line_only:
        prediction = first_line(prediction)
    classes = tuple(all_classes or ())
    if fn.item is not None:
        return ItemScore(fn.item(prediction, tuple(answers)))
    best = 0.0
    for answer in answers:
        best = max(best, fn(prediction, answer, all_classes=classes))
    if fn.parts is None:
        return ItemScore(best)
    parts: dict[str, float] = {}
    for answer in answers:
        for key, value in fn.parts(prediction, answer).items():
            parts[key] = max(parts.get(key, 0.0), value)
    return ItemScore(best, parts)


def item_score(prediction: str, answers: Sequence[str], *, metric: str, all_classes: Sequence[str] = (),
               first_line_only: bool = False) -> float:
    """:func:`score_item`'s value."""
    return score_item(prediction, answers, metric=metric, all_classes=all_classes,
                      first_line_only=first_line_only).value


def aggregate(metric: str, items: Sequence[ItemScore | float]) -> float:
    """A dataset score on the 0-100 scale, rounded to 2 decimals (NaN when there are no items).

    The mean item score with a sequential sum, as LongBench's eval.py; for a
    metric with ``aggregate_parts``, that function of the part means.
    """
    if not items:
        return math.nan
    fn = get_metric(metric)
    values = [i.value if isinstance(i, ItemScore) else float(i) for i in items]
    if fn.aggregate_parts is not None and all(isinstance(i, ItemScore) and i.parts for i in items):
        keys = list(items[0].parts)  # type: ignore[union-attr]
        means = {k: sum(i.parts[k] for i in items) / len(items) for k in keys}  # type: ignore[union-attr]
        return round(100 * fn.aggregate_parts(means), 2)
    total = 0.0
    for value in values:  # sequential sum, as the reference, so the rounding agrees to the last digit
        total += value
    return round(100 * total / len(values), 2)


@dataclass(frozen=True)
class MetricResult:
    """A dataset score (0-100, rounded to 2 decimals) and every item's score in [0, 1]."""

    score: float
    per_item: tuple[float, ...]


def _items(predictions, answers_list, metric, all_classes_list, first_line_only) -> list[ItemScore]:
    if len(predictions) != len(answers_list):
        raise ValueError(f"{len(predictions)} predictions but {len(answers_list)} answer lists")
    if all_classes_list is None:
        all_classes_list = [()] * len(predictions)
    elif len(all_classes_list) != len(predictions):
        raise ValueError(f"{len(predictions)} predictions but {len(all_classes_list)} all_classes lists")
    return [score_item(p, a, metric=metric, all_classes=c, first_line_only=first_line_only)
            for p, a, c in zip(predictions, answers_list, all_classes_list)]


def score_predictions(predictions: Sequence[str], answers_list: Sequence[Sequence[str]], *, metric: str,
                      all_classes_list: Sequence[Sequence[str]] | None = None,
                      first_line_only: bool = False) -> MetricResult:
    """LongBench eval.py ``scorer``: max over answers per item, then :func:`aggregate`."""
    items = _items(predictions, answers_list, metric, all_classes_list, first_line_only)
    if not items:
        raise ValueError("no predictions to score")
    return MetricResult(score=aggregate(metric, items), per_item=tuple(i.value for i in items))


def length_bucket(length: int) -> str:
    """LongBench-E bucket of a length in words: < 4000, < 8000, else."""
    if length < 4000:
        return "0-4k"
    if length < 8000:
        return "4-8k"
    return "8k+"


def score_by_length(predictions: Sequence[str], answers_list: Sequence[Sequence[str]], lengths: Sequence[int], *,
                    metric: str, all_classes_list: Sequence[Sequence[str]] | None = None,
                    first_line_only: bool = False) -> dict[str, float]:
    """LongBench eval.py ``scorer_e``: ``round(100 * np.mean(bucket), 2)`` per bucket; an empty bucket is NaN."""
    import numpy as np

    if len(lengths) != len(predictions):
        raise ValueError(f"{len(predictions)} predictions but {len(lengths)} lengths")
    items = _items(predictions, answers_list, metric, all_classes_list, first_line_only)
    buckets: dict[str, list[float]] = {name: [] for name in LONGBENCH_E_BUCKETS}
    for item, length in zip(items, lengths):
        buckets[length_bucket(length)].append(item.value)
    return {name: round(100 * float(np.mean(values)), 2) if values else math.nan for name, values in buckets.items()}

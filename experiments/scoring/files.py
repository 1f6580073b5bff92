"""Score a LongBench-format prediction file exactly as LongBench's eval.py does."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.errors import UnknownComponentError
from experiments.data.sources import DataError, iter_records
from experiments.scoring.registry import get_metric, score_by_length, score_predictions
from experiments.tasks.specs import get_task


@dataclass(frozen=True)
class ScoreReport:
    """``score`` for a plain run; ``buckets`` (0-4k / 4-8k / 8k+) for LongBench-E; per-item scores in [0, 1]."""

    dataset: str
    metric: str
    n: int
    score: float | None = None
    buckets: dict[str, float] | None = None
    per_item: tuple[float, ...] = field(default=(), compare=False)


def score_file(path: str | Path, dataset: str, *, metric: str | None = None, by_length: bool = False) -> ScoreReport:
    """Read ``pred, answers, all_classes, length`` lines and score them with the dataset's metric.

    As in eval.py, ``all_classes`` is taken from the last line for every item,
    and trec/triviaqa/samsum/lsht score only the prediction's first line.
    ``metric`` overrides the dataset's metric (e.g. ``best_subspan_em``); the
    dataset may then be any label.
    """
    first_line_only = False
    try:
        spec = get_task(dataset)
        first_line_only = spec.first_line_only
    except UnknownComponentError:
        if metric is None:
            raise
        spec = None
    metric_name = metric or spec.metric
    get_metric(metric_name)  # fail on a typo before reading the file

    predictions: list[str] = []
    answers: list[tuple[str, ...]] = []
    lengths: list[int] = []
    all_classes: tuple[str, ...] = ()
    for where, record in iter_records(path):
        predictions.append(where.get(record, "pred", str))
        answers.append(where.strings(record, "answers"))
        all_classes = where.strings(record, "all_classes", required=False)
        if by_length:
            lengths.append(where.get(record, "length", int))
    if not predictions:
        raise DataError(str(path), None, None, "no predictions in file")
    classes = [all_classes] * len(predictions)
    options = dict(metric=metric_name, all_classes_list=classes, first_line_only=first_line_only)
    result = score_predictions(predictions, answers, **options)
    if by_length:
        buckets = score_by_length(predictions, answers, lengths, **options)
        return ScoreReport(dataset, metric_name, len(predictions), buckets=buckets, per_item=result.per_item)
    return ScoreReport(dataset, metric_name, len(predictions), score=result.score, per_item=result.per_item)

"""Scoring: one registry of metrics (each benchmark's folder registers its own), one aggregation."""
from experiments.scoring.registry import (
    LONGBENCH_E_BUCKETS,
    METRICS,
    ItemScore,
    Metric,
    MetricResult,
    aggregate,
    first_line,
    get_metric,
    item_score,
    length_bucket,
    metric,
    score_by_length,
    score_item,
    score_predictions,
)

__all__ = [
    "LONGBENCH_E_BUCKETS", "METRICS", "ItemScore", "Metric", "MetricResult", "aggregate", "first_line", "get_metric",
    "item_score", "length_bucket", "metric", "score_by_length", "score_item", "score_predictions",
]

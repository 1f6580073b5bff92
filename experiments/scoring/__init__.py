"""Scoring: metrics that reproduce the published scorers, one registry, one aggregation."""
import experiments.scoring.helmet  # noqa: F401
import experiments.scoring.infinitebench  # noqa: F401
import experiments.scoring.leval  # noqa: F401  (the built-in metrics register on import)
import experiments.scoring.litm  # noqa: F401
import experiments.scoring.longbench  # noqa: F401
import experiments.scoring.longbench_v2  # noqa: F401
import experiments.scoring.ruler  # noqa: F401
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

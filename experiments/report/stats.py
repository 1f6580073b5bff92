"""The report's statistics, from the inference room (``experiments.inference``), under the names reports and
outside checks have always imported them by.

Every interval of scores, ``*``, p-value and verdict a report prints comes from the valid tests of
``experiments.inference.paired`` (exact for independent 0/1 scores, betting otherwise); the percentile
bootstrap and the sign flip of ``experiments.inference.resampling`` remain for unbounded quantities
(seconds, tokens), labelled descriptive.
"""
from __future__ import annotations

from experiments.inference.paired import mean_interval, paired_delta
from experiments.inference.resampling import (
    CLT_RATIO,
    LARGE_N,
    N_RESAMPLES,
    SEED,
    bootstrap_delta,
    bootstrap_mean,
    sign_flip_p_value,
)
from experiments.inference.results import (
    ALPHA,
    CONFIDENCE,
    MIN_CLUSTERS,
    MIN_PAIRS,
    MeanInterval,
    PairedDelta,
    format_delta,
    format_p,
)
from experiments.inference.units import Units, as_units
from experiments.inference.verdicts import (
    CANNOT_TELL,
    NOT_WORSE,
    TOO_FEW,
    UNINFORMATIVE,
    WORSE,
    NonInferiority,
    at_edge,
    holm,
    informative,
    noninferiority_test,
)

__all__ = ["ALPHA", "CANNOT_TELL", "CLT_RATIO", "CONFIDENCE", "LARGE_N", "MIN_CLUSTERS", "MIN_PAIRS", "NOT_WORSE",
           "N_RESAMPLES", "SEED", "TOO_FEW", "UNINFORMATIVE", "WORSE", "MeanInterval", "NonInferiority", "PairedDelta",
           "Units", "as_units", "bootstrap_delta", "bootstrap_mean", "at_edge", "format_delta", "format_p",
           "holm", "informative", "mean_interval", "noninferiority_test", "paired_delta", "sign_flip_p_value"]

"""The sequential rule of ``ctxcomp run --until-decided``, from the inference room.

Every look is a betting test (``experiments.inference.sequential``): anytime-valid, so a run may look after
every step, change its step, stop for cost or at its maximum n, and each cell's error stays at alpha.  The
group-sequential alpha spending that was here assumed a studentized statistic symmetric under the null,
which fails when the arm loses few answers and mostly for the worse (docs/metrics.md), and is gone.
"""
from __future__ import annotations

from experiments.inference.sequential import (
    FUTILE,
    NOT_DECIDED_AT_MAX,
    Look,
    decide_in_looks,
    futility,
    look,
    simulate_not_worse,
)

__all__ = ["FUTILE", "NOT_DECIDED_AT_MAX", "Look", "decide_in_looks", "futility", "look", "simulate_not_worse"]

"""The fixed-n betting stake of ``experiments.inference.betting`` (its module docstring), one bet at a time in
plain Python: an independent reading of the formula that tests compare the vectorized code with."""
from __future__ import annotations

import math
from collections.abc import Sequence

from experiments.inference import betting


def fixed_n_stake(y: Sequence[float], i: int, alpha: float) -> float:
    """The stake of step ``i`` (0-based) of the ``len(y)`` normalised outcomes, from y[:i] only: the stake tuned
    to n, capped at the cap whose constant bet has the largest past z (ties: the first cap listed)."""
    n, past = len(y), list(y[:i])
    m2 = (betting.PRIOR_VARIANCE + sum(v * v for v in past)) / (i + 1)
    best_z, cap = -math.inf, None
    for c in betting.FIXED_CAPS:
        growth = [math.log1p(c * v) for v in past] + [math.log1p(c / 2), math.log1p(-c / 2)]
        weights = [1.0] * len(past) + [0.5, 0.5]
        m = sum(w * g for w, g in zip(weights, growth)) / (i + 1)
        var = sum(w * g * g for w, g in zip(weights, growth)) / (i + 1) - m * m
        z = (n * m - math.log(1 / alpha)) / math.sqrt(n * var)
        if z > best_z:
            best_z, cap = z, c
    return min(cap, math.sqrt(2 * math.log(1 / alpha) / (n * m2)))


def fixed_n_e(y: Sequence[float], alpha: float) -> float:
    """The wealth after the last outcome, each stake from ``fixed_n_stake``."""
    wealth = 1.0
    for i, v in enumerate(y):
        wealth *= 1 + fixed_n_stake(y, i, alpha) * v
    return wealth

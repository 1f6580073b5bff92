"""How many examples a non-inferiority verdict needs, from a pilot run, and what they cost.

A researcher's first question before a large run is "how many questions do I need, and what will they
cost?".  Miller ("Adding Error Bars to Evals", 2024) asks for a power analysis before running; the reference
harnesses report fixed-n means.  ``ctxcomp plan RUN_DIR`` answers it from a finished (pilot) run: for each cell,
the spread of its paired differences (clustered), the n and documents the verdict needs, and the cost of that n
in reader calls, tokens, time and dollars measured in the pilot.

The planned n is that of the test the report runs (``experiments.report.stats.noninferiority_test``): a
one-sided sign-flip test of the shifted differences x = d + margin, which rejects when
sum X_c >= z_{1-alpha} sqrt(sum X_c^2) over cluster sums X_c.  With C clusters of mean size m, cluster sums of
variance tau^2 about their mean, and theta = delta + margin (the true difference above the margin, on the 0-1
scale), the sum has mean C m theta and variance C tau^2, while the test's own spread is
sqrt(C (tau^2 + m^2 theta^2)).  To first order, power 1 - beta is reached when

    sqrt(C) = (z_{1-beta} tau + z_{1-alpha} sqrt(tau^2 + m^2 theta^2)) / (m theta).

For independent questions (m = 1, tau = sigma) this is the normal-theory n of a one-sided paired test with the
spread taken about the null value, not about the mean (which is what a sign-flip test does: at a small sigma
and a wide margin the two differ by a quarter).  ``power_at`` adds the next term (the covariance of the sum
with the test's own spread, from the pilot's moments), and ``needed_n`` searches the smallest C it accepts.
The simulation in tests/experiments/design/test_power.py checks that this n reaches the stated power for 0/1,
F1-like and clustered scores.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from experiments.report.stats import ALPHA, MIN_CLUSTERS, as_units


@dataclass(frozen=True)
class Spread:
    """A pilot cell's paired differences summarised for planning (0-1 scale): per cluster, its size and its
    sum's residual about the pilot's mean (the shape of the differences, which the plan shifts to each assumed
    true difference)."""

    n: int
    n_clusters: int
    delta: float  # observed mean difference
    cluster_sd: float  # tau: SD of the cluster sums about their expected value (size x mean)
    mean_size: float  # m: mean cluster size
    residuals: tuple[float, ...] = field(default=(), repr=False)
    sizes: tuple[float, ...] = field(default=(), repr=False)

    @property
    def sd(self) -> float:
        """The per-example SD the clustered test effectively sees: tau / sqrt(m) (the design effect included)."""
        return self.cluster_sd / math.sqrt(self.mean_size) if self.mean_size > 0 else float("nan")


def spread(d: Sequence[float], clusters: Sequence[str] | None = None) -> Spread:
    """The spread of paired differences ``d`` over their clusters (a key per difference; None: independent)."""
    x = np.asarray(d, dtype=float)
    if len(x) == 0:
        return Spread(0, 0, float("nan"), float("nan"), float("nan"))
    units = as_units(x, clusters=clusters)
    mean = float(x.mean())
    c = len(units.sums)
    residual = units.sums - units.sizes * mean
    tau = math.sqrt(float(np.dot(residual, residual)) / (c - 1)) if c > 1 else float("nan")
    return Spread(len(x), c, mean, tau, len(x) / c, tuple(residual.tolist()), tuple(units.sizes.tolist()))


@dataclass(frozen=True)
class NeededN:
    """What a verdict needs at one assumed true difference: examples and clusters (documents)."""

    delta: float  # the assumed true difference (points)
    n: float  # inf: not reachable (the assumed difference is not above -margin)
    n_clusters: float
    note: str = ""


def power_at(s: Spread, margin: float, n_clusters: float, *, delta: float | None = None,
             alpha: float = ALPHA) -> float:
    """The chance that ``n_clusters`` clusters like the pilot's, at a true difference ``delta`` points (default:
    the pilot's), give "not worse": the test rejects when g = sum X - z sqrt(sum X^2) >= 0 over shifted cluster
    sums X, and g is taken as normal with the delta method's mean and variance from the pilot's moments of X
    (the covariance of sum X with sum X^2 narrows g where the mean is above 0: the first-order formula of the
    module docstring leaves it out and plans a few percent too many)."""
    if not s.residuals or n_clusters <= 0:
        return float("nan")
    theta = (s.delta if delta is None else delta / 100) + margin / 100
    x = np.asarray(s.residuals) + np.asarray(s.sizes) * theta
    m1, m2 = float(x.mean()), float(np.mean(x ** 2))
    if m2 <= 0:
        return float("nan")
    var1 = float(x.var())
    cov12 = float(np.mean(x ** 3)) - m1 * m2
    var2 = float(np.mean(x ** 4)) - m2 ** 2
    z = stats.norm.isf(alpha)
    c = float(n_clusters)
    mean_g = c * m1 - z * math.sqrt(c * m2)
    var_g = c * var1 - z * math.sqrt(c) * cov12 / math.sqrt(m2) + z ** 2 * var2 / (4 * m2)
    if var_g <= 0:
        return 1.0 if mean_g > 0 else 0.0
    return float(stats.norm.cdf(mean_g / math.sqrt(var_g)))


def needed_n(s: Spread, margin: float, *, delta: float | None = None, power: float = 0.8,
             alpha: float = ALPHA) -> NeededN:
    """The n (and clusters) at which "not worse than full by more than ``margin`` points" is shown with
    ``power`` when the true difference is ``delta`` points (default: the pilot's), clusters as in the pilot:
    the smallest number of clusters whose ``power_at`` reaches ``power`` (never under ``MIN_CLUSTERS``, with
    fewer no test can reject)."""
    true = s.delta if delta is None else delta / 100
    theta = true + margin / 100
    label = round(100 * true, 2)
    if s.n == 0:
        return NeededN(label, math.nan, math.nan, "no pairs in the pilot")
    if theta <= 0:
        return NeededN(label, math.inf, math.inf, "not reachable: the difference is not above -margin")
    floor = MIN_CLUSTERS
    if not s.cluster_sd > 0:
        return NeededN(label, floor * s.mean_size, floor, "no spread in the pilot: the fewest documents a test needs")

    def enough(c: int) -> bool:
        return power_at(s, margin, c, delta=100 * true, alpha=alpha) >= power

    hi = floor
    while not enough(hi):
        hi *= 2
        if hi > 10**9:
            return NeededN(label, math.inf, math.inf, "beyond 10^9 documents")
    lo = max(floor, hi // 2)
    if enough(lo):
        hi = lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return NeededN(label, hi * s.mean_size, float(hi))


__all__ = ["NeededN", "Spread", "needed_n", "power_at", "spread"]

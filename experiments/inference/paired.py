"""Valid paired inference on bounded scores: one interval per cell, and every verdict read off it.

Two arms scored on the same questions give paired differences in [-1, 1] (scores in [0, 1]).  The interval
printed for a cell, its ``*``, its p-value and its non-inferiority verdict all come from one pair of
one-sided tests at ``alpha`` each, valid at every n for every distribution of bounded scores:

- **0/1 scores, one question a document**: the exact unconditional test of ``experiments.inference.exact``
  (the differences are a trinomial draw; near z-test power, no normal limit).
- **anything else** (clusters of questions sharing a document, partial credit such as F1): the betting test
  of ``experiments.inference.betting`` at fixed n, averaged over random orders; valid for any bounded
  distribution, documents being the independent draws.
- **strata** (the average over tasks): each task's bounds at alpha / K, averaged (a union bound: each true
  task mean lies in its interval with probability >= 1 - 2 alpha / K at once, so their average does).

The bounds are ``lower = inf{delta : H0 "mean <= delta" not rejected}`` and the mirror ``upper``, so a true
difference lies below ``lower`` with probability at most alpha, and above ``upper`` likewise: a two-sided
1 - 2 alpha interval (95% at alpha = 0.025).  "Not worse" is ``lower > -margin``, "worse" is
``upper < -margin``, ``*`` is ``lower > 0 or upper < 0``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from experiments.inference import betting, exact
from experiments.inference.resampling import N_RESAMPLES, SEED, bootstrap_delta, bootstrap_mean
from experiments.inference.results import ALPHA, CONFIDENCE, MeanInterval, PairedDelta
from experiments.inference.units import Units, as_units


@dataclass(frozen=True)
class Bounds:
    """The mean difference and the bounds its two one-sided tests invert (0-1 scale), and how."""

    mean: float
    lower: float
    upper: float
    n: int
    n_clusters: int
    method: str  # "exact", "betting", "betting by stratum", "none"


# Above this many pairs the exact test's outcome table ((n + 1)^2 values, rebuilt for every difference an
# interval's bisection tries) costs seconds; there the betting test, as valid and a little less powerful,
# decides instead (at such n the power either has is rarely the constraint).
EXACT_MAX_N = 2000


def _binary_singletons(a: np.ndarray, b: np.ndarray, units: Units) -> bool:
    return (units.singletons and len(a) <= EXACT_MAX_N
            and bool(np.all((a == 0) | (a == 1)) and np.all((b == 0) | (b == 1))))


def check_scores(where: str, *arrays: np.ndarray, low: float = 0.0, high: float = 1.0,
                 allow_empty: bool = False) -> None:
    """One clear error for input a valid test cannot take: no pairs, a score that is not a number, or one
    outside [low, high] (0-100 scores passed for 0-1 ones: the bound every guarantee rests on)."""
    if not allow_empty and any(len(x) == 0 for x in arrays):
        raise ValueError(f"{where}: no scores to test (an empty sample decides nothing; check the cell's pairs)")
    for x in arrays:
        if len(x) and not np.all(np.isfinite(x)):
            bad = int(np.count_nonzero(~np.isfinite(x)))
            raise ValueError(f"{where}: {bad} score(s) are not a number (NaN or infinite): a bug upstream, never a "
                             "p-value")
        if len(x) and (x.min() < low or x.max() > high):
            hint = " (0-100 scores? divide by 100)" if x.max() > high and x.max() <= 100 * high else ""
            raise ValueError(f"{where}: scores must lie in [{low:g}, {high:g}], the bound the test's guarantee rests "
                             f"on; got values from {x.min():g} to {x.max():g}{hint}")


def check_margin(where: str, margin: float) -> None:
    if not (math.isfinite(margin) and margin >= 0):
        raise ValueError(f"{where}: the margin must be a number of points >= 0, got {margin!r}")


def document_bound(units: Units, max_cluster: float | None) -> float:
    """The most questions one document may hold, which bounds a document's sum for the betting test: the
    task's pool's largest document, fixed before any score (``max_cluster``).  It must not come from the
    sample: a sample's largest document is random, and when rare long documents carry the losses the sample
    that misses them gets a bound they break (docs/metrics.md: a false "not worse" in 0.117 of trials at 200
    documents).  Without it (a caller that cannot read the pool) the sample's largest is used: valid only
    given the sizes drawn."""
    largest = float(units.sizes.max()) if len(units.sizes) else 1.0
    if max_cluster is None:
        return largest
    if largest > max_cluster:
        raise ValueError(f"a document of {int(largest)} questions passes the pool's largest ({max_cluster:g}): the "
                         "bound the betting test was given is not the pool's")
    return float(max_cluster)


def _betting_rejects(units: Units, alpha: float, values: tuple[float, float], bound: float):
    order = betting.orders(len(units.sums))

    def reject(deltas: np.ndarray, upper: bool) -> np.ndarray:
        e = betting.one_sided_e(units.sums, units.sizes, deltas, values=values, bound=bound, upper=upper,
                                order=order, alpha=alpha)
        return e >= 1 / alpha

    return reject


def _one_stratum(a: np.ndarray, b: np.ndarray, units: Units, alpha: float, values: tuple[float, float],
                 max_cluster: int | None, anchors: tuple[float, ...] = ()) -> tuple[float, float, str]:
    d = b - a
    if _binary_singletons(a, b, units) and values == (-1.0, 1.0):
        loss, gain = int(np.sum(d < 0)), int(np.sum(d > 0))
        lo, hi = exact.exact_bounds(loss, gain, len(d), alpha, tuple(anchors))
        return lo, hi, "exact"
    bound = document_bound(units, max_cluster)
    lo, hi = betting.bounds(_betting_rejects(units, alpha, values, bound), values, float(d.mean()), anchors=anchors)
    return lo, hi, "betting"


def difference_bounds(a: Sequence[float], b: Sequence[float], *, clusters: Sequence[str] | None = None,
                      strata: Sequence[str] | None = None, alpha: float = ALPHA,
                      values: tuple[float, float] = (-1.0, 1.0), max_cluster: int | None = None,
                      anchors: tuple[float, ...] = (0.0,)) -> Bounds:
    """Bounds on mean(b - a), question-weighted within each stratum, strata averaged with equal weight.

    ``values``: the range of one difference (scores in [0, 1]: (-1, 1)).  ``max_cluster``: the most
    questions one document of the task can hold (default: the largest in the sample), which bounds a
    document's sum for the betting test.  ``anchors``: differences the betting bounds are computed at exactly
    (a margin, 0), so that a verdict read off a bound agrees with the test at that difference."""
    x, y = _paired("difference_bounds", a, b, values)
    units = as_units(y - x, strata, clusters)
    keys = list(strata) if strata is not None else [""] * len(x)
    names = list(dict.fromkeys(keys))
    if len(names) == 1:
        lo, hi, method = _one_stratum(x, y, units, alpha, values, max_cluster, anchors)
        return Bounds(units.statistic, lo, hi, len(x), len(units.sums), method)
    per = []
    arr = np.asarray(keys)
    for name in names:
        idx = arr == name
        sub_clusters = [c for c, k in zip(clusters, keys) if k == name] if clusters is not None else None
        sub = as_units(y[idx] - x[idx], None, sub_clusters)
        per.append(_one_stratum(x[idx], y[idx], sub, alpha / len(names), values, max_cluster, anchors)[:2])
    lo = float(np.mean([p[0] for p in per]))
    hi = float(np.mean([p[1] for p in per]))
    return Bounds(units.statistic, lo, hi, len(x), len(units.sums), "betting by stratum")


def one_sided_p(a: Sequence[float], b: Sequence[float], delta: float, *, upper: bool = True,
                clusters: Sequence[str] | None = None, values: tuple[float, float] = (-1.0, 1.0),
                max_cluster: int | None = None, alpha: float = ALPHA) -> float:
    """The p-value of H0 "mean(b - a) <= delta" (``upper``) or ">= delta": the exact test's, or 1/e of the
    betting test with its stakes tuned for ``alpha`` (valid by Markov's inequality, and <= alpha exactly when
    the test at ``alpha`` rejects).  Unstratified only (a stratified row is decided by its interval)."""
    x, y = _paired("one_sided_p", a, b, values)
    units = as_units(y - x, None, clusters)
    if _binary_singletons(x, y, units) and values == (-1.0, 1.0):
        d = y - x
        return exact.exact_p(int(np.sum(d < 0)), int(np.sum(d > 0)), len(d), delta, upper=upper)
    bound = document_bound(units, max_cluster)
    e = betting.one_sided_e(units.sums, units.sizes, np.array([delta]), values=values, bound=bound, upper=upper,
                            order=betting.orders(len(units.sums)), alpha=alpha)
    return float(min(1.0, 1.0 / max(float(e[0]), 1e-300)))


def mean_bounds(values: Sequence[float], *, clusters: Sequence[str] | None = None, alpha: float = ALPHA,
                max_cluster: int | None = None) -> tuple[float, float]:
    """Bounds on the (question-weighted) mean of scores in [0, 1], each one-sided at ``alpha``: Clopper-
    Pearson for independent 0/1 scores (exact), betting otherwise (clusters, partial credit)."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    check_scores("mean_bounds", x)
    units = as_units(x, None, clusters)
    if units.singletons and np.all((x == 0) | (x == 1)):
        ci = stats.binomtest(int(x.sum()), len(x)).proportion_ci(confidence_level=1 - 2 * alpha, method="exact")
        return float(ci.low), float(ci.high)
    bound = document_bound(units, max_cluster)
    return betting.bounds(_betting_rejects(units, alpha, (0.0, 1.0), bound), (0.0, 1.0), float(x.mean()))


def _paired(where: str, a: Sequence[float], b: Sequence[float],
            values: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """The paired samples as arrays, checked: equal lengths, not empty, numbers, and scores in [0, 1] (for
    differences in the default (-1, 1)) or differences within ``values``."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"{where}: paired samples must have the same length, got {len(x)} and {len(y)}")
    if values == (-1.0, 1.0):
        check_scores(where, x, y)
    else:
        check_scores(where, x, y, low=-math.inf, high=math.inf)
        check_scores(where, y - x, low=values[0], high=values[1])
    return x, y


def _in_unit_interval(*arrays: np.ndarray) -> bool:
    return all(len(x) == 0 or (np.all(np.isfinite(x)) and x.min() >= 0 and x.max() <= 1) for x in arrays)


def paired_delta(a: Sequence[float], b: Sequence[float], *, strata: Sequence[str] | None = None,
                 clusters: Sequence[str] | None = None, n_resamples: int = N_RESAMPLES, seed: int = SEED,
                 confidence: float = CONFIDENCE, scale: float = 100.0, max_cluster: int | None = None,
                 bounded: tuple[float, float] = (0.0, 1.0)) -> PairedDelta:
    """``b - a`` x ``scale`` with its interval and two-sided p-value.

    Values within ``bounded`` (scores in [0, 1]; a change of score in [-1, 1] for ``compare``'s difference of
    differences), ``scale`` 100: the interval both valid one-sided tests invert at (1 - confidence) / 2 each
    (``difference_bounds``), and the p-value of the same tests at a difference of 0 (twice the smaller
    one-sided p; none for a stratified average, which is decided by its interval).  Anything else (seconds,
    tokens): a descriptive cluster bootstrap (``experiments.inference.resampling``)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired samples must have the same length, got {len(x)} and {len(y)}")
    if scale == 100.0 and not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        bad = int(np.count_nonzero(~np.isfinite(x)) + np.count_nonzero(~np.isfinite(y)))
        raise ValueError(f"paired_delta got {bad} score(s) that are not a number: a bug upstream, never a p-value")
    low, high = bounded
    if scale != 100.0 or not _in_unit_interval((x - low) / (high - low), (y - low) / (high - low)):
        return bootstrap_delta(x, y, strata=strata, clusters=clusters, n_resamples=n_resamples, seed=seed,
                               confidence=confidence, scale=scale)
    if len(x) == 0:
        return PairedDelta(math.nan, math.nan, math.nan, math.nan, 0)
    alpha = (1 - confidence) / 2
    values = (low - high, high - low)
    found = difference_bounds(x, y, clusters=clusters, strata=strata, alpha=alpha, max_cluster=max_cluster,
                              values=values)
    p = math.nan
    if strata is None or len(set(strata)) == 1:
        sides = [one_sided_p(x, y, 0.0, upper=u, clusters=clusters, max_cluster=max_cluster, values=values,
                             alpha=alpha) for u in (True, False)]
        p = min(1.0, 2 * min(sides))
    return PairedDelta(round(100 * found.mean, 2), round(100 * found.lower, 2), round(100 * found.upper, 2),
                       round(p, 4) if p == p else p, found.n, found.n_clusters, found.method)


def mean_interval(values: Sequence[float], *, clusters: Sequence[str] | None = None, n_resamples: int = N_RESAMPLES,
                  seed: int = SEED, confidence: float = CONFIDENCE, max_cluster: int | None = None) -> MeanInterval:
    """100 x the mean of ``values`` with its interval: valid bounds (``mean_bounds``) for scores in [0, 1],
    a descriptive cluster bootstrap for anything else (a judge's 1-10 rating, say)."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return MeanInterval(math.nan, math.nan, math.nan, 0)
    if not _in_unit_interval(x):
        return bootstrap_mean(x, clusters=clusters, n_resamples=n_resamples, seed=seed, confidence=confidence)
    lo, hi = mean_bounds(x, clusters=clusters, alpha=(1 - confidence) / 2, max_cluster=max_cluster)
    units = as_units(x, None, clusters)
    method = "exact" if units.singletons and np.all((x == 0) | (x == 1)) else "betting"
    return MeanInterval(round(100 * float(x.mean()), 2), round(100 * lo, 2), round(100 * hi, 2), len(x),
                        len(units.sums), method)


__all__ = ["Bounds", "difference_bounds", "mean_bounds", "mean_interval", "one_sided_p", "paired_delta"]

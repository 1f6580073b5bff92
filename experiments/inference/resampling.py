"""Resampling statistics: the cluster bootstrap and the sign-flip test, for what they are good at.

These describe; they do not decide.  A percentile bootstrap interval is the spread of resampled means, and
near a floor or ceiling, or over a handful of documents, it covers less often than it says (a 95% interval
over 6 documents of 8 questions near p = 0.9 covers 85-88% of the time).  The sign flip is an exact test of
the sharp null "within each pair the two arms are exchangeable" -- not of "the means are equal", and, with a
margin added, not of "worse by the margin" (the shifted differences are not symmetric: docs/metrics.md).
So scores' intervals, ``*`` and verdicts come from ``experiments.inference.paired``; what stays here are
intervals of unbounded quantities (seconds, tokens, judge ratings on their own scale), labelled descriptive
where they are printed, and the randomization p-value of the sharp null.

Clusters.  Questions asked of one document are not independent, so every statistic takes ``clusters`` (a
key per pair): the bootstrap resamples whole clusters (Davison & Hinkley 1997, sec. 3.8; Field & Welsh 2007)
and the sign flip flips whole clusters.  Where every cluster holds one pair the direct methods run.

One sample is resampled by ``scipy.stats.bootstrap`` and sign-flipped by ``scipy.stats.permutation_test``
(exact when all 2^n sign patterns fit in ``n_resamples``).  Above ``LARGE_N`` values a sample is resampled
through the counts of its distinct values (a multinomial draw of how often each occurs; a binomial draw per
distinct |d| for the sign flip), and a large continuous sample whose Berry-Esseen ratio
r = sum|x - mean|^3 / (sum (x - mean)^2)^(3/2) is at most ``CLT_RATIO`` has its resampled means drawn from
their normal limit (the leading Edgeworth error at the 2.5% tail, about 0.03 r, is then below the 0.0016
standard error of a 2.5% quantile from 10^4 resamples).  Resampling is seeded: a report rebuilt from the
same predictions shows the same numbers.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from experiments.inference.results import CONFIDENCE, MeanInterval, PairedDelta
from experiments.inference.units import Units, as_units

N_RESAMPLES = 10_000
SEED = 0
_CHUNK = 1_000
# Above this many values a sample is resampled through its distinct values' counts (see the module docstring);
# below it, each value is resampled as drawn, so the intervals of small runs stay those of the plain bootstrap.
LARGE_N = 500
# Above LARGE_N, a continuous sample whose Berry-Esseen ratio is at most this has its resampled means drawn from
# their normal limit (module docstring); 0.02 admits uniform-like values from about n = 4,200.
CLT_RATIO = 0.02


def _few_distinct(x: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(distinct values, their counts) of a large sample with few distinct values; None otherwise."""
    if len(x) <= LARGE_N:
        return None
    values, counts = np.unique(x, return_counts=True)
    return (values, counts) if len(values) <= len(x) // 8 else None


def _clt_ratio(centred: np.ndarray) -> float:
    """sum|c|^3 / (sum c^2)^(3/2) of a centred sample: the Berry-Esseen ratio that bounds how far the law of a
    mean of n draws from it (or of n signed values) is from its normal limit; inf when every value is 0."""
    squares = float(np.dot(centred, centred))
    return float(np.sum(np.abs(centred) ** 3)) / squares ** 1.5 if squares > 0 else float("inf")


def _normal_limit(x: np.ndarray) -> bool:
    """Whether a large continuous sample's resampled means may be drawn from their normal limit."""
    return len(x) > LARGE_N and _clt_ratio(x - x.mean()) <= CLT_RATIO


def _resampled_means(x: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` bootstrap means of ``x``: index draws, multinomial counts of its distinct values (large n), or
    draws of their normal limit (large n, continuous, no dominant value)."""
    distinct = _few_distinct(x)
    if distinct is None:
        if _normal_limit(x):
            return rng.normal(x.mean(), x.std() / np.sqrt(len(x)), size=size)
        return x[rng.integers(0, len(x), size=(size, len(x)))].mean(axis=1)
    values, counts = distinct
    return rng.multinomial(len(x), counts / len(x), size=size) @ values / len(x)


def _flipped_means(d: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` means of ``d`` with random signs: sign draws, or binomial counts per distinct |d| (large n)."""
    distinct = _few_distinct(np.abs(d))
    if distinct is None:
        if len(d) > LARGE_N and _clt_ratio(d) <= CLT_RATIO:  # signs about 0: the values are their own centring
            return rng.normal(0.0, np.sqrt(np.dot(d, d)) / len(d), size=size)
        return ((rng.integers(0, 2, size=(size, len(d))) * 2 - 1) * d).mean(axis=1)
    values, counts = distinct
    positive = rng.binomial(counts, 0.5, size=(size, len(counts)))
    return (2 * positive - counts) @ values / len(d)


def _bootstrap_strata(groups: Sequence[np.ndarray], n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Resampled statistic: the mean over groups of each group's mean, each group resampled within itself."""
    out = np.zeros(n_resamples)
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        for g in groups:
            out[start: start + size] += _resampled_means(g, size, rng)
    return out / len(groups)


def _percentile_interval(means: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)


def bootstrap_mean(values: Sequence[float], *, clusters: Sequence[str] | None = None, n_resamples: int = N_RESAMPLES,
                  seed: int = SEED, confidence: float = CONFIDENCE) -> MeanInterval:
    """100 x the mean of ``values`` (scores in [0, 1]) with a percentile bootstrap interval, resampling whole
    ``clusters`` when given (a key per value; values that share a document move together)."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return MeanInterval(float("nan"), float("nan"), float("nan"), 0)
    units = as_units(x, clusters=clusters)
    if units.singletons:
        lo, hi = _one_sample_interval(x, n_resamples, seed, confidence)
    else:
        lo, hi = _percentile_interval(_cluster_bootstrap(units, n_resamples, np.random.default_rng(seed)), confidence)
    return MeanInterval(round(100 * float(x.mean()), 2), round(100 * lo, 2), round(100 * hi, 2), len(x),
                        len(units.sums), "bootstrap")


def _cluster_bootstrap(units: Units, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Resampled statistic of the cluster bootstrap: in each stratum, its C clusters drawn with replacement,
    the stratum's mean the drawn differences over the drawn pairs, spread
    about the observed mean by sqrt(C / (C - 1)); then the mean over strata.

    The factor undoes the bootstrap's variance bias, (C - 1) / C of the unbiased cluster variance (Davison &
    Hinkley 1997, sec. 3.8): it matters where C is small, and without it 95% intervals over 30 documents cover
    about 92.5% of the time (tests/experiments/report/test_clusters.py).
    """
    out = np.zeros(n_resamples)
    strata = [np.flatnonzero(units.stratum == k) for k in range(int(units.stratum.max()) + 1)]
    for idx in strata:
        sums, sizes, c = units.sums[idx], units.sizes[idx], len(idx)
        observed = sums.sum() / sizes.sum()
        spread = np.sqrt(c / (c - 1)) if c > 1 else 1.0
        chunk = max(1, min(_CHUNK, 10**7 // c))
        for start in range(0, n_resamples, chunk):
            size = min(chunk, n_resamples - start)
            drawn = rng.integers(0, c, size=(size, c))
            out[start: start + size] += observed + (sums[drawn].sum(axis=1) / sizes[drawn].sum(axis=1) - observed) * spread
    return out / len(strata)


def _one_sample_interval(x: np.ndarray, n_resamples: int, seed: int, confidence: float) -> tuple[float, float]:
    """The percentile bootstrap interval of one sample's mean (``scipy.stats.bootstrap``)."""
    from scipy import stats

    if len(x) == 1 or np.all(x == x[0]):  # one value: every resample is that value
        return float(x[0]), float(x[0])
    if _few_distinct(x) is not None or _normal_limit(x):
        rng = np.random.default_rng(seed)
        means = np.concatenate([_resampled_means(x, min(_CHUNK, n_resamples - start), rng)
                                for start in range(0, n_resamples, _CHUNK)])
        return _percentile_interval(means, confidence)
    res = stats.bootstrap((x,), np.mean, n_resamples=n_resamples, batch=_CHUNK, method="percentile",
                          confidence_level=confidence, random_state=np.random.default_rng(seed), vectorized=True)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def sign_flip_p_value(differences: Sequence[float] | Sequence[np.ndarray], *, n_resamples: int = N_RESAMPLES,
                      seed: int = SEED) -> float:
    """Two-sided paired permutation (sign-flip) test of mean difference 0; ``(1 + hits) / (1 + resamples)``.

    ``differences`` is one sample, or a list of per-stratum samples whose
    statistic is the mean of the stratum means.
    """
    groups = _as_groups(differences)
    if not groups:
        return float("nan")
    observed = abs(float(np.mean([g.mean() for g in groups])))
    if not any(g.any() for g in groups):
        return 1.0
    if len(groups) == 1 and len(groups[0]) == 1:
        return 1.0  # both signs of one difference are as extreme
    if len(groups) == 1 and len(groups[0]) <= LARGE_N:
        from scipy import stats

        res = stats.permutation_test((groups[0],), lambda d, axis=-1: np.abs(np.mean(d, axis=axis)),
                                     permutation_type="samples", n_resamples=n_resamples, batch=_CHUNK,
                                     alternative="greater", vectorized=True, random_state=np.random.default_rng(seed))
        return float(res.pvalue)
    return _flip_p_value(groups, observed, n_resamples, seed, two_sided=True)


def _flip_p_value(groups: Sequence[np.ndarray], observed: float, n_resamples: int, seed: int, *,
                  two_sided: bool) -> float:
    """``(1 + hits) / (1 + resamples)``: how often randomly signed differences give a mean of stratum means at
    least as extreme as ``observed``.  Strata, and one sample above ``LARGE_N``: scipy's permutation test
    spends about a second per call there on per-resample overhead (10^4 resamples of 10^3 latencies), where
    these draws take milliseconds; at or below ``LARGE_N`` one sample goes through scipy (exact when it can)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        stat = np.zeros(size)
        for g in groups:
            stat += _flipped_means(g, size, rng)
        stat = stat / len(groups)
        hits += int(((np.abs(stat) if two_sided else stat) >= observed - 1e-12).sum())
    return (1 + hits) / (1 + n_resamples)


def _as_groups(values: Sequence[float] | Sequence[np.ndarray]) -> list[np.ndarray]:
    if len(values) and isinstance(values[0], np.ndarray):
        return [np.asarray(g, dtype=float) for g in values if len(g)]  # type: ignore[arg-type]
    arr = np.asarray(values, dtype=float)
    return [arr] if len(arr) else []


def bootstrap_delta(a: Sequence[float], b: Sequence[float], *, strata: Sequence[str] | None = None,
                 clusters: Sequence[str] | None = None, n_resamples: int = N_RESAMPLES, seed: int = SEED,
                 confidence: float = CONFIDENCE, scale: float = 100.0) -> PairedDelta:
    """``b - a`` (per-example scores in [0, 1], same order) x 100 with a paired bootstrap interval and p-value.

    With ``strata`` (e.g. the task of each pair) the statistic is the mean
    over strata of each stratum's mean difference -- the difference of an
    unweighted average over tasks -- and pairs are resampled within their stratum.
    With ``clusters`` (a key per pair: the document it was asked of) whole
    clusters are resampled and sign-flipped (module docstring); a cluster of one
    pair is a pair, so without shared documents the numbers are those of the
    unclustered methods.
    ``scale`` multiplies the result (100: scores to points; 1: seconds or tokens as they are).
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired samples must have the same length, got {len(x)} and {len(y)}")
    if len(x) == 0:
        nan = float("nan")
        return PairedDelta(nan, nan, nan, nan, 0)
    d = y - x
    units = as_units(d, strata, clusters)
    if not units.singletons:
        return _clustered_delta(units, len(d), n_resamples, seed, confidence, scale)
    if strata is None:
        groups = [d]
    else:
        keys = np.asarray(strata)
        groups = [d[keys == k] for k in dict.fromkeys(strata)]
    point = float(np.mean([g.mean() for g in groups]))
    if len(groups) == 1:
        lo, hi = _one_sample_interval(groups[0], n_resamples, seed, confidence)
    else:
        lo, hi = _percentile_interval(_bootstrap_strata(groups, n_resamples, np.random.default_rng(seed)), confidence)
    p = sign_flip_p_value(groups, n_resamples=n_resamples, seed=seed + 1)
    return PairedDelta(round(scale * point, 2), round(scale * lo, 2), round(scale * hi, 2), round(p, 4), len(d),
                       len(d), "bootstrap")


def _clustered_delta(units: Units, n: int, n_resamples: int, seed: int, confidence: float,
                     scale: float) -> PairedDelta:
    """``paired_delta`` over clusters: the cluster bootstrap's percentile interval, and the two-sided sign flip
    of whole clusters (each stratum's cluster sums, scaled so that their mean is the stratum's mean difference:
    the unclustered test's own draws then flip clusters)."""
    point = units.statistic
    lo, hi = _percentile_interval(_cluster_bootstrap(units, n_resamples, np.random.default_rng(seed)), confidence)
    k = int(units.stratum.max()) + 1
    groups = []
    for s in range(k):
        idx = units.stratum == s
        groups.append(units.sums[idx] * (k * units.weights[idx]) * idx.sum())  # S_u * C_s / N_s
    p = sign_flip_p_value(groups, n_resamples=n_resamples, seed=seed + 1)
    return PairedDelta(round(scale * point, 2), round(scale * lo, 2), round(scale * hi, 2), round(p, 4), n,
                       len(units.sums), "bootstrap")


__all__ = ["CLT_RATIO", "LARGE_N", "N_RESAMPLES", "bootstrap_delta", "bootstrap_mean", "sign_flip_p_value"]

"""Paired statistics for comparing arms on the same examples: bootstrap intervals and a sign-flip test.

With the 20 to 200 examples a CPU run affords, a difference of a few points
between two arms is often noise; every delta in a report therefore carries
its paired 95% interval, its n and a p-value.

- ``paired_delta``: mean of ``b - a`` over the examples both arms scored, with
  a percentile bootstrap interval (``n_resamples`` resamples of the pairs,
  fixed seed) and a two-sided paired sign-flip permutation test (the
  randomization test: under the null each pair's difference is as likely to
  have either sign).  All on the 0-100 scale.
- ``mean_interval``: one arm's mean with its percentile bootstrap interval
  (curves and position sweeps).
- ``noninferiority``: "how much can go" as a test: the verdict against a
  margin, decided by the paired interval's lower bound (the one-sided 2.5%
  test of TOST), and the one-sided sign-flip p-value of the same hypothesis;
  ``holm`` adjusts a family of p-values (Holm's step-down procedure).

One sample is resampled by ``scipy.stats.bootstrap`` and sign-flipped by
``scipy.stats.permutation_test`` (which enumerates all 2^n sign patterns,
an exact test, when that is no more than ``n_resamples``).  The stratified
forms (the difference of an unweighted average over tasks, pairs resampled
within their task) have no scipy counterpart and are written here.
Resampling is seeded, so a report rebuilt from the same predictions shows
the same intervals.

Above ``LARGE_N`` examples a sample is resampled through the counts of its
distinct values: a bootstrap resample of n values is a multinomial draw of how
often each distinct value occurs, and a sign flip of the differences is, for
each distinct absolute difference, a binomial draw of how many are positive.
The distributions are those of the direct methods (another random stream), at
a cost in the number of distinct values instead of n, so a cell of a hundred
thousand 0/1 scores costs what a cell of three does.  Where nearly every value
is distinct (a continuous metric, latencies) the direct draws are used: the project's own sign draws, not scipy's
permutation test, which spends about a second a call on per-resample overhead at n = 1,000.

Direct draws cost n values per resample, 10^8 of them per interval at n = 10^4.  There, once the sample is
large enough for its mean to be normal to within the resampling's own noise, each resampled mean is drawn
from that normal instead (``_clt_ratio``): mean and plug-in spread for a bootstrap, 0 and root-sum-of-squares
for the sign flip, the distributions the direct draws converge to (the central limit theorem, conditional on
the sample).  The gate is the Berry-Esseen ratio r = sum|x - mean|^3 / (sum (x - mean)^2)^(3/2) <= ``CLT_RATIO``:
the leading (Edgeworth) error of the normal at the 2.5% tail is about 0.03 r, 0.0006 at the gate, below the
0.0016 standard error of a 2.5% quantile estimated from 10^4 resamples.  A sample with an outlier that carries
much of its spread (one timed-out call among thousands) keeps the direct draws.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

N_RESAMPLES = 10_000
SEED = 0
CONFIDENCE = 0.95
# Below this many pairs a bootstrap interval says little (with one pair it collapses to a point):
# reports then give the delta and its n, without an interval or a p-value.
MIN_PAIRS = 5
_CHUNK = 1_000
# Above this many values a sample is resampled through its distinct values' counts (see the module docstring);
# below it, as before, so the intervals of small runs never change.
LARGE_N = 500
# Above LARGE_N, a continuous sample whose Berry-Esseen ratio is at most this has its resampled means drawn from
# their normal limit (module docstring); 0.02 admits uniform-like values from about n = 4,200.
CLT_RATIO = 0.02


@dataclass(frozen=True)
class PairedDelta:
    """``b - a`` over ``n`` paired examples, x 100, with its interval and p-value."""

    delta: float
    lo: float
    hi: float
    p_value: float
    n: int

    @property
    def excludes_zero(self) -> bool:
        return self.n > 0 and (self.lo > 0 or self.hi < 0)


@dataclass(frozen=True)
class MeanInterval:
    mean: float
    lo: float
    hi: float
    n: int


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


def mean_interval(values: Sequence[float], *, n_resamples: int = N_RESAMPLES, seed: int = SEED,
                  confidence: float = CONFIDENCE) -> MeanInterval:
    """100 x the mean of ``values`` (scores in [0, 1]) with a percentile bootstrap interval."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return MeanInterval(float("nan"), float("nan"), float("nan"), 0)
    lo, hi = _one_sample_interval(x, n_resamples, seed, confidence)
    return MeanInterval(round(100 * float(x.mean()), 2), round(100 * lo, 2), round(100 * hi, 2), len(x))


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


def paired_delta(a: Sequence[float], b: Sequence[float], *, strata: Sequence[str] | None = None,
                 n_resamples: int = N_RESAMPLES, seed: int = SEED, confidence: float = CONFIDENCE,
                 scale: float = 100.0) -> PairedDelta:
    """``b - a`` (per-example scores in [0, 1], same order) x 100 with a paired bootstrap interval and p-value.

    With ``strata`` (e.g. the task of each pair) the statistic is the mean
    over strata of each stratum's mean difference -- the difference of an
    unweighted average over tasks -- and pairs are resampled within their stratum.
    ``scale`` multiplies the result (100: scores to points; 1: seconds or tokens as they are).
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired samples must have the same length, got {len(x)} and {len(y)}")
    if len(x) == 0:
        nan = float("nan")
        return PairedDelta(nan, nan, nan, nan, 0)
    d = y - x
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
    return PairedDelta(round(scale * point, 2), round(scale * lo, 2), round(scale * hi, 2), round(p, 4), len(d))


NOT_WORSE = "not worse than full by more than the margin"
WORSE = "worse"
CANNOT_TELL = "cannot tell at this n"


def noninferiority(pd: PairedDelta | None, margin: float) -> str:
    """The verdict on ``arm - full`` (a paired delta in points) against a margin in points.

    TOST-style, by the paired 95% interval (each bound a one-sided 2.5% test):
    its lower bound above ``-margin``: not worse than full by more than the
    margin; its upper bound below ``-margin``: worse (by more than the margin);
    otherwise, or below ``MIN_PAIRS`` pairs, the data cannot tell.
    """
    if pd is None or pd.n < MIN_PAIRS or pd.lo != pd.lo:
        return CANNOT_TELL
    if pd.lo > -margin:
        return NOT_WORSE
    if pd.hi < -margin:
        return WORSE
    return CANNOT_TELL


def noninferiority_p(differences: Sequence[float], margin: float, *, n_resamples: int = N_RESAMPLES,
                     seed: int = SEED) -> float:
    """One-sided p-value of H0 "the mean of ``differences`` (scores in [0, 1], arm - full) is at most
    ``-margin / 100``": a sign-flip test of the shifted differences ``d + margin / 100`` (exact when
    all 2^n sign patterns fit in ``n_resamples``)."""
    from scipy import stats

    x = np.asarray(differences, dtype=float) + margin / 100
    if len(x) == 0:
        return float("nan")
    if not x.any():
        return 1.0
    if len(x) == 1:  # two sign patterns: the observed one is the larger only when it is positive
        return 0.5 if x[0] > 0 else 1.0
    if len(x) > LARGE_N:
        return _flip_p_value([x], float(x.mean()), n_resamples, seed, two_sided=False)
    res = stats.permutation_test((x,), lambda v, axis=-1: np.mean(v, axis=axis), permutation_type="samples",
                                 n_resamples=n_resamples, batch=_CHUNK, alternative="greater", vectorized=True,
                                 random_state=np.random.default_rng(seed))
    return float(res.pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's (1979) step-down adjustment of a family of p-values, in the input order.

    The i-th smallest of m p-values becomes ``max over j <= i of min(1, (m - j + 1) p_(j))``; a NaN
    (a test that could not be run) stays NaN and does not count in the family.
    """
    values = [float(p) for p in p_values]
    order = sorted((i for i, p in enumerate(values) if p == p), key=lambda i: values[i])
    m = len(order)
    adjusted = [float("nan")] * len(values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * values[i]))
        adjusted[i] = running
    return adjusted


def format_p(pd: PairedDelta | None) -> str:
    """The sign-flip p-value beside an interval: at small n with 0/1 scores the percentile bootstrap can
    exclude 0 where the exact test does not (4 of 16 questions flipping one way: p = 0.125), so both are shown."""
    if pd is None or pd.n < MIN_PAIRS or pd.p_value != pd.p_value:
        return ""
    return f"{pd.p_value:.3f}"


def format_delta(pd: PairedDelta | None) -> str:
    """``+4.80 [+1.20, +8.50]*`` (the star marks an interval that excludes 0)."""
    if pd is None or pd.n == 0 or pd.delta != pd.delta:
        return ""
    star = "*" if pd.excludes_zero else ""
    return f"{pd.delta:+.2f} [{pd.lo:+.2f}, {pd.hi:+.2f}]{star}"

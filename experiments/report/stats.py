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
- ``noninferiority_test``: "how much can go" as a test: the one-sided
  sign-flip test of "the arm is worse than full by the margin or more" at
  ``ALPHA``, the interval that test inverts, and the verdict read off both, so
  verdict, interval and p-value cannot disagree; ``holm`` adjusts a family of
  p-values (Holm's step-down procedure).

Clusters.  Questions asked of one document are not independent (L-Eval asks
several of each; a position sweep asks one question at every position), so
every paired statistic takes ``clusters`` (a key per pair, from
``Example.cluster``): the bootstrap resamples whole clusters (the cluster, or
block, bootstrap; Davison & Hinkley 1997, sec. 3.8; Field & Welsh 2007) and
the sign flip flips whole clusters (a randomization test of the symmetric
cluster sums).  Where every cluster holds one pair the direct methods run
unchanged, so a run of independent questions gets exactly the numbers it got
before clusters existed.  Below ``MIN_CLUSTERS`` clusters no test can reach
significance (2^5 sign patterns: the smallest one-sided p-value is 1/32 >
0.025), so such a cell gets no star and no verdict.

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

import itertools
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


# Below this many clusters no sign-flip test reaches significance: with 5 clusters the smallest one-sided p-value
# is 1/2^5 = 0.031 > ALPHA (and the smallest two-sided one 0.0625 > 0.05), and a cluster bootstrap over so few
# clusters is far too narrow (tests/experiments/report/test_clusters.py measures it).
MIN_CLUSTERS = 6
# The one-sided level of a non-inferiority verdict: 0.025, the lower half of the report's 95% intervals (the
# CONSORT convention for non-inferiority: a two-sided 95% interval's lower bound against the margin).
ALPHA = 0.025


@dataclass(frozen=True)
class PairedDelta:
    """``b - a`` over ``n`` paired examples in ``n_clusters`` clusters, x 100, with its interval and p-value."""

    delta: float
    lo: float
    hi: float
    p_value: float
    n: int
    n_clusters: int = 0  # 0: not counted (a delta made before clusters existed): every pair its own cluster

    @property
    def clusters(self) -> int:
        return self.n_clusters or self.n

    @property
    def decidable(self) -> bool:
        """Enough clusters for a test to reach significance (``MIN_CLUSTERS``)."""
        return self.clusters >= MIN_CLUSTERS

    @property
    def excludes_zero(self) -> bool:
        return self.n > 0 and self.decidable and (self.lo > 0 or self.hi < 0)


@dataclass(frozen=True)
class MeanInterval:
    mean: float
    lo: float
    hi: float
    n: int
    n_clusters: int = 0


@dataclass(frozen=True)
class Units:
    """Paired differences as sign flips and cluster resamples act on them: one unit per cluster, holding its
    sum of differences and its size, each with the weight 1/(K N_s) of its stratum s (K strata, N_s pairs in
    s), so that ``sum(weight * sums)`` is the statistic (the mean over strata of each stratum's mean)."""

    sums: np.ndarray
    sizes: np.ndarray
    weights: np.ndarray
    stratum: np.ndarray  # the stratum index of each unit

    @property
    def statistic(self) -> float:
        return float(np.dot(self.weights, self.sums))

    @property
    def singletons(self) -> bool:
        return bool(np.all(self.sizes == 1))


def as_units(d: np.ndarray, strata: Sequence[str] | None = None, clusters: Sequence[str] | None = None) -> Units:
    """The units of paired differences ``d``: one per (stratum, cluster); a pair without a cluster is its own.

    A cluster key is read within its stratum (the same document in two tasks is two clusters: each task's mean
    is resampled apart).
    """
    n = len(d)
    keys_s = list(strata) if strata is not None else [""] * n
    keys_c = list(clusters) if clusters is not None else [str(i) for i in range(n)]
    stratum_of = {k: i for i, k in enumerate(dict.fromkeys(keys_s))}
    unit_of: dict[tuple[str, str], int] = {}
    index = np.fromiter((unit_of.setdefault((s, c), len(unit_of)) for s, c in zip(keys_s, keys_c)), dtype=np.int64,
                        count=n)
    sums = np.bincount(index, weights=d, minlength=len(unit_of))
    sizes = np.bincount(index, minlength=len(unit_of)).astype(float)
    stratum = np.array([stratum_of[s] for s, _ in unit_of], dtype=np.int64)
    per_stratum = np.bincount(stratum, weights=sizes)
    weights = 1.0 / (len(stratum_of) * per_stratum[stratum])
    return Units(sums, sizes, weights, stratum)


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


def mean_interval(values: Sequence[float], *, clusters: Sequence[str] | None = None, n_resamples: int = N_RESAMPLES,
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
                        len(units.sums))


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


def paired_delta(a: Sequence[float], b: Sequence[float], *, strata: Sequence[str] | None = None,
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
                       len(d))


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
                       len(units.sums))


NOT_WORSE = "not worse than full by more than the margin"
WORSE = "worse"
CANNOT_TELL = "cannot tell at this n"
TOO_FEW = "too few documents"
UNINFORMATIVE = "uninformative: the reference scores {}"


@dataclass(frozen=True)
class NonInferiority:
    """One non-inferiority test of ``arm - full`` against ``-margin`` (points), as ``noninferiority_test`` makes it.

    ``lo, hi``: the interval the test inverts (every shift the one-sided tests at ``alpha`` do not reject), so
    ``verdict`` is "not worse" exactly when ``lo > -margin`` and ``p <= alpha``, and "worse" exactly when
    ``hi < -margin`` and ``p_worse <= alpha``.  ``p``: one-sided p-value of H0 "worse by the margin or more";
    ``p_worse``: of H0 "not worse by more than the margin".
    """

    delta: float
    lo: float
    hi: float
    p: float
    p_worse: float
    n: int
    n_clusters: int
    verdict: str
    alpha: float = ALPHA

    @property
    def paired(self) -> PairedDelta:
        """As a ``PairedDelta`` (its interval; the two-sided p of the shift at 0 is not computed here)."""
        return PairedDelta(self.delta, self.lo, self.hi, float("nan"), self.n, self.n_clusters)


def _signed_sums(x: np.ndarray, y: np.ndarray, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``size`` draws of (sum s*x, sum s*y) over independent random signs s (one per unit): sign draws; for a
    large sample, binomial counts per distinct (x, y) pair, or the bivariate normal limit (``CLT_RATIO``)."""
    if len(x) > LARGE_N:
        pairs, counts = np.unique(np.stack([x, y], axis=1), axis=0, return_counts=True)
        if len(pairs) <= len(x) // 8:
            signed = 2 * rng.binomial(counts, 0.5, size=(size, len(counts))) - counts
            return signed @ pairs[:, 0], signed @ pairs[:, 1]
        if max(_clt_ratio(x), _clt_ratio(y)) <= CLT_RATIO:
            xy = float(np.dot(x, y))
            draws = rng.multivariate_normal([0.0, 0.0], [[float(np.dot(x, x)), xy], [xy, float(np.dot(y, y))]], size)
            return draws[:, 0], draws[:, 1]
    signs = rng.integers(0, 2, size=(size, len(x))) * 2 - 1
    return signs @ x, signs @ y


def _shift_thresholds(units: Units, n_resamples: int, seed: int) -> np.ndarray:
    """The sign-flip distribution of a shifted mean, as one threshold per sign pattern.

    Under H0 "the mean difference is delta" the shifted cluster sums ``S_u - delta m_u`` are symmetric, and a
    sign pattern s gives the statistic ``A - delta B`` (A = sum s w S, B = sum s w m) against the observed
    ``T - delta``.  It is at least as large exactly when ``delta >= t = (T - A) / (1 - B)``; the pattern of all
    plus signs (B = 1) is the observed one, t = -inf.  So one set of thresholds gives the one-sided p-value
    of every shift at once, and the interval the test inverts.  All 2^C patterns when they fit in
    ``n_resamples`` (exact), else ``n_resamples`` random ones beside the observed one.  Thresholds are
    rounded to 12 decimals, so a shift that ties one (a margin of exactly 5 points on 0/1 scores) is counted
    the same way by the p-value and by the interval.
    """
    x, y = units.weights * units.sums, units.weights * units.sizes
    c = len(x)
    if 2 ** c <= n_resamples:
        signs = np.array(list(itertools.product((1, -1), repeat=c)), dtype=float)
        a, b = signs @ x, signs @ y
    else:
        rng = np.random.default_rng(seed)
        parts = [_signed_sums(x, y, min(_CHUNK, n_resamples - start), rng) for start in range(0, n_resamples, _CHUNK)]
        a = np.concatenate([[float(x.sum())]] + [p[0] for p in parts])  # the observed pattern first, then the draws
        b = np.concatenate([[float(y.sum())]] + [p[1] for p in parts])
    observed = float(x.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.round(np.where(b >= 1 - 1e-12, -np.inf, (observed - a) / (1 - b)), 12)


def noninferiority_test(a: Sequence[float], b: Sequence[float], margin: float, *, strata: Sequence[str] | None = None,
                        clusters: Sequence[str] | None = None, alpha: float = ALPHA, n_resamples: int = N_RESAMPLES,
                        seed: int = SEED) -> NonInferiority:
    """Is the arm (``b``, scores in [0, 1]) worse than full (``a``, the same examples) by ``margin`` points or more?

    The test: a one-sided sign-flip (randomization) test of H0 "mean(b - a) <= -margin" (Pitman 1937; the
    shifted differences are symmetric under H0), flipping whole clusters, exact when all sign patterns fit in
    ``n_resamples``; and the mirror test of H0 "mean(b - a) >= -margin".  The interval is the set of shifts
    neither one-sided test rejects at ``alpha`` (with ``alpha`` = 0.025 a 95% interval), so the verdict, the
    interval and the p-value are one computation and never disagree:

    - ``too few documents``: under ``MIN_CLUSTERS`` clusters (no test could reject);
    - ``uninformative``: both arms score 0 on every example, or both 1 (a floor or a ceiling is not evidence);
    - ``not worse``: H0 "worse by the margin or more" rejected (``p <= alpha``, ``lo > -margin``);
    - ``worse``: H0 "not worse by more than the margin" rejected (``p_worse <= alpha``, ``hi < -margin``);
    - else ``cannot tell at this n``.

    The assumption is the randomization test's: under H0 each cluster's shifted sum is as likely positive as
    negative.  With ``strata`` the statistic is the mean over strata of each stratum's mean difference.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired samples must have the same length, got {len(x)} and {len(y)}")
    nan = float("nan")
    if len(x) == 0:
        return NonInferiority(nan, nan, nan, nan, nan, 0, 0, CANNOT_TELL, alpha)
    units = as_units(y - x, strata, clusters)
    point, c = units.statistic, len(units.sums)
    t = _shift_thresholds(units, n_resamples, seed)
    total = len(t)
    j = int(np.floor(alpha * total + 1e-9))  # the largest count of patterns at or past the observed that rejects
    ascending = np.sort(t)
    lo = float(ascending[j]) if j >= 1 else -np.inf
    worse_t = np.where(np.isneginf(t), np.inf, t)  # the observed pattern counts for the mirror test too
    descending = np.sort(worse_t)[::-1]
    hi = float(descending[j]) if j >= 1 else np.inf
    shift = -margin / 100
    p = float(np.count_nonzero(t <= shift)) / total
    p_worse = float(np.count_nonzero(worse_t >= shift)) / total
    if c < MIN_CLUSTERS:
        verdict = TOO_FEW
    elif (floor := bool(np.all(x == 0) and np.all(y == 0))) or (np.all(x == 1) and np.all(y == 1)):
        verdict = UNINFORMATIVE.format(0 if floor else 100)
    elif p <= alpha:
        verdict = NOT_WORSE
    elif p_worse <= alpha:
        verdict = WORSE
    else:
        verdict = CANNOT_TELL
    return NonInferiority(round(100 * point, 2), round(100 * lo, 2), round(100 * hi, 2), p, p_worse, len(x), c,
                          verdict, alpha)


def informative(verdict: str) -> bool:
    """Whether a verdict says something of the arm (neither too few documents nor a floor or ceiling)."""
    return verdict in (NOT_WORSE, WORSE, CANNOT_TELL)


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

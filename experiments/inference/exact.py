"""An exact unconditional test for the mean difference of paired 0/1 scores.

Paired 0/1 scores differ by -1 (the arm lost an answer full got), 0 or +1, so a sample of n pairs is a
trinomial draw: ``n_loss`` and ``n_gain`` out of n, with probabilities p_l and p_g.  The mean difference is
p_g - p_l.  To test H0 "p_g - p_l <= delta" this module computes, for an observed (n_loss, n_gain), the exact
p-value sup over every (p_l, p_g) of H0 of P(T >= T_obs) (Barnard 1947's unconditional approach; for
paired proportions with a margin, Nam 1997, Biometrics 53:1422, and Sidik 2003, J Biopharm Stat 13:623).
It is valid at every n by construction: no normal limit, no symmetry.

- T is the score statistic of Tango (1998, Stat Med 17:891): (d - delta) / sqrt(v / n), with v the variance
  of one difference at the restricted maximum likelihood estimate under p_g - p_l = delta.  Unlike the Wald
  statistic it stays finite when nothing changed (n_loss = n_gain = 0), and it has near z-test power.
- T is replaced by its monotone hull T'(l, g) = min over (l', g') with l' <= l and g' >= g of T(l', g'): a
  sample with fewer losses or more gains is never less significant.  With a monotone T' the rejection
  probability grows as p_l falls or p_g rises, so the supremum over H0 is reached on its boundary
  p_g - p_l = delta (a one-parameter line) -- what makes the supremum cheap and exact.
- On that line, P(T' >= t) = sum_k P(K = k) P(G >= c_k | K = k) with K = n_loss + n_gain ~ Bin(n, p_l + p_g),
  G | K ~ Bin(K, p_g / (p_l + p_g)) and c_k the smallest gain count of k discordant pairs that reaches t: O(n)
  per point of the line.  The supremum is taken on a grid of the line and refined around its best points.

With no surprise this gives "16 identical answers are not enough at a 5-point margin": the least favourable
null then loses 5% of the answers, and 16 pairs escape every loss with probability 0.95^16 = 0.44.
"""
from __future__ import annotations

import functools
import math

import numpy as np

GRID = 24  # points between a peak's neighbours, at each level of refinement
FINE = 96  # points on the null line
LOCAL_PEAKS = 3  # the best grid points refined


def _restricted_variance(loss: np.ndarray, gain: np.ndarray, n: int, delta: float) -> np.ndarray:
    """Var of one difference at the MLE of (p_l, p_g) restricted to p_g - p_l = delta (Tango 1998): the
    root of 2n p^2 - B p - C = 0 for p_l, clipped to the line's range.  In place on one buffer (a table of
    n = 1,000 has a million outcomes, built for every difference a bound's search tries)."""
    # B = loss (1 - 3 delta) + gain (1 - delta) - 2 (n - loss - gain) delta, C = loss delta (1 - delta)
    b = loss * (1 - delta) + gain * (1 + delta) - 2 * n * delta
    root = b * b
    root += loss * (8 * n * delta * (1 - delta))
    np.maximum(root, 0.0, out=root)
    np.sqrt(root, out=root)
    root += b
    root /= 4 * n
    np.clip(root, max(0.0, -delta), (1 - delta) / 2, out=root)
    root *= 2
    root += delta - delta * delta
    return np.maximum(root, 1e-12, out=root)


@functools.lru_cache(maxsize=64)
def _statistic_table(n: int, delta: float, upper: bool) -> np.ndarray:
    """T' of every outcome by anti-diagonal: row k (discordant pairs), column g (gains; k - g losses), NaN
    for g > k; oriented so that large is evidence against H0 ("<= delta" when ``upper``, ">= delta" otherwise)
    and monotone by construction (the hull of the module docstring, taken on the (loss, gain) grid)."""
    loss = np.arange(n + 1, dtype=float)[:, None]
    gain = np.arange(n + 1, dtype=float)[None, :]
    t = _restricted_variance(loss, gain, n, delta)
    t *= n
    np.sqrt(t, out=t)
    np.divide(gain - loss - n * delta, t, out=t)
    if not upper:
        np.negative(t, out=t)
    t[loss + gain > n] = np.inf  # impossible outcomes never lower a minimum
    if upper:  # favourable: fewer losses (smaller row), more gains (larger column)
        np.minimum.accumulate(t, axis=0, out=t)
        t = np.minimum.accumulate(t[:, ::-1], axis=1)[:, ::-1]
    else:  # favourable to "worse": more losses, fewer gains
        t = np.minimum.accumulate(t[::-1, :], axis=0)[::-1, :]
        np.minimum.accumulate(t, axis=1, out=t)
    # by_k[k, g] = t[k - g, g]: flat index k (n + 1) - g n of t, read through a strided view of t behind n^2
    # NaNs (g > k falls in them), copied once instead of a million fancy-indexed reads
    flat = np.empty(n * n + (n + 1) ** 2)
    flat[: n * n] = np.nan
    flat[n * n:] = np.ascontiguousarray(t).ravel()
    step = flat.itemsize
    view = np.lib.stride_tricks.as_strided(flat[n * n:], shape=(n + 1, n + 1), strides=((n + 1) * step, -n * step))
    by_k = view.copy()
    by_k.flags.writeable = False
    return by_k


def _thresholds(by_k: np.ndarray, t: float, upper: bool) -> tuple[np.ndarray, np.ndarray]:
    """For each count k of discordant pairs, the smallest (``upper``) or largest gain count g whose outcome
    (k - g losses, g gains) has T' >= t; k with none get n + 1 (``upper``) or -1."""
    n = by_k.shape[0] - 1
    hit = by_k >= t - 1e-12  # NaN compares False
    k = np.arange(n + 1)
    if upper:
        return k, np.where(hit.any(1), hit.argmax(1), n + 1)
    return k, np.where(hit.any(1), n - hit[:, ::-1].argmax(1), -1)


def _log_binom_pmf(k: np.ndarray, n: int, p: np.ndarray) -> np.ndarray:
    """log P(Bin(n, p) = k), broadcast (p of 0 or 1 handled: log 0 = -inf)."""
    from scipy.special import gammaln, xlog1py, xlogy

    return (gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1) + xlogy(k, p) + xlog1py(n - k, -p))


def _tail(p_loss: np.ndarray, delta: float, n: int, k: np.ndarray, cut: np.ndarray, upper: bool) -> np.ndarray:
    """P(T' >= t) at each p_l of the null line p_g = p_l + delta (vectorized over ``p_loss``); the
    conditional binomial tails are evaluated only where P(K = k) is not negligible (below 1e-18 a term
    cannot move the sum), with scipy.special's binomial tails (the ufuncs, without scipy.stats' per-call
    checks: a report calls this thousands of times).  scipy is imported here, not at the top: it costs
    seconds, and every command that imports the report's statistics (the dry run among them) would pay them
    without testing anything."""
    from scipy.special import bdtr, bdtrc

    p_gain = p_loss + delta
    discordant = np.clip(p_loss + p_gain, 1e-300, 1.0)
    share = np.clip(p_gain / discordant, 0.0, 1.0)
    with np.errstate(divide="ignore"):
        pk = np.exp(_log_binom_pmf(k[None, :].astype(float), n, discordant[:, None]))
    rows, cols = np.nonzero(pk > 1e-18)
    kk, cc, q = k[cols].astype(np.int64), cut[cols].astype(np.int64), share[rows]  # integer counts: scipy
    if upper:  # P(G >= cut): 1 below 1, 0 past k                                  # warns on float ones
        cond = np.where(cc <= 0, 1.0, np.where(cc > kk, 0.0, bdtrc(np.maximum(cc - 1, 0), kk, q)))
    else:  # P(G <= cut)
        cond = np.where(cc < 0, 0.0, np.where(cc >= kk, 1.0, bdtr(np.clip(cc, 0, None), kk, q)))
    out = np.bincount(rows, weights=pk[rows, cols] * cond, minlength=len(p_loss))
    return np.clip(out, 0.0, 1.0)


def _line(delta: float) -> tuple[float, float]:
    """The range of p_l on the null line p_g - p_l = delta (both probabilities in [0, 1], summing to <= 1)."""
    return max(0.0, -delta), (1 - delta) / 2


@functools.lru_cache(maxsize=4096)
def exact_p(loss: int, gain: int, n: int, delta: float, *, upper: bool = True) -> float:
    """The exact unconditional p-value of H0 "mean difference <= delta" (``upper``) or ">= delta" (not
    ``upper``) for ``loss`` losses and ``gain`` gains among ``n`` pairs."""
    if n <= 0:
        return 1.0
    delta = float(np.clip(delta, -1.0, 1.0))
    if (upper and delta >= 1) or (not upper and delta <= -1):
        return 1.0
    if (upper and delta <= -1) or (not upper and delta >= 1):
        return 0.0 if (gain - loss) / n != delta else 1.0
    by_k = _statistic_table(n, round(delta, 12), upper)
    return _sup_tail(by_k, float(by_k[loss + gain, gain]), n, delta, upper)


def _sup_tail(by_k: np.ndarray, t: float, n: int, delta: float, upper: bool) -> float:
    """sup over the null line of P(T' >= t): a grid of FINE points, then finer grids around each of its
    LOCAL_PEAKS best local maxima (the tail along the line has several bumps: one refined peak let a
    neighbouring one pass alpha)."""
    k, cut = _thresholds(by_k, t, upper)
    lo, hi = _line(delta)
    if hi <= lo:
        return float(_tail(np.array([lo]), delta, n, k, cut, upper)[0])
    grid = np.linspace(lo, hi, FINE)
    values = _tail(grid, delta, n, k, cut, upper)
    best = float(values.max())
    peaks = np.argsort(values)[::-1][:LOCAL_PEAKS]
    for i in peaks:
        local = grid
        j = int(i)
        for _ in range(2):  # twice: each level narrows the bracket GRID / 2 times
            local = np.linspace(local[max(j - 1, 0)], local[min(j + 1, len(local) - 1)], GRID)
            found = _tail(local, delta, n, k, cut, upper)
            j = int(found.argmax())
            best = max(best, float(found.max()))
    return min(1.0, best)


def exact_bounds(loss: int, gain: int, n: int, alpha: float,
                 anchors: tuple[float, ...] = ()) -> tuple[float, float]:
    """(lower, upper): the confidence bounds the two one-sided exact tests invert at ``alpha`` each.

    lower = inf{delta : H0 "<= delta" not rejected}, so a true difference lies below it with probability at
    most alpha; upper likewise.  At each of the ``anchors`` (a margin, 0) the test itself is run, and a bound
    clears an anchor exactly when that test rejects: the verdict read off the bound and the p-value at the
    margin cannot disagree (issue 50: 262 pairs, 15 losses, 13 gains read "not worse" with p = 0.025014).
    The crossings are found once per outcome (``_crossings``, cached) and only moved to an anchor's edge
    where its test says otherwise, so the scores table and the verdict table share one search."""
    lower, upper = _crossings(loss, gain, n, alpha)
    mean = (gain - loss) / n
    for anchor in anchors:
        if not -1 < anchor < 1:
            continue
        if anchor < mean:  # the lower bound's side: rejected at the anchor <=> lower > anchor
            rejected = exact_p(loss, gain, n, anchor, upper=True) <= alpha
            if rejected and lower <= anchor:
                lower = float(np.nextafter(anchor, 1.0))
            elif not rejected and lower > anchor:
                lower = anchor
        elif anchor > mean:
            rejected = exact_p(loss, gain, n, anchor, upper=False) <= alpha
            if rejected and upper >= anchor:
                upper = float(np.nextafter(anchor, -1.0))
            elif not rejected and upper < anchor:
                upper = anchor
    return lower, upper


@functools.lru_cache(maxsize=4096)
def _crossings(loss: int, gain: int, n: int, alpha: float) -> tuple[float, float]:
    """Where each one-sided p-value crosses alpha, by Brent's method on p(delta) - alpha between the end
    where it rejects (-1 for the lower bound) and the mean (where it never does), to 5e-5; the bound
    returned is a difference the test keeps."""
    from scipy.optimize import brentq

    mean = (gain - loss) / n

    def crossing(upper: bool) -> float:
        reject_end, keep_end = (-1.0, mean) if upper else (1.0, mean)
        if exact_p(loss, gain, n, keep_end, upper=upper) <= alpha:  # cannot happen for a sane test; be safe
            return keep_end
        if exact_p(loss, gain, n, reject_end, upper=upper) > alpha:
            return reject_end
        # a bracket of a few standard errors first (each try builds one outcome table; Brent's method then
        # needs about half the steps it takes from the whole range)
        sd = math.sqrt(max((loss + gain) / n - mean * mean, 1 / n) / n)
        toward = -1.0 if upper else 1.0
        for width in (4.0, 8.0):
            edge = float(np.clip(mean + toward * width * sd, -1.0, 1.0))
            if edge == reject_end:
                break
            if exact_p(loss, gain, n, edge, upper=upper) <= alpha:
                reject_end = edge
                break
            keep_end = edge
        root = brentq(lambda d: exact_p(loss, gain, n, float(d), upper=upper) - alpha - 1e-15, reject_end,
                      keep_end, xtol=5e-5)
        step = 5e-5 if keep_end > reject_end else -5e-5
        return float(root + step) if exact_p(loss, gain, n, float(root), upper=upper) <= alpha else float(root)

    return crossing(True), crossing(False)


@functools.lru_cache(maxsize=32)
def rejection_table(n: int, delta: float, alpha: float, *, upper: bool = True) -> np.ndarray:
    """Boolean (loss, gain) table of the outcomes of n pairs that the exact test rejects at ``alpha``: what a
    simulation looks its verdicts up in (the test's p-value falls as T' rises, so the region is T' >= t*)."""
    by_k = _statistic_table(n, round(float(delta), 12), upper)
    values = np.unique(by_k[np.isfinite(by_k)])
    if not len(values) or _sup_tail(by_k, float(values[-1]), n, delta, upper) > alpha:
        return np.zeros((n + 1, n + 1), dtype=bool)
    lo, hi = 0, len(values) - 1  # values[hi] rejects; find the smallest that does
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _sup_tail(by_k, float(values[mid]), n, delta, upper) <= alpha else (mid, hi)
    crit = values[hi] if _sup_tail(by_k, float(values[lo]), n, delta, upper) > alpha else values[lo]
    loss = np.arange(n + 1)[:, None]
    gain = np.arange(n + 1)[None, :]
    valid = loss + gain <= n
    rejected = np.zeros((n + 1, n + 1), dtype=bool)
    rejected[valid] = by_k[(loss + gain)[valid], np.broadcast_to(gain, valid.shape)[valid]] >= crit - 1e-12
    rejected.flags.writeable = False
    return rejected


binary_tail = _tail  # P(T' >= t) at any (p_l, p_l + delta): what a plan sums its power with

__all__ = ["binary_tail", "exact_bounds", "exact_p", "rejection_table"]

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

Speed (a report over 60 cells of n = 1,000 in a minute on 2 cores, ``plan`` over them in two; docs/metrics.md):
an outcome's p-value needs only the thresholds c_k, not the whole table.  Tango's T is itself monotone (no
outcome of 4,133 tables checked, n 5-1,000 and differences -0.99..0.99, has a neighbour with fewer losses or
more gains and a smaller T, to the last bit), so its hull is T and each c_k is a binary search along
anti-diagonal k: O(n log n) evaluations of T instead of the (n + 1)^2 table for every difference a bound's
search tries (a region that came out not monotone would be read off the table's hull instead).  The line's
binomial terms are computed only in the band of k where they can pass 1e-18.  A rejection region (what a plan
and a simulation read) is found from 5-9 suprema instead of a bisection's 20 (``_region_cuts``).  What
depends on (n, difference, alpha) and not on the cell -- a region -- is computed once and kept, as are a
cell's bounds and printed p-values, in memory and in a disk cache under ``$CTXCOMP_CACHE_DIR/exact`` keyed by
every setting and library version that changes them, so a report's second run and a plan over cells that
share n reuse them.  Every number is the one bd70c94's table-and-bisection code gave, to the bit
(``tests/experiments/inference/test_exact_fast.py`` checks p-values and regions against that reference).

With no surprise this gives "16 identical answers are not enough at a 5-point margin": the least favourable
null then loses 5% of the answers, and 16 pairs escape every loss with probability 0.95^16 = 0.44.
"""
from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

GRID = 24  # points between a peak's neighbours, at each level of refinement
FINE = 96  # points on the null line
LOCAL_PEAKS = 3  # the best grid points refined
EXACT_VERSION = 2  # bumped by hand whenever a p-value, bound or region this module computes changes
TIE = 1e-12  # statistics this close count as equal (the same value reached by two roundings)


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


def _statistic(loss: np.ndarray, gain: np.ndarray, n: int, delta: float, upper: bool) -> np.ndarray:
    """Tango's T at the outcomes (``loss``, ``gain``) (float arrays that broadcast), oriented as
    ``_statistic_table`` orients it: the same operations element by element, so the same bits."""
    t = _restricted_variance(loss, gain, n, delta)
    t *= n
    np.sqrt(t, out=t)
    np.divide(gain - loss - n * delta, t, out=t)
    if not upper:
        np.negative(t, out=t)
    return t


@functools.lru_cache(maxsize=4)  # 8 MB at n = 1,000: a plan's dozens of n's keep their cuts, not their tables
def _statistic_table(n: int, delta: float, upper: bool) -> np.ndarray:
    """T' of every outcome by anti-diagonal: row k (discordant pairs), column g (gains; k - g losses), NaN
    for g > k; oriented so that large is evidence against H0 ("<= delta" when ``upper``, ">= delta" otherwise)
    and monotone by construction (the hull of the module docstring, taken on the (loss, gain) grid).  The
    reference the fast path (``_cuts``) is checked against, and where a region's candidate thresholds come
    from."""
    loss = np.arange(n + 1, dtype=float)[:, None]
    gain = np.arange(n + 1, dtype=float)[None, :]
    t = _statistic(loss, gain, n, delta, upper)
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
    (k - g losses, g gains) has T' >= t; k with none get n + 1 (``upper``) or -1.  Read off the whole table:
    the reference of ``_cuts``."""
    n = by_k.shape[0] - 1
    hit = by_k >= t - TIE  # NaN compares False
    k = np.arange(n + 1)
    if upper:
        return k, np.where(hit.any(1), hit.argmax(1), n + 1)
    return k, np.where(hit.any(1), n - hit[:, ::-1].argmax(1), -1)


def _cuts(t: float, n: int, delta: float, upper: bool) -> np.ndarray:
    """``_thresholds`` without the table: along anti-diagonal k, T(k - g, g) rises with g (``upper``; falls
    otherwise), so the first (last) g with T >= t - TIE is a binary search, all k at once: about log2(n) + 1
    rounds of n + 1 evaluations of T.  Equal to the table's while T is monotone (module docstring); a region
    that is not an up-set would betray a T that is not, and is then read off the table's hull instead."""
    k = np.arange(n + 1)
    lo, hi = np.zeros(n + 1, dtype=np.int64), k + 1  # the answer lies in [lo, hi]; hi = k + 1: none
    while True:
        open_ = lo < hi
        if not open_.any():
            break
        mid = (lo + hi) // 2
        g = np.minimum(mid, k).astype(float)
        value = _statistic(k - g, g, n, delta, upper)
        # upper: T rises with g, so "found" moves hi down; otherwise S falls with g and we search the first g
        # whose S drops below t (the last that reaches it is one less)
        inside = value >= t - TIE if upper else value < t - TIE
        hi = np.where(open_ & inside, mid, hi)
        lo = np.where(open_ & ~inside, mid + 1, lo)
    cut = np.where(lo > k, n + 1, lo) if upper else lo - 1  # lower: the last g whose S reaches t; -1: none
    return cut if _is_up_set(cut, upper) else _thresholds(_statistic_table(n, delta, upper), t, upper)[1]


def _is_up_set(cut: np.ndarray, upper: bool) -> bool:
    """Whether the region ``cut`` draws keeps every outcome with fewer losses or more gains than one it holds
    (``upper``; mirrored otherwise): what puts the supremum on the null line.  Always so while T is monotone;
    ``_cuts`` falls back to the table's hull if it ever were not."""
    k = np.arange(len(cut))
    first = np.where(cut > k, k + 1, cut) if upper else np.where(cut < 0, k + 1, k - cut)  # fewest gains/losses
    held = first <= k
    # an outcome held at k with a loss (a gain) to spare: one loss fewer (one gain more) at k - 1 (k + 1) too
    fewer_losses = ~held[1:] | (first[1:] >= k[1:]) | (first[:-1] <= first[1:])
    more_gains = ~held[:-1] | (first[1:] <= first[:-1] + 1)
    return bool(fewer_losses.all() and more_gains.all())


def _log_binom_pmf(k: np.ndarray, n: int, p: np.ndarray) -> np.ndarray:
    """log P(Bin(n, p) = k), broadcast (p of 0 or 1 handled: log 0 = -inf)."""
    from scipy.special import xlog1py, xlogy

    return _log_choose(n)[k.astype(np.int64)] + xlogy(k, p) + xlog1py(n - k, -p)


@functools.lru_cache(maxsize=64)
def _log_choose(n: int) -> np.ndarray:
    """log C(n, k) for k = 0..n, as ``gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)`` in that order
    (kept per n: every point of the line needs it)."""
    from scipy.special import gammaln

    k = np.arange(n + 1, dtype=float)
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


BAND = 25.0  # terms farther than sqrt(BAND n) from n d are below e^-50 (Hoeffding), far under 1e-18


def _line_terms(p_loss: np.ndarray, delta: float, n: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rows, k, P(K = k), each row's share of gains among discordant pairs): the terms P(K = k) > 1e-18 at
    the points ``p_loss`` of the null line, K ~ Bin(n, d) with d = 2 p_l + delta, row by row in increasing k.
    Computed only in a band of k around n d that holds every one of them (P(K = k) <= exp(-2 (k - n d)^2 /
    n), below e^-50 outside it): at n = 1,000 a third of the n + 1 columns, each term the same bits."""
    p_gain = p_loss + delta
    discordant = np.clip(p_loss + p_gain, 1e-300, 1.0)
    share = np.clip(p_gain / discordant, 0.0, 1.0)
    width = min(n + 1, 2 * math.ceil(math.sqrt(BAND * n)) + 5)
    start = np.clip(np.round(n * discordant).astype(np.int64) - width // 2, 0, n + 1 - width)
    k = start[:, None] + np.arange(width)[None, :]
    with np.errstate(divide="ignore"):
        pk = np.exp(_log_binom_pmf(k.astype(float), n, discordant[:, None]))
    rows, offset = np.nonzero(pk > 1e-18)
    return rows, start[rows] + offset, pk[rows, offset], share


def _conditional(cut: np.ndarray, k: np.ndarray, share: np.ndarray, upper: bool) -> np.ndarray:
    """P(G >= cut | K = k) (``upper``: 1 below 1, 0 past k) or P(G <= cut | K = k), G ~ Bin(k, share), with
    scipy.special's binomial tails only where the cut falls inside (integer counts: scipy warns on float
    ones)."""
    from scipy.special import bdtr, bdtrc

    if upper:
        cond = np.where(cut <= 0, 1.0, 0.0)
        inner = (cut > 0) & (cut <= k)
        cond[inner] = bdtrc(cut[inner] - 1, k[inner], share[inner])
    else:
        cond = np.where(cut < 0, 0.0, 1.0)
        inner = (cut >= 0) & (cut < k)
        cond[inner] = bdtr(cut[inner], k[inner], share[inner])
    return cond


def _tail(p_loss: np.ndarray, delta: float, n: int, k: np.ndarray, cut: np.ndarray, upper: bool) -> np.ndarray:
    """P(T' >= t) at each p_l of the null line p_g = p_l + delta (vectorized over ``p_loss``; ``k`` is
    0..n): the sum over k of P(K = k) P(G >= cut_k | K = k), over the terms ``_line_terms`` keeps (below
    1e-18 a term cannot move the sum), with scipy.special's binomial tails (the ufuncs, without scipy.stats'
    per-call checks: a report calls this thousands of times).  scipy is imported in the helpers, not at the
    top: it costs seconds, and every command that imports the report's statistics (the dry run among them)
    would pay them without testing anything."""
    rows, cols, weights, share = _line_terms(p_loss, delta, n)
    cond = _conditional(cut[cols].astype(np.int64), k[cols].astype(np.int64), share[rows], upper)
    out = np.bincount(rows, weights=weights * cond, minlength=len(p_loss))
    return np.clip(out, 0.0, 1.0)


def _line(delta: float) -> tuple[float, float]:
    """The range of p_l on the null line p_g - p_l = delta (both probabilities in [0, 1], summing to <= 1)."""
    return max(0.0, -delta), (1 - delta) / 2


def _trivial_p(loss: int, gain: int, n: int, delta: float, upper: bool) -> float | None:
    """The p-value where no table is needed (no pairs, a null that holds everything or nothing); else None."""
    if n <= 0:
        return 1.0
    if (upper and delta >= 1) or (not upper and delta <= -1):
        return 1.0
    if (upper and delta <= -1) or (not upper and delta >= 1):
        return 0.0 if (gain - loss) / n != delta else 1.0
    return None


@functools.lru_cache(maxsize=4096)
def exact_p(loss: int, gain: int, n: int, delta: float, *, upper: bool = True) -> float:
    """The exact unconditional p-value of H0 "mean difference <= delta" (``upper``) or ">= delta" (not
    ``upper``) for ``loss`` losses and ``gain`` gains among ``n`` pairs (kept on disk: a report prints it
    again at every run)."""
    key = (int(loss), int(gain), int(n), float(delta), bool(upper))
    return _kept("p", key, lambda: _p_value(*key))


@functools.lru_cache(maxsize=4096)
def _p_value(loss: int, gain: int, n: int, delta: float, upper: bool = True) -> float:
    """``exact_p`` computed (in memory only: a bound's search tries a dozen differences it never asks again)."""
    delta = float(np.clip(delta, -1.0, 1.0))
    trivial = _trivial_p(loss, gain, n, delta, upper)
    if trivial is not None:
        return trivial
    table_delta = round(delta, 12)  # the statistic's difference, as the table's cache key rounds it
    observed = float(_statistic(np.array([float(loss)]), np.array([float(gain)]), n, table_delta, upper)[0])
    return _sup_tail(_cuts(observed, n, table_delta, upper), n, delta, upper)


def _sup_tail(cut: np.ndarray, n: int, delta: float, upper: bool) -> float:
    """sup over the null line of the probability of the region that ``cut`` draws (``_cuts``): a grid of
    FINE points, then finer grids around each of its LOCAL_PEAKS best local maxima (the tail along the line
    has several bumps: one refined peak let a neighbouring one pass alpha)."""
    k = np.arange(n + 1)
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
    margin cannot disagree (a supremum over a grid alone read 262 pairs, 15 losses and 13 gains as "not worse"
    with p = 0.025014).
    The crossings are found once per outcome (``_crossings``, kept in memory and on disk) and only moved to an
    anchor's edge where its test says otherwise, so the scores table and the verdict table share one search."""
    key = (int(loss), int(gain), int(n), float(alpha))
    lower, upper = _kept("bounds", key, lambda: _crossings(*key))
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

    def p(delta: float, upper: bool) -> float:
        return _p_value(loss, gain, n, float(delta), upper)

    def crossing(upper: bool) -> float:
        reject_end, keep_end = (-1.0, mean) if upper else (1.0, mean)
        if p(keep_end, upper) <= alpha:  # cannot happen for a sane test; be safe
            return keep_end
        if p(reject_end, upper) > alpha:
            return reject_end
        # a bracket of a few standard errors first (Brent's method then needs about half the steps it takes
        # from the whole range)
        sd = math.sqrt(max((loss + gain) / n - mean * mean, 1 / n) / n)
        toward = -1.0 if upper else 1.0
        for width in (4.0, 8.0):
            edge = float(np.clip(mean + toward * width * sd, -1.0, 1.0))
            if edge == reject_end:
                break
            if p(edge, upper) <= alpha:
                reject_end = edge
                break
            keep_end = edge
        root = brentq(lambda d: p(d, upper) - alpha - 1e-15, reject_end, keep_end, xtol=5e-5)
        step = 5e-5 if keep_end > reject_end else -5e-5
        return float(root + step) if p(root, upper) <= alpha else float(root)

    return crossing(True), crossing(False)


@functools.lru_cache(maxsize=256)
def rejection_cuts(n: int, delta: float, alpha: float, *, upper: bool = True) -> np.ndarray:
    """The region of the outcomes of n pairs that the exact test rejects at ``alpha``, as one cut per count k
    of discordant pairs: it rejects k - g losses and g gains exactly when g >= cut[k] (``upper``; g <= cut[k]
    otherwise).  It depends on (n, delta, alpha), never on a cell: a plan's candidate n's and a simulation's
    trials read it, and it is kept in memory and on disk (read-only int64, n + 1 entries)."""
    key = (int(n), float(delta), float(alpha), bool(upper))
    raw = _kept("cuts", key, lambda: _region_cuts(*key).astype(np.int64).tobytes())
    cut = np.frombuffer(raw, dtype=np.int64)
    cut.flags.writeable = False
    return cut


class _GridTails:
    """P(the region) at fixed points of the null line, for one region after another: the trinomial terms are
    computed once, and a conditional tail again only where the region's cut moved.  The same terms summed
    in the same order as ``_tail``'s, so the same bits."""

    def __init__(self, points: np.ndarray, n: int, delta: float, upper: bool) -> None:
        self.points, self.upper = points, upper
        self.rows, self.cols, self.weights, share = _line_terms(points, delta, n)
        self.q = share[self.rows]
        self.cut = np.full(n + 1, -2, dtype=np.int64)  # no region yet: every term is computed the first time
        self.cond = np.zeros(len(self.rows))

    def __call__(self, cut: np.ndarray) -> np.ndarray:
        moved = np.nonzero(cut != self.cut)[0]
        if len(moved):
            changed = np.isin(self.cols, moved)
            self.cond[changed] = _conditional(cut[self.cols[changed]].astype(np.int64), self.cols[changed],
                                              self.q[changed], self.upper)
            self.cut = cut.astype(np.int64).copy()
        out = np.bincount(self.rows, weights=self.weights * self.cond, minlength=len(self.points))
        return np.clip(out, 0.0, 1.0)


class _LineSearch:
    """Whether a region's supremum on the null line passes alpha, for the many regions a critical value's
    search tries at one (n, delta): ``_sup_tail``'s grids, each kept as ``_GridTails`` (successive regions
    differ in a few cuts and mostly refine the same peaks), stopping at the first point past alpha.  The
    decision is ``_sup_tail(cut, ...) > alpha``'s, bit for bit."""

    def __init__(self, n: int, delta: float, upper: bool) -> None:
        self.n, self.delta, self.upper = n, delta, upper
        lo, hi = _line(delta)
        self.fine = np.linspace(lo, hi, FINE) if hi > lo else np.array([lo])
        self.grids: dict[tuple[float, float, int], _GridTails] = {}

    def _tails(self, points: np.ndarray, cut: np.ndarray) -> np.ndarray:
        key = (float(points[0]), float(points[-1]), len(points))
        if key not in self.grids:
            self.grids[key] = _GridTails(points, self.n, self.delta, self.upper)
        return self.grids[key](cut)

    def exceeds(self, cut: np.ndarray, alpha: float) -> tuple[bool, float, float]:
        """(whether the supremum passes alpha, the largest tail seen and the p_l it was seen at: guides for
        the search, no more)."""
        values = self._tails(self.fine, cut)
        top = int(values.argmax())
        best, where = float(values[top]), float(self.fine[top])
        if best > alpha or len(self.fine) == 1:
            return best > alpha, best, where
        for i in np.argsort(values)[::-1][:LOCAL_PEAKS]:
            local, j = self.fine, int(i)
            for _ in range(2):
                local = np.linspace(local[max(j - 1, 0)], local[min(j + 1, len(local) - 1)], GRID)
                found = self._tails(local, cut)
                j = int(found.argmax())
                if found[j] > best:
                    best, where = float(found[j]), float(local[j])
                if best > alpha:
                    return True, best, where
        return False, best, where


MASS_VALUES = 1 << 14  # a bracket of at most this many values is searched by the weight of its outcomes
STEP = 0.02  # the first bracket's half-width around the normal critical value, doubled until it brackets


def _outcome_weights(by_k: np.ndarray, lo: float, hi: float, n: int, p_loss: np.ndarray, delta: float
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(T' of the outcomes with lo <= T' <= hi, their trinomial probabilities at each (p_loss, p_loss +
    delta): one row a point)."""
    from scipy.special import gammaln, xlogy

    k, gain = np.nonzero((by_k >= lo) & (by_k <= hi))
    loss, rest = (k - gain).astype(float), (n - k).astype(float)
    p_loss = np.asarray(p_loss, dtype=float)[:, None]
    p_gain = p_loss + delta
    log = (gammaln(n + 1) - gammaln(loss + 1) - gammaln(gain + 1.0) - gammaln(rest + 1) + xlogy(loss, p_loss)
           + xlogy(gain, p_gain) + xlogy(rest, np.maximum(1 - p_loss - p_gain, 0.0)))
    return by_k[k, gain], np.exp(log)


def _region_cuts(n: int, delta: float, alpha: float, upper: bool) -> np.ndarray:
    """The cuts of the region T' >= t*, t* the smallest of the table's values whose region's supremum is at
    most alpha (the p-value falls as T' rises; bd70c94 bisected over all the values, about 20 suprema at
    n = 1,000).  Here: bracket t* around the standard normal's critical value (T is about standard normal
    on the null line), halve the bracket down to ``MASS_VALUES`` values, then guess t* from the weights of
    the outcomes in the bracket at the two ends' peaks (the supremum jumps where an outcome of weight enters
    and stays flat over the many that weigh nothing, which bisection walks through one halving at a time);
    a wrong guess is followed by a halving.  Every step's decision is a supremum's (``_LineSearch``), so the
    answer is the bisection's wherever the supremum falls as T' rises, as both searches assume."""
    from scipy.special import ndtri

    by_k = _statistic_table(n, round(delta, 12), upper)
    values = np.unique(by_k[np.isfinite(by_k)])
    none = np.full(n + 1, n + 1 if upper else -1, dtype=np.int64)
    if not len(values):
        return none
    line = _LineSearch(n, delta, upper)
    seen: dict[int, tuple[bool, float, float]] = {}

    def exceeds(i: int) -> bool:
        if i not in seen:
            seen[i] = line.exceeds(_thresholds(by_k, float(values[i]), upper)[1], alpha)
        return seen[i][0]

    def by_weight(lo: int, hi: int) -> tuple[int, bool]:
        """The first index whose region the weights say keeps alpha, judged at the peaks the two ends were
        seen at, and what they say there."""
        (_, s_lo, at_lo), (_, s_hi, at_hi) = seen[lo], seen[hi]
        found, weight = _outcome_weights(by_k, float(values[lo]), float(values[hi]), n, np.array([at_lo, at_hi]),
                                         delta)
        index = np.searchsorted(values, found) - lo  # 0 .. hi - lo
        lose = np.bincount(index, weights=weight[0], minlength=hi - lo + 1)  # leaving the region, from lo up
        gain = np.bincount(index, weights=weight[1], minlength=hi - lo + 1)  # in the region, from hi down
        from_lo = s_lo - np.cumsum(lose)[:-2]  # the region of lo + 1 .. hi - 1, at lo's peak
        from_hi = s_hi + np.cumsum(gain[::-1])[::-1][1:-1]  # the same regions at hi's peak
        keeps = np.nonzero(np.maximum(from_lo, from_hi) <= alpha)[0]
        return (lo + 1 + int(keeps[0]), True) if len(keeps) else (hi - 1, False)

    hi = len(values) - 1
    if exceeds(hi):
        return none
    lo = -1  # the region of every outcome (probability 1)
    i = int(np.clip(np.searchsorted(values, ndtri(1.0 - alpha)), 0, hi - 1))
    step, first = STEP, None
    while lo < i < hi:  # bracket around the normal critical value, widening until both sides are seen
        above = exceeds(i)
        lo, hi = (i, hi) if above else (lo, i)
        if first is None:
            first = above
        elif above != first:
            break
        i = int(np.searchsorted(values, float(values[i]) + (step if above else -step)))
        step *= 2
    weigh = True
    while hi - lo > 1:
        guess = None
        if weigh and lo >= 0 and hi - lo - 1 <= MASS_VALUES:
            i, guess = by_weight(lo, hi)
        else:
            i = (lo + hi) // 2
        if exceeds(i):
            lo = i
        else:
            hi = i
        weigh = guess is None or guess == (hi == i)  # a wrong guess: one halving before the next
    return _thresholds(by_k, float(values[hi]), upper)[1].astype(np.int64)


@functools.lru_cache(maxsize=8)  # a simulation looks thousands of trials up in one table
def rejection_table(n: int, delta: float, alpha: float, *, upper: bool = True) -> np.ndarray:
    """Boolean (loss, gain) table of the outcomes of n pairs that the exact test rejects at ``alpha``: what a
    simulation looks its verdicts up in (``rejection_cuts`` spread over the table)."""
    cut = rejection_cuts(n, delta, alpha, upper=upper)
    loss = np.arange(n + 1)[:, None]
    gain = np.arange(n + 1)[None, :]
    k = np.minimum(loss + gain, n)
    rejected = (gain >= cut[k]) if upper else (gain <= cut[k])
    rejected &= loss + gain <= n
    rejected.flags.writeable = False
    return rejected


def binary_tail(p_loss: np.ndarray, delta: float, n: int, cut: np.ndarray, upper: bool = True) -> np.ndarray:
    """P(the region ``cut`` draws) at each (p_l, p_l + delta): what a plan sums its power with."""
    return _tail(np.asarray(p_loss, dtype=float), delta, n, np.arange(n + 1), cut, upper)


# -- the disk cache -------------------------------------------------------------------------------------------

CACHE_NAME = "exact"


def _kept(kind: str, key: tuple, compute: Any) -> Any:
    """``compute()``, kept in a diskcache store under ``$CTXCOMP_CACHE_DIR/exact`` by ``kind``, ``key`` and
    everything else that changes the number (this module's version and grid, numpy's and scipy's versions):
    a report's second run and a plan over cells that share n read it back.  A folder that cannot be used
    only costs the time (the number is computed, not kept)."""
    import sqlite3

    store = _store(str(_cache_dir()), os.getpid())  # a forked worker opens its own connection
    name = json.dumps([kind, EXACT_VERSION, FINE, GRID, LOCAL_PEAKS, TIE, _libraries(), list(key)])
    found = None
    if store is not None:
        try:
            found = store.get(name)
        except (OSError, sqlite3.Error):  # a store gone bad: the number is computed
            found = None
    if found is not None:
        return json.loads(found) if kind == "bounds" else found
    value = compute()
    if store is not None:
        try:
            store.set(name, json.dumps(list(value)) if kind == "bounds" else value)
        except (OSError, sqlite3.Error):  # a full or read-only disk: the number stands, unkept
            pass
    return value


def _cache_dir() -> Path:
    from core.paths import cache_root

    return cache_root() / CACHE_NAME


@functools.lru_cache(maxsize=8)
def _store(directory: str, _process: int) -> Any:
    from core.caches import CacheError, open_store

    try:
        return open_store(directory, "exact test")
    except CacheError:
        return None


@functools.lru_cache(maxsize=1)
def _libraries() -> str:
    from core.versions import package_version

    return f"numpy={package_version('numpy')},scipy={package_version('scipy')}"


__all__ = ["binary_tail", "exact_bounds", "exact_p", "rejection_cuts", "rejection_table"]

"""Tests and confidence sets for a bounded mean by betting (Waudby-Smith & Ramdas 2024, "Estimating means of
bounded random variables by betting", JRSS B 86(1):1-27).

To test H0 "E[X] <= 0" for X >= -A, a gambler starts with wealth 1 and at step i stakes a fraction
lambda_i in [0, c/A] (c < 1) chosen from the past only: K_i = K_{i-1} (1 + lambda_i X_i).  Under H0, K is a
nonnegative supermartingale, so by Ville's inequality P(sup_i K_i >= 1/alpha) <= alpha: the test may be
looked at after every observation and stopped at any time (anytime-valid), and nothing about X's shape
is assumed beyond its lower bound -- not symmetry, not a normal limit.  That is the property the
"not worse" verdicts need: with rare one-sided losses the shifted differences are skewed, and a test that
assumes symmetry says "not worse" far too often.

The unit here is a document (a cluster of questions): X_c = S_c - delta n_c, the sum of the paired
differences of its n_c questions less delta per question, so the null is about the question-weighted mean
(the estimand the report prints) while documents are the independent draws (``sample: {by: document}``).
Each difference lies in [-r, r], so X_c >= -(r + delta) N with N the largest document's question count.

- The stake (``stakes``): lambda_i = mu_{i-1} / (sigma2_{i-1} + mu_{i-1}^2), clipped to [0, c] on the
  scale of A: the approximate growth-rate-optimal bet ("aGRAPA", WSR sec. B.3), with mu the mean of the
  past outcomes (0 before any) and sigma2 their variance about the running means, shrunk towards 1/4 by one
  pseudo-observation.
- ``fixed_n_stakes`` (what the fixed-n test bets): with n known in advance the stake is tuned to it, as
  WSR sec. 5 tunes its "hedged" capital process: lambda_i = sqrt(2 log(1/alpha) / (n m2_{i-1})), with m2 the
  mean square of the past outcomes (one pseudo-observation of 1/4), clipped to [0, cap_i].  By
  log(1 + lambda y) ~ lambda y - lambda^2 y^2 / 2, the bet that clears log(1/alpha) with the smallest sum of
  outcomes: the test then needs sum(y) >= sqrt(2 log(1/alpha) sum(y^2)), against about 1.5x that for the
  growth-optimal bet, which spends the first units learning.  The cap cap_i is one of ``FIXED_CAPS``
  (0.8, 0.99): the one whose constant bet the past outcomes favour, by the largest
  z = (n m(c) - log(1/alpha)) / sqrt(n v(c)), with m(c) and v(c) the mean and variance of log(1 + c y) over
  the past outcomes and a pseudo-pair y = +-1/2 (a normal approximation of the final log-wealth).  Where
  the outcomes are mostly small gains (few changed answers) the tuned stake passes any cap and the larger
  cap grows fastest; where a document can lose most of its questions the lower cap loses less on it
  (docs/metrics.md: at 4% discordance and 1.5x the z-test's n the power rises from 0.26 to 0.34, within 0.01
  elsewhere; a third cap of 0.9 changed nothing measurable).  Any predictable stake keeps K a nonnegative
  supermartingale under H0, so the test stays valid whatever the choice; it is tuned for n, not for
  stopping early (``sequence_log_wealth``, the sequential rule, keeps the growth-optimal bet).
- ``one_sided_e``: K_n, averaged over B seeded random orders of the units at fixed n (a mean of e-values is
  an e-value: the average removes the dependence of one bet sequence on the order, WSR sec. 6).
- ``sequence_log_wealth``: log K_i along one order (the sampling order), for sequential looks.
- ``bounds``: the confidence interval both one-sided tests invert, on a grid of delta refined by bisection.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

CAP = 0.75  # the largest stake, as a share of 1/A: a loss of A costs at most 75% of the wealth
FIXED_CAPS = (0.8, 0.99)  # the fixed-n test's caps, one chosen per step (docstring); with 0.99 six agreeing
# documents bound a difference to +-46.2 points, the limit being +-46.0
PERMUTATIONS = 16  # random orders averaged at fixed n
BLOCK = 2_000_000  # outcomes a fixed-n e-value computation holds at once (memory)
PRIOR_VARIANCE = 0.25
SEED = 0


def stakes(y: np.ndarray, cap: float = CAP) -> np.ndarray:
    """The predictable stakes lambda_i for normalised outcomes ``y`` (..., T) >= -1: each uses y_1..y_{i-1}.
    Written in place into two buffers (``plan`` simulates millions of bets; half the time of the plain form,
    the same floats)."""
    if y.shape[-1] == 0:
        return np.zeros(y.shape)
    count = np.arange(1, y.shape[-1], dtype=float)  # observations before step i (i >= 2)
    mean = np.empty(y.shape, dtype=float)  # mu_{i-1}: 0 before any observation
    mean[..., 0] = 0.0
    np.cumsum(y[..., :-1], axis=-1, out=mean[..., 1:])
    mean[..., 1:] /= count
    work = np.subtract(y, mean)
    np.multiply(work, work, out=work)
    var = np.empty_like(mean)  # sigma2_{i-1}, shrunk towards PRIOR_VARIANCE by one pseudo-observation
    var[..., 0] = PRIOR_VARIANCE
    np.cumsum(work[..., :-1], axis=-1, out=var[..., 1:])
    var[..., 1:] += PRIOR_VARIANCE
    var[..., 1:] /= count + 1
    var += np.multiply(mean, mean, out=work)
    return np.clip(np.divide(mean, var, out=mean), 0.0, cap, out=mean)


def _constant_bet_z(y: np.ndarray, stake: float, n: int, alpha: float) -> np.ndarray:
    """For each step i, z = (n m - log(1/alpha)) / sqrt(n v) of the constant ``stake``: m and v the mean and
    variance of log(1 + stake y) over y_1..y_{i-1} and the pseudo-pair y = +-1/2."""
    growth = np.log1p(np.multiply(y, stake))
    pair = (math.log1p(stake / 2), math.log1p(-stake / 2))
    first = np.cumsum(growth, axis=-1)
    first -= growth  # the sums before each step
    np.square(growth, out=growth)
    second = np.cumsum(growth, axis=-1)
    second -= growth
    count = np.arange(1, n + 1, dtype=float)
    first += sum(pair) / 2
    first /= count
    second += (pair[0] ** 2 + pair[1] ** 2) / 2
    second /= count
    second -= np.square(first, out=growth)
    np.maximum(second, 1e-300, out=second)
    second *= n
    first *= n
    first -= math.log(1 / alpha)
    return np.divide(first, np.sqrt(second, out=second), out=first)


def fixed_n_stakes(y: np.ndarray, alpha: float, caps: tuple[float, ...] = FIXED_CAPS) -> np.ndarray:
    """The stakes tuned to the known number of units n = y.shape[-1] (module docstring): each uses y_1..y_{i-1}."""
    n = y.shape[-1]
    if n == 0:
        return np.zeros(y.shape)
    square = np.empty(y.shape, dtype=float)  # n m2_{i-1}: (1/4 + sum of past squares) / i, times n
    square[..., 0] = PRIOR_VARIANCE
    np.cumsum(np.square(y[..., :-1]), axis=-1, out=square[..., 1:])
    square[..., 1:] += PRIOR_VARIANCE
    square /= np.arange(1, n + 1, dtype=float)
    square *= n
    np.divide(2 * np.log(1 / alpha), square, out=square)
    np.sqrt(square, out=square)
    if len(caps) == 1:
        return np.minimum(square, caps[0], out=square)
    tuned = square.reshape(-1, n)  # a view: rows are sequences
    rows = (tuned > min(caps)).any(axis=1)  # elsewhere no cap binds, and none needs choosing
    if rows.all():
        np.minimum(tuned, _chosen_caps(y.reshape(-1, n), n, alpha, caps), out=tuned)
    elif rows.any():
        tuned[rows] = np.minimum(tuned[rows], _chosen_caps(y.reshape(-1, n)[rows], n, alpha, caps))
    return square


def _chosen_caps(y: np.ndarray, n: int, alpha: float, caps: tuple[float, ...]) -> np.ndarray:
    """Each step's cap: the one whose constant bet has the largest past z (ties: the first listed)."""
    cap = np.full(y.shape, caps[0])
    best = _constant_bet_z(y, caps[0], n, alpha)
    for c in caps[1:]:
        z = _constant_bet_z(y, c, n, alpha)
        cap[z > best] = c
        np.maximum(best, z, out=best)
    return cap


def _normalised(sums: np.ndarray, sizes: np.ndarray, delta: np.ndarray | float, values: tuple[float, float],
                bound: float, upper: bool) -> np.ndarray:
    """X / A for the test of "mean <= delta" (``upper``) or the mirror "mean >= delta" (X negated), >= -1:
    each question's value lies in ``values`` = (low, high), so X_c >= (low - delta) n_c >= (low - delta) N."""
    delta = np.asarray(delta, dtype=float)[..., None, None]
    x = sums - delta * sizes
    scale = (delta - values[0]) * bound if upper else (values[1] - delta) * bound
    return (x if upper else -x) / np.maximum(scale, 1e-12)


def log_wealth(y: np.ndarray, cap: float = CAP, *, alpha: float | None = None) -> np.ndarray:
    """log K_i along the last axis (cumulative): growth-optimal stakes, or with ``alpha`` the fixed-n ones."""
    growth = stakes(y, cap) if alpha is None else fixed_n_stakes(y, alpha)
    growth *= y
    return np.cumsum(np.log1p(growth, out=growth), axis=-1, out=growth)


def orders(count: int, permutations: int = PERMUTATIONS, seed: int = SEED) -> np.ndarray:
    """``permutations`` seeded random orders of ``count`` units (B x count indices)."""
    rng = np.random.default_rng(seed)
    return np.argsort(rng.random((permutations, count)), axis=1)


def one_sided_e(sums: np.ndarray, sizes: np.ndarray, delta: np.ndarray | float, *, values: tuple[float, float],
                bound: float, upper: bool, order: np.ndarray, alpha: float | None = None) -> np.ndarray:
    """The fixed-n e-value of H0 "mean <= delta" (``upper``) or "mean >= delta", averaged over the orders
    (B x C indices); vectorized over an array of ``delta``.  ``alpha``: bet with the stakes tuned to n for a
    test at that level (``fixed_n_stakes``); None: the growth-optimal stakes."""
    deltas = np.asarray(delta, dtype=float).ravel()
    block = max(1, BLOCK // max(order.size, 1))  # deltas at a time: the fixed-n stakes hold several such arrays
    out = np.empty(deltas.shape)
    for start in range(0, len(deltas), block):
        part = deltas[start:start + block]
        y = _normalised(sums[order], sizes[order], part, values, bound, upper)  # (deltas, B, C)
        final = log_wealth(y, alpha=alpha)[..., -1]
        with np.errstate(over="ignore", divide="ignore"):  # a wealth past 1e308 is infinite evidence: inf >= 1/alpha
            out[start:start + block] = np.exp(final).mean(axis=-1)
    return out.reshape(np.shape(delta))


def sequence_log_wealth(sums: np.ndarray, sizes: np.ndarray, delta: float, *, values: tuple[float, float],
                        bound: float, upper: bool) -> np.ndarray:
    """log K_i after each unit, in the order given (the sampling order): what sequential looks read."""
    return log_wealth(_normalised(sums[None, :], sizes[None, :], delta, values, bound, upper))[0]


def bounds(reject: Callable[[np.ndarray, bool], np.ndarray], values: tuple[float, float], mean: float, *,
           grid: int = 801, tol: float = 5e-5, anchors: tuple[float, ...] = ()) -> tuple[float, float]:
    """(lower, upper) = (inf of the deltas "mean <= delta" does not reject, sup of those "mean >= delta" does
    not), given ``reject(deltas, upper)``: a grid over the values' range, then bisection at each crossing.
    A bound at the end of the range is that end (every delta beyond it is impossible).  The grid's step,
    a quarter of a point on [-1, 1], holds every margin of whole or quarter points, and other ``anchors``
    are added: with the margin on the grid, "lower > -margin" holds exactly when every grid delta up to the
    margin is rejected, so a verdict read off the bound is the test's own, and a cell's interval is the
    same whichever table asks for it."""
    base = np.linspace(values[0], values[1], grid)
    extra = [a for a in anchors if values[0] < a < values[1] and np.min(np.abs(base - a)) > 1e-12]
    deltas = np.unique(np.concatenate([base, extra]))
    grid = len(deltas)
    out = []
    for upper in (True, False):
        rejected = reject(deltas, upper)
        order = range(grid) if upper else range(grid - 1, -1, -1)
        first_kept = next((i for i in order if not rejected[i]), None)
        if first_kept is None:
            out.append(mean)
            continue
        if (upper and first_kept == 0) or (not upper and first_kept == grid - 1):
            out.append(float(deltas[first_kept]))
            continue
        a, b = deltas[first_kept - 1 if upper else first_kept + 1], deltas[first_kept]  # a rejected, b kept
        while abs(b - a) > tol:
            mid = (a + b) / 2
            a, b = (mid, b) if reject(np.array([mid]), upper)[0] else (a, mid)
        out.append(float(b))
    return out[0], out[1]


__all__ = ["CAP", "FIXED_CAPS", "PERMUTATIONS", "bounds", "fixed_n_stakes", "log_wealth", "one_sided_e", "orders", "sequence_log_wealth", "stakes"]

"""The exact test's fast path (issue 50, speed) against the reference computation it replaced.

The reference reads everything off the whole outcome table with its monotone hull (``_statistic_table``,
``_thresholds``) and finds a region's critical value by plain bisection over all the table's values; the fast
path searches each threshold along its anti-diagonal, interpolates the critical value's search, and keeps
regions, bounds and p-values in memory and on disk.  Both take the supremum over the same grid of the null line
(``_sup_tail``, the test's definition), so they must agree bit for bit.  The queries are made in an order where
a cache keyed without alpha, the difference or the side would hand one query another's answer.
"""
from __future__ import annotations

import functools
import os

import numpy as np
import pytest

from experiments.inference import exact

CELLS_N = (7, 30, 101, 262)
DIFFERENCES = (-0.1, -0.05, 0.0, 0.03)
ALPHAS = (0.05, 0.025)


def _forget_memory() -> None:
    """What a new process starts with: no in-memory cache of the module."""
    for value in vars(exact).values():
        if isinstance(value, functools._lru_cache_wrapper):
            value.cache_clear()


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path))
    _forget_memory()
    yield tmp_path / exact.CACHE_NAME
    _forget_memory()


def _reference_p(loss: int, gain: int, n: int, delta: float, upper: bool) -> float:
    by_k = exact._statistic_table(n, round(delta, 12), upper)
    cut = exact._thresholds(by_k, float(by_k[loss + gain, gain]), upper)[1]
    return exact._sup_tail(cut, n, delta, upper)


def _reference_cuts(n: int, delta: float, alpha: float, upper: bool) -> np.ndarray:
    """bd70c94's ``rejection_table``: bisection over every value of the table."""
    by_k = exact._statistic_table(n, round(delta, 12), upper)
    values = np.unique(by_k[np.isfinite(by_k)])

    def sup(v: float) -> float:
        return exact._sup_tail(exact._thresholds(by_k, v, upper)[1], n, delta, upper)

    if sup(float(values[-1])) > alpha:
        return np.full(n + 1, n + 1 if upper else -1)
    lo, hi = 0, len(values) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if sup(float(values[mid])) <= alpha else (mid, hi)
    crit = values[hi] if sup(float(values[lo])) > alpha else values[lo]
    return exact._thresholds(by_k, float(crit), upper)[1]


def _cells(n: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(n)
    out = [(0, 0), (n // 10, n // 20), (1, 0)]
    for _ in range(3):
        loss = int(rng.integers(0, n // 3 + 1))
        out.append((loss, int(rng.integers(0, n // 3 + 1))))
    return out


def test_tangos_statistic_is_monotone_so_its_hull_is_itself():
    """The premise of searching thresholds along anti-diagonals: no outcome has a neighbour with fewer losses
    or more gains and a smaller T (to the last bit), so the table's hull changes nothing."""
    for n in (5, 12, 40, 150, 301):
        loss = np.arange(n + 1, dtype=float)[:, None]
        gain = np.arange(n + 1, dtype=float)[None, :]
        valid = loss + gain <= n
        for delta in np.round(np.linspace(-0.95, 0.95, 39), 12):
            for upper in (True, False):
                raw = exact._statistic(loss, gain, n, float(delta), upper)
                hull = exact._statistic_table(n, float(delta), upper)
                by_k = hull[(loss + gain)[valid].astype(int), np.broadcast_to(gain, valid.shape)[valid].astype(int)]
                assert np.array_equal(raw[valid], by_k), (n, delta, upper)


@pytest.mark.parametrize("n", CELLS_N)
def test_p_values_and_regions_equal_the_reference_for_every_alpha_difference_and_side(n, fresh_cache):
    for alpha in ALPHAS:  # alpha outermost: a region kept without alpha answers the second alpha wrongly
        for delta in DIFFERENCES:
            for upper in (True, False):
                expected = _reference_cuts(n, delta, alpha, upper)
                assert np.array_equal(exact.rejection_cuts(n, delta, alpha, upper=upper), expected), \
                    (n, delta, alpha, upper)
                table = exact.rejection_table(n, delta, alpha, upper=upper)
                loss, gain = np.nonzero(table)
                k = loss + gain
                assert np.all(gain >= expected[k]) if upper else np.all(gain <= expected[k])
                assert table.sum() == sum(max(0, min(kk, n) - int(c) + 1) if upper else max(0, min(int(c), kk) + 1)
                                          for kk, c in enumerate(expected))
    for delta in DIFFERENCES:
        for upper in (True, False):
            for loss, gain in _cells(n):
                assert exact.exact_p(loss, gain, n, delta, upper=upper) == _reference_p(loss, gain, n, delta, upper), \
                    (n, loss, gain, delta, upper)


def test_what_is_kept_on_disk_is_read_back_by_its_own_key(fresh_cache):
    """A second process (memory emptied, disk kept) gets each query's own answer back, in another order, and
    reads it from the disk store (an answer planted there under the key is what comes back)."""
    n = 60
    queries = [(alpha, delta, upper) for alpha in ALPHAS for delta in DIFFERENCES for upper in (True, False)]
    cold = {q: exact.rejection_cuts(n, q[1], q[0], upper=q[2]).copy() for q in queries}
    bounds = {alpha: exact.exact_bounds(5, 2, n, alpha) for alpha in ALPHAS}
    p_values = {(delta, upper): exact.exact_p(5, 2, n, delta, upper=upper) for delta in DIFFERENCES
                for upper in (True, False)}
    assert bounds[0.05] != bounds[0.025]
    assert len({c.tobytes() for c in cold.values()}) > len(queries) // 2  # the answers do differ by key
    _forget_memory()
    for q in reversed(queries):
        assert np.array_equal(exact.rejection_cuts(n, q[1], q[0], upper=q[2]), cold[q]), q
    for alpha in reversed(ALPHAS):
        assert exact.exact_bounds(5, 2, n, alpha) == bounds[alpha]
    for (delta, upper), p in reversed(p_values.items()):
        assert exact.exact_p(5, 2, n, delta, upper=upper) == p
    assert fresh_cache.is_dir()
    _forget_memory()  # an answer planted on disk is what the next process reads: the disk is read, not redone
    store = exact._store(str(fresh_cache), os.getpid())
    planted = [key for key in store.iterkeys() if '"bounds"' in key and ", 0.025]" in key]
    assert len(planted) == 1
    store.set(planted[0], "[-0.5, 0.5]")
    _forget_memory()
    assert exact.exact_bounds(5, 2, n, 0.025) == (-0.5, 0.5)
    assert exact.exact_bounds(5, 2, n, 0.05) == bounds[0.05]


def test_a_region_that_is_not_an_up_set_is_refused():
    # gains >= cut[k]: at k = 2 two gains are rejected, at k = 3 none (one more loss would have to be)
    assert exact._is_up_set(np.array([4, 4, 2, 4]), True) is False
    assert exact._is_up_set(np.array([4, 1, 2, 3]), True) is True
    assert exact._is_up_set(np.array([0, 0, 0, 1]), False) is True
    assert exact._is_up_set(np.array([-1, 0, -1, 1]), False) is False

"""The betting stakes and wealth, checked against the formula of the module docstring computed one bet at a
time (an independent loop, not the vectorized code): the in-place form ``plan`` needs for speed must give the
same floats."""
from __future__ import annotations

import math

import numpy as np

from experiments.inference import betting
from tests.support.betting_by_hand import fixed_n_stake


def _stakes_by_hand(y, cap=betting.CAP, prior=betting.PRIOR_VARIANCE):
    out = []
    for i in range(len(y)):
        past = y[:i]
        mu = float(np.mean(past)) if i else 0.0
        running = [float(np.mean(past[:j])) if j else 0.0 for j in range(i)]  # the mean before each past step
        sigma2 = (prior + sum((past[j] - running[j]) ** 2 for j in range(i))) / (i + 1)
        out.append(min(max(mu / (sigma2 + mu * mu), 0.0), cap))
    return np.array(out)


def test_stakes_and_wealth_follow_the_docstring_bet_by_bet():
    rng = np.random.default_rng(4)
    for length in (1, 2, 7, 40):
        for _ in range(5):
            y = np.clip(rng.normal(0.05, 0.4, length), -1.0, None)
            y[rng.random(length) < 0.1] = -1.0  # a rare full loss, where the wealth falls hardest
            np.testing.assert_allclose(betting.stakes(y), _stakes_by_hand(y), rtol=1e-12, atol=1e-15)
            wealth = np.cumsum([math.log1p(s * v) for s, v in zip(_stakes_by_hand(y), y)])
            np.testing.assert_allclose(betting.log_wealth(y), wealth, rtol=1e-12, atol=1e-12)


def test_stakes_are_computed_per_row_and_an_empty_sequence_bets_nothing():
    rng = np.random.default_rng(5)
    y = np.clip(rng.normal(0.0, 0.5, (3, 4, 9)), -1.0, None)
    whole = betting.stakes(y)
    for index in np.ndindex(3, 4):
        np.testing.assert_array_equal(whole[index], betting.stakes(y[index]))
    assert betting.stakes(np.zeros((2, 0))).shape == (2, 0)
    assert betting.log_wealth(np.zeros((2, 0))).shape == (2, 0)


def test_six_agreeing_documents_bound_the_difference_near_the_limit():
    """Issue 50: six documents whose differences are all 0 got [-100, +100] (the growth-optimal bet spends its
    first units learning).  The limit: a law of mean -0.46 on {-1, 0} gives six zeros with probability
    0.54^6 = 0.025, so no valid interval is narrower than about +-46; the bets tuned to n must give at most
    +-60 -- and, being valid, no less than the limit.  With the cap of 0.9 for every step the partial-credit
    cell got +-48.6; the cap chosen per step (0.99 here) gives +-46.2."""
    from experiments.inference.paired import difference_bounds

    assert 0.54 ** 6 > 0.0247
    for arm in (0.5, 0.0, 1.0):
        found = difference_bounds(np.full(6, arm), np.full(6, arm), clusters=[str(i) for i in range(6)])
        assert -0.475 <= found.lower <= -0.459 and 0.459 <= found.upper <= 0.475, (arm, found)


def test_the_fixed_n_stakes_follow_the_docstring_bet_by_bet():
    rng = np.random.default_rng(6)
    alpha = 0.025
    for length in (1, 3, 30, 200):
        y = np.clip(rng.normal(0.05, 0.4, length), -1.0, None)
        y[rng.random(length) < 0.05] = -1.0
        by_hand = [fixed_n_stake(y, i, alpha) for i in range(length)]
        np.testing.assert_allclose(betting.fixed_n_stakes(y, alpha), by_hand, rtol=1e-9)


def test_the_fixed_n_cap_follows_the_outcomes():
    """Mostly small gains: the tuned stake passes every cap and the largest is taken (it grows fastest);
    documents that lose most of their questions now and then: the lower cap.  The choice is made at every
    step, from the earlier outcomes only."""
    alpha = 0.025
    gains = np.full(60, 0.05)
    assert betting.fixed_n_stakes(gains, alpha)[-1] == max(betting.FIXED_CAPS)
    rough = np.array(([0.1] * 9 + [-1.0]) * 6)  # one document in ten loses every question
    stakes = betting.fixed_n_stakes(rough, alpha)
    assert stakes[-1] == min(betting.FIXED_CAPS) and stakes[len(rough) // 2] == min(betting.FIXED_CAPS)


def test_one_sided_e_takes_deltas_in_blocks_with_the_same_floats():
    """The e-values of many differences are computed a block at a time (memory); each equals its own call."""
    rng = np.random.default_rng(8)
    sums, sizes = rng.integers(-3, 4, 40).astype(float), np.full(40, 3.0)
    order = betting.orders(40)
    deltas = np.linspace(-0.9, 0.9, 37)
    kwargs = dict(values=(-1.0, 1.0), bound=3.0, upper=True, order=order, alpha=0.025)
    whole = betting.one_sided_e(sums, sizes, deltas, **kwargs)
    old, betting.BLOCK = betting.BLOCK, 5 * order.size
    try:
        blocked = betting.one_sided_e(sums, sizes, deltas, **kwargs)
    finally:
        betting.BLOCK = old
    np.testing.assert_array_equal(whole, blocked)
    for d, e in zip(deltas[::9], whole[::9]):
        assert betting.one_sided_e(sums, sizes, float(d), **kwargs) == e

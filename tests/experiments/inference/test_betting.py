"""The betting stakes and wealth, checked against the formula of the module docstring computed one bet at a
time (an independent loop, not the vectorized code): the in-place form ``plan`` needs for speed must give the
same floats."""
from __future__ import annotations

import math

import numpy as np

from experiments.inference import betting


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


def test_under_eight_documents_of_partial_credit_the_interval_is_the_whole_range():
    """The floor docs/metrics.md states: the first stake is 0 (nothing seen) and each later one at most CAP of
    what is affordable, so a document multiplies the wealth by at most 1 + CAP, and 7 documents reach at most
    1.75^6 = 28.7 < 40 = 1/alpha (each side at 0.025): whatever the scores, no bound.  At 8 the most extreme
    documents (1.75^7 = 50) can move it."""
    from experiments.inference.paired import difference_bounds

    assert (1 + betting.CAP) ** 6 < 40 < (1 + betting.CAP) ** 7
    for n in (6, 7):
        for full, arm in ((0.5, 0.52), (0.3, 0.99), (0.99, 0.01)):
            found = difference_bounds(np.full(n, full), np.full(n, arm), clusters=[str(i) for i in range(n)])
            assert (found.lower, found.upper) == (-1.0, 1.0), (n, full, arm)
    found = difference_bounds(np.full(8, 0.3), np.full(8, 0.99), clusters=[str(i) for i in range(8)])
    assert -1.0 < found.lower < 0.0 < found.upper < 1.0

"""The exact unconditional test of paired 0/1 scores, against a brute-force computation of its definition.

The reference here shares no code with ``experiments.inference.exact``: every outcome (losses, gains) of n
pairs is enumerated, Tango's score statistic is computed with the restricted maximum likelihood estimate
found by a numerical optimiser (not the closed-form root), its monotone hull by explicit minima, and the
p-value is the maximum over a fine grid of the null line of the summed trinomial probabilities.  The size of
the test is then checked exactly, not by simulation: the rejection probability summed over every outcome, at
many points of the null, never exceeds alpha.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import optimize, stats

from experiments.inference.exact import exact_bounds, exact_p, rejection_table


def _restricted_p_loss(loss, gain, n, delta):
    ties = n - loss - gain
    lo, hi = max(0.0, -delta) + 1e-12, (1 - delta) / 2 - 1e-12

    def nll(p):
        q = p + delta
        terms = [loss * math.log(p) if loss else 0.0, gain * math.log(q) if gain else 0.0,
                 ties * math.log(1 - p - q) if ties else 0.0]
        return -sum(terms)

    return optimize.minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}).x


def _reference(n, delta):
    outcomes = [(lo, g) for lo in range(n + 1) for g in range(n + 1 - lo)]
    t = {}
    for lo, g in outcomes:
        p = _restricted_p_loss(lo, g, n, delta)
        var = max(2 * p + delta - delta * delta, 1e-12)
        t[(lo, g)] = ((g - lo) / n - delta) / math.sqrt(var / n)
    hull = {(lo, g): min(t[(a, b)] for a, b in outcomes if a <= lo and b >= g) for lo, g in outcomes}
    return outcomes, hull


def _reference_p(loss, gain, n, delta, grid=4001):
    outcomes, hull = _reference(n, delta)
    observed = hull[(loss, gain)]
    region = np.array([(lo, g, n - lo - g) for lo, g in outcomes if hull[(lo, g)] >= observed - 1e-9])
    best = 0.0
    for p_loss in np.linspace(max(0.0, -delta), (1 - delta) / 2, grid):
        probs = [p_loss, p_loss + delta, 1 - 2 * p_loss - delta]
        if min(probs) < -1e-12:
            continue
        best = max(best, float(stats.multinomial.pmf(region, n, np.clip(probs, 0, 1)).sum()))
    return best, outcomes, hull


@pytest.mark.parametrize("loss, gain, n", [(0, 0, 12), (1, 0, 12), (0, 3, 12), (2, 5, 12), (4, 1, 12), (0, 0, 9)])
def test_the_p_value_is_the_supremum_over_the_null_of_the_definition(loss, gain, n):
    reference, _, _ = _reference_p(loss, gain, n, -0.05)
    assert exact_p(loss, gain, n, -0.05) == pytest.approx(reference, abs=2e-4)


def test_no_change_at_all_is_the_least_favourable_null_escaping_every_loss():
    # the null that loses 5% of answers and gains none leaves all n unchanged with probability 0.95^n, and
    # that outcome is in the region of any test that rejects on it: so p >= 0.95^n, and 16, 40, 60 identical
    # answers cannot be "not worse" at a 5-point margin (0.44, 0.13, 0.046 > 0.025)
    for n in (16, 40, 60, 72, 80):
        assert exact_p(0, 0, n, -0.05) >= 0.95 ** n - 1e-12
    assert exact_p(0, 0, 60, -0.05) > 0.025 and exact_p(0, 0, 80, -0.05) < 0.025


def test_its_size_is_at_most_alpha_everywhere_in_the_null_computed_exactly():
    n, delta, alpha = 14, -0.05, 0.025
    region = rejection_table(n, delta, alpha)
    outcomes = np.array([(lo, g, n - lo - g) for lo in range(n + 1) for g in range(n + 1 - lo) if region[lo, g]])
    worst = 0.0
    for p_loss in np.linspace(0, 1, 301):
        for p_gain in np.linspace(0, 1, 301):
            if p_loss + p_gain > 1 or p_gain - p_loss > delta + 1e-12:
                continue
            size = float(stats.multinomial.pmf(outcomes, n, [p_loss, p_gain, 1 - p_loss - p_gain]).sum()) \
                if len(outcomes) else 0.0
            worst = max(worst, size)
    assert 0 < worst <= alpha + 1e-9, worst


def test_the_region_is_monotone_and_matches_the_p_values():
    n = 30
    region = rejection_table(n, -0.05, 0.025)
    for lo, g in itertools.product(range(n + 1), repeat=2):
        if lo + g > n:
            continue
        assert region[lo, g] == (exact_p(lo, g, n, -0.05) <= 0.025)
        if region[lo, g]:  # fewer losses or more gains stay rejected
            assert lo == 0 or region[lo - 1, g]
            assert lo + g == n or region[lo, g + 1]


def test_the_bounds_are_the_inverted_tests():
    loss, gain, n = 3, 6, 40
    lower, upper = exact_bounds(loss, gain, n, 0.025)
    assert lower < (gain - loss) / n < upper
    assert exact_p(loss, gain, n, lower - 1e-3) <= 0.025 < exact_p(loss, gain, n, lower + 1e-3)
    assert exact_p(loss, gain, n, upper + 1e-3, upper=False) <= 0.025 < exact_p(loss, gain, n, upper - 1e-3, upper=False)

"""benchmarks/sim_issue50.py's limit of any valid interval (the ``width-limit`` part), on samples where it is
known in closed form (its simulated rates are not checked here)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks import sim_issue50 as sim
from experiments.inference.paired import difference_bounds
from experiments.inference.results import ALPHA


def test_six_agreeing_documents_limit_is_the_all_zero_sample_bound_and_the_report_respects_it():
    """Six one-question documents that all agree: a law of mean -p on {-1, 0} gives that sample with
    probability (1 - p)^6, so no valid lower bound passes -(1 - alpha^(1/6)) = -0.459 (the sure version,
    ``power`` 1); the report's interval for partial-credit scores (betting: +-46.2 points), being valid, is no
    narrower."""
    sizes, sums = np.ones(6), np.zeros(6)
    sure = sim.untilted_limit(sizes, sums, 1.0, power=1.0)
    assert sure == pytest.approx(-(1 - ALPHA ** (1 / 6)), abs=1e-12)
    found = difference_bounds(np.full(6, 0.5), np.full(6, 0.5), clusters=[str(i) for i in range(6)], max_cluster=1)
    assert found.lower <= sure and found.upper >= -sure


def test_simulated_limit_matches_the_closed_form_where_tilting_cannot_help():
    """On a sample without spread Q is one atom, tilting leaves it, and the NP power of the mixed null is
    alpha / (1 - w)^n exactly, so ``lower_limit`` must find the closed form's m.  Tolerance: the NP power is
    alpha over a simulated share of 20,000 null samples near 0.05 (relative SE 3%), which moves w by
    (1 - w) / n x 3% = 0.0045 per SE; 0.02 is over 4 SE."""
    sizes, sums = np.ones(6), np.zeros(6)
    closed = sim.untilted_limit(sizes, sums, 1.0)
    assert closed == pytest.approx(-(1 - (2 * ALPHA) ** (1 / 6)), abs=1e-12)
    assert math.isclose(sim.lower_limit(sizes, sums, 1.0, 20000, 0), closed, abs_tol=0.02)


def test_a_longer_far_document_moves_the_question_weighted_mean_more():
    """The worst document may hold the pool's largest count of questions: with documents of 5 and a bound of
    10, the same mixing weight moves the question-weighted mean by w 10 / ((1 - w) 5 + w 10), not w."""
    sizes, sums = np.full(20, 5.0), np.zeros(20)
    w = 1 - (2 * ALPHA) ** (1 / 20)
    assert math.isclose(sim.untilted_limit(sizes, sums, 10.0), -w * 10 / ((1 - w) * 5 + w * 10), rel_tol=1e-12)
    assert math.isclose(sim.untilted_limit(sizes, sums, 10.0, keep_sizes=True), -w, rel_tol=1e-12)

"""The smallest non-inferior budget controls the family-wise error over a compressor's budgets.

Simulated ladders of four budgets that share one full arm: the fixed-sequence procedure the report uses
(``experiments.report.tradeoff.fixed_sequence``, largest budget first, stopping at the first failure) with the
report's own test, against the naive rule "the smallest budget whose own verdict says not worse"."""
from __future__ import annotations

import numpy as np

from experiments.inference.verdicts import NOT_WORSE, noninferiority_test
from experiments.report.tradeoff import fixed_sequence

MARGIN, N, TRIALS = 10.0, 60, 400


class _Arm:
    def __init__(self, budget):
        self.budget = {"tokens": budget}


def _ladder(rng, truths):
    """One trial: verdict rows from the largest budget down, for arms whose true Δ (points) is ``truths``."""
    full = (rng.random(N) < 0.6).astype(float)
    rows = []
    for budget, truth in zip((2048, 1024, 512, 256), truths):
        # losses where full is right (rate p_lose), gains where it is wrong (0.2): mean difference truth / 100
        p_lose = (0.4 * 0.2 - truth / 100) / 0.6
        u = rng.random(N)
        arm = np.where(full == 1, (u >= p_lose).astype(float), (u < 0.2).astype(float))
        test = noninferiority_test(full, arm, MARGIN, n_resamples=500, seed=int(rng.integers(1 << 30)))
        rows.append({"arm": _Arm(budget), "verdict": test.verdict, "truth": truth})
    return rows


def _false(rows, passed):
    """Whether a budget whose true Δ is at or below -margin was declared not worse."""
    return any(r["truth"] <= -MARGIN for r in rows[:passed])


def test_the_fixed_sequence_keeps_the_family_wise_error_where_the_naive_rule_does_not():
    rng = np.random.default_rng(5)
    fixed = naive = 0
    for _ in range(TRIALS):
        rows = _ladder(rng, [-MARGIN] * 4)  # every budget exactly at the margin: every "not worse" is an error
        passed, _ = fixed_sequence(rows)
        fixed += _false(rows, passed)
        naive += any(r["verdict"] == NOT_WORSE for r in rows)
    se = np.sqrt(0.025 * 0.975 / TRIALS)
    assert fixed / TRIALS <= 0.025 + 3 * se, fixed / TRIALS
    assert naive / TRIALS > fixed / TRIALS + 0.02  # about 1 - 0.975^4 = 0.096 for independent arms


def test_the_ladder_stops_at_the_first_budget_not_shown_not_worse():
    rows = [{"arm": _Arm(b), "verdict": v} for b, v in
            ((2048, NOT_WORSE), (1024, NOT_WORSE), (512, "cannot tell at this n"), (256, NOT_WORSE))]
    assert fixed_sequence(rows) == (2, "stopped at 512: cannot tell at this n")
    assert fixed_sequence(rows[:2]) == (2, "every budget passed")

"""Non-inferiority verdicts: "is the arm worse than full by the margin or more?", kept at their error rate.

``noninferiority_test`` reads the verdict off the interval ``experiments.inference.paired`` inverts, so the
verdict, the interval and the p-value are one computation:

- ``too few documents``: under ``MIN_CLUSTERS`` documents (no valid test can decide; from ``MIN_PAIRS`` pairs
  the interval is still given, the one the scores table prints, but no verdict is read off it);
- ``uninformative``: full's score lies within the margin of the metric's floor (0), or full's and the arm's
  both lie within it of the ceiling (100).  At the floor the arm cannot lose the margin, so "not worse"
  would hold whatever the arm does; with both at the ceiling a cell says nothing about the arm beyond the
  ceiling's own noise (an arm that falls from it is still tested).  Such a cell takes no part in a
  multiple-testing family, and its interval is given as for too few documents;
- ``not worse``: H0 "worse by the margin or more" rejected at alpha: ``lo > -margin``;
- ``worse``: H0 "not worse by more than the margin" rejected at alpha: ``hi < -margin``;
- else ``cannot tell at this n``.

Why not a sign flip: under H0 "mean difference = -margin" a sign flip assumes each (shifted)
difference is symmetric about 0.  When the arm changes few answers and mostly for the worse, the shifted
differences are +0.05 most of the time and -0.95 rarely: mean 0, median positive.  The sign flip then says
"not worse" in 30-37% of trials at 16 questions for a nominal 2.5% (docs/metrics.md has the table).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from experiments.inference.paired import check_margin, check_scores, difference_bounds, one_sided_p
from experiments.inference.results import ALPHA, MIN_CLUSTERS, MIN_PAIRS, PairedDelta
from experiments.inference.units import as_units

NOT_WORSE = "not worse than full by more than the margin"
WORSE = "worse"
CANNOT_TELL = "cannot tell at this n"
TOO_FEW = "too few documents"
UNINFORMATIVE = "uninformative: the reference scores {}"


@dataclass(frozen=True)
class NonInferiority:
    """One non-inferiority test of ``arm - full`` against ``-margin`` (points), as ``noninferiority_test`` makes it.

    ``lo, hi``: the interval the two one-sided tests at ``alpha`` invert; ``verdict`` is "not worse" exactly when
    ``lo > -margin`` and "worse" exactly when ``hi < -margin``.  ``p``: one-sided p-value of H0 "worse by the
    margin or more" (NaN where no test is run: too few documents, uninformative); ``p_worse``: of the mirror H0.
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
    method: str = ""

    @property
    def paired(self) -> PairedDelta:
        """As a ``PairedDelta`` (its interval; the two-sided p of a difference of 0 is not computed here)."""
        return PairedDelta(self.delta, self.lo, self.hi, float("nan"), self.n, self.n_clusters, self.method)


def at_edge(full_mean: float, margin: float, arm_mean: float) -> str | None:
    """"0" when full's mean score (0-1) lies within ``margin`` points of the metric's floor (the arm cannot
    lose the margin there); "100" when full's and the arm's both lie within it of the ceiling (no room to
    show anything beyond the ceiling's noise; an arm that falls from the ceiling is still tested, and can be
    "worse"); None otherwise.  Only ever removes a verdict, so it cannot add an error."""
    m = margin / 100
    if full_mean <= m + 1e-12:
        return "0"
    if full_mean >= 1 - m - 1e-12 and arm_mean >= 1 - m - 1e-12:
        return "100"
    return None


def noninferiority_test(a: Sequence[float], b: Sequence[float], margin: float, *, strata: Sequence[str] | None = None,
                        clusters: Sequence[str] | None = None, alpha: float = ALPHA, n_resamples: int | None = None,
                        seed: int | None = None, max_cluster: int | None = None) -> NonInferiority:
    """Is the arm (``b``, scores in [0, 1]) worse than full (``a``, the same examples) by ``margin`` points or more?

    Valid for every distribution of bounded scores at every n (module docstring, and
    ``experiments.inference.paired`` for the tests).  ``clusters``: the document of each pair (documents are
    the independent units); ``strata``: the task of each pair, for an average over tasks; ``max_cluster``:
    the most questions one document of the task holds.  ``n_resamples`` and ``seed`` are accepted for the old
    signature and unused: the tests are exact or deterministic.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"noninferiority_test: paired samples must have the same length, got {len(x)} and {len(y)}")
    check_scores("noninferiority_test", x, y)
    check_margin("noninferiority_test", margin)
    nan = math.nan
    units = as_units(y - x, strata, clusters)
    point, c = units.statistic, len(units.sums)
    # the floor and ceiling of a stratified row: every stratum's full mean there
    keys = np.asarray(list(strata) if strata is not None else [""] * len(x))
    edges = {at_edge(float(x[keys == k].mean()), margin, float(y[keys == k].mean()))
             for k in dict.fromkeys(keys.tolist())}
    shift = -margin / 100
    untested = TOO_FEW if c < MIN_CLUSTERS else (UNINFORMATIVE.format(edges.pop())
                                                 if len(edges) == 1 and None not in edges else None)
    if untested is not None and len(x) < MIN_PAIRS:
        return NonInferiority(round(100 * point, 2), -math.inf, math.inf, nan, nan, len(x), c, untested, alpha)
    found = difference_bounds(x, y, clusters=clusters, strata=strata, alpha=alpha, max_cluster=max_cluster,
                              anchors=(shift, 0.0))
    if untested is not None:  # the interval the scores table prints for the cell; no verdict is read off it
        return NonInferiority(round(100 * point, 2), round(100 * found.lower, 2), round(100 * found.upper, 2), nan,
                              nan, len(x), c, untested, alpha, found.method)
    if strata is None or len(set(strata)) == 1:
        p = one_sided_p(x, y, shift, upper=True, clusters=clusters, max_cluster=max_cluster, alpha=alpha)
        p_worse = one_sided_p(x, y, shift, upper=False, clusters=clusters, max_cluster=max_cluster, alpha=alpha)
    else:
        p = p_worse = nan
    if found.lower > shift + 1e-12:
        verdict = NOT_WORSE
    elif found.upper < shift - 1e-12:
        verdict = WORSE
    else:
        verdict = CANNOT_TELL
    return NonInferiority(round(100 * point, 2), round(100 * found.lower, 2), round(100 * found.upper, 2), p,
                          p_worse, len(x), c, verdict, alpha, found.method)


def informative(verdict: str) -> bool:
    """Whether a verdict says something of the arm (neither too few documents nor a floor or ceiling)."""
    return verdict in (NOT_WORSE, WORSE, CANNOT_TELL)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's (1979) step-down adjustment of a family of p-values, in the input order.

    The i-th smallest of m p-values becomes ``max over j <= i of min(1, (m - j + 1) p_(j))``; a NaN
    (a test that was not run: too few documents, uninformative) stays NaN and does not count in the family.
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


__all__ = ["CANNOT_TELL", "NOT_WORSE", "NonInferiority", "TOO_FEW", "UNINFORMATIVE", "WORSE", "at_edge",
           "holm", "informative", "noninferiority_test"]

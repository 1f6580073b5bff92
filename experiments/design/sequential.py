"""Group-sequential non-inferiority: look at every cell after each step of a growing sample, stop the cells
that are decided, and keep the error rate at alpha although the data are looked at many times.

Testing at a fixed level after every step inflates the error (five looks at 2.5% reject a true null about
7% of the time).  Alpha spending (Lan & DeMets 1983, Biometrika 70:659) fixes how much of alpha may be spent
by the time a fraction t of the maximum sample is in, and sets each look's boundary so that the chance of
crossing it for the first time, under the null, is exactly the increment spent.  Looks need not be planned:
a boundary depends only on the information fractions of the looks made so far.

- ``obrien_fleming`` (the default): alpha(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t)) (Lan & DeMets' O'Brien-
  Fleming-type function): almost nothing is spent early, so a cell stops early only on strong evidence and
  the last look's boundary stays close to the fixed-n test's;
- ``pocock``: alpha(t) = alpha ln(1 + (e - 1) t): even spending, earlier stops, a higher last boundary.

The statistic of a cell at a look is the studentized sign-flip statistic of the shifted differences: with
``X_c`` the sum over cluster c of (arm - full + margin), Z = sum X_c / sqrt(sum X_c^2).  Under H0 "the arm is
worse by the margin" each X_c is symmetric about 0 and Z has mean 0 and variance 1 under random signs (the
randomization test's normal form, Pitman 1937), whatever the scores' distribution; as the sample grows it is
a Brownian motion in the information fraction, which the boundaries assume.  "Not worse" is decided when Z
crosses the boundary; "worse" when the mirror statistic (H0 "not worse by more than the margin") crosses the
same boundary at the same alpha.  The interval reported at the deciding look is the repeated confidence
interval (Jennison & Turnbull 1989, JRSS B 51:305): the shifts whose statistic stays inside the boundary, so
interval and decision agree as in ``experiments.report.stats.noninferiority_test``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

Spending = Literal["obrien_fleming", "pocock"]
GRID = 801  # points per unit of standard deviation range in the boundary recursion (error ~1e-7)


def spent(t: float, alpha: float, kind: Spending = "obrien_fleming") -> float:
    """How much of the one-sided ``alpha`` may be spent by information fraction ``t`` (0 < t <= 1)."""
    t = min(max(t, 0.0), 1.0)
    if t == 0:
        return 0.0
    if kind == "obrien_fleming":
        return float(2 - 2 * stats.norm.cdf(stats.norm.ppf(1 - alpha / 2) / math.sqrt(t)))
    if kind == "pocock":
        return float(alpha * math.log(1 + (math.e - 1) * t))
    raise ValueError(f"unknown spending function {kind!r} (obrien_fleming or pocock)")


def boundaries(fractions: Sequence[float], alpha: float, kind: Spending = "obrien_fleming") -> list[float]:
    """Z boundaries c_1..c_K for looks at increasing information fractions: under H0, the chance that Z first
    crosses at look k is spent(t_k) - spent(t_{k-1}).

    Computed by the recursive numerical integration of Armitage, McPherson & Rowe (1969) on the score scale
    S = Z sqrt(t), a Brownian motion: the density of S on the region not yet stopped is carried from look to
    look on a grid and the boundary of each look is found by bisection.
    """
    t = [float(x) for x in fractions]
    if not t or any(b <= a for a, b in zip(t, t[1:])) or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise ValueError(f"information fractions must increase within (0, 1], got {t}")
    out: list[float] = []
    grid = density = None
    previous = 0.0
    for k, tk in enumerate(t):
        target = spent(tk, alpha, kind) - spent(previous, alpha, kind)
        if k == 0:
            c = float(stats.norm.isf(target)) if target > 0 else math.inf
            grid = np.linspace(-8 * math.sqrt(tk), c * math.sqrt(tk) if math.isfinite(c) else 8 * math.sqrt(tk),
                               GRID)
            density = stats.norm.pdf(grid, scale=math.sqrt(tk))
        else:
            step = tk - t[k - 1]
            c = _solve_boundary(grid, density, step, tk, target)
            top = c * math.sqrt(tk) if math.isfinite(c) else grid[-1] + 8 * math.sqrt(step)
            new = np.linspace(min(grid[0], -8 * math.sqrt(tk)), top, GRID)
            kernel = stats.norm.pdf((new[:, None] - grid[None, :]) / math.sqrt(step)) / math.sqrt(step)
            density = np.trapezoid(kernel * density[None, :], grid, axis=1)
            grid = new
        out.append(c)
        previous = tk
    return out


def _solve_boundary(grid: np.ndarray, density: np.ndarray, step: float, tk: float, target: float) -> float:
    """The Z boundary at this look whose first-crossing probability from ``density`` (on ``grid``) is ``target``."""
    if target <= 0:
        return math.inf

    def crossing(c: float) -> float:
        tail = stats.norm.sf((c * math.sqrt(tk) - grid) / math.sqrt(step))
        return float(np.trapezoid(density * tail, grid))

    lo, hi = -2.0, 12.0
    if crossing(lo) < target:
        return lo
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if crossing(mid) > target else (lo, mid)
    return (lo + hi) / 2


@dataclass(frozen=True)
class Look:
    """One cell at one look: the statistics, the boundary and what was decided (points for the interval)."""

    n: int
    n_clusters: int
    fraction: float
    boundary: float
    z_not_worse: float
    z_worse: float
    delta: float
    lo: float
    hi: float
    decision: str  # "not worse", "worse" or "" (go on)


def studentized(shifted_sums: np.ndarray) -> float:
    """Z = sum X / sqrt(sum X^2) of shifted cluster sums (0 when every sum is 0)."""
    norm = float(np.sqrt(np.dot(shifted_sums, shifted_sums)))
    return float(shifted_sums.sum()) / norm if norm > 0 else 0.0


def repeated_interval(sums: np.ndarray, sizes: np.ndarray, c: float) -> tuple[float, float]:
    """The shifts delta (on the 0-1 scale) whose studentized statistic of ``sums - delta * sizes`` lies within
    (-c, c): the repeated confidence interval at a look with boundary c.  Z(delta) falls as delta rises (for
    clusters of equal size it is monotone; bisection finds the crossing where it is not)."""
    mean = float(sums.sum() / sizes.sum())
    if not math.isfinite(c):
        return -math.inf, math.inf

    def z(delta: float) -> float:
        return studentized(sums - delta * sizes)

    def cross(target: float, lo: float, hi: float) -> float:
        for _ in range(80):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if z(mid) > target else (lo, mid)
        return (lo + hi) / 2

    width = 2.0 + abs(mean)
    lower = cross(c, mean - width, mean) if z(mean - width) > c else -math.inf
    upper = cross(-c, mean, mean + width) if z(mean + width) < -c else math.inf
    return lower, upper


def look(sums: np.ndarray, sizes: np.ndarray, margin: float, fraction: float, boundary: float) -> Look:
    """The decision for one cell at one look: ``sums``/``sizes`` per cluster of (arm - full), margin in points."""
    shift = margin / 100
    z_nw = studentized(sums + shift * sizes)
    z_w = -z_nw
    lo, hi = repeated_interval(sums, sizes, boundary)
    decision = "not worse" if z_nw >= boundary else "worse" if z_w >= boundary else ""
    delta = float(sums.sum() / sizes.sum())
    return Look(int(sizes.sum()), len(sums), fraction, boundary, z_nw, z_w, round(100 * delta, 2),
                round(100 * lo, 2) if math.isfinite(lo) else -math.inf,
                round(100 * hi, 2) if math.isfinite(hi) else math.inf, decision)


@dataclass(frozen=True)
class Simulated:
    """The rule on simulated trials: per trial, whether it stopped "not worse", whether the fixed test at the
    last look (z at or above z_{1-alpha}) says so, and how many questions it read."""

    not_worse: np.ndarray
    fixed_not_worse: np.ndarray
    used: np.ndarray


def simulate(differences: np.ndarray, looks: Sequence[int], margin: float, *, cluster_size: int = 1,
             alpha: float = 0.025, spending: Spending = "obrien_fleming") -> Simulated:
    """The sequential rule (``boundaries`` and ``studentized``) on many trials at once: ``differences`` is
    trials x max n (0-1 scale; clusters are ``cluster_size`` consecutive questions), ``looks`` the questions read
    at each look, the last being the maximum.  For planning a design (step, maximum n, spending) before a run,
    and for checking its error rate and power (benchmarks/sim_stats.py, tests/experiments/design)."""
    n_max = looks[-1]
    c = np.array(boundaries([n / n_max for n in looks], alpha, spending))
    count = differences.shape[0]
    x = (differences[:, :n_max] + margin / 100).reshape(count, n_max // cluster_size, cluster_size).sum(axis=2)
    z = np.stack([x[:, : n // cluster_size].sum(1) / np.sqrt((x[:, : n // cluster_size] ** 2).sum(1))
                  for n in looks], axis=1)
    crossed = (z >= c) | (-z >= c)
    first = np.where(crossed.any(1), crossed.argmax(1), len(looks) - 1)
    return Simulated((z >= c)[np.arange(count), first], z[:, -1] >= stats.norm.isf(alpha), np.asarray(looks)[first])


__all__ = ["Look", "Simulated", "Spending", "boundaries", "look", "repeated_interval", "simulate", "spent",
           "studentized"]

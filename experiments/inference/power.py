"""How many documents a non-inferiority verdict needs: the power of the real test, not of a normal formula.

``ctxcomp plan`` asks, for a cell of a pilot run: at an assumed true difference Delta (the user's, default
0 -- not the pilot's noisy estimate, which makes a plan chase its own luck), how many documents give "not
worse than full by more than the margin" with the wanted power, with the test the report runs
(``experiments.inference.paired``)?

- **0/1 scores, one question a document** (the exact test): the differences are a trinomial draw, so the
  power at n is computed exactly, summing the trinomial probabilities of the outcomes the exact test rejects
  (``exact.rejection_cuts``).  What the pilot tells is the share of pairs that differ (the discordance); the
  plan takes it as observed (the power a plan states is the expected power, and it asks the n that gives
  it), and never less than the margin itself (the least favourable null loses the margin's share of
  answers: a pilot where nothing changed plans from that worst case).
- **anything else** (documents of several questions, partial credit): the power is simulated by drawing
  documents from the pilot's with replacement, each document's sum of differences moved to the assumed Delta
  (its spread about it as observed), and running the betting test the report runs (stakes tuned to n).
- **averages over tasks**: the stratified test averages each task's bounds at alpha / K; it says "not worse"
  whenever every task's bound at alpha / K clears the margin, so the product of those tasks' powers is a
  lower bound of the average's power, and the plan promises that.

A plan is capped at the documents the task's pool holds: past that, the task cannot decide the cell at this
margin, and the plan says so.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from experiments.inference import betting, exact
from experiments.inference.paired import EXACT_MAX_N
from experiments.inference.results import ALPHA, MIN_CLUSTERS
from experiments.inference.units import as_units

SIMULATIONS = 400  # draws per simulated power (standard error <= 0.025)
MOST = 20_000  # documents: beyond this a plan says "not reachable" (no CPU study reads more)


@dataclass(frozen=True)
class Pilot:
    """A pilot cell's paired differences (arm - full, 0-1 scale), per document in the pilot's order."""

    sums: np.ndarray
    sizes: np.ndarray
    binary: bool  # 0/1 scores, one question a document: the exact test, planned exactly
    discordant: int  # pairs that differ (binary pilots)
    n: int

    @property
    def n_clusters(self) -> int:
        return len(self.sums)

    @property
    def delta(self) -> float:
        return float(self.sums.sum() / self.sizes.sum()) if self.n else math.nan

    @property
    def sd(self) -> float:
        """The per-question spread the clustered test sees: the SD of documents' sums about size x mean over
        sqrt(mean size); for independent 0/1 questions, the SD of one difference."""
        if self.n_clusters < 2:
            return math.nan
        resid = self.sums - self.sizes * self.delta
        tau = math.sqrt(float(np.dot(resid, resid)) / (self.n_clusters - 1))
        return tau / math.sqrt(self.n / self.n_clusters)


def pilot(full: Sequence[float], arm: Sequence[float], clusters: Sequence[str] | None = None) -> Pilot:
    x, y = np.asarray(full, dtype=float), np.asarray(arm, dtype=float)
    d = y - x
    units = as_units(d, None, clusters)
    binary = bool(len(x)) and units.singletons and bool(np.all(np.isin(x, (0.0, 1.0))) and np.all(np.isin(y, (0.0, 1.0))))
    return Pilot(units.sums, units.sizes, binary, int(np.count_nonzero(d)), len(x))


@dataclass(frozen=True)
class Plan:
    """What a verdict needs at one assumed true difference: questions and documents, and the power there."""

    delta: float  # the assumed true difference (points)
    n: float  # inf: not reachable
    n_clusters: float
    power: float  # of the real test at the planned n (exact, simulated, or a lower bound for an average)
    note: str = ""


def _planning_discordance(p: Pilot, margin: float, delta: float) -> float:
    """The pilot's share of changed pairs, as observed: the plan sizes to the expected power (sizing to an
    upper 90% bound would ask 2.2x the n that gives 80%); never below the margin (a pilot where nothing changed
    plans from the least favourable null, which changes the margin's share of answers)."""
    return min(1.0, max(p.discordant / p.n, margin / 100, abs(delta) + 1e-9))


def _binary_power(p: Pilot, margin: float, n: int, delta: float, alpha: float) -> float:
    discordant = _planning_discordance(p, margin, delta)
    p_loss = (discordant - delta) / 2
    # the region is monotone (more gains never less significant), so with k discordant pairs it is "gains >=
    # cut_k": the power is a sum over k, O(n), not the trinomial's O(n^2) cells one by one; the cuts depend on
    # (n, margin, alpha) only, so every cell and every candidate n of the same size shares them
    cut = exact.rejection_cuts(n, -margin / 100, alpha)
    if not np.any(cut <= n):
        return 0.0
    return float(exact.binary_tail(np.array([p_loss]), delta, n, cut)[0])


def _planning_sums(p: Pilot, delta: float) -> np.ndarray:
    """The pilot's documents as the simulation draws them: each sum's distance from the pilot's mean as
    observed, then all moved by one shift so that the question-weighted mean is exactly
    ``delta`` *after* clipping each sum to what its questions can hold.  (Moving by ``delta`` before clipping
    left the mean wherever the clipping put it: a pilot at -15 points with 45% changed answers, planned at 0,
    was simulated at about -4.5 and came back "beyond 20,000 documents".)"""
    spread = p.sums - p.sizes * p.delta  # as observed: the plan sizes to the expected power
    target = delta * float(p.sizes.sum())

    def moved(shift: float) -> np.ndarray:
        return np.clip(spread + p.sizes * shift, -p.sizes, p.sizes)

    lo, hi = -3.0, 3.0  # the clipped total is nondecreasing in the shift
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if moved(mid).sum() < target else (lo, mid)
    return moved((lo + hi) / 2)


def _simulated_power(p: Pilot, margin: float, n_clusters: int, delta: float, alpha: float,
                     max_cluster: float, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    c = p.n_clusters
    planned = _planning_sums(p, delta)
    order = betting.orders(n_clusters)
    block = max(1, min(SIMULATIONS, 2_000_000 // (len(order) * n_clusters)))  # bounded memory at any n
    wins = 0
    for start in range(0, SIMULATIONS, block):
        pick = rng.integers(0, c, size=(min(block, SIMULATIONS - start), n_clusters))
        sizes = p.sizes[pick]
        sums = planned[pick]
        y = betting._normalised(sums[:, order], sizes[:, order], -margin / 100, (-1.0, 1.0), max_cluster, True)
        wins += int(np.sum(np.exp(betting.log_wealth(y, alpha=alpha)[..., -1]).mean(axis=-1) >= 1 / alpha))
    return wins / SIMULATIONS


def power_at(p: Pilot, margin: float, n_clusters: int, *, delta: float = 0.0, alpha: float = ALPHA,
             max_cluster: float | None = None) -> float:
    """The chance that ``n_clusters`` documents like the pilot's, at a true difference ``delta`` points, give
    "not worse" at ``margin`` (module docstring: exact for 0/1 pilots, simulated otherwise)."""
    if p.n == 0 or n_clusters < MIN_CLUSTERS:
        return 0.0
    if p.binary and n_clusters <= EXACT_MAX_N:  # the report's exact test; past EXACT_MAX_N it bets
        return _binary_power(p, margin, int(n_clusters), delta / 100, alpha)
    return _simulated_power(p, margin, int(n_clusters), delta / 100, alpha, float(max_cluster or p.sizes.max()))


def _normal_start(p: Pilot, margin: float, delta: float, power: float, alpha: float) -> int:
    """Where the search of a 0/1 pilot starts: the z-test's n at the planning discordance (the exact test
    needs a few more; each candidate is then checked exactly)."""
    discordant = _planning_discordance(p, margin, delta / 100)
    sigma = math.sqrt(max(discordant - (delta / 100) ** 2, 1e-9))
    z = stats.norm.isf(alpha) + stats.norm.isf(1 - power)
    return max(MIN_CLUSTERS, int(math.ceil((z * sigma / ((delta + margin) / 100)) ** 2)))


def needed(p: Pilot, margin: float, *, delta: float = 0.0, power: float = 0.8, alpha: float = ALPHA,
           pool: int | None = None, max_cluster: float | None = None) -> Plan:
    """The fewest documents whose ``power_at`` reaches ``power`` at the assumed ``delta`` (points), searched by
    bracketing and bisection (a 0/1 pilot from the z-test's n, each candidate's power an exact sum, to one
    document; a simulated power to within 1% of n); capped at the ``pool`` of documents the task holds."""
    if p.n == 0:
        return Plan(delta, math.nan, math.nan, math.nan, "no pairs in the pilot")
    if delta <= -margin:
        return Plan(delta, math.inf, math.inf, math.nan, "not reachable: the assumed difference is not above -margin")
    mean_size = p.n / p.n_clusters
    limit = min(pool or MOST, MOST)

    def at(c: int) -> float:
        return power_at(p, margin, c, delta=delta, alpha=alpha, max_cluster=max_cluster)

    def beyond(c: int) -> Plan:
        note = (f"the task's pool holds {pool} documents: it cannot decide this cell at this margin"
                if pool and c >= pool else f"beyond {MOST:,} documents")
        return Plan(delta, math.inf, math.inf, at(min(c, limit)), note)

    # a bracket [lo, hi] with at(lo) < power <= at(hi), then bisection; a 0/1 pilot starts near the z-test's n
    # and widens by 10% (each check is an exact sum), any other from the fewest documents by doubling
    exact_path = p.binary and _normal_start(p, margin, delta, power, alpha) <= EXACT_MAX_N
    start = min(_normal_start(p, margin, delta, power, alpha), limit) if exact_path else MIN_CLUSTERS
    grow = 1.1 if exact_path else 2.0
    hi = start
    while at(hi) < power:
        if hi >= limit:
            return beyond(hi)
        hi = min(limit, max(hi + 1, int(math.ceil(hi * grow))))
    lo = MIN_CLUSTERS - 1
    if hi == start and start > MIN_CLUSTERS:
        lo = max(MIN_CLUSTERS - 1, int(start / grow) - 1)
        while lo >= MIN_CLUSTERS and at(lo) >= power:
            hi, lo = lo, max(MIN_CLUSTERS - 1, int(lo / grow) - 1)
    elif hi != start:
        lo = max(MIN_CLUSTERS - 1, int(hi / grow))
    # the exact path bisects to one document; a simulated power has a standard error of up to 0.025, so
    # n is found to within 1% (the answer is still a checked n: at(hi) >= power)
    resolution = 1 if exact_path else max(1, hi // 100)
    while hi - lo > resolution:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if at(mid) >= power else (mid, hi)
    return Plan(delta, hi * mean_size, float(hi), at(hi))


def needed_for_average(pilots: Sequence[Pilot], margin: float, *, delta: float = 0.0, power: float = 0.8,
                       alpha: float = ALPHA, pools: Sequence[int | None] = ()) -> Plan:
    """Documents per task for an average over tasks: the fewest at which the product of the tasks' powers at
    alpha / K (a lower bound of the average's power: module docstring) reaches ``power``."""
    k = len(pilots)
    if k == 0 or any(p.n == 0 for p in pilots):
        return Plan(delta, math.nan, math.nan, math.nan, "no pairs in a task of the pilot")
    pools = list(pools) or [None] * k
    share = power ** (1 / k)
    plans = [needed(p, margin, delta=delta, power=share, alpha=alpha / k, pool=pool) for p, pool in zip(pilots, pools)]
    if any(math.isinf(pl.n_clusters) for pl in plans):
        return Plan(delta, math.inf, math.inf, math.nan, next(pl.note for pl in plans if math.isinf(pl.n_clusters)))
    c = int(max(pl.n_clusters for pl in plans))
    reached = float(np.prod([power_at(p, margin, c, delta=delta, alpha=alpha / k) for p in pilots]))
    mean_size = float(np.mean([p.n / p.n_clusters for p in pilots]))
    return Plan(delta, c * mean_size, float(c), reached, "per task; the power is a lower bound")


__all__ = ["Pilot", "Plan", "needed", "needed_for_average", "pilot", "power_at"]

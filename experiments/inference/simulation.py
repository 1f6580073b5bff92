"""The room's tests on many simulated trials at once: what benchmarks/sim_stats.py and the suite check them by.

Each engine decides exactly as the report's test does, vectorized over trials:

- ``exact_not_worse``: 0/1 scores, one question a document: the exact test's verdict at the margin is a
  lookup of (losses, gains) in its rejection region (``exact.rejection_table``);
- ``betting_not_worse``: documents of any size, any bounded scores: the fixed-n betting e-value at the
  margin, averaged over the same seeded orders, against 1/alpha.  The report's verdict also asks every
  difference below the margin to be rejected (its bound must clear the margin), so it says "not worse" at
  most as often as this engine: a false rate measured here is an upper bound of the report's;
- ``sequential_not_worse``: the anytime-valid rule at a list of looks (``sequential.simulate_not_worse``).

And the draws: paired scores whose true mean difference is set exactly (``paired_01``, ``paired_f1``), with
documents of unequal sizes and correlated questions (a per-document loss rate drawn from a beta law).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from experiments.inference import betting, exact
from experiments.inference.paired import EXACT_MAX_N
from experiments.inference.results import ALPHA, MIN_CLUSTERS
from experiments.inference.sequential import simulate_not_worse
from experiments.inference.verdicts import at_edge

CHUNK = 500  # trials per block (memory: trials x orders x documents floats)


@dataclass(frozen=True)
class Draws:
    """Trials x documents: each document's summed difference (arm - full) and size, and each trial's full
    mean (for the floor and ceiling rule)."""

    sums: np.ndarray
    sizes: np.ndarray
    full_mean: np.ndarray


def _sizes(rng: np.random.Generator, trials: int, documents: int, size: int | tuple[int, int]) -> np.ndarray:
    if isinstance(size, tuple):
        return rng.integers(size[0], size[1] + 1, size=(trials, documents)).astype(float)
    return np.full((trials, documents), float(size))


def _rates(accuracy: float, discordant: float, delta: float) -> tuple[float, float] | None:
    """(P(lose | full right), P(gain | full wrong)) giving the discordance and mean difference, or None."""
    lose = (discordant - delta) / (2 * accuracy) if accuracy > 0 else math.inf
    gain = (discordant + delta) / (2 * (1 - accuracy)) if accuracy < 1 else (0.0 if discordant + delta <= 0 else math.inf)
    if not (0 <= lose <= 1 and 0 <= gain <= 1):
        return None
    return lose, gain


def paired_01(rng: np.random.Generator, trials: int, documents: int, *, accuracy: float, discordant: float,
              delta: float, size: int | tuple[int, int] = 1, spread: float = 0.0) -> Draws | None:
    """0/1 scores: full right with probability ``accuracy``; the arm loses a right answer or gains a wrong
    one at the rates that give ``discordant`` pairs that differ and mean difference ``delta`` (0-1).
    ``spread`` > 0 makes questions of one document correlated: each document's loss and gain rates are
    drawn from beta laws with those means and concentration 1/spread.  None where the rates are impossible."""
    rates = _rates(accuracy, discordant, delta)
    if rates is None:
        return None
    sizes = _sizes(rng, trials, documents, size)
    most = int(sizes.max())
    lose, gain = rates

    def per_document(p: float) -> np.ndarray:
        if spread <= 0 or p in (0.0, 1.0):
            return np.full((trials, documents, 1), p)
        k = 1 / spread
        return rng.beta(p * k, (1 - p) * k, size=(trials, documents, 1))

    present = np.arange(most)[None, None, :] < sizes[..., None]
    full = (rng.random((trials, documents, most)) < accuracy) & present
    u = rng.random((trials, documents, most))
    lost = full & (u < per_document(lose))
    gained = ~full & present & (u < per_document(gain))
    d = gained.astype(float) - lost.astype(float)
    full_mean = full.sum(axis=(1, 2)) / sizes.sum(axis=1)
    return Draws(d.sum(axis=2), sizes, full_mean)


def paired_f1(rng: np.random.Generator, trials: int, documents: int, *, delta: float, gains: bool = False,
              size: int | tuple[int, int] = 1) -> Draws:
    """Partial-credit scores (F1-like): full's score is 0 with probability 0.3, else uniform on (0, 1]; the arm
    equals full except when it breaks the answer (score 0), at the rate giving mean difference ``delta``;
    with ``gains`` it also raises some answers to 1, and breaks more to keep the mean."""
    sizes = _sizes(rng, trials, documents, size)
    most = int(sizes.max())
    present = np.arange(most)[None, None, :] < sizes[..., None]
    full = np.where(rng.random((trials, documents, most)) < 0.3, 0.0, rng.uniform(0.01, 1.0, (trials, documents, most)))
    full = full * present
    mean_full = 0.7 * 0.505
    gain_rate = 0.05 if gains else 0.0
    gain_mean = 0.7 * 0.495 + 0.3  # E[1 - full]
    breaks = (-delta + gain_rate * gain_mean) / mean_full
    u = rng.random((trials, documents, most))
    arm = np.where(u < breaks, 0.0, np.where(u < breaks + gain_rate, 1.0, full))
    d = (arm - full) * present
    return Draws(d.sum(axis=2), sizes, full.sum(axis=(1, 2)) / sizes.sum(axis=1))


def _informative(draws: Draws, margin: float) -> np.ndarray:
    arm_mean = draws.full_mean + draws.sums.sum(axis=1) / draws.sizes.sum(axis=1)
    edge = np.array([at_edge(float(f), margin, float(a)) is not None for f, a in zip(draws.full_mean, arm_mean)])
    return ~edge


def exact_not_worse(draws: Draws, margin: float, alpha: float = ALPHA) -> np.ndarray:
    """The exact test's "not worse" per trial (one 0/1 question a document)."""
    n = draws.sums.shape[1]
    if n < MIN_CLUSTERS:
        return np.zeros(len(draws.sums), dtype=bool)
    region = exact.rejection_table(n, round(-margin / 100, 12), alpha)
    loss = (draws.sums < 0).sum(axis=1)
    gain = (draws.sums > 0).sum(axis=1)
    return region[loss, gain] & _informative(draws, margin)


def betting_e(sums: np.ndarray, sizes: np.ndarray, delta: float, *, bound: float, upper: bool = True,
              values: tuple[float, float] = (-1.0, 1.0), alpha: float | None = ALPHA) -> np.ndarray:
    """The fixed-n betting e-value per trial (trials x documents), averaged over the report's seeded orders,
    with the report's stakes (tuned to n for ``alpha``; None: the growth-optimal ones)."""
    order = betting.orders(sums.shape[1])
    out = np.empty(len(sums))
    for start in range(0, len(sums), CHUNK):
        block = slice(start, start + CHUNK)
        y = betting._normalised(sums[block][:, order], sizes[block][:, order], delta, values, bound, upper)
        out[block] = np.exp(betting.log_wealth(y, alpha=alpha)[..., -1]).mean(axis=-1)
    return out


def betting_not_worse(draws: Draws, margin: float, alpha: float = ALPHA, bound: float | None = None) -> np.ndarray:
    """The betting test's "not worse" per trial at the margin (an upper bound of the report's: docstring)."""
    if draws.sums.shape[1] < MIN_CLUSTERS:
        return np.zeros(len(draws.sums), dtype=bool)
    bound = float(bound or draws.sizes.max())
    return (betting_e(draws.sums, draws.sizes, -margin / 100, bound=bound, alpha=alpha) >= 1 / alpha) & _informative(draws, margin)


def sequential_not_worse(draws: Draws, margin: float, looks: list[int], alpha: float = ALPHA,
                         bound: float | None = None) -> np.ndarray:
    """Whether the sequential rule stops "not worse" at some look (documents at each look)."""
    out = np.zeros(len(draws.sums), dtype=bool)
    for start in range(0, len(draws.sums), CHUNK):
        block = slice(start, start + CHUNK)
        out[block] = simulate_not_worse(draws.sums[block], draws.sizes[block], looks, margin, alpha=alpha,
                                        bound=bound or float(draws.sizes.max()))
    return out & _informative(draws, margin)


def report_not_worse(draws: Draws, margin: float, alpha: float = ALPHA, bound: float | None = None) -> np.ndarray:
    """The engine the report would use for these draws: exact for one 0/1 question a document, else betting."""
    binary = bool(np.all(draws.sizes == 1) and np.all(np.isin(draws.sums, (-1.0, 0.0, 1.0)))
                  and draws.sums.shape[1] <= EXACT_MAX_N)
    return exact_not_worse(draws, margin, alpha) if binary else betting_not_worse(draws, margin, alpha, bound)


__all__ = ["Draws", "betting_e", "betting_not_worse", "exact_not_worse", "paired_01", "paired_f1",
           "report_not_worse", "sequential_not_worse"]

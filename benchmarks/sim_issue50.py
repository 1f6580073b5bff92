"""Two regimes of clustered questions, measured side by side: validity when rare long documents carry the losses, and the
power of the clustered path against the cluster-robust z-test.

- ``rare``: 40-question documents (1 in 100) lose every answer, the 1-2-question rest gain 20.6% of theirs, so
  the question-weighted difference is exactly -5 points (the margin): every "not worse" is an error.  The
  betting test bounded by the sample's largest document (valid only given the sizes drawn) beside the pool's (40), fixed n and
  sequential (a look at every document), 50-400 documents.
- ``power``: 8-question documents, intra-document correlation 0.3 of the differences, discordance 4/10/30%,
  a true difference of 0.  Each question's difference is its document's shared draw with
  probability sqrt(0.3), else its own (the same trinomial law): the correlation of two questions is 0.3.
  At the z-test's n for 80% power x 1, 1.5 and 2: the power of the fixed-n test with the stakes tuned to n
  (the report's), with the growth-optimal stakes, of the sequential rule, and of
  the cluster-robust z-test (its variance estimated from the documents' sums).

Run: ``python benchmarks/sim_issue50.py [--trials N] [--only rare,power]``.  Each rate is printed with its
Monte Carlo standard error.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.inference import simulation as sim  # noqa: E402
from experiments.inference.results import ALPHA  # noqa: E402

MARGIN = 5.0


def _se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-12) / n)


def rare_draws(rng: np.random.Generator, trials: int, documents: int) -> sim.Draws:
    long = rng.random((trials, documents)) < 0.01
    sizes = np.where(long, 40.0, rng.integers(1, 3, (trials, documents)).astype(float))
    sums = np.where(long, -40.0, rng.binomial(sizes.astype(int), 0.2059).astype(float))
    return sim.Draws(sums, sizes, np.full(trials, 0.5))


def _by_bound(draws: sim.Draws, engine, bounds: np.ndarray) -> np.ndarray:
    out = np.zeros(len(draws.sums), dtype=bool)
    for b in np.unique(bounds):
        idx = bounds == b
        out[idx] = engine(sim.Draws(draws.sums[idx], draws.sizes[idx], draws.full_mean[idx]), float(b))
    return out


def part_rare(trials: int) -> None:
    print(f"\nrare long documents carrying the losses (true Δ = -5), {trials} trials a row")
    print("| documents | bound | fixed n | sequential | MC SE at 0.025 |\n| --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(50)
    for documents in (50, 100, 200, 400):
        draws = rare_draws(rng, trials, documents)
        looks = list(range(1, documents + 1))
        for name, bounds in (("sample's largest", draws.sizes.max(axis=1)), ("pool's (40)", np.full(trials, 40.0))):
            fixed = _by_bound(draws, lambda d, b: sim.betting_not_worse(d, MARGIN, bound=b), bounds).mean()
            seq = _by_bound(draws, lambda d, b: sim.sequential_not_worse(d, MARGIN, looks, bound=b), bounds).mean()
            print(f"| {documents} | {name} | {fixed:.4f} | {seq:.4f} | {_se(ALPHA, trials):.4f} |")


def clustered_draws(rng: np.random.Generator, trials: int, documents: int, discordant: float,
                    size: int = 8, icc: float = 0.3) -> sim.Draws:
    def trinomial(shape: tuple[int, ...]) -> np.ndarray:
        u = rng.random(shape)
        return np.where(u < discordant / 2, -1.0, np.where(u < discordant, 1.0, 0.0))

    shared = trinomial((trials, documents, 1))
    own = trinomial((trials, documents, size))
    d = np.where(rng.random((trials, documents, size)) < math.sqrt(icc), shared, own)
    return sim.Draws(d.sum(axis=2), np.full((trials, documents), float(size)), np.full(trials, 0.5))


def _z_n(discordant: float, size: int = 8, icc: float = 0.3, power: float = 0.8) -> int:
    sd_sum = math.sqrt(size * discordant * (1 + (size - 1) * icc))
    z = stats.norm.isf(ALPHA) + stats.norm.isf(1 - power)
    return int(math.ceil((z * sd_sum / (size * MARGIN / 100)) ** 2))


def _z_rejects(draws: sim.Draws) -> np.ndarray:
    x = draws.sums + MARGIN / 100 * draws.sizes
    n = x.shape[1]
    return x.mean(axis=1) / (x.std(axis=1, ddof=1) / math.sqrt(n)) >= stats.norm.isf(ALPHA)


def part_power(trials: int) -> None:
    print(f"\npower at Δ = 0, 8-question documents, ICC 0.3, {trials} trials a cell (MC SE <= {_se(0.5, trials):.3f})")
    print("| discordant | z-test n (80%) | n | z-test | fixed n, tuned to n | fixed n, growth-optimal "
          "| sequential |\n| --- | --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(51)
    for disc in (0.04, 0.10, 0.30):
        zn = _z_n(disc)
        for factor in (1.0, 1.5, 2.0):
            n = int(round(zn * factor))
            draws = clustered_draws(rng, trials, n, disc)
            z = _z_rejects(draws).mean()
            tuned = (sim.betting_e(draws.sums, draws.sizes, -MARGIN / 100, bound=8.0) >= 1 / ALPHA).mean()
            growth = (sim.betting_e(draws.sums, draws.sizes, -MARGIN / 100, bound=8.0, alpha=None) >= 1 / ALPHA).mean()
            seq = sim.sequential_not_worse(draws, MARGIN, list(range(1, n + 1)), bound=8.0).mean()
            print(f"| {disc:.0%} | {zn} | {n} ({factor:g}x) | {z:.3f} | {tuned:.3f} | {growth:.3f} | {seq:.3f} |",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--only", default="rare,power")
    args = parser.parse_args()
    start = time.time()
    for part in args.only.split(","):
        {"rare": part_rare, "power": part_power}[part](args.trials)
    print(f"\n{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()

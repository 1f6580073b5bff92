"""The statistics of issue 29 by simulation, 10^4 trials per setting (not a test; the suite runs smaller versions).

1. Clustered intervals: documents with a known within-document correlation, true difference 0; how often the
   95% interval covers it with clusters (``mean_interval(..., clusters=...)``) and without.
2. Planned n: plan from a large pilot (``experiments.design.power.needed_n``), then the share of "not worse"
   verdicts of the report's own test (``noninferiority_test``) at the planned n, for 0/1, F1-like and clustered
   differences; the target is the stated power (0.8).
3. The sequential rule (``experiments.design.sequential``): at the margin, the false "not worse" rate (at most
   alpha = 0.025); at a true difference of 0, its power beside the fixed design's at the same maximum n, and
   its expected n.

Run: ``python benchmarks/sim_stats.py [--trials N] [--only clusters,plan,sequential]``; prints one table per part
and the Monte Carlo standard error of each rate.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.design.power import needed_n, spread
from experiments.design.sequential import simulate
from experiments.report.stats import NOT_WORSE, mean_interval, noninferiority_test
from testkit.simulated import binary, clustered, f1_like
from testkit.simulated import trials as draw_trials


def _se(p: float, n: int) -> float:
    return float(np.sqrt(max(p * (1 - p), 1e-12) / n))


def part_clusters(trials: int) -> None:
    print("\n## 1. Coverage of 95% intervals, true difference 0 (scores' SD 0.3)\n")
    print("| documents x questions | within-document correlation | clustered | unclustered | MC SE |")
    print("| --- | --- | --- | --- | --- |")
    for documents, size, rho in ((50, 4, 0.5), (30, 5, 0.5), (100, 2, 0.3), (50, 4, 0.0)):
        rng = np.random.default_rng(documents * 100 + size)
        with_c = without = 0
        for _ in range(trials):
            d, cl = clustered(rng, documents * size, 0.0, size=size, rho=rho)
            a = mean_interval(d, clusters=cl, n_resamples=2_000)
            b = mean_interval(d, n_resamples=2_000)
            with_c += a.lo <= 0 <= a.hi
            without += b.lo <= 0 <= b.hi
        print(f"| {documents} x {size} | {rho} | {with_c / trials:.3f} | {without / trials:.3f} | "
              f"{_se(0.95, trials):.3f} |")


def part_plan(trials: int) -> None:
    print("\n## 2. Planned n against the power it reaches (margin 10 points, true difference 0, target 0.80)\n")
    print("| differences | planned n (documents) | power reached | MC SE |")
    print("| --- | --- | --- | --- |")
    for name, draw in (("0/1 (30% discordant)", binary), ("F1-like (70% non-zero, SD 0.25)", f1_like),
                       ("clustered (4 a document, correlation 0.4)", clustered)):
        rng = np.random.default_rng(11)
        pilot, cl = draw(rng, 20_000, 0.0)
        plan = needed_n(spread(pilot - pilot.mean(), cl), 10.0, delta=0.0, power=0.8)
        n = int(np.ceil(plan.n))
        wins = 0
        for _ in range(trials):
            d, c = draw(rng, n, 0.0)
            wins += noninferiority_test(np.zeros(n), d, 10.0, clusters=c, n_resamples=1_000,
                                        seed=int(rng.integers(1 << 30))).verdict == NOT_WORSE
        print(f"| {name} | {n} ({int(plan.n_clusters)}) | {wins / trials:.3f} | {_se(0.8, trials):.3f} |")


def part_sequential(trials: int) -> None:
    print("\n## 3. The sequential rule: 5 looks (every 40 of 200), O'Brien-Fleming spending, one-sided alpha 0.025\n")
    print("| differences | margin | false 'not worse' at Δ = -margin: sequential / fixed | power at Δ = 0: "
          "sequential / fixed n = 200 | expected n at Δ = 0 | expected n at Δ = -margin | MC SE (power) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind, cluster, margin in (("binary", 0, 0.1), ("binary", 0, 0.05), ("continuous", 0, 0.05),
                                  ("continuous", 4, 0.1)):
        rng = np.random.default_rng(7 + cluster)
        looks = [40, 80, 120, 160, 200]
        null = simulate(draw_trials(rng, trials, 200, -margin, kind, cluster), looks, 100 * margin,
                        cluster_size=cluster or 1)
        false_nw, false_fixed, used_null = null.not_worse, null.fixed_not_worse, null.used
        zero = simulate(draw_trials(rng, trials, 200, 0.0, kind, cluster), looks, 100 * margin, cluster_size=cluster or 1)
        seq, fixed, used = zero.not_worse, zero.fixed_not_worse, zero.used
        name = f"{kind}" + (f", {cluster} a document" if cluster else "")
        print(f"| {name} | {100 * margin:g} | {false_nw.mean():.4f} / {false_fixed.mean():.4f} | "
              f"{seq.mean():.3f} / {fixed.mean():.3f} | "
              f"{used.mean():.0f} | {used_null.mean():.0f} | {_se(seq.mean(), trials):.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--only", default="clusters,plan,sequential")
    args = parser.parse_args()
    parts = {"clusters": part_clusters, "plan": part_plan, "sequential": part_sequential}
    for name in args.only.split(","):
        start = time.perf_counter()
        parts[name](args.trials)
        print(f"\n({name}: {time.perf_counter() - start:.0f} s, {args.trials} trials per setting)")


if __name__ == "__main__":
    main()

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
from experiments.design.sequential import boundaries
from experiments.report.stats import NOT_WORSE, mean_interval, noninferiority_test


def _se(p: float, n: int) -> float:
    return float(np.sqrt(max(p * (1 - p), 1e-12) / n))


def clustered(rng, documents, size, rho, scale=0.3):
    shared = rng.normal(0, np.sqrt(rho), documents).repeat(size)
    d = scale * (shared + rng.normal(0, np.sqrt(1 - rho), documents * size))
    return d, [f"doc{i // size}" for i in range(documents * size)]


def part_clusters(trials: int) -> None:
    print("\n## 1. Coverage of 95% intervals, true difference 0 (scores' SD 0.3)\n")
    print("| documents x questions | within-document correlation | clustered | unclustered | MC SE |")
    print("| --- | --- | --- | --- | --- |")
    for documents, size, rho in ((50, 4, 0.5), (30, 5, 0.5), (100, 2, 0.3), (50, 4, 0.0)):
        rng = np.random.default_rng(documents * 100 + size)
        with_c = without = 0
        for _ in range(trials):
            d, cl = clustered(rng, documents, size, rho)
            a = mean_interval(d, clusters=cl, n_resamples=2_000)
            b = mean_interval(d, n_resamples=2_000)
            with_c += a.lo <= 0 <= a.hi
            without += b.lo <= 0 <= b.hi
        print(f"| {documents} x {size} | {rho} | {with_c / trials:.3f} | {without / trials:.3f} | "
              f"{_se(0.95, trials):.3f} |")


def binary(rng, n, delta, discordant=0.3):
    up, down = (discordant + delta) / 2, (discordant - delta) / 2
    u = rng.random(n)
    return np.where(u < up, 1.0, np.where(u < up + down, -1.0, 0.0)), None


def f1_like(rng, n, delta):
    return np.clip(rng.normal(delta, 0.25, n), -1, 1) * (rng.random(n) < 0.7) + delta * 0.3, None


def clustered_d(rng, n, delta, size=4, rho=0.4):
    docs = -(-n // size)
    d = delta + 0.3 * (np.sqrt(rho) * rng.normal(size=docs).repeat(size)[:n] + np.sqrt(1 - rho) * rng.normal(size=n))
    return d, [f"doc{i // size}" for i in range(n)]


def part_plan(trials: int) -> None:
    print("\n## 2. Planned n against the power it reaches (margin 10 points, true difference 0, target 0.80)\n")
    print("| differences | planned n (documents) | power reached | MC SE |")
    print("| --- | --- | --- | --- |")
    for name, draw in (("0/1 (30% discordant)", binary), ("F1-like (70% non-zero, SD 0.25)", f1_like),
                       ("clustered (4 a document, correlation 0.4)", clustered_d)):
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


def simulate_sequential(rng, trials, n_max, step, delta, margin, kind, cluster, spending="obrien_fleming"):
    looks = list(range(step, n_max + 1, step))
    c = np.array(boundaries([n / n_max for n in looks], 0.025, spending))
    size = cluster or 1
    docs = n_max // size
    if kind == "binary":
        up, down = (0.3 + delta) / 2, (0.3 - delta) / 2
        u = rng.random((trials, n_max))
        d = np.where(u < up, 1.0, np.where(u < up + down, -1.0, 0.0))
    else:
        shared = rng.normal(0, np.sqrt(0.5), (trials, docs)).repeat(size, axis=1) if cluster else 0.0
        d = delta + 0.25 * (shared + rng.normal(0, np.sqrt(0.5) if cluster else 1.0, (trials, n_max)))
    x = (d + margin).reshape(trials, docs, size).sum(axis=2)
    z = np.stack([x[:, : n // size].sum(1) / np.sqrt((x[:, : n // size] ** 2).sum(1)) for n in looks], axis=1)
    crossed = (z >= c) | (-z >= c)
    first = np.where(crossed.any(1), crossed.argmax(1), len(looks) - 1)
    not_worse = (z >= c)[np.arange(trials), first]
    return not_worse, z[:, -1] >= 1.959964, np.array(looks)[first]


def part_sequential(trials: int) -> None:
    print("\n## 3. The sequential rule: 5 looks (every 40 of 200), O'Brien-Fleming spending, one-sided alpha 0.025\n")
    print("| differences | margin | false 'not worse' at Δ = -margin: sequential / fixed | power at Δ = 0: "
          "sequential / fixed n = 200 | expected n at Δ = 0 | expected n at Δ = -margin | MC SE (power) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind, cluster, margin in (("binary", 0, 0.1), ("binary", 0, 0.05), ("continuous", 0, 0.05),
                                  ("continuous", 4, 0.1)):
        rng = np.random.default_rng(7 + cluster)
        false_nw, false_fixed, used_null = simulate_sequential(rng, trials, 200, 40, -margin, margin, kind, cluster)
        seq, fixed, used = simulate_sequential(rng, trials, 200, 40, 0.0, margin, kind, cluster)
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

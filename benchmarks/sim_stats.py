"""A hostile simulation battery for the verdicts: where a test of "not worse" is weakest.

Every row draws paired scores whose true mean difference is exactly -margin (the null's edge: every "not
worse" is an error) and counts how often the report's test says "not worse"; the bound is alpha = 0.025.
Rows cover 0/1 and partial-credit (F1-like) scores; discordance from 2% to 40%; losses only and both;
full's accuracy from 0.1 to 0.95 (within the margin of the floor or ceiling a cell is "uninformative", never
"not worse"); documents of 1 to 10 questions, equal and unequal, with correlated questions; 6 to 500
documents; fixed n, and sequential with looks at every document and every 10.  Gains only cannot reach a
mean difference of -margin and have no row.  Each rate comes with its Monte Carlo standard error, and the
worst row is named.

Further parts: power at a true difference of 0 against a plain one-sided z-test (the price of validity, and
the n 80% power takes); coverage of the accuracy interval and the rate of ``*`` at a true difference of 0,
at 6, 10 and 20 documents near the ceiling; the saturation k on a rising curve; the realised power of
``ctxcomp plan``'s n from 20-question pilots; what futility stopping saves and costs in a sequential run.

Run: ``python benchmarks/sim_stats.py [--trials N] [--only null,power,coverage,saturation,plan,futility]``.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.inference import betting, exact  # noqa: E402
from experiments.inference import simulation as sim  # noqa: E402
from experiments.inference.paired import EXACT_MAX_N  # noqa: E402
from experiments.inference.power import needed, pilot  # noqa: E402
from experiments.inference.results import ALPHA  # noqa: E402

MARGIN = 5.0


def _se(p: float, n: int) -> float:
    return float(math.sqrt(max(p * (1 - p), 1e-12) / n))


def null_rows() -> list[dict]:
    """The settings of the null battery (each a row)."""
    rows = []
    for docs in (6, 16, 40, 120, 500):
        for acc, disc in ((0.9, 0.05), (0.9, 0.072), (0.6, 0.2), (0.5, 0.4), (0.1, 0.1), (0.95, 0.08)):
            rows.append(dict(kind="0/1", docs=docs, accuracy=acc, discordant=disc, size=1, spread=0.0,
                             design="fixed"))
    rows.append(dict(kind="0/1", docs=40, accuracy=0.9, discordant=0.02, size=1, spread=0.0, design="fixed",
                     margin=1.0))
    for docs in (6, 20, 60, 200):
        for size, spread in ((8, 0.3), ((7, 8), 0.3), ((1, 10), 0.5), ((1, 3), 0.0)):
            rows.append(dict(kind="0/1", docs=docs, accuracy=0.6, discordant=0.12, size=size, spread=spread,
                             design="fixed"))
        rows.append(dict(kind="0/1", docs=docs, accuracy=0.9, discordant=0.06, size=(1, 10), spread=0.5,
                         design="fixed"))
    for docs in (16, 60, 200, 500):
        for gains in (False, True):
            rows.append(dict(kind="F1-like", docs=docs, gains=gains, size=1, design="fixed"))
        rows.append(dict(kind="F1-like", docs=docs, gains=False, size=(1, 3), design="fixed"))
    for docs, every in ((12, 4), (40, 10), (40, 1), (200, 10), (200, 1), (500, 10)):
        rows.append(dict(kind="0/1", docs=docs, accuracy=0.9, discordant=0.072, size=1, spread=0.0,
                         design=f"sequential, every {every}", every=every))
    rows.append(dict(kind="0/1", docs=60, accuracy=0.6, discordant=0.12, size=(1, 10), spread=0.5,
                     design="sequential, every 10", every=10))
    rows.append(dict(kind="F1-like", docs=200, gains=True, size=1, design="sequential, every 1", every=1))
    return rows


def _draw(rng: np.random.Generator, trials: int, row: dict, delta: float) -> sim.Draws | None:
    if row["kind"] == "0/1":
        return sim.paired_01(rng, trials, row["docs"], accuracy=row["accuracy"], discordant=row["discordant"],
                             delta=delta, size=row["size"], spread=row["spread"])
    return sim.paired_f1(rng, trials, row["docs"], delta=delta, gains=row["gains"], size=row["size"])


def _describe(row: dict) -> str:
    size = row["size"]
    size = f"{size[0]}-{size[1]}" if isinstance(size, tuple) else str(size)
    what = row["kind"]
    if row["kind"] == "0/1":
        what += f", full {row['accuracy']:g}, {100 * row['discordant']:g}% discordant"
        what += ", losses only" if abs(row["discordant"] - row.get("margin", MARGIN) / 100) < 1e-9 else ""
        what += f", correlated ({row['spread']:g})" if row["spread"] else ""
    else:
        what += ", losses and gains" if row["gains"] else ", losses only"
    return f"{what} | {row['docs']} x {size} | {row['design']}"


def part_null(trials: int) -> None:
    print("\n## False 'not worse' at a true difference of exactly -margin (one-sided alpha 0.025)\n")
    print("| scores | documents x questions | design | false 'not worse' | MC SE |")
    print("| --- | --- | --- | --- | --- |")
    worst = (-1.0, "")
    for i, row in enumerate(null_rows()):
        margin = row.get("margin", MARGIN)
        rng = np.random.default_rng(1000 + i)
        draws = _draw(rng, trials, row, -margin / 100)
        if draws is None:
            continue
        if row["design"].startswith("sequential"):
            looks = list(range(row["every"], row["docs"] + 1, row["every"]))
            rate = float(sim.sequential_not_worse(draws, margin, looks).mean())
        else:
            rate = float(sim.report_not_worse(draws, margin).mean())
        text = _describe(row) + (f" (margin {margin:g})" if margin != MARGIN else "")
        print(f"| {text} | {rate:.4f} | {_se(rate, trials):.4f} |")
        worst = max(worst, (rate, text))
    print(f"\nWorst row: {worst[1]}: {worst[0]:.4f} (bound {ALPHA}).")


def _z_power(sd: float, n: int, margin: float) -> float:
    return float(stats.norm.cdf(margin / 100 / (sd / math.sqrt(n)) - stats.norm.isf(ALPHA)))


def part_power(trials: int) -> None:
    print("\n## Power at a true difference of 0 (0/1 scores, one question a document, margin 5)\n")
    print("| discordance | n | z-test (normal theory, not valid) | fixed n (exact) | ratio | sequential "
          "(every 10) | MC SE |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for disc, n in ((0.3, 200), (0.3, 400), (0.3, 800), (0.04, 100), (0.04, 200), (0.04, 400), (0.1, 400),
                    (0.2, 400)):
        rng = np.random.default_rng(int(disc * 1000) + n)
        draws = sim.paired_01(rng, trials, n, accuracy=0.5, discordant=disc, delta=0.0)
        fixed = float(sim.report_not_worse(draws, MARGIN).mean())
        seq = float(sim.sequential_not_worse(draws, MARGIN, list(range(10, n + 1, 10))).mean())
        z = _z_power(math.sqrt(disc), n, MARGIN)
        print(f"| {100 * disc:g}% | {n} | {z:.3f} | {fixed:.3f} | {fixed / z:.2f} | {seq:.3f} | "
              f"{_se(fixed, trials):.3f} |")
    print("\n### n for 80% power at a true difference of 0 (0/1, one question a document, margin 5)\n")
    print("| discordance | z-test | fixed n (exact) | sequential, looks every 10 (median stop) |")
    print("| --- | --- | --- | --- |")
    for disc in (0.04, 0.1, 0.2, 0.3):
        z_n = math.ceil(((stats.norm.isf(ALPHA) + stats.norm.isf(0.2)) * math.sqrt(disc) / 0.05) ** 2)
        p = pilot(np.zeros(1000), np.r_[np.ones(int(1000 * disc / 2)), np.zeros(1000 - int(1000 * disc / 2))])
        p = type(p)(p.sums, p.sizes, True, int(1000 * disc), 1000)
        plan = needed(p, MARGIN, delta=0.0, power=0.8)
        seq_n = _sequential_n(disc, 0.8, min(trials, 2000))
        print(f"| {100 * disc:g}% | {z_n} | {int(plan.n)} (at the pilot's 90% upper discordance) | {seq_n} |")


def _sequential_n(disc: float, power: float, trials: int) -> str:
    """The n by which the sequential rule (looks every 10) has stopped "not worse" in ``power`` of trials."""
    rng = np.random.default_rng(3)
    n = 4000
    draws = sim.paired_01(rng, trials, n, accuracy=0.5, discordant=disc, delta=0.0)
    y = betting._normalised(draws.sums, draws.sizes, -MARGIN / 100, (-1.0, 1.0), 1.0, True)
    reached = np.maximum.accumulate(betting.log_wealth(y), axis=-1) >= math.log(1 / ALPHA)
    first = np.where(reached.any(1), reached.argmax(1) + 1, n + 1)
    first = np.ceil(first / 10) * 10
    q = float(np.quantile(first, power))
    return f"{q:.0f}" if q <= n else f"> {n}"


def part_coverage(trials: int) -> None:
    print("\n## Accuracy intervals and the `*` at a true difference of 0, near the ceiling\n")
    print("| documents x questions | p | accuracy interval covers p | `*` at Δ = 0 | MC SE |")
    print("| --- | --- | --- | --- | --- |")
    for docs, size in ((6, 8), (10, 8), (20, 8), (20, 1), (40, 1)):
        for p in (0.9, 0.95):
            rng = np.random.default_rng(docs * 10 + size)
            sizes = np.full((trials, docs), float(size))
            # correlated documents: each its own accuracy around p
            acc = rng.beta(p * 10, (1 - p) * 10, size=(trials, docs, 1)) if size > 1 else np.full((trials, docs, 1), p)
            full = (rng.random((trials, docs, size)) < acc).astype(float)
            sums = full.sum(axis=2)
            if size == 1:
                k = sums.sum(axis=1).astype(int)
                lo = stats.beta.ppf(ALPHA, k, docs - k + 1)
                hi = stats.beta.ppf(1 - ALPHA, k + 1, docs - k)
                lo, hi = np.nan_to_num(lo, nan=0.0), np.nan_to_num(hi, nan=1.0)
                covered = (lo <= p) & (p <= hi)
            else:
                up = sim.betting_e(sums, sizes, p, bound=size, values=(0.0, 1.0)) >= 1 / ALPHA
                down = sim.betting_e(sums, sizes, p, bound=size, values=(0.0, 1.0), upper=False) >= 1 / ALPHA
                covered = ~(up | down)
            arm = (rng.random((trials, docs, size)) < acc).astype(float)  # the same accuracy: Δ = 0
            d = (arm - full).sum(axis=2)
            if size == 1:
                loss, gain = (d < 0).sum(1), (d > 0).sum(1)
                star = exact.rejection_table(docs, 0.0, ALPHA)[loss, gain] | \
                    exact.rejection_table(docs, 0.0, ALPHA, upper=False)[loss, gain]
            else:
                star = (sim.betting_e(d, sizes, 0.0, bound=size) >= 1 / ALPHA) | \
                    (sim.betting_e(d, sizes, 0.0, bound=size, upper=False) >= 1 / ALPHA)
            print(f"| {docs} x {size} | {p:g} | {covered.mean():.3f} | {star.mean():.3f} | "
                  f"{_se(0.95, trials):.3f} |")


def part_saturation(trials: int) -> None:
    """Two curves of 0/1 answers, comonotone across k (a question right at k is right at every larger k): a
    rising one (true accuracy 15, 35, 50, 53, 56, 60 at k = 1, 2, 5, 10, 20, 50; n = 50: every k <= 10 is more
    than 5 points below k = 50, so every named k <= 10 is an error), and one with a flat top (15, 35, 50, 58,
    60, 60; n = 400: k >= 10 are saturated, k <= 5 are not)."""
    print("\n## The saturation k (margin 5): a k named saturated that is worse than a larger k by the margin\n")
    print("| curve | n | false 'saturated' (a wrong k named) | runs naming a k | share of named k that are wrong | "
          "MC SE |")
    print("| --- | --- | --- | --- | --- | --- |")
    ks = [1, 2, 5, 10, 20, 50]
    for name, acc, n in (("rising 15/35/50/53/56/60", [0.15, 0.35, 0.50, 0.53, 0.56, 0.60], 50),
                         ("flat top 15/35/50/58/60/60", [0.15, 0.35, 0.50, 0.58, 0.60, 0.60], 400)):
        acc = np.array(acc)
        rng = np.random.default_rng(n)
        count = trials if n <= 100 else min(trials, 2000)
        u = rng.random((count, n))
        right = u[:, None, :] < acc[None, :, None]  # trials x k x questions
        region = exact.rejection_table(n, -MARGIN / 100, ALPHA)

        def passes(small: int, large: int) -> np.ndarray:
            d = right[:, small].astype(int) - right[:, large].astype(int)
            return region[(d < 0).sum(1), (d > 0).sum(1)]

        chosen = np.full(count, -1)
        alive = np.ones(count, dtype=bool)
        for i in range(len(ks) - 2, -1, -1):
            ok = alive.copy()
            for j in range(i + 1, len(ks)):
                ok &= passes(i, j)
            chosen[ok] = i
            alive = ok
        named = chosen >= 0
        worse = np.array([acc[i] < acc[i + 1:].max() - MARGIN / 100 if i < len(ks) - 1 else False
                          for i in range(len(ks))])
        wrong = named & worse[np.clip(chosen, 0, None)]
        rate = float(wrong.mean())
        print(f"| {name} | {n} | {rate:.4f} | {named.mean():.3f} | {wrong.sum() / max(named.sum(), 1):.3f} | "
              f"{_se(rate, count):.4f} |")


def part_plan(trials: int) -> None:
    print("\n## `ctxcomp plan` from 20-question pilots: the true power at the planned n (target 0.80)\n")
    print("| truth | pilots | mean true power | share under 0.5 | median planned n | plans past the exact test's "
          "2,000 pairs (the betting test's power simulated, 400 draws) | unreachable |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for disc in (0.1, 0.3):
        rng = np.random.default_rng(int(disc * 100))
        powers, ns, past, unreachable = [], [], 0, 0
        for _ in tqdm(range(min(trials, 40)), desc=f"plan, {100 * disc:g}% discordant", leave=False):
            draws = sim.paired_01(rng, 1, 20, accuracy=0.5, discordant=disc, delta=0.0)
            d = draws.sums[0]
            full = np.where(d < 0, 1.0, np.where(d > 0, 0.0, (rng.random(20) < 0.5).astype(float)))
            plan = needed(pilot(full, full + d), MARGIN, delta=0.0, power=0.8)
            if not np.isfinite(plan.n):
                unreachable += 1
                continue
            n = int(plan.n)
            ns.append(n)
            if n > EXACT_MAX_N:  # the report bets there: its power is simulated on the truth
                past += 1
                truth = sim.paired_01(rng, 400, n, accuracy=0.5, discordant=disc, delta=0.0)
                powers.append(float(sim.report_not_worse(truth, MARGIN).mean()))
                continue
            region = exact.rejection_table(n, -MARGIN / 100, ALPHA)
            loss, gain = np.nonzero(region)
            probs = stats.multinomial.pmf(np.stack([loss, gain, n - loss - gain], 1), n, [disc / 2, disc / 2, 1 - disc])
            powers.append(float(probs.sum()))
        powers = np.array(powers)
        print(f"| 0/1, Δ = 0, {100 * disc:g}% discordant | {len(powers)} | {powers.mean():.3f} | "
              f"{(powers < 0.5).mean():.3f} | {int(np.median(ns))} | {past} | {unreachable} |")


def _sequential_paths(draws: sim.Draws, margin: float, looks: list[int], *, futile: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per trial: the sequential rule's verdict (1 not worse, -1 worse, 0 open) and the documents it read,
    with or without futility stopping (``experiments.inference.sequential.futility``)."""
    from experiments.inference.sequential import Look, futility

    shift, threshold = -margin / 100, math.log(1 / ALPHA)
    bound = float(draws.sizes.max())
    up = np.maximum.accumulate(betting.log_wealth(betting._normalised(
        draws.sums, draws.sizes, shift, (-1.0, 1.0), bound, True)), axis=-1)
    down = np.maximum.accumulate(betting.log_wealth(betting._normalised(
        draws.sums, draws.sizes, shift, (-1.0, 1.0), bound, False)), axis=-1)
    verdict = np.zeros(len(draws.sums), dtype=int)
    read = np.full(len(draws.sums), looks[-1])
    for t in range(len(draws.sums)):
        for count in looks:
            u, d = up[t, count - 1], down[t, count - 1]
            if count >= 6 and (u >= threshold or d >= threshold):
                verdict[t], read[t] = (1 if u >= threshold else -1), count
                break
            if futile:
                seen = Look(int(draws.sizes[t, :count].sum()), count, float(u), float(d), threshold, 0.0, 0.0,
                            0.0, "")
                if futility(seen, draws.sums[t, :count], draws.sizes[t, :count], margin,
                            remaining=looks[-1] - count, bound=bound):
                    read[t] = count
                    break
    return verdict, read


def part_futility(trials: int) -> None:
    trials = min(trials, 2000)  # a Python loop over trials and looks
    print("\n## Futility stopping in a sequential run (looks every 10 documents, margin 5)\n")
    print("| scores | true Δ | max documents | decided, no futility | decided, futility | documents read, "
          "no futility | documents read, futility | MC SE |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    settings = [("0/1, 4% discordant", 0.04, 0.0), ("0/1, 30% discordant", 0.3, 0.0),
                ("0/1, 8% discordant", 0.08, -0.05), ("0/1, 30% discordant", 0.3, -0.15)]
    for i, (what, disc, delta) in enumerate(settings):
        for docs in (40, 200, 500):
            rng = np.random.default_rng(5000 + 10 * i + docs)
            draws = sim.paired_01(rng, trials, docs, accuracy=0.5, discordant=disc, delta=delta)
            looks = list(range(10, docs + 1, 10))
            cells = []
            for futile in (False, True):
                verdict, read = _sequential_paths(draws, MARGIN, looks, futile=futile)
                cells.append(((verdict != 0).mean(), read.mean()))
            print(f"| {what} | {100 * delta:+g} | {docs} | {cells[0][0]:.3f} | {cells[1][0]:.3f} | "
                  f"{cells[0][1]:.1f} | {cells[1][1]:.1f} | {_se(cells[0][0], trials):.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--only", default="null,power,coverage,saturation,plan,futility")
    args = parser.parse_args()
    parts = {"null": part_null, "power": part_power, "coverage": part_coverage, "saturation": part_saturation,
             "plan": part_plan, "futility": part_futility}
    for name in args.only.split(","):
        start = time.perf_counter()
        parts[name](args.trials)
        print(f"\n({name}: {time.perf_counter() - start:.0f} s, {args.trials} trials per row)")


if __name__ == "__main__":
    main()

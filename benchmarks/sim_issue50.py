"""Issue 50's regimes, measured side by side: validity when rare long documents carry the losses, and the
power of the clustered path against the cluster-robust z-test.

- ``rare``: 40-question documents (1 in 100) lose every answer, the 1-2-question rest gain 20.6% of theirs, so
  the question-weighted difference is exactly -5 points (the margin): every "not worse" is an error.  The
  betting test bounded by the sample's largest document (valid only given the sizes drawn) beside the pool's (40), fixed n and
  sequential (a look at every document), 50-400 documents.
- ``power``: 8-question documents, intra-document correlation 0.3 of the differences, discordance 4/10/30%,
  a true difference of 0.  Each question's difference is its document's shared draw with
  probability sqrt(0.3), else its own (the same trinomial law): the correlation of two questions is 0.3.
  At the z-test's n for 80% power x 1, 1.5 and 2: the power of the fixed-n test with the stakes tuned to n
  and the cap chosen per step (the report's), with one cap of 0.9 and with the growth-optimal stakes,
  of the sequential rule, and of the cluster-robust z-test (its variance estimated
  from the documents' sums).

- ``null``: the power settings' model at a true difference of -5 (every "not worse" is an error), fixed n.
- ``limit``: the most power any valid test can have there (``power_limit``), which prices the target;
  ``n80``: that bound and the test's power around the n where each reaches 80%.
- ``candidates``: the empirical Bentkus bound (Bentkus 2004; Kuchibhotla & Zheng 2021), valid, at three
  splits of alpha between the mean and the second moment, beside Bentkus with the variance known; the most
  power a test on the sample mean alone can have (``mean_only_power``: Phan, Thomas & Learned-Miller 2021
  with T = the mean); the betting e-value against a uniform threshold U / alpha (the uniformly randomised
  Markov inequality, Ramdas & Manole 2023: P(e >= U / alpha) = E min(1, alpha e) <= alpha), exact in U.
- ``n80-randomised``: that randomised test's power around the n where it reaches 80%.
- ``width-limit``: on the held-out L-Eval cell (``benchmarks/heldout_nq.yaml``, ``--run``), the width any
  valid interval can reach on documents drawn like the cell's (``lower_limit``), against ours and the cluster
  bootstrap.

Run: ``python benchmarks/sim_issue50.py [--trials N] [--run DIR]
[--only rare,power,null,limit,n80,candidates,n80-randomised,width-limit]``.  Each rate is printed with its Monte
Carlo standard error.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.inference import betting  # noqa: E402
from experiments.inference import simulation as sim  # noqa: E402
from experiments.inference.paired import difference_bounds  # noqa: E402
from experiments.inference.resampling import bootstrap_delta  # noqa: E402
from experiments.inference.results import ALPHA  # noqa: E402
from experiments.inference.units import as_units  # noqa: E402

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
                    size: int = 8, icc: float = 0.3, delta: float = 0.0) -> sim.Draws:
    """Each question's difference: -1 with probability (discordant - delta) / 2, +1 with (discordant + delta) / 2
    (``delta`` on the 0-1 scale), shared by its document with probability sqrt(icc)."""
    lose = (discordant - delta) / 2

    def trinomial(shape: tuple[int, ...]) -> np.ndarray:
        u = rng.random(shape)
        return np.where(u < lose, -1.0, np.where(u < discordant, 1.0, 0.0))

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


def _one_cap_e(draws: sim.Draws, cap: float) -> np.ndarray:
    """The fixed-n e-value with the tuned stake clipped at one cap for every step (0.9: the rule the per-step choice replaces)."""
    order = betting.orders(draws.sums.shape[1])
    out = np.empty(len(draws.sums))
    for start in range(0, len(out), sim.CHUNK):
        block = slice(start, start + sim.CHUNK)
        y = betting._normalised(draws.sums[block][:, order], draws.sizes[block][:, order], -MARGIN / 100,
                                (-1.0, 1.0), 8.0, True)
        out[block] = np.exp(np.log1p(betting.fixed_n_stakes(y, ALPHA, caps=(cap,)) * y).sum(axis=-1)).mean(axis=-1)
    return out


def part_power(trials: int) -> None:
    print(f"\npower at Δ = 0, 8-question documents, ICC 0.3, {trials} trials a cell (MC SE <= {_se(0.5, trials):.3f})")
    print("| discordant | z-test n (80%) | n | z-test | fixed n, cap chosen per step | fixed n, one cap of 0.9 "
          "| fixed n, growth-optimal | sequential |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(51)
    for disc in (0.04, 0.10, 0.30):
        zn = _z_n(disc)
        for factor in (1.0, 1.5, 2.0):
            n = int(round(zn * factor))
            draws = clustered_draws(rng, trials, n, disc)
            z = _z_rejects(draws).mean()
            now = (sim.betting_e(draws.sums, draws.sizes, -MARGIN / 100, bound=8.0) >= 1 / ALPHA).mean()
            one_cap = (_one_cap_e(draws, 0.9) >= 1 / ALPHA).mean()
            before = (sim.betting_e(draws.sums, draws.sizes, -MARGIN / 100, bound=8.0, alpha=None) >= 1 / ALPHA).mean()
            seq = sim.sequential_not_worse(draws, MARGIN, list(range(1, n + 1)), bound=8.0).mean()
            print(f"| {disc:.0%} | {zn} | {n} ({factor:g}x) | {z:.3f} | {now:.3f} | {one_cap:.3f} | {before:.3f} "
                  f"| {seq:.3f} |", flush=True)


def part_null(trials: int) -> None:
    """The power settings' model at the null's edge (true Δ = -5: every "not worse" is an error), at the n of
    the power table; 4% discordance cannot lose 5 points, so its row takes 5% (losses only)."""
    print(f"\nclustered null (Δ = -5), 8-question documents, ICC 0.3, {trials} trials a row, fixed n with the "
          f"stakes now\n| discordant | n | false 'not worse' | the same, randomised Markov (e >= U / alpha) "
          f"| MC SE at 0.025 |\n| --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(52)
    for disc in (0.05, 0.10, 0.30):
        for factor in (1.0, 1.5, 2.0):
            n = int(round(_z_n(max(disc, 0.04)) * factor))
            draws = clustered_draws(rng, trials, n, disc, delta=-MARGIN / 100)
            e = sim.betting_e(draws.sums, draws.sizes, -MARGIN / 100, bound=8.0)  # every cell here is informative
            chance = np.minimum(1.0, ALPHA * e)  # each trial's probability of rejecting, exact in U
            se = chance.std(ddof=1) / math.sqrt(trials)
            print(f"| {disc:.0%} | {n} | {(e >= 1 / ALPHA).mean():.4f} | {chance.mean():.4f} (SE {se:.4f}) "
                  f"| {_se(ALPHA, trials):.4f} |", flush=True)


def document_law(discordant: float, size: int = 8, icc: float = 0.3) -> np.ndarray:
    """P(a document's summed difference = s), s = -size..size, in ``clustered_draws``'s model at Δ = 0."""
    shared = math.sqrt(icc)
    tri = np.array([discordant / 2, 1 - discordant, discordant / 2])  # -1, 0, +1
    law = np.zeros(2 * size + 1)
    for value, p in enumerate(tri):
        question = (1 - shared) * tri
        question[value] += shared
        dist = np.array([1.0])
        for _ in range(size):
            dist = np.convolve(dist, question)
        law += p * dist
    return law


def np_power(alt: np.ndarray, null: np.ndarray, n: int, trials: int, rng: np.random.Generator) -> float:
    """The Neyman-Pearson power at level ALPHA of n draws, ``null`` against ``alt`` (two laws on one finite
    support), randomised on ties and simulated on ``trials`` samples of each.  An atom the alternative never
    draws (the null's added worst document) makes a sample the null's: it is never rejected."""
    with np.errstate(divide="ignore"):
        ratio = np.nan_to_num(np.log(alt) - np.log(null), neginf=-1e9)
    under_null = rng.multinomial(n, null, size=trials) @ ratio
    under_alt = rng.multinomial(n, alt, size=trials) @ ratio
    cut = np.quantile(under_null, 1 - ALPHA)
    ties = (under_null == cut).mean()
    share = (ALPHA - (under_null > cut).mean()) / ties if ties > 0 else 0.0
    return float((under_alt > cut).mean() + share * (under_alt == cut).mean())


def mean_zero_nulls(alt: np.ndarray, x: np.ndarray, worst: int, thetas: np.ndarray):
    """Null laws of E x = 0 built from the alternative ``alt`` on the support ``x``: tilted by exp(-theta x)
    and mixed with the atom ``worst`` (the bound's end) at the weight that puts the mean at 0.  Yields
    (theta, null) while the tilted mean is still >= 0."""
    for theta in thetas:
        tilted = alt * np.exp(-theta * x)
        tilted /= tilted.sum()
        mean = float(tilted @ x)
        if mean < 0:
            return
        weight = mean / (mean - x[worst])
        null = (1 - weight) * tilted
        null[worst] += weight
        yield float(theta), null


def power_limit(law: np.ndarray, n: int, trials: int, rng: np.random.Generator, size: int = 8) -> tuple[float, float]:
    """An upper bound on the power of any valid test at n documents: the Neyman-Pearson power against the
    alternative ``law`` of one null law at Δ = -margin, minimised over a family of nulls (``mean_zero_nulls``
    on the shifted document sum x = sum + margin x size, the worst atom a document that loses all its
    questions, x = -(1 - margin) size): what the issue's rare-loss and shifted-mean worries are made of.  Any
    valid test has size <= alpha under each such law, so its power at the alternative is at most each law's
    NP power.  Returns (bound, theta)."""
    x = np.arange(-size, size + 1) + MARGIN / 100 * size
    best = (1.0, 0.0)
    for theta, null in mean_zero_nulls(law, x, 0, np.linspace(0.0, 1.5, 31)):
        power = np_power(law, null, n, trials, rng)
        if power < best[0]:
            best = (power, theta)
    return best


def part_limit(trials: int) -> None:
    trials = max(trials, 20000)
    print(f"\nthe most power any valid test can have (NP bound over tilted + rare-loss nulls, {trials} samples "
          f"each; MC SE <= {_se(0.5, trials):.3f})\n| discordant | n | bound on power | theta |\n| --- | --- | --- | --- |")
    rng = np.random.default_rng(53)
    for disc in (0.04, 0.10, 0.30):
        zn = _z_n(disc)
        for factor in (1.0, 1.5, 2.0):
            n = int(round(zn * factor))
            power, theta = power_limit(document_law(disc), n, trials, rng)
            print(f"| {disc:.0%} | {n} ({factor:g}x) | {power:.3f} | {theta:.2f} |", flush=True)


N80 = {0.04: ((80, 86, 92), (110, 120, 130)), 0.10: ((130, 140, 150), (230, 245, 260)),
       0.30: ((340, 355), (600, 630, 660))}  # (n for the limit, n for the test) around each 80% crossing


def part_n80(trials: int) -> None:
    """Where 80% power is reached: the bound on any valid test (``power_limit``) and the test now."""
    print(f"\nn around 80% power ({trials} trials a test cell, 20,000 samples a limit cell)"
          "\n| discordant | n (x the z-test's n) | what | power |\n| --- | --- | --- | --- |")
    rng = np.random.default_rng(56)
    for disc, (limit_ns, test_ns) in N80.items():
        zn = _z_n(disc)
        for n in limit_ns:
            bound, _ = power_limit(document_law(disc), n, max(trials, 20000), rng)
            print(f"| {disc:.0%} | {n} ({n / zn:.2f}x) | bound on any valid test | {bound:.3f} |", flush=True)
        for n in test_ns:
            draws = clustered_draws(rng, trials, n, disc)
            power = (sim.betting_e(draws.sums, draws.sizes, -MARGIN / 100, bound=8.0) >= 1 / ALPHA).mean()
            print(f"| {disc:.0%} | {n} ({n / zn:.2f}x) | fixed n, now | {power:.3f} |", flush=True)


N80_RANDOMISED = {0.04: (90, 100, 110), 0.10: (190, 205, 220), 0.30: (460, 490, 520)}  # around its crossing


def part_n80_randomised(trials: int) -> None:
    """Where the betting e-value against U / alpha (randomised Markov, ``part_candidates``) reaches 80%."""
    print(f"\nn around 80% power, betting with the randomised Markov threshold ({trials} trials a cell, MC SE <= "
          f"{_se(0.5, trials):.3f})\n| discordant | n (x the z-test's n) | power |\n| --- | --- | --- |")
    rng = np.random.default_rng(59)
    for disc, ns in N80_RANDOMISED.items():
        for n in ns:
            draws = clustered_draws(rng, trials, n, disc)
            e = sim.betting_e(draws.sums, draws.sizes, -MARGIN / 100, bound=8.0)
            print(f"| {disc:.0%} | {n} ({n / _z_n(disc):.2f}x) | {np.minimum(1.0, ALPHA * e).mean():.3f} |", flush=True)


def _bentkus_rejects_one(total: float, n: int, second: float, high: float, level: float) -> bool:
    """Bentkus (2004): P(sum >= t) <= inf_h E(T - h)_+^2 / (t - h)^2, T a sum of n two-point laws on
    {-second / high, high} (mean 0, second moment ``second``); reject when that is <= ``level``."""
    if total <= 0:
        return False
    k = np.arange(n + 1)
    down = second / high
    values = (high + down) * k - n * down
    pmf = stats.binom.pmf(k, n, second / (second + high * high))
    h = np.linspace(values.min(), total, 400)[:-1]
    tail = (np.clip(values[None, :] - h[:, None], 0, None) ** 2 * pmf).sum(axis=1) / (total - h) ** 2
    return bool(tail.min() <= level)


def bentkus_rejects(x: np.ndarray, low: float, high: float, share: float = 0.2) -> np.ndarray:
    """The empirical Bentkus test of H0 "E x = 0" (x in [-low, high]; Bentkus 2004, Kuchibhotla & Zheng 2021),
    at alpha split as alpha (1 - share) for the mean and alpha share for E x^2: the second moment's upper
    bound from the binomial (KL) lower tail of x^2 / R, R = max(low, high)^2, then Bentkus's bound on sum(x)."""
    n = x.shape[1]
    bound = max(low, high) ** 2
    seen = np.clip((x ** 2).mean(axis=1) / bound, 1e-15, 1 - 1e-15)
    level = math.log(1 / (ALPHA * share))
    lo, hi = seen.copy(), np.ones_like(seen)
    for _ in range(60):
        mid = (lo + hi) / 2
        q = np.clip(mid, 1e-15, 1 - 1e-15)
        kl = seen * np.log(seen / q) + (1 - seen) * np.log((1 - seen) / (1 - q))
        inside = n * kl <= level
        lo, hi = np.where(inside, mid, lo), np.where(inside, hi, mid)
    second = lo * bound
    return np.array([_bentkus_rejects_one(t, n, v, high, ALPHA * (1 - share)) for t, v in zip(x.sum(axis=1), second)])


def part_candidates(trials: int) -> None:
    print(f"\ncandidates at 1.5x the z-test's n, Δ = 0 ({trials} trials a cell, MC SE <= {_se(0.5, trials):.3f})"
          "\n| discordant | n | betting, cap per step | empirical Bentkus (share 0.05 / 0.2 / 0.5) "
          "| Bentkus, variance known (not valid) | any test on the mean alone (Phan et al. 2021, T = mean), at most "
          "| betting, randomised Markov (e >= U / alpha) |\n| --- | --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(54)
    low, high = (1 - MARGIN / 100) * 8, (1 + MARGIN / 100) * 8
    for disc in (0.04, 0.10, 0.30):
        n = int(round(_z_n(disc) * 1.5))
        draws = clustered_draws(rng, trials, n, disc)
        x = draws.sums + MARGIN / 100 * draws.sizes
        e = sim.betting_e(draws.sums, draws.sizes, -MARGIN / 100, bound=8.0)
        now, randomised = (e >= 1 / ALPHA).mean(), np.minimum(1.0, ALPHA * e).mean()
        split = " / ".join(f"{bentkus_rejects(x, low, high, share).mean():.3f}" for share in (0.05, 0.2, 0.5))
        known = _bentkus_known(x, high, float(document_law(disc) @ (np.arange(-8, 9) ** 2)))
        print(f"| {disc:.0%} | {n} | {now:.3f} | {split} | {known:.3f} | {mean_only_power(x, low, high):.3f} "
              f"| {randomised:.3f} |", flush=True)


def mean_only_power(x: np.ndarray, low: float, high: float) -> float:
    """The most power a test of H0 "E x <= 0" (x in [-low, high]) that rejects on the sample mean alone, when it
    is large enough (Phan, Thomas & Learned-Miller 2021 with T = the mean: their bound is a function of T(x),
    monotone in it), can have on the samples ``x`` (trials x n): it must hold its level under the two-point law
    on {-low, high} of mean 0, whose mean of n draws is (high K - low (n - K)) / n, K ~ Binomial(n,
    low / (low + high)); so it cannot reject at or below the largest such mean with an upper tail above alpha."""
    n = x.shape[1]
    k = np.arange(n + 1)
    tail = stats.binom.sf(k - 1, n, low / (low + high))  # P(K >= k)
    first = int(k[tail <= ALPHA][0])  # the smallest count whose upper tail is <= alpha
    return float((x.mean(axis=1) > (high * (first - 1) - low * (n - first + 1)) / n).mean())


def _bentkus_known(x: np.ndarray, high: float, variance: float) -> float:
    """Bentkus's test with the variance given (an oracle: the price of not knowing it is the gap to the
    empirical one)."""
    return float(np.mean([_bentkus_rejects_one(t, x.shape[1], variance, high, ALPHA) for t in x.sum(axis=1)]))


def cell_pairs(run: Path) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each compressed arm of a run's predictions.jsonl against its ``full`` arm, by question: full's score,
    the arm's, and the document (cluster) it was asked of; keyed by the arm's label."""
    rows = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines() if line.strip()]
    full = {r["id"]: r["score"] for r in rows if r["compressor"] == "full"}
    out = {}
    for arm in sorted({r["compressor"] for r in rows} - {"full"}):
        mine = [r for r in rows if r["compressor"] == arm and r["id"] in full]
        out[arm] = (np.array([full[r["id"]] for r in mine]), np.array([r["score"] for r in mine]),
                    np.array([r["cluster"] for r in mine]))
    return out


def lower_limit(sizes: np.ndarray, sums: np.ndarray, bound: float, trials: int, seed: int,
                power: float = 0.5) -> float:
    """The highest a valid lower bound on the question-weighted mean can reach with probability ``power``
    on documents drawn like the sample's (its empirical law Q): for each m below the sample's mean, the nulls
    of ``mean_zero_nulls`` (Q tilted, mixed with a document of ``bound`` questions that loses them all) have
    mean m, so any valid bound L has P_Q(L > m) <= the least NP power b(m) among them; the limit is the m
    where b(m) = ``power`` (bisection; the same seed at every m, so b is a smooth function of m)."""
    q = np.append(np.full(len(sizes), 1 / len(sizes)), 0.0)  # the worst document last, Q never draws it

    def b(m: float) -> float:
        x = np.append(sums - m * sizes, -bound * (1 + m))
        rng = np.random.default_rng(seed)
        return min(np_power(q, null, len(sizes), trials, rng)
                   for _, null in mean_zero_nulls(q, x, len(x) - 1, np.linspace(0.0, 3.0, 31)))

    high, low = float(sums.sum() / sizes.sum()), -1.0  # b(high) = alpha < power, b(-1) = 1
    while high - low > 2e-4:
        mid = (high + low) / 2
        low, high = (mid, high) if b(mid) >= power else (low, mid)
    return low


def untilted_limit(sizes: np.ndarray, sums: np.ndarray, bound: float, power: float = 0.5,
                   keep_sizes: bool = False) -> float:
    """``lower_limit`` with the untilted null (1 - w) Q + w (worst document) alone, in closed form: its n
    draws dominate (1 - w)^n Q^n, so P_Q(L > m_w) <= alpha / (1 - w)^n for any valid L, = ``power`` at
    w = 1 - (alpha / power)^(1/n); m_w its question-weighted mean.  ``keep_sizes``: the worst document is
    one of the sample's, losing all its questions (a narrower class of laws than the test's, whose documents
    may hold up to ``bound`` questions in any proportion): m_w = (1 - w) mean - w."""
    w = 1 - (ALPHA / power) ** (1 / len(sizes))
    if keep_sizes:
        return float((1 - w) * sums.sum() / sizes.sum() - w)
    return float(((1 - w) * sums.mean() - w * bound) / ((1 - w) * sizes.mean() + w * bound))


def mean_only_lower(sizes: np.ndarray, sums: np.ndarray, bound: float) -> float:
    """The highest lower bound any bound read off the sample's mean alone (monotone in it: Phan, Thomas &
    Learned-Miller 2021 with T = the mean) can give: at a candidate m it must hold its level under the
    two-point law of x = sum - m size on {-(1 + m) N, (1 - m) N} with mean 0, where the mean of n draws is
    N (2K - n (1 + m)) / n, K ~ Binomial(n, (1 + m) / 2); it cannot reject m while P(mean >= observed) > alpha."""
    n = len(sizes)
    for m in np.arange(float(sums.sum() / sizes.sum()), -1.0, -1e-4):
        observed = float((sums - m * sizes).mean())
        k = math.ceil(n * (1 + m) / 2 + n * observed / (2 * bound) - 1e-9)
        if stats.binom.sf(k - 1, n, (1 + m) / 2) <= ALPHA:
            return float(m)
    return -1.0


def our_widths(sizes: np.ndarray, sums: np.ndarray, bound: float, resamples: int, seed: int) -> np.ndarray:
    """The report's interval (``difference_bounds``) on ``resamples`` draws of documents from the sample's
    empirical law, each document's sum spread evenly over its questions (the units the test reads)."""
    rng = np.random.default_rng(seed)
    widths = np.empty(resamples)
    for i in range(resamples):
        pick = rng.integers(0, len(sizes), len(sizes))
        counts = sizes[pick].astype(int)
        diffs = np.repeat(sums[pick] / sizes[pick], counts)
        clusters = list(np.repeat(np.arange(len(pick)), counts).astype(str))
        found = difference_bounds(0.5 - diffs / 2, 0.5 + diffs / 2, clusters=clusters, max_cluster=int(bound))
        widths[i] = found.upper - found.lower
    return widths


def randomised_interval(d: np.ndarray, clusters: list[str], bound: float, u: float) -> tuple[float, float, float]:
    """The report's fixed-n interval with the threshold U / alpha for one U (the uniformly randomised Markov
    inequality): the rejected deltas grow as U falls, so at U = 1/2 it is the median interval over U.  Also
    the U below which it is empty (both one-sided tests reject the sample's own mean)."""
    units = as_units(d, None, clusters)
    order = betting.orders(len(units.sums))

    def e(deltas: np.ndarray, upper: bool) -> np.ndarray:
        return betting.one_sided_e(units.sums, units.sizes, deltas, values=(-1.0, 1.0), bound=bound, upper=upper,
                                   order=order, alpha=ALPHA)

    lo, hi = betting.bounds(lambda deltas, upper: e(deltas, upper) >= u / ALPHA, (-1.0, 1.0), float(d.mean()))
    mean = np.array([units.statistic])
    return lo, hi, ALPHA * float(min(e(mean, True)[0], e(mean, False)[0]))


def part_width_limit(trials: int, run: Path = ROOT / "runs" / "nq-heldout", resamples: int = 200) -> None:
    """What any valid interval can do on the held-out cell (docs/metrics.md): run ``benchmarks/heldout_nq.yaml``
    into ``run`` first."""
    if not (run / "predictions.jsonl").exists():
        print(f"\nwidth-limit: no {run / 'predictions.jsonl'}; run: ctxcomp run benchmarks/heldout_nq.yaml --out {run}")
        return
    trials = max(trials, 20000)
    print(f"\nwhat any valid interval can reach on documents drawn like the cell's (NP over tilted + worst-document "
          f"nulls, {trials} samples a law; each bound is beyond its limit at least half the time, the width below "
          f"its limit at most half the time: each side at 1/4), against ours\n| arm | documents (questions) | ours on the "
          f"sample | ours, median over {resamples} resamples | each bound's limit (median) | the width's limit (median) | limit, untilted null | the same, sizes "
          f"known | any bound read "
          f"off the mean alone | cluster bootstrap | ours, randomised Markov at U = 1/2 |\n"
          f"| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for arm, (a, b, clusters) in cell_pairs(run).items():
        units = as_units(b - a, None, list(clusters))
        sizes, sums = units.sizes, units.sums
        bound = float(sizes.max())  # the whole file is read: the sample's largest document is the pool's
        ours = difference_bounds(a, b, clusters=list(clusters), max_cluster=int(bound))
        sides = [(sizes, sums), (sizes, -sums)]  # the upper bound is the mirror sample's lower bound, negated
        limit = [lower_limit(s, t, bound, trials, 57) for s, t in sides]
        either = [lower_limit(s, t, bound, trials, 57, power=0.25) for s, t in sides]  # P(either side) <= 1/2
        plain = [untilted_limit(s, t, bound) for s, t in sides]
        known = [untilted_limit(s, t, bound, keep_sizes=True) for s, t in sides]
        mean_only = [mean_only_lower(s, t, bound) for s, t in sides]
        resampled = our_widths(sizes, sums, bound, resamples, 58)
        boot = bootstrap_delta(a, b, clusters=list(clusters))
        low, high, empty = randomised_interval(b - a, list(clusters), bound, 0.5)
        print(f"| {arm} | {len(sizes)} ({int(sizes.sum())}) | {100 * (ours.upper - ours.lower):.1f} "
              f"[{100 * ours.lower:+.1f}, {100 * ours.upper:+.1f}] | {100 * np.median(resampled):.1f} "
              f"| {-100 * sum(limit):.1f} [{100 * limit[0]:+.1f}, {-100 * limit[1]:+.1f}] | {-100 * sum(either):.1f} "
              f"| {-100 * sum(plain):.1f} | {-100 * sum(known):.1f} | {-100 * sum(mean_only):.1f} | {boot.hi - boot.lo:.1f} "
              f"| {100 * (high - low):.1f} (empty at U < {empty:.4f}) |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--only", default="rare,power,null,limit,n80,candidates,n80-randomised,width-limit")
    parser.add_argument("--run", type=Path, default=ROOT / "runs" / "nq-heldout",
                        help="the held-out cell's run directory (width-limit)")
    args = parser.parse_args()
    start = time.time()
    for part in args.only.split(","):
        {"rare": part_rare, "power": part_power, "null": part_null, "limit": part_limit,
         "candidates": part_candidates, "n80": part_n80, "n80-randomised": part_n80_randomised,
         "width-limit": lambda trials: part_width_limit(trials, args.run)}[part](args.trials)
    print(f"\n{time.time() - start:.0f} s")


if __name__ == "__main__":
    main()

"""Sequential non-inferiority: look at a growing sample as often as wanted and stop when it is decided.

The betting test of ``experiments.inference.betting`` is anytime-valid: under H0 "the arm is worse than full
by the margin or more", the gambler's wealth K_t along the documents in the order they were sampled is a
nonnegative supermartingale, and by Ville's inequality it ever reaches 1/alpha with probability at most
alpha -- whenever and however often it is looked at, and whatever made the run stop.  So a cell is "not
worse" at a look once its wealth has reached 1/alpha at some document so far, and "worse" once the mirror
wealth (H0 "not worse by more than the margin") has; no spending plan, no planned number of looks, and
fixed n and sequential are one computation (Waudby-Smith & Ramdas 2024, JRSS B 86(1), sec. 3 and 5).

The interval reported at a look is the confidence sequence: every difference delta whose wealth has not
reached 1/alpha at any document so far (the running intersection).  The verdict is read off it, so the
interval and the decision never disagree.

The price of being able to stop at any time: at a fixed n the betting test needs roughly
(2 ln(1/alpha))^1/2 / z_alpha = 1.4x the z-interval's width (docs/metrics.md gives the n it takes).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from experiments.inference import betting
from experiments.inference.paired import check_margin, check_scores
from experiments.inference.results import ALPHA, MIN_CLUSTERS
from experiments.inference.units import as_units
from experiments.inference.verdicts import UNINFORMATIVE, at_edge

NOT_WORSE = "not worse"
WORSE = "worse"
NOT_DECIDED_AT_MAX = "cannot tell at the maximum n"
FUTILE = "cannot tell: stopped for futility at {n} documents ({why})"
OPTIMISM = 2.0  # standard errors the projection of futility moves the estimate towards each decision


@dataclass(frozen=True)
class Look:
    """One cell at one look: the log-wealth each test has reached so far, the confidence sequence (points),
    and the decision ("not worse", "worse" or "" to go on)."""

    n: int
    n_clusters: int
    log_wealth_not_worse: float
    log_wealth_worse: float
    threshold: float  # log(1 / alpha)
    delta: float
    lo: float
    hi: float
    decision: str


def _reached(sums: np.ndarray, sizes: np.ndarray, deltas: np.ndarray, *, values: tuple[float, float],
             bound: float, upper: bool) -> np.ndarray:
    """The highest log-wealth reached so far, for each delta (documents in their sampling order)."""
    y = betting._normalised(sums[None, :], sizes[None, :], deltas, values, bound, upper)[:, 0, :]
    return betting.log_wealth(y).max(axis=-1)


def look(sums: np.ndarray, sizes: np.ndarray, margin: float, *, alpha: float = ALPHA, bound: float | None = None,
         values: tuple[float, float] = (-1.0, 1.0)) -> Look:
    """The decision at one look over the documents so far (``sums``/``sizes`` per document of arm - full, in
    sampling order), margin in points; ``bound``: the most questions a document of the task holds."""
    check_margin("look", margin)
    bound = float(bound or sizes.max())
    if len(sizes) and sizes.max() > bound:
        raise ValueError(f"a document of {int(sizes.max())} questions passes the bound of {bound:g} the betting "
                         "test was given: its outcomes would leave the range the stakes are safe on")
    shift = -margin / 100
    threshold = math.log(1 / alpha)

    def reject(deltas: np.ndarray, upper: bool) -> np.ndarray:
        return _reached(sums, sizes, deltas, values=values, bound=bound, upper=upper) >= threshold

    mean = float(sums.sum() / sizes.sum())
    lo, hi = betting.bounds(reject, values, mean, anchors=(shift, 0.0))
    up = float(_reached(sums, sizes, np.array([shift]), values=values, bound=bound, upper=True)[0])
    down = float(_reached(sums, sizes, np.array([shift]), values=values, bound=bound, upper=False)[0])
    decision = NOT_WORSE if lo > shift + 1e-12 else WORSE if hi < shift - 1e-12 else ""
    if len(sums) < MIN_CLUSTERS:
        decision = ""
    return Look(int(sizes.sum()), len(sums), up, down, threshold, round(100 * mean, 2), round(100 * lo, 2),
                round(100 * hi, 2), decision)


def _growth_ceiling(shift: float, values: tuple[float, float], upper: bool) -> float:
    """The most log-wealth one more document can add to the test of ``shift``: its best outcome (every
    question at the far end of ``values``) normalised by the largest document, at the largest stake."""
    best = (values[1] - shift) / (shift - values[0]) if upper else (shift - values[0]) / (values[1] - shift)
    return math.log1p(betting.CAP * best)


def _best_rate(y: np.ndarray) -> float:
    """The growth rate per document of the best constant stake in hindsight on these outcomes: no predictable
    stake does better on average over data like these, so a projection at this rate errs towards going on."""
    lams = np.linspace(0.0, betting.CAP, 76)
    return float(np.log1p(lams[:, None] * y[None, :]).mean(axis=1).max())


def futility(seen: Look, sums: np.ndarray, sizes: np.ndarray, margin: float, *, remaining: int,
             bound: float | None = None, values: tuple[float, float] = (-1.0, 1.0)) -> str:
    """Why the documents still to come (``remaining``, up to the maximum n) can no longer decide the cell, or "".

    Stopping a cell early never adds an error: each test stays anytime-valid, and a futile cell only ends
    undecided (non-binding futility).  What it can cost is power, so the rule stops only where a decision is
    out of reach:

    - *certain*: even if every remaining document gave its best outcome at the largest stake, neither wealth
      could reach 1/alpha (each document adds at most log(1 + CAP * best) to a log-wealth);
    - *projected* (from ``MIN_CLUSTERS`` documents on): even if the true difference were ``OPTIMISM``
      standard errors more favourable than the estimate (towards each decision in turn), and the remaining
      documents were bet on with the best constant stake in hindsight on data like those seen so moved
      (more than the predictable stakes earn), neither log-wealth would reach log(1/alpha).  The standard
      error counts one pseudo-document of variance 1/4 per question, so a run of identical answers is not
      taken for certainty.  benchmarks/sim_stats.py (``--only futility``) gives what the rule saves and costs."""
    if remaining <= 0 or not seen.n_clusters:
        return ""
    shift = -margin / 100
    room = remaining * max(_growth_ceiling(shift, values, True), _growth_ceiling(shift, values, False))
    if max(seen.log_wealth_not_worse, seen.log_wealth_worse) + room < seen.threshold:
        return f"{remaining} more could not reach 1/α even at their best"
    if seen.n_clusters < MIN_CLUSTERS:
        return ""
    bound = float(bound or sizes.max())
    total = float(sizes.sum())
    mean = float(sums.sum()) / total
    squares = float(((sums - mean * sizes) ** 2).sum()) + 0.25 * (total / len(sizes)) ** 2
    moved = OPTIMISM * math.sqrt(squares) / total
    reach = []
    for upper, current in ((True, seen.log_wealth_not_worse), (False, seen.log_wealth_worse)):
        hopeful = sums + (moved if upper else -moved) * sizes
        y = betting._normalised(hopeful[None, :], sizes[None, :], np.array([shift]), values, bound, upper)[0, 0]
        reach.append(current + remaining * _best_rate(y))
    if max(reach) < seen.threshold:
        return (f"at Δ {seen.delta:+.2f} ± {OPTIMISM:g} standard errors, {remaining} more would lift the "
                f"log-wealth to at most {max(reach):.2f} of the {seen.threshold:.2f} a decision needs")
    return ""


def decide_in_looks(a: Sequence[float], b: Sequence[float], margin: float, *, clusters: Sequence[str] | None,
                    looks: Sequence[int], alpha: float = ALPHA, max_cluster: int | None = None,
                    stop_futile: bool = False) -> str:
    """The verdict at which the sequential rule stops: ``a`` full's and ``b`` the arm's scores in [0, 1], per
    question in the order the run sampled them; ``clusters`` each question's document; ``looks`` the
    cumulative number of documents at each look.  Returns "not worse", "worse", "uninformative: ..." (full
    within the margin of the floor or ceiling at the last look) or "cannot tell at the maximum n".
    ``stop_futile``: stop early, undecided, once the last look's documents can no longer decide (``futility``;
    what ``--until-decided`` does)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"decide_in_looks: paired samples must have the same length, got {len(x)} and {len(y)}")
    check_scores("decide_in_looks", x, y)
    check_margin("decide_in_looks", margin)
    keys = list(clusters) if clusters is not None else [str(i) for i in range(len(x))]
    units = as_units(y - x, None, keys)
    order = list(dict.fromkeys(keys))  # documents in sampling order (as_units keeps first appearance)
    bound = max_cluster or (int(units.sizes.max()) if len(units.sizes) else 1)
    for count in looks:
        count = min(int(count), len(order))
        if count < 1:
            continue
        docs = set(order[:count])
        rows = [i for i, k in enumerate(keys) if k in docs]
        if at_edge(float(x[rows].mean()), margin, float(y[rows].mean())) is not None:
            continue
        seen = look(units.sums[:count], units.sizes[:count], margin, alpha=alpha, bound=bound)
        if seen.decision:
            return seen.decision
        left = min(int(looks[-1]), len(order)) - count
        why = futility(seen, units.sums[:count], units.sizes[:count], margin, remaining=left,
                       bound=bound) if stop_futile else ""
        if why:
            return FUTILE.format(n=count, why=why)
    edge = at_edge(float(x.mean()), margin, float(y.mean())) if len(x) else None
    return UNINFORMATIVE.format(edge) if edge is not None else NOT_DECIDED_AT_MAX


def simulate_not_worse(differences: np.ndarray, sizes: np.ndarray, looks: Sequence[int], margin: float, *,
                       alpha: float = ALPHA, bound: float | None = None) -> np.ndarray:
    """Whether the rule says "not worse" at some look, for many trials at once: ``differences`` trials x
    documents of each document's summed difference, ``sizes`` trials x documents (0-1 scale); the same test
    as ``look`` at the margin (benchmarks/sim_stats.py, tests)."""
    bound = float(bound or sizes.max())
    shift = -margin / 100
    y = betting._normalised(differences, sizes, shift, (-1.0, 1.0), bound, True)
    wealth = np.maximum.accumulate(betting.log_wealth(y), axis=-1)
    idx = np.clip(np.asarray(looks) - 1, 0, differences.shape[1] - 1)
    reached = wealth[:, idx] >= math.log(1 / alpha)
    return reached[:, np.asarray(looks) >= MIN_CLUSTERS].any(axis=1)


__all__ = ["FUTILE", "Look", "NOT_DECIDED_AT_MAX", "NOT_WORSE", "WORSE", "decide_in_looks", "futility", "look",
           "simulate_not_worse"]

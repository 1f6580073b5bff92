"""What the room's tests return, and how a report prints it."""
from __future__ import annotations

from dataclasses import dataclass, field

CONFIDENCE = 0.95
# Below this many pairs an interval says little: reports then give the delta and its n, without an interval
# or a p-value.
MIN_PAIRS = 5
# Below this many documents no verdict and no star are given.  Not because no valid test could reject: with
# one 0/1 question a document, five gains out of five reject "worse by 5 points" (the least favourable null
# gains at most 47.5%: 0.475^5 = 0.0245 < 0.025).  But five units of unknown spread say little a reader
# should act on (a sign test of five has 1/2^5 = 0.031), so the cell says "too few documents" instead of a
# verdict the reader might over-read; its interval is still given from MIN_PAIRS pairs.
MIN_CLUSTERS = 6
# The one-sided level of a non-inferiority verdict: 0.025, the lower half of the report's 95% intervals (the
# CONSORT convention for non-inferiority: a two-sided 95% interval's lower bound against the margin).
ALPHA = 0.025


@dataclass(frozen=True)
class PairedDelta:
    """``b - a`` over ``n`` paired examples in ``n_clusters`` clusters, x 100, with its interval and p-value.

    ``method`` says where the interval comes from: "exact" or "betting" (valid tests of bounded scores,
    ``experiments.inference.paired``), "betting by stratum" (an average over tasks), or "bootstrap" (a
    descriptive percentile interval of an unbounded quantity: seconds, tokens)."""

    delta: float
    lo: float
    hi: float
    p_value: float
    n: int
    n_clusters: int = 0  # 0: not counted (a delta made before clusters existed): every pair its own cluster
    method: str = field(default="", compare=False)  # how, not what: two deltas with equal numbers are equal

    @property
    def clusters(self) -> int:
        return self.n_clusters or self.n

    @property
    def decidable(self) -> bool:
        """Enough clusters for a verdict (``MIN_CLUSTERS``)."""
        return self.clusters >= MIN_CLUSTERS

    @property
    def descriptive(self) -> bool:
        return self.method == "bootstrap"

    @property
    def excludes_zero(self) -> bool:
        return self.n > 0 and self.decidable and (self.lo > 0 or self.hi < 0)


@dataclass(frozen=True)
class MeanInterval:
    mean: float
    lo: float
    hi: float
    n: int
    n_clusters: int = 0
    method: str = field(default="", compare=False)


def format_p(pd: PairedDelta | None) -> str:
    """The p-value beside an interval (of the same test: two-sided, difference 0)."""
    if pd is None or pd.n < MIN_PAIRS or pd.p_value != pd.p_value:
        return ""
    return f"{pd.p_value:.3f}"


def format_delta(pd: PairedDelta | None) -> str:
    """``+4.80 [+1.20, +8.50]*`` (the star marks an interval that excludes 0; a descriptive bootstrap interval
    of seconds or tokens gets no star: it is not a test)."""
    if pd is None or pd.n == 0 or pd.delta != pd.delta:
        return ""
    star = "*" if pd.excludes_zero and not pd.descriptive else ""
    return f"{pd.delta:+.2f} [{pd.lo:+.2f}, {pd.hi:+.2f}]{star}"


__all__ = ["ALPHA", "CONFIDENCE", "MIN_CLUSTERS", "MIN_PAIRS", "MeanInterval", "PairedDelta", "format_delta",
           "format_p"]

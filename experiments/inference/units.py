"""Paired differences as the independent units the tests draw: one per (stratum, document)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Units:
    """Paired differences as sign flips and cluster resamples act on them: one unit per cluster, holding its
    sum of differences and its size, each with the weight 1/(K N_s) of its stratum s (K strata, N_s pairs in
    s), so that ``sum(weight * sums)`` is the statistic (the mean over strata of each stratum's mean)."""

    sums: np.ndarray
    sizes: np.ndarray
    weights: np.ndarray
    stratum: np.ndarray  # the stratum index of each unit

    @property
    def statistic(self) -> float:
        return float(np.dot(self.weights, self.sums))

    @property
    def singletons(self) -> bool:
        return bool(np.all(self.sizes == 1))


def as_units(d: Sequence[float] | np.ndarray, strata: Sequence[str] | None = None,
             clusters: Sequence[str] | None = None) -> Units:
    """The units of paired differences ``d``: one per (stratum, cluster), in the order each first appears (the
    sampling order); a pair without a cluster is its own.

    A cluster key is read within its stratum (the same document in two tasks is two clusters: each task's mean
    is resampled apart).
    """
    d = np.asarray(d, dtype=float)
    n = len(d)
    keys_s = list(strata) if strata is not None else [""] * n
    keys_c = list(clusters) if clusters is not None else [str(i) for i in range(n)]
    stratum_of = {k: i for i, k in enumerate(dict.fromkeys(keys_s))}
    unit_of: dict[tuple[str, str], int] = {}
    index = np.fromiter((unit_of.setdefault((s, c), len(unit_of)) for s, c in zip(keys_s, keys_c)), dtype=np.int64,
                        count=n)
    sums = np.bincount(index, weights=d, minlength=len(unit_of))
    sizes = np.bincount(index, minlength=len(unit_of)).astype(float)
    stratum = np.array([stratum_of[s] for s, _ in unit_of], dtype=np.int64)
    per_stratum = np.bincount(stratum, weights=sizes)
    weights = 1.0 / (len(stratum_of) * per_stratum[stratum])
    return Units(sums, sizes, weights, stratum)


__all__ = ["Units", "as_units"]

"""Paired differences with known properties, for the statistics' simulations (tests/experiments/design,
tests/experiments/report/test_clusters.py, benchmarks/sim_stats.py): each drawer returns (differences on the
0-1 scale, cluster keys or None)."""
from __future__ import annotations

import numpy as np


def binary(rng: np.random.Generator, n: int, delta: float, discordant: float = 0.3) -> tuple[np.ndarray, None]:
    """0/1 scores' differences: +1 or -1 on a share ``discordant`` of the pairs, mean ``delta``."""
    up, down = (discordant + delta) / 2, (discordant - delta) / 2
    u = rng.random(n)
    return np.where(u < up, 1.0, np.where(u < up + down, -1.0, 0.0)), None


def f1_like(rng: np.random.Generator, n: int, delta: float) -> tuple[np.ndarray, None]:
    """F1/ROUGE-like differences: many exact ties at 0, the rest continuous in [-1, 1]; mean about ``delta``."""
    return np.clip(rng.normal(delta, 0.25, n), -1, 1) * (rng.random(n) < 0.7) + delta * 0.3, None


def clustered(rng: np.random.Generator, n: int, delta: float, size: int = 4, rho: float = 0.4,
              scale: float = 0.3) -> tuple[np.ndarray, list[str]]:
    """Documents of ``size`` questions whose differences correlate by ``rho`` within a document; SD ``scale``."""
    docs = -(-n // size)
    shared = np.sqrt(rho) * rng.normal(size=docs).repeat(size)[:n]
    d = delta + scale * (shared + np.sqrt(1 - rho) * rng.normal(size=n))
    return d, [f"doc{i // size}" for i in range(n)]


def trials(rng: np.random.Generator, count: int, n: int, delta: float, kind: str, cluster: int = 0) -> np.ndarray:
    """``count`` trials (rows) of ``n`` differences at once: ``binary`` (30% discordant) or ``continuous``
    (SD 0.25; with ``cluster`` > 0, documents of that many questions correlated by 0.5)."""
    if kind == "binary":
        up, down = (0.3 + delta) / 2, (0.3 - delta) / 2
        u = rng.random((count, n))
        return np.where(u < up, 1.0, np.where(u < up + down, -1.0, 0.0))
    if cluster:
        shared = rng.normal(0, np.sqrt(0.5), (count, n // cluster)).repeat(cluster, axis=1)
        return delta + 0.25 * (shared + rng.normal(0, np.sqrt(0.5), (count, n)))
    return delta + 0.25 * rng.normal(0, 1.0, (count, n))

"""Vectors with structure, for testing approximate indexes without an encoder."""
from __future__ import annotations

import numpy as np


def clustered_vectors(n: int, d: int, seed: int = 0, spread: float = 0.6) -> np.ndarray:
    """``n`` unit vectors of ``d`` dimensions around 40 centres: an inverted file's lists mean something, as
    with real embeddings (on unstructured Gaussian vectors every list is as near as every other).  ``spread``:
    the noise around a centre; at 1.5 a vector's neighbours lie in many lists (one list of 32 holds 0.42 of
    its exact top-20, about what IVF256 with nprobe 1 kept of real passages' in issue 52)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, d))
    x = (centres[rng.integers(0, 40, n)] + spread * rng.standard_normal((n, d))).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)

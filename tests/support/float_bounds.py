"""What floating point guarantees when two code paths compute the same inner products: tolerances for tests.

FAISS, BLAS, numpy and torch choose their kernels by the CPU (SSE, AVX2, AVX-512, AMX) and by the thread count,
so the same dot product is summed in another order on another host and its last bits differ.  A test that
compares two paths (two index kinds, float16 and float32 vectors, torch and FAISS) may only ask for what holds on
every host: each score within the rounding bound derived here, and each top-k equal up to near-ties -- hits
whose exact scores lie closer than that bound may swap places or trade the last seat.

The bound for a dot product of d terms summed in float32, in any order, with or without fused multiply-adds, is
Higham's ``|fl(q.x) - q.x| <= gamma_d * sum|q_i x_i|`` with ``gamma_d = d u / (1 - d u)`` and ``u = 2^-24``
(Accuracy and Stability of Numerical Algorithms, 2nd ed., section 3.1).  Vectors stored in float16 (an 11-bit
significand) are each off by at most ``|x_i| 2^-11`` (normal numbers) or ``2^-25`` (subnormal ones) before that.
"""
from __future__ import annotations

import numpy as np

FLOAT32_UNIT_ROUNDOFF = float(np.finfo(np.float32).eps) / 2  # 2^-24
FLOAT64_UNIT_ROUNDOFF = float(np.finfo(np.float64).eps) / 2  # 2^-53


def dot_error_bound(queries: np.ndarray, vectors: np.ndarray, *, stored: type = np.float32) -> np.ndarray:
    """(n_queries, n_vectors): how far a float32 inner product of each query with each vector, the vector read
    back from ``stored`` (float32 or float16), may lie from :func:`exact_scores` of the float32 inputs."""
    q = np.abs(np.atleast_2d(queries).astype(np.float64))
    x = np.abs(np.atleast_2d(vectors).astype(np.float64))
    d = q.shape[1]
    gamma = d * FLOAT32_UNIT_ROUNDOFF / (1 - d * FLOAT32_UNIT_ROUNDOFF)
    info = np.finfo(stored)
    relative = float(info.eps) / 2 if stored != np.float32 else 0.0  # float32 inputs are the exact ones
    absolute = float(info.smallest_subnormal) / 2 if stored != np.float32 else 0.0
    stored_error = q @ x.T * relative + q.sum(axis=1, keepdims=True) * absolute
    reference = d * FLOAT64_UNIT_ROUNDOFF / (1 - d * FLOAT64_UNIT_ROUNDOFF) * (q @ x.T)  # exact_scores' own
    # the sum of d products of the stored values, each at most |q_i| (|x_i| + its rounding)
    return stored_error + gamma * (q @ x.T + stored_error) + reference


def l2_error_bound(queries: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """(n_queries, n_vectors): how far a float32 squared L2 distance may lie from the exact one, whether it is
    summed term by term or as ``|q|^2 + |x|^2 - 2 q.x`` (FAISS takes the second for batches of queries)."""
    q = np.atleast_2d(queries).astype(np.float64)
    x = np.atleast_2d(vectors).astype(np.float64)
    d = q.shape[1] + 3  # the d terms, the two additions of the norms and the subtraction
    gamma = d * FLOAT32_UNIT_ROUNDOFF / (1 - d * FLOAT32_UNIT_ROUNDOFF)
    magnitude = (q ** 2).sum(1)[:, None] + (x ** 2).sum(1)[None, :] + 2 * np.abs(q) @ np.abs(x).T
    return gamma * magnitude + q.shape[1] * FLOAT64_UNIT_ROUNDOFF * 2 * magnitude  # and exact_l2's own


def exact_l2(queries: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """(n_queries, n_vectors) squared L2 distances of the float32 inputs, summed in float64."""
    q = np.atleast_2d(queries).astype(np.float64)
    x = np.atleast_2d(vectors).astype(np.float64)
    return ((q[:, None, :] - x[None, :, :]) ** 2).sum(-1)


def exact_scores(queries: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """(n_queries, n_vectors) inner products of the float32 inputs summed in float64 (off by gamma_d at 2^-53)."""
    return np.atleast_2d(queries).astype(np.float64) @ np.atleast_2d(vectors).astype(np.float64).T


def assert_top_k_up_to_ties(got_exact: np.ndarray, best_exact: np.ndarray, tolerance: np.ndarray | float,
                            *, higher_is_better: bool = True) -> None:
    """A path's top-k is the true top-k up to near-ties: for every query, the exact scores of the hits it
    returned, sorted, lie within ``2 * tolerance`` of the true k best exact scores, rank by rank.

    ``got_exact`` (n, k): the exact scores of the rows the path returned; ``best_exact`` (n, k): the k best
    exact scores over every candidate the path saw, best first; ``tolerance``: the most the path's own score of
    any candidate may differ from its exact score (one number, or one per query).  Why twice: if every
    computed score is within t of the exact one, the j-th best computed and the j-th best exact score differ
    by at most t, and the exact score of the row holding computed rank j by at most t more.
    """
    got = np.sort(np.asarray(got_exact, dtype=np.float64), axis=1)
    best = np.sort(np.asarray(best_exact, dtype=np.float64), axis=1)
    if higher_is_better:
        got, best = got[:, ::-1], best[:, ::-1]
    assert got.shape == best.shape, (got.shape, best.shape)
    slack = 2 * np.broadcast_to(np.asarray(tolerance, dtype=np.float64).reshape(-1, 1), (len(got), 1))
    worst = np.abs(got - best) - slack
    bad = np.argwhere(worst > 0)
    assert not len(bad), (f"{len(bad)} ranks beyond near-ties, e.g. query {bad[0][0]} rank {bad[0][1]}: exact "
                          f"{got[tuple(bad[0])]:.9g} vs best {best[tuple(bad[0])]:.9g}, tolerance "
                          f"{slack[bad[0][0], 0]:.3g}")


def share_in_top_k_up_to_ties(got_exact: np.ndarray, best_exact: np.ndarray, tolerance: np.ndarray | float) -> float:
    """The share of an approximate search's hits that belong to the true top-k up to near-ties: whose exact
    score is at least the k-th best exact score less ``2 * tolerance`` (``got_exact``, ``best_exact``: (n, k)
    as for :func:`assert_top_k_up_to_ties`).  Unlike a share of row ids it does not fall when a hit trades
    places with one exactly as good, which is all another host's kernels change in an exact search."""
    got = np.asarray(got_exact, dtype=np.float64)
    kth = np.min(np.asarray(best_exact, dtype=np.float64), axis=1, keepdims=True)
    slack = 2 * np.asarray(tolerance, dtype=np.float64).reshape(-1, 1)
    return float(np.mean(got >= kth - slack))


def best_k(exact: np.ndarray, k: int, *, higher_is_better: bool = True) -> np.ndarray:
    """(n, k): the k best of each row of ``exact``, best first."""
    ordered = np.sort(exact, axis=1)
    return ordered[:, ::-1][:, :k] if higher_is_better else ordered[:, :k]


def assert_scores_within(scores: np.ndarray, rows: np.ndarray, exact: np.ndarray, bound: np.ndarray) -> None:
    """Each computed score ``scores[q, j]`` of row ``rows[q, j]`` lies within ``bound[q, row]`` of ``exact[q, row]``
    (``exact``, ``bound``: (n_queries, n_vectors) from the functions above)."""
    error = np.abs(np.take_along_axis(exact, rows, 1) - scores)
    allowed = np.take_along_axis(bound, rows, 1)
    assert np.all(error <= allowed), f"a score is {np.max(error - allowed):.3g} beyond its rounding bound"


def assert_same_ranking_up_to_ties(ids_a: list, scores_a: list[float], ids_b: list, scores_b: list[float],
                                   tolerance: float) -> None:
    """Two paths' top-k of one query, each searched over the whole corpus with every score within ``tolerance``
    of the exact one, agree up to near-ties: rank by rank the scores differ by at most ``2 * tolerance``; two
    hits both hold in the other order only if path a scores them within ``4 * tolerance``; a hit only one path
    holds scores within ``4 * tolerance`` of that path's last (each bound: the exact scores of the two hits lie
    within ``2 * tolerance``, and each computed score within ``tolerance`` of its exact one)."""
    assert len(ids_a) == len(ids_b), (ids_a, ids_b)
    gap = np.max(np.abs(np.asarray(scores_a, np.float64) - np.asarray(scores_b, np.float64)), initial=0.0)
    assert gap <= 2 * tolerance, f"rank by rank the scores differ by {gap:.3g}, beyond 2 x {tolerance:.3g}"
    for (ids, scores), others in (((ids_a, scores_a), ids_b), ((ids_b, scores_b), ids_a)):
        score, rank_in_other = dict(zip(ids, scores)), {hit: j for j, hit in enumerate(others)}
        for hit in set(ids) - set(others):
            assert score[hit] - scores[-1] <= 4 * tolerance, f"{hit} is in one top-{len(ids)} only, not near its last"
        shared = [hit for hit in ids if hit in rank_in_other]
        for i, x in enumerate(shared):
            for y in shared[i + 1:]:
                if rank_in_other[y] < rank_in_other[x]:
                    assert abs(score[x] - score[y]) <= 4 * tolerance, f"{x} and {y} swap places but are no near-tie"

"""The tolerances tests use to compare code paths (tests/support/float_bounds.py) hold and still catch errors:
each bound covers float32 and float16 sums of random vectors, yet a coarser rounding (bfloat16) exceeds it; the
up-to-ties checks accept hits that trade places with near-ties and refuse any other change."""
from __future__ import annotations

import numpy as np
import pytest

from tests.support.float_bounds import (
    assert_same_ranking_up_to_ties,
    assert_top_k_up_to_ties,
    dot_error_bound,
    exact_l2,
    exact_scores,
    l2_error_bound,
    share_in_top_k_up_to_ties,
)


def _vectors(n, d, seed):
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def test_the_bounds_cover_float32_and_float16_sums_and_not_bfloat16():
    queries, docs = _vectors(20, 384, 0), _vectors(300, 384, 1)
    exact = exact_scores(queries, docs)
    assert np.all(np.abs(queries @ docs.T - exact) <= dot_error_bound(queries, docs))
    half = docs.astype(np.float16).astype(np.float32)
    assert np.all(np.abs(queries @ half.T - exact) <= dot_error_bound(queries, docs, stored=np.float16))
    assert np.all(dot_error_bound(queries, docs) < dot_error_bound(queries, docs, stored=np.float16))
    brain = (docs.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)  # bfloat16: 8 significant bits
    assert np.any(np.abs(queries @ brain.T - exact) > dot_error_bound(queries, docs, stored=np.float16))
    l2 = ((queries[:, None, :] - docs[None, :, :]) ** 2).sum(-1, dtype=np.float32)
    assert np.all(np.abs(l2 - exact_l2(queries, docs)) <= l2_error_bound(queries, docs))


def test_a_top_k_passes_up_to_near_ties_and_fails_otherwise():
    best = np.array([[0.9, 0.8, 0.8 - 1e-7, 0.7]])
    assert_top_k_up_to_ties(np.array([[0.9, 0.8 - 1e-7, 0.8, 0.7]]), best, 1e-6)  # a near-tie swapped
    assert_top_k_up_to_ties(np.array([[0.9, 0.8, 0.8, 0.7 - 1e-7]]), best, 1e-6)  # the last place, to a near-tie
    with pytest.raises(AssertionError, match="beyond near-ties"):
        assert_top_k_up_to_ties(np.array([[0.9, 0.8, 0.7, 0.6]]), best, 1e-6)
    assert share_in_top_k_up_to_ties(np.array([[0.9, 0.8, 0.7, 0.6]]), best, 1e-6) == 0.75


def test_two_rankings_agree_up_to_near_ties_and_not_otherwise():
    ids, scores = ["a", "b", "c", "d"], [0.9, 0.8, 0.8 - 1e-7, 0.7]
    assert_same_ranking_up_to_ties(ids, scores, ["a", "c", "b", "d"], [0.9, 0.8, 0.8 - 1e-7, 0.7], 1e-6)
    assert_same_ranking_up_to_ties(ids, scores, ["a", "b", "c", "e"], [0.9, 0.8, 0.8, 0.7 - 1e-7], 1e-6)
    with pytest.raises(AssertionError, match="no near-tie"):
        assert_same_ranking_up_to_ties(ids, scores, ["b", "a", "c", "d"], [0.9, 0.8, 0.8, 0.7], 0.01)
    with pytest.raises(AssertionError, match="in one top-4 only"):
        assert_same_ranking_up_to_ties(ids, scores, ["a", "e", "c", "d"], [0.9, 0.8, 0.8, 0.7], 0.01)
    with pytest.raises(AssertionError, match="rank by rank"):
        assert_same_ranking_up_to_ties(ids, scores, ids, [0.9, 0.8, 0.8, 0.6], 1e-6)

"""A corpus index split over Ray actors: on a local Ray cluster with 2 actors, the merged hits of flat parts
equal those of one flat index over the whole corpus."""
from __future__ import annotations

import numpy as np
import pytest

from core.errors import UserError
from experiments.run.sharding import IndexActor, RayShardedIndex, merge_top_k, split_shards
from indexes.factory import RowIndex
from retrievers.shards import ShardStore
from tests.support.float_bounds import (
    assert_scores_within,
    assert_top_k_up_to_ties,
    best_k,
    dot_error_bound,
    exact_scores,
)


@pytest.fixture
def shard_folder(tmp_path):
    """5 shards of 400 (the last 150) real-like vectors, as the encoder writes them."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1750, 32)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    store = ShardStore.open(tmp_path / "emb", model_id="m", use_title=True, texts=["t"] * 1750, shard_size=400,
                            digest="d" * 64)
    for i in range(store.shards):
        lo, hi = store.bounds(i)
        store.write(i, x[lo:hi])
    return tmp_path / "emb", x


def test_split_and_merge_without_ray():
    assert split_shards(5, 2) == [(0, 2), (2, 5)] and split_shards(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    with pytest.raises(UserError, match="cannot split 2 embedding shard"):
        split_shards(2, 3)
    a = (np.array([[0.9, 0.5]]), np.array([[3, 1]]))
    b = (np.array([[0.7, 0.5]]), np.array([[10, 0]]))
    scores, rows = merge_top_k([a, b], 3)
    assert rows.tolist() == [[3, 10, 0]] and scores.tolist() == [[0.9, 0.7, 0.5]]


def test_actor_parts_answer_with_global_rows(shard_folder):
    folder, x = shard_folder
    part = IndexActor(str(folder), 2, 5, "Flat")
    assert part.size() == (800, 950)
    _, rows = part.search(x[900:901], 1, {})
    assert rows.tolist() == [[900]]


@pytest.mark.slow  # a local Ray instance
def test_two_ray_actors_of_flat_parts_equal_one_flat_index(shard_folder):
    pytest.importorskip("ray")
    folder, x = shard_folder
    queries = np.random.default_rng(9).standard_normal((25, 32)).astype(np.float32)
    whole_scores, whole_rows = RowIndex.build("Flat", 32, len(x), lambda: [x]).search(queries, 20)
    with RayShardedIndex(folder, "Flat", parts=2) as sharded:
        assert len(sharded.actors) == 2 and sum(n for _, n in sharded.sizes) == 1750
        scores, rows = sharded.search(queries, 20)
    assert rows.dtype == np.int64 and rows.shape == whole_rows.shape
    # each part is searched by its own BLAS call: the merged top-20 and the whole index's are both the exact top-20
    # up to near-ties, each score within float32's rounding (issue 48: not equal ids, which ties may swap by host)
    truth, rounding = exact_scores(queries, x), dot_error_bound(queries, x)
    for got_scores, got_rows in ((scores, rows), (whole_scores, whole_rows)):
        assert_scores_within(got_scores, got_rows, truth, rounding)
        assert_top_k_up_to_ties(np.take_along_axis(truth, got_rows, 1), best_k(truth, 20), rounding.max(axis=1))

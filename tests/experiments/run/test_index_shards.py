"""A corpus index split over Ray actors: on a local Ray cluster with 2 actors, the merged hits of flat parts
equal those of one flat index over the whole corpus, and an approximate string is searched by the search plan
one index of it gets (tested without Ray on the same parts, searched in this process)."""
from __future__ import annotations

import numpy as np
import pytest

from core.errors import UserError
from experiments.run.sharding import IndexActor, PartedIndex, RayShardedIndex, merge_top_k, split_shards
from indexes.factory import RowIndex, SearchGiven, exact_top, overlap, planned_search
from retrievers.shards import ShardStore
from tests.support.float_bounds import (
    assert_scores_within,
    assert_top_k_up_to_ties,
    best_k,
    dot_error_bound,
    exact_scores,
)
from tests.support.vectors import clustered_vectors


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


@pytest.fixture
def clustered_folder(tmp_path):
    """4,000 clustered vectors in 4 shards of 1,000: 2 parts of 2,000, enough to train 32 lists each; spread so
    that one list of 32 holds under half of a vector's exact top-20."""
    x = clustered_vectors(4000, 32, seed=5, spread=1.5)
    store = ShardStore.open(tmp_path / "emb", model_id="m", use_title=True, texts=["t"] * len(x), shard_size=1000,
                            digest="c" * 64)
    for i in range(store.shards):
        store.write(i, x[slice(*store.bounds(i))])
    return tmp_path / "emb", x


def _parted(folder, string, parts=2):
    """The parts a ``RayShardedIndex`` builds, searched here one after another instead of on Ray actors."""
    store = ShardStore.load(folder)
    actors = [IndexActor(str(folder), a, b, string) for a, b in split_shards(store.shards, parts)]
    return PartedIndex(string, store.count, actors[0].kind(),
                       lambda q, depth, params: [a.search(q, depth, params) for a in actors]), store


def _own_share(search, x, rows):
    """The share of each query row's exact top-20 (its own row left out) that ``search(queries, k)`` finds."""
    truth = exact_top(x[rows], [x], 21)
    truth = np.array([t[t != r][:20] for t, r in zip(truth, rows)])
    _, got = search(x[rows], 21)
    return overlap(np.array([g[g != r][:20] for g, r in zip(got, rows)]), truth)


@pytest.mark.parametrize("string", ["IVF32,Flat", "IVF16,SQ4"])
def test_parts_merged_are_planned_as_one_index_to_reach_the_target_of_exact_search(clustered_folder, string):
    folder, x = clustered_folder
    index, store = _parted(folder, string)
    said: list[str] = []
    sidecar = folder / "plan.search.json"
    found = planned_search(index, sidecar, store.blocks, lambda rows: x[rows], seed=2, say=said.append)
    assert found.reached and found.share >= 0.95 and found.queries == 500 and sidecar.is_file()
    assert any(line.startswith(f"search plan for {string!r}: {found.param} {found.value}") for line in said)
    if "IVF" in string:
        assert found.param == "nprobe" and found.value > 1  # never one list of 32 (or 16)
    if "SQ4" in string:  # 4-bit codes fall short alone: re-ranked exactly, after the parts' candidates are merged
        assert found.rerank > 0
    # the merged search with the plan's parameters, measured again on the plan's own query rows, finds its share
    rows = np.sort(np.random.default_rng(2).choice(len(x), 500, replace=False))
    params = SearchGiven().over(found)
    assert _own_share(lambda q, k: index.search(q, k, vectors=lambda r: x[r], **params), x, rows) == \
        pytest.approx(found.share)
    cheaper = [share for v, r, share in found.curve if (r, v) < (found.rerank, found.value)]
    assert all(share < 0.95 for share in cheaper)
    again: list[str] = []
    planned_search(index, sidecar, lambda: pytest.fail("chosen twice"), lambda rows: x[rows], seed=2,
                   given=SearchGiven(nprobe=1) if "IVF" in string else SearchGiven(ef_search=16), say=again.append)
    assert again[0] == found.describe() and again[1].startswith(f"search: {found.param} ")
    if "IVF" in string:
        assert again[2].startswith(f"warning: --nprobe 1 searches 1 of {index.nlist} inverted lists")


def test_parts_searched_with_no_nprobe_are_refused_not_searched_in_one_list(clustered_folder):
    folder, x = clustered_folder
    index, _ = _parted(folder, "IVF32,Flat")
    with pytest.raises(UserError, match=r"'IVF32,Flat' searched with no nprobe would search 1 of its 32 lists"):
        index.search(x[:3], 5)


@pytest.mark.slow  # a local Ray instance
def test_a_ray_sharded_ivf_index_is_planned_at_build_and_searched_by_its_plan(clustered_folder):
    pytest.importorskip("ray")
    folder, x = clustered_folder
    said: list[str] = []
    with RayShardedIndex(folder, "IVF32,Flat", parts=2, say=said.append) as sharded:
        found = sharded.search_plan
        assert found is not None and found.reached and found.param == "nprobe" and found.value > 1
        assert sharded.search_params() == {"nprobe": found.value, "rerank": 0}
        rows = np.sort(np.random.default_rng(0).choice(len(x), 500, replace=False))  # the plan's query rows
        assert _own_share(sharded.search, x, rows) == pytest.approx(found.share)  # no flags: the plan's search
        assert _own_share(lambda q, k: sharded.search(q, k, nprobe=1), x, rows) < found.share  # overridden
        sharded.search(x[:2], 5, nprobe=1)
    assert [line for line in said if "warning" in line] == [  # warned, once
        "warning: --nprobe 1 searches 1 of 32 inverted lists; FAISS's guidelines and the search plan above say "
        "how much of the top-20 that loses"]
    assert (folder / "index-IVF32_Flat-2parts.search.json").is_file()
    assert any(line.startswith(f"search plan for 'IVF32,Flat': nprobe {found.value} finds") for line in said)

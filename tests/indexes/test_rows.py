"""Rows of .npy shards read at random, all of a batch at once: the same vectors a memory map gives, in the
order asked, repeats and shard edges included; the batched re-ranking ranks as scoring each query alone."""
from __future__ import annotations

import numpy as np
import pytest

from indexes.factory import exact_rerank
from indexes.rows import RowReader


@pytest.fixture(params=["float32", "float16"])
def shards(tmp_path, request):
    rng = np.random.default_rng(0)
    sizes = [7, 50, 1, 33]  # unequal, one of a single row
    arrays = [rng.standard_normal((m, 12)).astype(request.param) for m in sizes]
    paths = []
    for i, a in enumerate(arrays):
        paths.append(tmp_path / f"shard-{i:05d}.npy")
        np.save(paths[-1], a)
    return paths, np.concatenate(arrays).astype(np.float32)


def test_rows_come_back_as_the_memory_map_holds_them_in_the_order_asked(shards):
    paths, whole = shards
    reader = RowReader(paths, threads=4)
    assert len(reader) == 91 and reader.dim == 12
    rows = np.array([90, 0, 6, 7, 56, 57, 57, 3, 90, 56])  # every shard edge, repeats, out of order
    got = reader.read(rows)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, whole[rows])
    rng = np.random.default_rng(1)
    many = rng.integers(0, 91, 500)
    np.testing.assert_array_equal(reader.read(many), whole[many])
    assert reader.read(np.zeros(0, np.int64)).shape == (0, 12)
    with pytest.raises(IndexError, match=r"rows must lie in \[0, 91\), got 0..91"):
        reader.read(np.array([0, 91]))
    reader.close()


def test_shards_of_another_dimension_are_refused(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((3, 4), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match="b.npy: not a C-ordered 2-d array of float32 x 4"):
        RowReader([tmp_path / "a.npy", tmp_path / "b.npy"])
    (tmp_path / "c.npy").write_bytes(b"not an array")
    with pytest.raises(ValueError, match=r"c.npy: not a .npy file \("):
        RowReader([tmp_path / "a.npy", tmp_path / "c.npy"])


def test_the_batched_re_ranking_ranks_as_each_query_alone(shards):
    paths, whole = shards
    reader = RowReader(paths, threads=3)
    rng = np.random.default_rng(2)
    queries = rng.standard_normal((9, 12)).astype(np.float32)
    rows = rng.integers(0, 91, (9, 15))
    rows[2, 10:] = -1  # FAISS's padding
    rows[5] = -1
    calls = []

    def counted(r):
        calls.append(len(r))
        return reader.read(r)

    scores, ranked = exact_rerank(queries, rows, counted, batch=4)
    assert len(calls) == 3  # one read a batch of queries, never one per row
    for i in range(9):
        cand = rows[i][rows[i] >= 0]
        exact = whole[cand] @ queries[i]
        order = np.argsort(-exact, kind="stable")
        np.testing.assert_array_equal(ranked[i, :len(cand)], cand[order])
        np.testing.assert_allclose(scores[i, :len(cand)], exact[order], rtol=1e-6)
        assert (ranked[i, len(cand):] == -1).all()

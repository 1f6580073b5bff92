"""FaissIndex against brute-force numpy, persistence, approximate kinds, boundary checks."""
from __future__ import annotations

import numpy as np
import pytest

from indexes.vector import FaissIndex
from tests.support.float_bounds import (
    assert_scores_within,
    assert_top_k_up_to_ties,
    best_k,
    dot_error_bound,
    exact_l2,
    exact_scores,
    l2_error_bound,
    share_in_top_k_up_to_ties,
)


def unit_rows(n, d, seed):
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def data():
    return unit_rows(500, 16, 0), unit_rows(20, 16, 1), [f"v{i}" for i in range(500)]


def _rows(results):
    """Row numbers and scores of a ``FaissIndex.search`` result (ids are 'v<row>')."""
    rows = np.array([[int(i[1:]) for i, _ in row] for row in results])
    return rows, np.array([[s for _, s in row] for row in results])


def test_flat_matches_brute_force(data):
    """Each score within float32's summation of the exact one; the top-5 numpy's up to near-ties (FAISS and
    BLAS sum in the order their SIMD kernels take, which differs by host)."""
    base, queries, ids = data
    index = FaissIndex(16, "flat", device="cpu")
    index.add(ids, base)
    assert len(index) == 500
    rows, scores = _rows(index.search(queries, 5))
    exact, bound = exact_scores(queries, base), dot_error_bound(queries, base)
    assert_scores_within(scores, rows, exact, bound)
    assert np.all(np.diff(scores, axis=1) <= 0)
    assert_top_k_up_to_ties(np.take_along_axis(exact, rows, 1), best_k(exact, 5), bound.max(axis=1))


def test_l2_metric_returns_squared_distances(data):
    base, queries, ids = data
    index = FaissIndex(16, "flat", metric="l2", device="cpu")
    index.add(ids, base)
    rows, scores = _rows(index.search(queries[:1], 3))
    d2, bound = exact_l2(queries[:1], base), l2_error_bound(queries[:1], base)
    assert_scores_within(scores, rows, d2, bound)
    assert_top_k_up_to_ties(d2[:, rows[0]], best_k(d2, 3, higher_is_better=False), bound.max(),
                            higher_is_better=False)


def test_k_larger_than_index_gives_shorter_lists_without_minus_one():
    index = FaissIndex(4, device="cpu")
    index.add(["a", "b"], np.eye(4, dtype=np.float32)[:2])
    (row,) = index.search(np.eye(4, dtype=np.float32)[:1], 10)
    assert [i for i, _ in row] == ["a", "b"]
    assert FaissIndex(4).search(np.eye(4, dtype=np.float32), 3) == [[], [], [], []]


def test_save_load_round_trip(tmp_path, data):
    base, queries, ids = data
    index = FaissIndex(16, "hnsw", device="cpu")
    index.add(ids, base)
    index.save(tmp_path / "idx")
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == ["ids.json", "index.faiss", "meta.json"]
    loaded = FaissIndex.load(tmp_path / "idx")
    assert len(loaded) == 500 and loaded.kind == "hnsw"
    assert loaded.search(queries, 7) == index.search(queries, 7)


def test_load_rejects_a_folder_that_is_not_an_index(tmp_path):
    with pytest.raises(ValueError, match="not a saved FaissIndex"):
        FaissIndex.load(tmp_path)


# the share of the true top-10 each kind must find, up to near-ties: ivf searching all its lists is exact; hnsw
# at this size found all of it for 10 seeds of these data with FAISS's SIMD at AVX512_SPR, AVX2 and NONE
@pytest.mark.parametrize("kind,params,floor", [("hnsw", {}, 0.9), ("ivf", {"nlist": 8, "nprobe": 8}, 1.0)])
def test_approximate_kinds_agree_with_exact(kind, params, floor, data):
    base, queries, ids = data
    approx = FaissIndex(16, kind, device="cpu", **params)
    approx.add(ids, base)
    rows, _ = _rows(approx.search(queries, 10))
    exact, bound = exact_scores(queries, base), dot_error_bound(queries, base).max(axis=1)
    assert share_in_top_k_up_to_ties(np.take_along_axis(exact, rows, 1), best_k(exact, 10), bound) >= floor
    # a vector's own nearest neighbour is itself
    assert [row[0][0] for row in approx.search(base[:10], 1)] == ids[:10]


def test_ivf_with_too_few_vectors_is_a_clear_error():
    index = FaissIndex(8, "ivf", nlist=64, device="cpu")
    with pytest.raises(ValueError, match="at least 64 vectors"):
        index.add([str(i) for i in range(10)], unit_rows(10, 8, 2))


def test_boundary_checks():
    index = FaissIndex(4, device="cpu")
    with pytest.raises(ValueError, match="float32"):
        index.add(["a"], np.ones((1, 4), dtype=np.float64))
    with pytest.raises(ValueError, match="shape"):
        index.add(["a"], np.ones((1, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="ids"):
        index.add(["a", "b"], np.ones((1, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="duplicate"):
        index.add(["a", "a"], np.ones((2, 4), dtype=np.float32))
    index.add(["a"], np.ones((1, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="duplicate"):
        index.add(["a"], np.ones((1, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="k must"):
        index.search(np.ones((1, 4), dtype=np.float32), 0)
    with pytest.raises(ValueError):
        FaissIndex(4, "annoy")


# -- exact search with torch, for a GPU without faiss-gpu (run here on CPU torch) ------------------------------
@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize("resident", [True, False])
def test_torch_flat_search_equals_faiss_flat(metric, resident):
    """Chunks far smaller than the base, so the top-k of every chunk is merged many times."""
    import faiss

    from indexes.vector import TorchFlatSearch

    base, queries = unit_rows(3000, 24, 3), unit_rows(37, 24, 4)
    exact = faiss.IndexFlatIP(24) if metric == "ip" else faiss.IndexFlatL2(24)
    exact.add(base)
    want_scores, want_rows = exact.search(queries, 50)
    search = TorchFlatSearch(metric, "cpu", score_bytes=37 * 4 * 1024, max_chunk_rows=1024, resident=resident)
    scores, rows = search.search(base, queries, 50)
    assert rows.shape == (37, 50) and scores.dtype == np.float32
    # torch and FAISS sum in their own orders: each score within float32's rounding of the exact one, in order,
    # and the top-50 FAISS's up to near-ties
    ip = metric == "ip"
    exact = exact_scores(queries, base) if ip else exact_l2(queries, base)
    bound = dot_error_bound(queries, base) if ip else l2_error_bound(queries, base)
    for got_rows, got_scores in ((rows, scores), (want_rows, want_scores)):
        assert_scores_within(got_scores, got_rows, exact, bound)
        assert np.all(np.diff(got_scores, axis=1) <= 0 if ip else np.diff(got_scores, axis=1) >= 0)
    assert_top_k_up_to_ties(np.take_along_axis(exact, rows, 1), best_k(exact, 50, higher_is_better=ip),
                            bound.max(axis=1), higher_is_better=ip)
    _, short_rows = search.search(base[:7], queries, 50)  # k above the rows: all of them, ranked
    assert short_rows.shape == (37, 7) and sorted(short_rows[0]) == list(range(7))


def test_the_engine_follows_the_gpu_faiss_and_the_kind():
    from indexes.vector import search_engine

    def engine(kind, device, faiss_gpu=False, torch_gpu=False):
        return search_engine(kind, device, faiss_gpu=faiss_gpu, torch_gpu=torch_gpu)

    assert engine("flat", "auto") == engine("ivf", "auto") == "faiss-cpu"
    assert engine("flat", "auto", torch_gpu=True) == "torch"          # a GPU, no faiss-gpu: torch searches it
    assert engine("flat", "gpu", torch_gpu=True) == "torch"           # asked for a GPU, served by torch
    assert engine("flat", "gpu", faiss_gpu=True, torch_gpu=True) == "faiss-gpu"
    assert engine("ivf", "auto", torch_gpu=True) == "faiss-cpu"       # approximate kinds need faiss-gpu
    assert engine("hnsw", "auto", faiss_gpu=True, torch_gpu=True) == "faiss-cpu"
    assert engine("flat", "cpu", faiss_gpu=True, torch_gpu=True) == "faiss-cpu"
    for kind, flags in [("flat", {}), ("ivf", {"torch_gpu": True}), ("hnsw", {"faiss_gpu": True})]:
        with pytest.raises(ValueError, match="device='gpu' cannot search"):
            engine(kind, "gpu", **flags)


def test_an_index_searching_with_torch_gives_faiss_hits_and_saves_as_faiss(data, tmp_path, monkeypatch):
    """The wiring of FaissIndex: where torch reports a GPU (here its CPU stands in for it), device='gpu' searches
    with torch, adds after a search are seen, and the saved index is FAISS's own."""
    import indexes.vector as vector

    base, queries, ids = data
    monkeypatch.setattr(vector, "torch_gpu_device", lambda load: "cpu")
    monkeypatch.setattr(vector, "faiss_sees_gpu", lambda: False)
    on_torch = FaissIndex(16, "flat", device="gpu")
    on_torch.add(ids[:300], base[:300])
    assert on_torch.engine == "torch"
    on_torch.search(queries, 3)
    on_torch.add(ids[300:], base[300:])
    exact = FaissIndex(16, "flat", device="cpu")
    exact.add(ids, base)
    (rows, scores), want = _rows(on_torch.search(queries, 10)), exact.search(queries, 10)
    truth, bound = exact_scores(queries, base), dot_error_bound(queries, base)
    assert_scores_within(scores, rows, truth, bound)
    assert_top_k_up_to_ties(np.take_along_axis(truth, rows, 1), best_k(truth, 10), bound.max(axis=1))
    on_torch.save(tmp_path / "idx")
    assert FaissIndex.load(tmp_path / "idx", device="cpu").search(queries, 10) == want


def test_an_ivf_index_takes_the_one_nlist_rule_and_nprobe_1_of_many_lists_is_warned():
    from indexes.factory import default_nlist

    x = np.random.default_rng(0).standard_normal((5000, 8)).astype(np.float32)
    index = FaissIndex(8, "ivf", device="cpu")
    index.add([str(i) for i in range(len(x))], x)
    assert index.nlist == default_nlist(5000) == 128 and index.nprobe == 16
    one_list = FaissIndex(8, "ivf", nprobe=1, device="cpu")
    with pytest.warns(UserWarning, match="nprobe=1 of its 128 lists"):
        one_list.add([str(i) for i in range(len(x))], x)
    assert [len(hits) for hits in one_list.search(x[:5], 3)] == [3] * 5  # warned, and still searched


@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize("kind,params,string", [("flat", {}, "Flat"), ("ivf", {"nlist": 8, "nprobe": 2}, "IVF8,Flat"),
                                                ("hnsw", {"hnsw_m": 8}, "HNSW8,Flat")])
def test_each_kind_builds_and_searches_the_row_index_of_its_factory_string(kind, params, string, metric, data):
    """One FAISS layer: a FaissIndex is the ``RowIndex`` of the factory string its kind names, with string ids.
    Flat and IVF (trained on the same rows, k-means seeded by FAISS) give the very same hits; HNSW's graph is
    built by threads in the order they run, so only its string is compared."""
    from indexes.factory import RowIndex

    base, queries, ids = data
    index = FaissIndex(16, kind, metric=metric, device="cpu", **params)
    index.add(ids, base)
    assert index.factory_string() == string
    if kind == "hnsw":
        return
    rows = RowIndex.empty(string, 16, metric=metric)
    if not rows.index.is_trained:
        rows.index.train(base)
    rows.add(base)
    scores, labels = rows.search(queries, 10, nprobe=params.get("nprobe"))
    assert index.search(queries, 10) == [[(ids[j], float(s)) for j, s in zip(row, row_scores)]
                                         for row, row_scores in zip(labels, scores)]

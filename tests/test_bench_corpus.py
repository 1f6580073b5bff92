"""benchmarks/bench_corpus.py's ground truth and its projection to 21M (its timings are not checked)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_corpus", REPO / "benchmarks" / "bench_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_exact_top_k_scanned_shard_by_shard_is_the_whole_matrix_top_k():
    bench = _bench()
    rng = np.random.default_rng(3)
    corpus = rng.standard_normal((1000, 16)).astype(np.float32)
    queries = rng.standard_normal((7, 16)).astype(np.float32)
    shards = [corpus[:300], corpus[300:310], corpus[310:]]  # unequal, one smaller than k
    got = bench.exact_top(shards, queries, 20)
    want = np.argsort(-(queries @ corpus.T), axis=1)[:, :20]
    assert got.shape == (7, 20) and (got == want).all()


def test_fit_draws_a_line_through_the_sizes_and_projects_it_to_wikipedia(tmp_path, capsys):
    bench = _bench()
    rows = [{"what": "dense", "string": "IVF1024,SQ8", "rerank": 0, "n": n, "index_bytes": 100 + 808 * n,
             "build_s": 2 + 1e-4 * n, "qps": 1 / (0.001 + 1e-9 * n)} for n in (100_000, 1_000_000, 5_000_000)]
    rows.append({"what": "bm25", "n": 1_000_000, "qps": 75.0})  # one size only: no line
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(map(json.dumps, rows)) + "\n")
    bench.fit(type("Args", (), {"files": [str(path)]})())
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == 1 and lines[0]["ns"] == [100_000, 1_000_000, 5_000_000]
    index = lines[0]["index_bytes"]
    assert index["per_passage"] == 808 and abs(index["at_21M"] - (100 + 808 * bench.WIKIPEDIA)) < 1e-3 * index["at_21M"]
    assert abs(lines[0]["qps"]["at_21M"] - 1 / (0.001 + 1e-9 * bench.WIKIPEDIA)) < 0.01

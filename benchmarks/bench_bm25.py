"""BM25 speed, measured side by side in one run (not a test).

Open domain (the per-example LongBench comparison is in ``bench_compression.py``): index N synthetic passages (Zipfian words, ~60 each) and search,
   rank-bm25 vs bm25s with the same tokens; rank-bm25 gets fewer queries and
   both are reported per query and for a whole NQ-Open run (build + 2,655
   queries, rank-bm25's search time extrapolated from its per-query time).

Indexing against bm25s's own pipeline: ctxcomp's BM25 (its word tokens, then bm25s indexing from token ids)
   against ``bm25s.tokenize`` + ``BM25.index`` on the same texts, alternating, best of ``--rounds``; the target
   is a ratio within 1.1 at 100k passages.  Search: ctxcomp's per-query ``get_scores`` + top-k against bm25s's
   batched ``retrieve``.

Run: ``python benchmarks/bench_bm25.py [--quick] [--rounds N]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from indexes.types import Chunk, whole_chunk
from retrievers.bm25 import BM25Retriever

NQ_QUERIES = 2655  # one open-domain NQ-Open run (Lost in the Middle's question set)


def time_best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def zipf_corpus(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = np.array([f"t{i}" for i in range(50000)])
    ids = np.minimum(rng.zipf(1.15, size=n * 60), 49999)
    return [" ".join(vocab[ids[i * 60 : (i + 1) * 60]]) for i in range(n)]


def open_domain(sizes: list[int], queries_bm25s: int, queries_rank: int) -> None:
    print("\n## Open domain: index build + search (same word tokens), synthetic Zipfian passages of 60 words")
    print(f"| passages | engine | build (s) | per query (ms) | build + {NQ_QUERIES} queries (s) | bm25s speed-up (per query / whole run) |")
    print("| --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(1)
    for n in sizes:
        texts = zipf_corpus(n)
        chunks = [Chunk(f"d{i}#0", f"d{i}", 0, 0, len(t), t) for i, t in enumerate(texts)]
        qs = [" ".join(f"t{int(x)}" for x in rng.integers(5, 3000, size=5)) for _ in range(queries_bm25s)]
        totals, per_q = {}, {}
        for engine, nq in (("rank_bm25", queries_rank), ("bm25s", queries_bm25s)):
            r = BM25Retriever(backend=engine, lang="en")
            t0 = time.perf_counter()
            r.index(chunks)
            build = time.perf_counter() - t0
            t0 = time.perf_counter()
            r.search(qs[:nq], 10)
            per_query = (time.perf_counter() - t0) / nq
            totals[engine], per_q[engine] = build + NQ_QUERIES * per_query, per_query
            ratio = (f"{per_q['rank_bm25'] / per_q['bm25s']:.0f}x / {totals['rank_bm25'] / totals['bm25s']:.0f}x"
                     if engine == "bm25s" else "")
            print(f"| {n} | {engine} ({nq} q) | {build:.2f} | {per_query * 1e3:.1f} | {totals[engine]:.2f} | {ratio} |")


def against_bm25s(sizes: list[int], rounds: int, n_queries: int = 200) -> None:
    import bm25s

    print("\n## Against bm25s's own tokenize + index and batched retrieve (best of rounds, alternating)")
    print("| passages | ctxcomp index (s) | bm25s tokenize + index (s) | ratio | ctxcomp search (s) | bm25s retrieve (s) |")
    print("| --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(2)
    for n in sizes:
        texts = zipf_corpus(n)
        chunks = [whole_chunk(f"d{i}", t) for i, t in enumerate(texts)]
        qs = [" ".join(f"t{int(x)}" for x in rng.integers(5, 3000, size=5)) for _ in range(n_queries)]
        ours_index = theirs_index = ours_search = theirs_search = float("inf")
        for _ in range(rounds):
            t0 = time.perf_counter()
            ours = BM25Retriever(backend="bm25s", lang="en").index(chunks)
            ours_index = min(ours_index, time.perf_counter() - t0)
            t0 = time.perf_counter()
            model = bm25s.BM25(method="lucene")
            model.index(bm25s.tokenize(texts, stopwords=None, show_progress=False), show_progress=False)
            theirs_index = min(theirs_index, time.perf_counter() - t0)
            t0 = time.perf_counter()
            ours.search(qs, 10)
            ours_search = min(ours_search, time.perf_counter() - t0)
            t0 = time.perf_counter()
            model.retrieve(bm25s.tokenize(qs, stopwords=None, show_progress=False), k=10, show_progress=False)
            theirs_search = min(theirs_search, time.perf_counter() - t0)
        print(f"| {n} | {ours_index:.2f} | {theirs_index:.2f} | {ours_index / theirs_index:.2f} | "
              f"{ours_search:.2f} | {theirs_search:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the comparison against bm25s")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.quick:
        open_domain([10_000], queries_bm25s=50, queries_rank=5)
        against_bm25s([10_000], rounds=1, n_queries=20)
    else:
        open_domain([10_000, 100_000], queries_bm25s=100, queries_rank=5)
        against_bm25s([20_000, 100_000], rounds=args.rounds)


if __name__ == "__main__":
    main()

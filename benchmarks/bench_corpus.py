"""Corpus-scale retrieval on one machine: index strings' memory, build time, queries/s and recall against flat,
and BM25 built in blocks; each size in a fresh process so peak RSS is its own.

    python benchmarks/bench_corpus.py dense --n 100000 --strings "Flat;IVF256,SQ8;IVF256,PQ64" --rerank 100
    python benchmarks/bench_corpus.py dense --n 21015324 --strings "IVF16384_HNSW32,SQ4" --dtype float16 \
        --train-size 262144 --nprobe 16,32,64 --threads 2 --save     # Wikipedia's size: 32 GB of float16 shards
    python benchmarks/bench_corpus.py bm25 --n 200000
    python benchmarks/bench_corpus.py bm25-real --n 1000000 --limit 500  # NQ-Open questions: ctxcomp vs bm25s
    python benchmarks/bench_corpus.py bm25-cores --n 1000000 --dir D     # 1 thread vs 2 threads vs 2 processes
    python benchmarks/bench_corpus.py e2e --n 1000000 --limit 500        # the curve over a 1M-passage corpus
    python benchmarks/bench_corpus.py fit results.jsonl                   # lines through the sizes, at 21M
    python benchmarks/bench_corpus.py real --passages 2600 --synthetic   # real MiniLM vectors and NQ-Open questions

Dense vectors are real-like, not real: 768-d, drawn as a mixture of 2,000 Gaussian clusters whose centres
lie in a random 128-d subspace with a decaying spectrum, plus isotropic noise, then L2-normalised (sentence
embeddings are anisotropic and clustered; i.i.d. Gaussian vectors would make every index look worse than
it is).  Queries are corpus vectors plus noise.  They are written as 50,000-row .npy shards, as the encoder
writes them, and the index is built from the memory-mapped shards.  BM25 passages are 100 words drawn from a
Zipf(1.1) vocabulary of 200,000 words, queried with 4 synthetic words: far fewer postings than a real question
reads, so ``bm25`` times the engine's mechanics, not its speed on questions.  ``bm25-real`` is the speed on
questions: the real NQ-Open questions over their gold passages plus filler passages of 100 words drawn
(seeded) from those passages' word frequencies (``--n`` in all; the filler's word ids are cached in
``--dir``), indexed with each analyzer, searched by ctxcomp's engine and by bm25s's own ``retrieve`` on the
same memory-mapped index and the same tokens, alternating, best of ``--rounds``; it reports both q/s and CPU
time a question, ctxcomp's q/s in ``--threads`` threads and in ``--processes`` forked processes, whether
the top-20 lists agree, the postings a query reads (and those its terms hold) and answer recall@1/5/20.
``--n 2600`` is the gold passages alone (``--limit 2655``: all the questions).  ``bm25-cores`` searches the
same questions over that index in one thread, in ``--workers`` threads and in as many forked processes, and
splits each worker's time (Linux's schedstat) into time on a CPU, waiting for a CPU (no free core) and blocked
(for threads, the GIL): what a second core would give, read off a machine whose cores are busy.  One line of JSON per
measurement, with the load average beside it.

``dense`` finds the exact top-20 by scanning the shards (no flat index need be held), so the share of the
exact top-20 an index finds is measured at any size (and is kept in ``--dir``, so a second string over the same
shards does not scan again).  ``--dtype float16`` writes the shards as ``--shard-dtype float16`` does (half the
disk; the index is built from them cast to float32); ``--save`` writes the index and searches it read back
memory-mapped, as ``ctxcomp`` serves a corpus index (one already saved there is searched again, not
built; ``--rerank`` and ``--nprobe`` take several values).  ``e2e`` runs ``ctxcomp curve --corpus`` with BM25 over
the Lost in the Middle oracle passages plus filler passages: 100 words each, drawn from the word frequencies of
those real passages (seeded), so that BM25 meets distractors that share the questions' vocabulary; it reports
the command's wall time and peak RSS.  ``fit`` fits a straight line (least squares) through each quantity
against n and projects it to Wikipedia's 21,015,324 passages.  ``real`` embeds, with the packaged MiniLM,
every distinct passage of the Lost in the Middle oracle file plus L-Eval's documents (the four files under
``leval/``) cut into 100-word passages, and measures each string against the exact top-20 and by answer
recall@1/5/20 over the NQ-Open questions (Lost in the Middle's answer matching), each string searched with
its search plan (``ctxcomp``'s default) and, for inverted files, with FAISS's default of one list;
``--passages N`` keeps the first N (the oracle's come first), ``--synthetic`` runs the same strings on
real-like vectors of that size and dimension beside them.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from indexes.factory import RowIndex, plan  # noqa: E402
from indexes.rows import RowReader  # noqa: E402


def rss_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_anon_mb() -> float | None:
    """Resident anonymous memory now (the heap: the index and Python), without the pages of memory-mapped
    shards and stores that ``ru_maxrss`` also counts; None off Linux."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    kb = next((int(line.split()[1]) for line in text.splitlines() if line.startswith("RssAnon:")), None)
    return None if kb is None else round(kb / 1024)


class PeakAnon:
    """The largest :func:`rss_anon_mb` seen, sampled every half second on a daemon thread."""

    def __init__(self) -> None:
        import threading

        self.peak = rss_anon_mb() or 0
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while True:
            self.peak = max(self.peak, rss_anon_mb() or 0)
            time.sleep(0.5)


def real_like(n: int, dim: int, seed: int, block: int = 50_000):
    """Blocks of the real-like vectors described above (the same for a given seed and n)."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((dim, 128)))[0].T.astype(np.float32)  # 128 x dim
    spectrum = (np.arange(1, 129) ** -0.5).astype(np.float32)
    centres = (rng.standard_normal((2000, 128)).astype(np.float32) * spectrum) @ basis
    for lo in range(0, n, block):
        m = min(block, n - lo)
        brng = np.random.default_rng([seed, lo])
        x = centres[brng.integers(0, 2000, m)] + 0.35 * (brng.standard_normal((m, 128)).astype(np.float32) * spectrum) @ basis
        x += 0.02 * brng.standard_normal((m, dim)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        yield x


def dense(args) -> None:
    import faiss

    faiss.omp_set_num_threads(args.threads)
    folder = Path(args.dir or tempfile.mkdtemp(prefix="bench-corpus-"))
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    paths = [folder / f"shard-{i:05d}.npy" for i in range(-(-args.n // 50_000))]
    if not all(p.exists() for p in paths):  # drawing the blocks is most of the time: only when one is missing
        for path, block in zip(paths, real_like(args.n, args.dim, 0)):
            if not path.exists():
                write_shard(path, block.astype(args.dtype))
    shards = [np.load(p, mmap_mode="r") for p in paths]
    write_s = time.perf_counter() - t0
    offsets = np.cumsum([0] + [len(s) for s in shards])
    rng = np.random.default_rng(1)
    picks = rng.choice(args.n, args.queries, replace=False)
    queries = np.stack([shards[np.searchsorted(offsets, r, "right") - 1][r - offsets[np.searchsorted(offsets, r, "right") - 1]] for r in picks])
    queries = queries.astype(np.float32) + 0.05 * rng.standard_normal(queries.shape).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    vectors = RowReader(paths).read  # the product's re-ranking reads (retrievers.corpus.DenseEngine.vectors)

    t0 = time.perf_counter()
    cached = folder / f"exact-top20-{args.queries}q.npy"
    exact = np.load(cached) if cached.exists() else exact_top(shards, queries, 20)
    np.save(cached, exact)
    exact_s = time.perf_counter() - t0
    print(json.dumps({"what": "dense-shards", "n": args.n, "dtype": args.dtype, "shard_write_s": round(write_s, 1),
                      "exact_scan_s": round(exact_s, 1), "shard_bytes": sum(p.stat().st_size for p in paths),
                      "load": os.getloadavg()[0]}), flush=True)
    anon = PeakAnon()
    for string in args.strings.split(";"):
        p = plan(string, args.n, args.dim, train_size=args.train_size)
        saved = folder / f"{string.replace(',', '_')}.faiss"
        if args.save and saved.is_file():  # built by an earlier run over the same shards: searched again
            build_s, built = None, {"index_file_bytes": saved.stat().st_size, "reused_index": True}
        else:
            t0 = time.perf_counter()
            index = RowIndex.build(string, args.dim, args.n, lambda: (np.asarray(s) for s in shards),
                                   train_size=args.train_size, say=lambda m: print(m, file=sys.stderr, flush=True))
            build_s = round(time.perf_counter() - t0, 1)
            built = {"peak_anon_mb_build": anon.peak, "rss_anon_mb_built": rss_anon_mb()}
            if args.save:  # as the product serves it: written, then read back memory-mapped
                index.save(saved)
                built["index_file_bytes"] = saved.stat().st_size
                del index
        if args.save:
            index = RowIndex.load(saved, string)
        for rerank in ([0] if string == "Flat" else [0] + [int(x) for x in str(args.rerank).split(",")]):
            for nprobe in [int(x) for x in str(args.nprobe).split(",")] if "IVF" in string else [None]:
                t0 = time.perf_counter()
                _, rows = index.search(queries, 20, nprobe=nprobe, rerank=rerank, vectors=vectors if rerank else None)
                search_s = time.perf_counter() - t0
                overlap = float(np.mean([len(set(a) & set(b)) / 20 for a, b in zip(rows, exact)]))
                print(json.dumps({"what": "dense", "string": string, "n": args.n, "dim": args.dim, "rerank": rerank,
                                  "nprobe": nprobe, "shard_dtype": args.dtype, "index_bytes": p.resident,
                                  "bytes_per_vector": round(p.per_vector(), 1),
                                  "stored_bytes": faiss.serialize_index(index.index).nbytes if args.n <= 300_000 else None,
                                  "ids_bytes": p.ids, "fixed_bytes": p.fixed, "training_bytes": p.training,
                                  "train_size": p.train_size, "build_s": build_s,
                                  "qps": round(len(queries) / search_s, 1), "top20_of_flat": overlap,
                                  "peak_rss_mb": round(rss_peak_mb()), "rss_anon_mb": rss_anon_mb(),
                                  "peak_anon_mb": anon.peak, **built, "threads": args.threads,
                                  "load": os.getloadavg()[0]}), flush=True)
        del index


def write_shard(path: Path, block: np.ndarray) -> None:
    """Whole or not at all, as the encoder writes its shards: a killed run leaves no half shard to reuse."""
    tmp = path.with_suffix(".partial.npy")
    np.save(tmp, block)
    os.replace(tmp, path)


def exact_top(shards, queries: np.ndarray, k: int) -> np.ndarray:
    """Rows of the exact top-k by inner product, one shard at a time (the ground truth at any n)."""
    best_s = np.full((len(queries), 0), -np.inf, np.float32)
    best_r = np.zeros((len(queries), 0), np.int64)
    lo = 0
    for shard in shards:
        scores = queries @ np.asarray(shard).T
        top = np.argpartition(-scores, min(k, scores.shape[1] - 1), axis=1)[:, :k]
        best_s = np.hstack([best_s, np.take_along_axis(scores, top, 1)])
        best_r = np.hstack([best_r, top + lo])
        keep = np.argsort(-best_s, axis=1)[:, :k]
        best_s, best_r = np.take_along_axis(best_s, keep, 1), np.take_along_axis(best_r, keep, 1)
        lo += len(shard)
    return best_r


def bm25(args) -> None:
    from indexes.passages import build_store
    from retrievers.corpus import BM25Engine

    folder = Path(args.dir or tempfile.mkdtemp(prefix="bench-bm25-"))
    rng = np.random.default_rng(0)
    vocab = np.array([f"w{i}" for i in range(200_000)])
    weights = 1 / np.arange(1, 200_001) ** 1.1
    weights /= weights.sum()

    def rows():
        for lo in range(0, args.n, 10_000):
            words = rng.choice(vocab, size=(min(10_000, args.n - lo), 100), p=weights)
            for i, ws in enumerate(words):
                yield f"d{lo + i}", " ".join(ws), ""

    anon = PeakAnon()
    t0 = time.perf_counter()
    store = build_store(folder / "store.sqlite", rows, source=f"zipf-{args.n}").store
    store_s = time.perf_counter() - t0
    rss_store, anon_store = rss_peak_mb(), anon.peak
    t0 = time.perf_counter()
    engine = BM25Engine(store, folder / "bm25", use_title=False)
    build_s = time.perf_counter() - t0
    qrng = np.random.default_rng(2)  # apart from the corpus's draws, so a reused folder gets the same queries
    queries = [" ".join(qrng.choice(vocab[:20_000], 4)) for _ in range(args.queries)]
    t0 = time.perf_counter()
    _, got = engine.search_rows(queries, 20)  # first: the columns come from disk (or a cold page cache)
    qps_first = len(queries) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    want = [full_vector_top(engine.index, q, 20) for q in queries]
    qps_full = len(queries) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    engine.search_rows(queries, 20)  # again, the columns now in the page cache as they were for bm25s's pass
    qps = len(queries) / (time.perf_counter() - t0)
    disk = sum(f.stat().st_size for f in (folder / "bm25").iterdir())
    print(json.dumps({"what": "bm25", "n": args.n, "store_s": round(store_s, 1), "build_s": round(build_s, 1),
                      "qps": round(qps, 1), "qps_first_pass": round(qps_first, 1), "qps_full_vector": round(qps_full, 1),
                      "speedup": round(qps / qps_full, 2),
                      "same_hits": all(np.array_equal(a, b) for a, b in zip(got, want)),
                      "store_bytes": store.path.stat().st_size, "index_disk_bytes": disk,
                      "peak_rss_mb_store": round(rss_store), "peak_rss_mb": round(rss_peak_mb()),
                      "peak_anon_mb_store": anon_store, "peak_anon_mb": anon.peak,
                      "load": os.getloadavg()[0]}), flush=True)


def full_vector_top(index, query: str, k: int) -> np.ndarray:
    """What a query cost before ``BM25Corpus.scores_of``: bm25s's score of every passage, then the best k
    (ties to the lower row), the reference the postings-only search is timed and checked against."""
    ids = index.query_ids(query)  # the index's own analyzer
    scores = index.engine.get_scores_from_ids(ids)
    top = np.argpartition(-scores, k)[:k]
    floor = scores[top].min()
    top = np.flatnonzero(scores >= floor)
    top = top[np.lexsort((top, -scores[top]))][:k]
    return top[scores[top] > 0]


GOLD_WORDS = 100  # filler passages' length in words, as DPR's passages


def nq_corpus(folder: Path, litm: Path, n: int):
    """NQ-Open's questions, and a corpus of ``n`` passages: the gold passages (titled), then filler of 100 words
    drawn (seeded) from the word frequencies of those passages, its word ids cached in ``folder`` (not in git).
    Returns (questions, gold passages, text_of(row), blocks) with ``blocks()`` the texts in row order."""
    from collections import Counter

    from experiments.protocols.corpus import load_litm_corpus

    questions, gold = load_litm_corpus(litm)
    counts = Counter(w for p in gold for w in p.text.split())
    words = np.array(list(counts))
    filler_path = folder / f"filler-{n}.npy"
    if not filler_path.exists():
        weights = np.array(list(counts.values()), np.float64)
        rng = np.random.default_rng(0)
        ids = np.lib.format.open_memmap(filler_path.with_suffix(".partial.npy"), mode="w+", dtype=np.int32,
                                        shape=(max(n - len(gold), 0), GOLD_WORDS))
        for lo in range(0, len(ids), 100_000):
            ids[lo: lo + 100_000] = rng.choice(len(words), size=(len(ids[lo: lo + 100_000]), GOLD_WORDS),
                                                p=weights / weights.sum())
        ids.flush()
        del ids
        os.replace(filler_path.with_suffix(".partial.npy"), filler_path)
    filler = np.load(filler_path, mmap_mode="r")
    gold_texts = [f"{p.title} {p.text}" if p.title else p.text for p in gold]

    def text_of(row: int) -> str:
        return gold_texts[row] if row < len(gold) else " ".join(words[filler[row - len(gold)]])

    def blocks():
        yield gold_texts
        for lo in range(0, len(filler), 10_000):
            yield [" ".join(ws) for ws in words[filler[lo: lo + 10_000]]]

    return questions, gold, text_of, blocks


SCORERS = {"auto": None, "compiled": True, "maxscore": False}  # BM25Corpus(compiled=...)


def _timed(run):
    """((wall s, CPU s of this process), run())."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = run()
    return (time.perf_counter() - wall, time.process_time() - cpu), out


_FORKED: dict = {}  # what a forked worker searches: set before the fork, read in the child


def _search_share(share: list[int]) -> int:
    index, ids = _FORKED["index"], _FORKED["ids"]
    return sum(len(r.rows) for r in index.top_many([ids[i] for i in share], 20))


def _in_processes(index, ids, processes: int) -> float:
    """Wall seconds for ``processes`` forked processes to search the questions, each a share, over the same
    memory-mapped files (no lock between them, as two servers of one index would run)."""
    import multiprocessing

    _FORKED.update(index=index, ids=ids)
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        pool.map(_search_share, [[0]] * processes)  # started, and each has touched the index, before the clock
        t0 = time.perf_counter()
        pool.map(_search_share, [list(range(p, len(ids), processes)) for p in range(processes)], chunksize=1)
        return time.perf_counter() - t0


def bm25_real(args) -> None:
    """Real NQ-Open questions over the gold passages plus filler: ctxcomp's engine against bm25s's own retrieve
    on the same memory-mapped index and tokens, alternating rounds, best of; and recall@1/5/20."""
    import bm25s

    from retrievers.bm25_corpus import BM25Corpus, build_bm25
    from retrievers.metrics import hit_has_answer, recall_at_k

    folder = Path(args.dir or tempfile.mkdtemp(prefix="bench-bm25-real-"))
    folder.mkdir(parents=True, exist_ok=True)
    questions, gold, text_of, blocks = nq_corpus(folder, Path(args.litm), args.n)
    questions = questions[: args.limit]
    for analyzer in args.analyzers.split(","):
        t0 = time.perf_counter()
        built = build_bm25(folder / f"bm25-{analyzer}-{args.n}", blocks, n=args.n, analyzer=analyzer,
                           source=f"nq-gold+filler-{args.n}", say=lambda m: print(m, file=sys.stderr, flush=True))
        build_s = time.perf_counter() - t0
        index = BM25Corpus(built, compiled=SCORERS[args.scorer])
        # bm25s as a user runs it: its own retriever over the same maps, with the backend asked for
        engine = bm25s.BM25.load(str(built), mmap=True, show_progress=False)
        engine.backend = args.bm25s_backend
        if args.bm25s_backend == "numba":
            engine.retrieve([[0]], k=20, show_progress=False)  # compiled before the clock
        index.top([0], 20)  # likewise, where ctxcomp scores with numba
        ids = [index.query_ids(q.query) for q in questions]
        inverse = {i: t for t, i in index.vocab.items()}
        tokens = [[inverse[i] for i in q] for q in ids]
        asked = [i for i, q in enumerate(ids) if q]  # bm25s refuses a query with no known term
        times = {(engine, th): (float("inf"), float("inf")) for engine in ("ctxcomp", "bm25s")
                 for th in sorted({1, args.threads})}  # best (wall s, CPU s of the process) of the rounds
        forked = float("inf")
        ours = theirs = None
        for _ in range(args.rounds):
            for threads in sorted({1, args.threads}):
                took, ours = _timed(lambda: index.top_many(ids, 20, threads))  # as BM25Corpus.search runs them
                times["ctxcomp", threads] = tuple(map(min, times["ctxcomp", threads], took))
                took, theirs = _timed(lambda: engine.retrieve([tokens[i] for i in asked], k=20,
                                                                      show_progress=False,
                                                                      n_threads=threads if threads > 1 else 0))
                times["bm25s", threads] = tuple(map(min, times["bm25s", threads], took))
            if args.processes > 1:
                forked = min(forked, _in_processes(index, ids, args.processes))
        # the same lists: the same scores (bm25s's float32, bit for bit), and the same rows but where bm25s's
        # partition picked others among those tied at the 20th score
        same = tied = 0
        for j, i in enumerate(asked):
            mine, its = ours[i], theirs.scores[j] > 0
            if not np.array_equal(np.sort(mine.scores), np.sort(theirs.scores[j][its])):
                continue
            differ = set(mine.rows.tolist()) ^ set(theirs.documents[j][its].tolist())
            same += not differ
            tied += bool(differ) and bool(np.all(mine.scores[np.isin(mine.rows, list(differ))] == mine.scores[-1]))
        relevant = [[hit_has_answer(text_of(int(r)), q.answers) for r in ours[i].rows] for i, q in enumerate(questions)]
        full = [int(sum(index.indptr[t + 1] - index.indptr[t] for t in q)) for q in ids]
        read = [r.postings_read for r in ours]
        disk = sum(f.stat().st_size for f in built.iterdir())
        print(json.dumps({"what": "bm25-real", "string": analyzer, "n": args.n, "questions": len(questions),
                          "build_s": round(build_s, 1), "qps": round(len(ids) / times["ctxcomp", 1][0], 1),
                          "qps_bm25s": round(len(asked) / times["bm25s", 1][0], 1),
                          "ratio": round(len(ids) / times["ctxcomp", 1][0] / (len(asked) / times["bm25s", 1][0]), 2),
                          "cpu_ms": round(1e3 * times["ctxcomp", 1][1] / len(ids), 2),
                          "cpu_ms_bm25s": round(1e3 * times["bm25s", 1][1] / len(asked), 2),
                          f"qps_{args.threads}_threads": round(len(ids) / times["ctxcomp", args.threads][0], 1),
                          f"cpu_per_wall_{args.threads}_threads": round(times["ctxcomp", args.threads][1]
                                                                        / times["ctxcomp", args.threads][0], 2),
                          f"qps_bm25s_{args.threads}_threads": round(len(asked) / times["bm25s", args.threads][0], 1),
                          f"qps_{args.processes}_processes": round(len(ids) / forked, 1) if args.processes > 1 else None,
                          "same_top20": f"{same}/{len(asked)}", "same_but_ties_at_20th": tied,
                          "terms_mean": round(float(np.mean([len(q) for q in ids])), 2),
                          "postings_all_mean": round(float(np.mean(full))), "postings_read_mean": round(float(np.mean(read))),
                          "postings_read_median": int(np.median(read)), "postings_read_max": int(np.max(read)),
                          "recall": {k: round(v, 3) for k, v in recall_at_k(relevant, [1, 5, 20]).items()},
                          "index_disk_bytes": disk, "vocab": len(index.vocab), "bm25s": bm25s.__version__, "bm25s_backend": args.bm25s_backend, "ctxcomp_compiled": index.compiled,
                          "peak_rss_mb": round(rss_peak_mb()), "rss_anon_mb": rss_anon_mb(),
                          "load": os.getloadavg()[0]}), flush=True)


def _sched(work):
    """(work(), this thread's seconds on a CPU, runnable but waiting for one, and neither: blocked, which for a
    thread of a busy process is the GIL).  Linux's /proc/<tid>/schedstat."""
    import threading

    def now():
        run, wait, _ = Path(f"/proc/self/task/{threading.get_native_id()}/schedstat").read_text().split()
        return int(run) / 1e9, int(wait) / 1e9, time.perf_counter()

    before = now()
    out = work()
    run, wait, wall = (b - a for a, b in zip(before, now()))
    return out, {"cpu": run, "runqueue": wait, "blocked": wall - run - wait}


def bm25_cores(args) -> None:
    """One thread, ``--workers`` threads and as many forked processes searching shares of the same questions over
    the same maps, interleaved: the wall time, and summed over the workers the time on a CPU, waiting for a CPU
    (other jobs: no free core) and blocked (the GIL), so what two cores would give can be read off a busy machine."""
    import threading

    from retrievers.bm25_corpus import BM25Corpus

    folder = Path(args.dir)
    questions, *_ = nq_corpus(folder, Path(args.litm), args.n)
    index = BM25Corpus(folder / f"bm25-{args.analyzer}-{args.n}", compiled=SCORERS[args.scorer])
    ids = [index.query_ids(q.query) for q in questions[: args.limit]]

    def share(j: int, k: int):
        return _sched(lambda: [index.top(ids[i], 20) for i in range(j, len(ids), k)])[1]

    def threads(k: int) -> list[dict]:
        got: list = [None] * k
        workers = [threading.Thread(target=lambda j=j: got.__setitem__(j, share(j, k))) for j in range(k)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return got

    def processes(k: int) -> list[dict]:
        pipes = []
        for j in range(k):
            r, w = os.pipe()
            if os.fork() == 0:
                os.write(w, json.dumps(share(j, k)).encode())
                os._exit(0)
            os.close(w)
            pipes.append(r)
        got = [json.loads(os.read(r, 1 << 16)) for r in pipes]
        for _ in pipes:
            os.wait()
        return got

    for q in ids[:50]:  # the lists' pages mapped before the clock
        index.top(q, 20)
    k = args.workers
    for _ in range(args.rounds):
        for name, run in (("1 thread", lambda: threads(1)), (f"{k} threads", lambda: threads(k)),
                          (f"{k} processes", lambda: processes(k))):
            t0 = time.perf_counter()
            got = run()
            wall = time.perf_counter() - t0
            total = {key: round(sum(g[key] for g in got), 2) for key in ("cpu", "runqueue", "blocked")}
            print(json.dumps({"what": "bm25-cores", "n": args.n, "run": name, "questions": len(ids),
                              "wall_s": round(wall, 2), "qps": round(len(ids) / wall, 1),
                              "cpu_ms": round(1e3 * total["cpu"] / len(ids), 2), **total,
                              "load": os.getloadavg()[0]}), flush=True)


def e2e(args) -> None:
    """Write the corpus (oracle passages, then filler) as a TSV, then time ``ctxcomp curve`` on it."""
    import gzip
    import subprocess
    from collections import Counter

    folder = Path(args.dir or tempfile.mkdtemp(prefix="bench-e2e-"))
    folder.mkdir(parents=True, exist_ok=True)
    questions = Path(args.litm)
    passages: dict[str, tuple[str, str]] = {}
    with gzip.open(questions, "rt", encoding="utf-8") as f:
        for line in f:
            for ctx in json.loads(line)["ctxs"]:
                passages.setdefault(ctx["text"], (ctx["text"], ctx.get("title", "")))
    counts = Counter(w for text, _ in passages.values() for w in text.split())
    words = np.array(list(counts))
    weights = np.array(list(counts.values()), np.float64)
    weights /= weights.sum()
    corpus = folder / f"litm-plus-filler-{args.n}.tsv"
    t0 = time.perf_counter()
    if not corpus.exists():
        rng = np.random.default_rng(0)
        with open(corpus.with_suffix(".partial"), "w", encoding="utf-8", newline="") as out:
            rows = csv.writer(out, delimiter="\t", lineterminator="\n")  # DPR's quoting: passages kept verbatim
            rows.writerow(("id", "text", "title"))
            rows.writerows((f"litm{i}", text, title) for i, (text, title) in enumerate(passages.values()))
            for lo in range(len(passages), args.n, 10_000):
                block = rng.choice(words, size=(min(10_000, args.n - lo), 100), p=weights)
                rows.writerows((f"filler{lo + j}", " ".join(ws), "") for j, ws in enumerate(block))
        corpus.with_suffix(".partial").rename(corpus)
    write_s = time.perf_counter() - t0
    env = dict(os.environ, CTXCOMP_CACHE_DIR=str(folder / "cache"))
    cmd = [sys.executable, "-m", "experiments.cli", "curve", "--litm", str(questions), "--corpus", str(corpus),
           "--retriever", "bm25", "--reader", args.reader, "--limit", str(args.limit), "--out", str(folder / "run")]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=Path(__file__).resolve().parents[1])
    wall = time.perf_counter() - t0
    curve = json.loads((folder / "run" / "curve.json").read_text()) if done.returncode == 0 else None
    print(json.dumps({"what": "e2e", "n": args.n, "oracle_passages": len(passages), "limit": args.limit,
                      "reader": args.reader, "rc": done.returncode, "corpus_write_s": round(write_s, 1),
                      "curve_wall_s": round(wall, 1),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
                      "corpus_bytes": corpus.stat().st_size, "curve": curve, "load": os.getloadavg()[0]}), flush=True)


def real(args) -> None:
    """Real questions on vectors an encoder made, beside the synthetic vectors of the same size and dimension.

    Each string is searched the way ``ctxcomp`` searches it by default (its search plan, chosen at build
    time on the corpus's own vectors as queries) and, for inverted files, with FAISS's own default (nprobe 1,
    a search plan's baseline). Queries/s are the index's alone (the query vectors encoded beforehand) and
    with the query encoder's measured time added, since a user's question has to be encoded too.
    """
    import faiss

    from experiments.protocols.corpus import load_litm_corpus
    from indexes.factory import choose_search
    from retrievers.metrics import hit_has_answer
    from retrievers.sentence_transformers import SentenceTransformerEncoder, packaged_minilm_path

    faiss.omp_set_num_threads(args.threads)
    data = Path(os.environ.get("CTXCOMP_DATA_DIR", "data"))
    questions, passages = load_litm_corpus(data / "lost_in_the_middle" / "nq-open-oracle.jsonl.gz")
    texts = [f"{p.title} {p.text}" for p in passages]
    for path in sorted((data / "leval").glob("*.jsonl")):
        docs = dict.fromkeys(json.loads(line)["input"] for line in path.read_text(encoding="utf-8").splitlines())
        for doc in docs:
            words = doc.split()
            texts += [" ".join(words[i: i + 100]) for i in range(0, len(words), 100)]
    texts = texts[: args.passages] if args.passages else texts
    questions = questions[: args.limit]
    folder = Path(args.dir or tempfile.mkdtemp(prefix="bench-real-"))
    folder.mkdir(parents=True, exist_ok=True)
    enc = SentenceTransformerEncoder(str(packaged_minilm_path()), device="cpu")
    docs, encode_s = _cached(folder / f"minilm-{len(texts)}.npy", lambda: enc.encode_documents(texts))
    queries, query_s = _cached(folder / f"minilm-queries-{len(questions)}.npy",
                               lambda: enc.encode_queries([q.query for q in questions]))
    base = {"what": "real", "vectors": "MiniLM", "passages": len(texts), "litm_passages": min(len(passages), len(texts)),
            "queries": len(questions), "dim": docs.shape[1], "encode_s": encode_s, "query_encode_s": query_s,
            "load": os.getloadavg()[0]}
    sets = [(base, docs, queries, _recall(texts, questions, hit_has_answer))]
    if args.synthetic:  # the synthetic vectors of the other tables, at this size and dimension
        fake = np.concatenate(list(real_like(len(docs), docs.shape[1], 0)))
        rng = np.random.default_rng(1)
        fq = fake[rng.choice(len(fake), len(queries), replace=len(queries) > len(fake))] + 0.05 * rng.standard_normal(queries.shape)
        fq = (fq / np.linalg.norm(fq, axis=1, keepdims=True)).astype(np.float32)
        sets.append(({**base, "vectors": "synthetic (real_like)", "encode_s": None}, fake, fq, None))
    for head, vecs, qvecs, recall in sets:
        exact = exact_top([vecs], qvecs, 20)
        print(json.dumps({**head, "string": "exact", "top20_of_exact": 1.0, **(recall(exact) if recall else {})}),
              flush=True)
        for string in args.strings.split(";"):
            index = RowIndex.build(string, vecs.shape[1], len(vecs), lambda v=vecs: iter([v]))
            found = choose_search(index, lambda v=vecs: iter([v]), lambda r, v=vecs: v[r])
            given = {k: v for k, v in (("nprobe", args.nprobe if index.nlist > 1 else None),
                                       ("ef_search", args.ef_search if "HNSW" in string else None),
                                       ("rerank", args.rerank)) if v is not None}
            runs = [("plan", found.params() if found else {})] + ([("faiss default", {"nprobe": 1})]
                                                                  if index.nlist > 1 else [])
            runs += [("given", given), ("given, no re-rank", {**given, "rerank": 0})] if given else []
            for label, params in runs:
                t0 = time.perf_counter()
                _, rows = index.search(qvecs, 20, vectors=(lambda r, v=vecs: v[r]) if params.get("rerank") else None,
                                       **params)
                search_s = time.perf_counter() - t0
                share = float(np.mean([len(set(a) & set(b)) / 20 for a, b in zip(rows, exact)]))
                row = {**head, "string": string, "search": label, **params,
                       "plan_share_own_vectors": round(found.share, 3) if found else None, "top20_of_exact": round(share, 3),
                       "qps_index": round(len(qvecs) / search_s, 1)}
                if head["vectors"] == "MiniLM" and query_s:
                    row["qps_with_query_encoder"] = round(len(qvecs) / (search_s + query_s), 1)
                print(json.dumps({**row, **(recall(rows) if recall else {})}), flush=True)


def _cached(path: Path, make) -> tuple[np.ndarray, float | None]:
    """``make()``'s vectors, saved at ``path`` the first time; (vectors, seconds it took, None when cached)."""
    if path.exists():
        meta = path.with_suffix(".json")
        return np.load(path), json.loads(meta.read_text())["seconds"] if meta.exists() else None
    t0 = time.perf_counter()
    vectors = np.asarray(make(), np.float32)
    seconds = round(time.perf_counter() - t0, 1)
    np.save(path, vectors)
    path.with_suffix(".json").write_text(json.dumps({"seconds": seconds}))
    return vectors, seconds


def _recall(texts, questions, has_answer):
    """Answer recall@1/5/20 of rows (Lost in the Middle's answer matching)."""
    def recall(rows) -> dict:
        hit = np.array([[has_answer(texts[r], q.answers) if r >= 0 else False for r in row]
                        for q, row in zip(questions, rows)])
        return {f"recall@{k}": round(float(hit[:, :k].any(axis=1).mean()), 3) for k in (1, 5, 20)}
    return recall


FIT_KEYS = ("index_bytes", "ids_bytes", "build_s", "store_bytes", "index_disk_bytes", "peak_rss_mb", "rss_anon_mb",
            "peak_anon_mb")
WIKIPEDIA = 21_015_324


def fit(args) -> None:
    """A least-squares line through each quantity against n, per (what, string, rerank), projected to 21M;
    queries/s (``qps``, ``qps_bm25s``) are fitted as seconds per query."""
    rows = [json.loads(line) for path in args.files for line in Path(path).read_text().splitlines()
            if line.startswith("{")]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["what"], r.get("string"), r.get("rerank")), []).append(r)
    for key, group in groups.items():
        ns = sorted({r["n"] for r in group})
        if len(ns) < 2:
            continue
        out = {"what": key[0], "string": key[1], "rerank": key[2], "ns": ns}
        for name in FIT_KEYS + ("qps", "qps_bm25s", "postings_read_mean", "postings_all_mean"):
            rate = name.startswith("qps")
            pts = [(r["n"], 1 / r[name] if rate else r[name]) for r in group if r.get(name)]
            if len({n for n, _ in pts}) < 2:
                continue
            slope, icept = np.polyfit(*zip(*pts), 1)
            at = icept + slope * WIKIPEDIA
            out[name] = {k: float(f"{v:.4g}") for k, v in
                         {"per_passage": slope, "fixed": icept, "at_21M": 1 / at if rate else at}.items()}
        print(json.dumps(out), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    litm_file = str(Path(os.environ.get("CTXCOMP_DATA_DIR", "data")) / "lost_in_the_middle" / "nq-open-oracle.jsonl.gz")
    sub = ap.add_subparsers(dest="what", required=True)
    d = sub.add_parser("dense")
    d.add_argument("--n", type=int, default=100_000)
    d.add_argument("--dim", type=int, default=768)
    d.add_argument("--strings", default="Flat;IVF256,SQ8;IVF256,PQ64")
    d.add_argument("--nprobe", default="16", help="one value or several, comma-separated (each searched)")
    d.add_argument("--rerank", default="100", help="candidates re-ranked exactly; several, comma-separated")
    d.add_argument("--queries", type=int, default=200)
    d.add_argument("--threads", type=int, default=1)
    d.add_argument("--dtype", choices=("float32", "float16"), default="float32", help="of the shards on disk")
    d.add_argument("--train-size", type=int, help="vectors to train on (default: 64 a list)")
    d.add_argument("--save", action="store_true", help="write the index and search it read back memory-mapped")
    d.add_argument("--dir")
    b = sub.add_parser("bm25")
    b.add_argument("--n", type=int, default=200_000)
    b.add_argument("--queries", type=int, default=200)
    b.add_argument("--dir")
    e = sub.add_parser("e2e")
    e.add_argument("--n", type=int, default=1_000_000)
    e.add_argument("--litm", default=litm_file)
    e.add_argument("--reader", default="extractive")
    e.add_argument("--limit", type=int, default=500)
    e.add_argument("--dir")
    q = sub.add_parser("bm25-real")
    q.add_argument("--n", type=int, default=1_000_000, help="passages: NQ-Open's gold ones, then filler")
    q.add_argument("--litm", default=litm_file)
    q.add_argument("--limit", type=int, default=500, help="questions")
    q.add_argument("--analyzers", default="english,words")
    q.add_argument("--rounds", type=int, default=2)
    q.add_argument("--threads", type=int, default=2, help="also timed with this many threads, both engines")
    q.add_argument("--processes", type=int, default=2, help="also timed as this many forked processes (ctxcomp)")
    q.add_argument("--bm25s-backend", choices=("numpy", "numba"), default="numpy",
                   help="bm25s's scoring backend (numba: needs the numba package)")
    q.add_argument("--scorer", choices=tuple(SCORERS), default="auto", help="ctxcomp's: as BM25Corpus picks, or this one")
    q.add_argument("--dir")
    c = sub.add_parser("bm25-cores")
    c.add_argument("--n", type=int, default=1_000_000)
    c.add_argument("--litm", default=litm_file)
    c.add_argument("--analyzer", default="english")
    c.add_argument("--limit", type=int, default=500)
    c.add_argument("--workers", type=int, default=2)
    c.add_argument("--rounds", type=int, default=2)
    c.add_argument("--dir", required=True, help="where bm25-real built the index")
    c.add_argument("--scorer", choices=tuple(SCORERS), default="auto", help="ctxcomp's: as BM25Corpus picks, or this one")
    r = sub.add_parser("real")
    r.add_argument("--strings", default="IVF64,Flat;IVF64,SQ8;IVF64,SQ4;IVF64,PQ48x4;IVF64,PQ96x4;HNSW32,Flat")
    r.add_argument("--nprobe", type=int, help="also search with this nprobe (IVF strings)")
    r.add_argument("--ef-search", type=int, help="also search with this efSearch (HNSW strings)")
    r.add_argument("--rerank", type=int, help="also search re-ranking this many candidates exactly")
    r.add_argument("--passages", type=int, help="only the first N passages (the oracle's come first)")
    r.add_argument("--synthetic", action="store_true", help="the same strings on synthetic vectors of this size too")
    r.add_argument("--limit", type=int, default=2655)
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--dir")
    f = sub.add_parser("fit")
    f.add_argument("files", nargs="+")
    args = ap.parse_args()
    {"dense": dense, "bm25": bm25, "bm25-real": bm25_real, "bm25-cores": bm25_cores, "e2e": e2e, "real": real,
     "fit": fit}[args.what](args)


if __name__ == "__main__":
    main()

"""BM25 over a corpus too large for memory: tokenized in blocks, written in bm25s's own format, memory-mapped.

``bm25s.BM25.index`` holds every document's tokens and the score triplets at
once (4 kB a passage, 86 GB at 21M).  Here the corpus is read block by block
from the passage store, twice:

1. analyze each block (``retrievers.bm25.analyze``, the in-memory
   retriever's own terms; Pyserini's English analysis by default, see
   :data:`CORPUS_ANALYZER`), grow the vocabulary, and append each passage's
   distinct token ids and counts to two files on disk; count document
   frequencies and lengths;
2. score each (token, passage) pair with bm25s's own ``lucene`` formulas
   (``bm25s.scoring``) and write it at its place in the term-major (CSC)
   arrays, which are ``.npy`` files opened as memory maps.

The folder is bm25s's save format (``data/indices/indptr.csc.index.npy``,
``vocab.index.json``, ``params.index.json``), so ``bm25s.BM25.load(folder,
mmap=True)`` searches it, and the scores are those ``bm25s`` computes in
memory.  Beside it, ``maxscore.ctxcomp.npy`` holds each term's largest score, which lets a query skip
most of its long postings lists (MaxScore, :meth:`BM25Corpus.top`).  The folder is built under ``NAME.partial`` and renamed when whole:
a kill leaves no folder a later run takes for finished; the next run starts
over and says so.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from pathlib import Path
from typing import NamedTuple

import numpy as np

from core.errors import UserError
from core.files import disk_error, write_atomic
from retrievers.bm25 import analyze

DONE = "ctxcomp-bm25.json"
FILES = ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy")
MAXSCORE = "maxscore.ctxcomp.npy"
# Pyserini's default analysis over a corpus: on NQ-Open it loses no recall against every word kept, and the
# stopwords it drops are the longest lists a question reads (docs/scale.md, "BM25 on real questions")
CORPUS_ANALYZER = "english"


def build_bm25(folder: str | os.PathLike, blocks: Callable[[], Iterable[Sequence[str]]], *, n: int,
               lang: str = "en", analyzer: str = CORPUS_ANALYZER, k1: float = 1.5, b: float = 0.75,
               source: str = "",
               on_block: Callable[[int], None] | None = None, say: Callable[[str], None] | None = None) -> Path:
    """Build the index of ``blocks()`` (lists of passage texts, ``n`` in all, in row order) into ``folder``.

    A finished folder of the same ``source`` and analyzer is kept as it is; an unfinished one, or one analyzed
    otherwise, is started over.
    """
    import bm25s

    folder = Path(folder)
    analyze("", lang, analyzer)  # an unknown analyzer: refused before any work
    if (folder / DONE).is_file():
        built = json.loads((folder / DONE).read_text())
        if built.get("source") == source and built.get("analyzer", "words") == analyzer:
            if say is not None:
                say(f"bm25 index {folder}: already built")
            return folder
        if say is not None:
            say(f"bm25 index {folder}: built with analyzer {built.get('analyzer', 'words')!r}; rebuilding with "
                f"{analyzer!r}")
    part = folder.with_name(folder.name + ".partial")
    if part.exists():
        shutil.rmtree(part)
        if say is not None:
            say(f"bm25 index {folder}: an interrupted build was found; starting over")
    try:
        part.mkdir(parents=True)
        lengths, df, vocab = _pass_tokens(part, blocks(), n, lang, analyzer, on_block)
        _pass_scores(part, lengths, df, k1, b)
        params = {"k1": k1, "b": b, "delta": 0.5, "method": "lucene", "idf_method": "lucene", "dtype": "float32",
                  "int_dtype": "int32", "num_docs": n, "version": bm25s.__version__, "backend": "numpy"}
        (part / "params.index.json").write_text(json.dumps(params, indent=4))
        (part / "vocab.index.json").write_text(json.dumps(vocab, ensure_ascii=False))
        for tmp in ("tokens.bin", "counts.bin"):
            (part / tmp).unlink()
        write_atomic(part / DONE, json.dumps({"source": source, "lang": lang, "analyzer": analyzer, "n": n}))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(part, folder)
    except OSError as err:
        raise disk_error(part, err) from None
    return folder


def _pass_tokens(part: Path, blocks: Iterable[Sequence[str]], n: int, lang: str, analyzer: str,
                 on_block: Callable[[int], None] | None) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Pass 1: per passage its distinct token ids (int32) and counts (float32), appended to two files."""
    vocab: dict[str, int] = {}
    lengths = np.zeros(n, dtype=np.int32)  # tokens per passage
    distinct = np.zeros(n, dtype=np.int32)  # distinct tokens per passage
    df = np.zeros(1 << 16, dtype=np.int64)
    row = 0
    with open(part / "tokens.bin", "wb") as tok_fh, open(part / "counts.bin", "wb") as cnt_fh:
        for texts in blocks:
            ids_parts, cnt_parts = [], []
            for text in texts:
                ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in analyze(text, lang, analyzer)),
                                  dtype=np.int32)
                uniq, counts = np.unique(ids, return_counts=True)
                ids_parts.append(uniq)
                cnt_parts.append(counts.astype(np.float32))
                lengths[row], distinct[row] = len(ids), len(uniq)
                row += 1
            if len(vocab) > len(df):
                df = np.concatenate([df, np.zeros(max(len(vocab), 2 * len(df)) - len(df), dtype=np.int64)])
            if ids_parts:
                block_ids = np.concatenate(ids_parts)
                df[: len(vocab)] += np.bincount(block_ids, minlength=len(vocab))[: len(vocab)]
                tok_fh.write(block_ids.tobytes())
                cnt_fh.write(np.concatenate(cnt_parts).tobytes())
            if on_block is not None:
                on_block(row)
    if row != n:
        raise ValueError(f"the blocks held {row} passages, not {n}")
    np.save(part / "distinct.npy", distinct)
    return lengths, df[: len(vocab)], vocab


def _pass_scores(part: Path, lengths: np.ndarray, df: np.ndarray, k1: float, b: float, rows: int = 1 << 16) -> None:
    """Pass 2: bm25s's lucene score of every (token, passage) pair, written term-major into memory-mapped .npy;
    and each term's largest score."""
    from bm25s.scoring import _score_idf_lucene, _score_tfc_lucene

    n = len(lengths)
    distinct = np.load(part / "distinct.npy")
    nnz = int(distinct.sum())
    indptr = np.zeros(len(df) + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    values, inverse = np.unique(df, return_inverse=True)  # bm25s's idf is per df value: compute each value once
    idf = np.array([_score_idf_lucene(int(v), N=n) for v in values], dtype=np.float32)[inverse]
    avg = float(lengths.mean()) if n else 0.0
    data = np.lib.format.open_memmap(part / FILES[0], mode="w+", dtype=np.float32, shape=(nnz,))
    indices = np.lib.format.open_memmap(part / FILES[1], mode="w+", dtype=np.int32, shape=(nnz,))
    np.save(part / FILES[2], indptr)
    tokens = np.memmap(part / "tokens.bin", dtype=np.int32, mode="r", shape=(nnz,))
    counts = np.memmap(part / "counts.bin", dtype=np.float32, mode="r", shape=(nnz,))
    fill = indptr[:-1].copy()  # the next free place of each term's column
    maxscore = np.zeros(len(df), dtype=np.float32)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(distinct, out=offsets[1:])
    for lo in range(0, n, rows):  # passages in row order: each column's rows come out ascending, as CSC wants
        hi = min(lo + rows, n)
        a, z = offsets[lo], offsets[hi]
        term = np.asarray(tokens[a:z])
        doc = np.repeat(np.arange(lo, hi, dtype=np.int32), distinct[lo:hi])
        score = idf[term] * _score_tfc_lucene(np.asarray(counts[a:z]), lengths[doc].astype(np.float32), avg, k1, b)
        order = np.argsort(term, kind="stable")
        term, doc, score = term[order], doc[order], score[order]
        starts = np.flatnonzero(np.r_[True, term[1:] != term[:-1]])
        group = np.repeat(starts, np.diff(np.r_[starts, len(term)]))
        where = fill[term] + (np.arange(len(term)) - group)
        data[where] = score
        indices[where] = doc
        uniq, count = term[starts], np.diff(np.r_[starts, len(term)])
        fill[uniq] += count
        np.maximum.at(maxscore, uniq, np.maximum.reduceat(score, starts))  # uniq: distinct, so .at is a plain max
    np.save(part / MAXSCORE, maxscore)
    data.flush()
    indices.flush()
    del data, indices, tokens, counts
    (part / "distinct.npy").unlink()


class Ranked(NamedTuple):
    """One query's best rows (int64, best first), their scores (bm25s's float32) and the postings it read."""

    rows: np.ndarray
    scores: np.ndarray
    postings_read: int


# bm25s compiles its numba functions in each process, on its first query (11-15 s on the 2 busy cores where this
# was measured); it saves about 1 ms a question at 250k passages and 4 ms at 1M (docs/scale.md): from 1M up it pays
# back within NQ-Open's 2,655 questions, and below, MaxScore answers in a few ms anyway
COMPILED_FROM = 1_000_000

# float32 sums of q positive terms stay within q units in the last place (2**-24 each) of the exact sum; bounds
# are widened by twice that, so a row is skipped only when it is below the k-th best whatever the rounding
_ULP = 2.0 ** -24


class BM25Corpus:
    """A built folder, loaded memory-mapped: ``search(queries, k)`` gives (scores, rows) as int64 row numbers.

    From :data:`COMPILED_FROM` passages up, a query is scored by bm25s's own compiled (numba) retrieval,
    every posting of its terms (:meth:`_top_compiled`): on real questions that costs 3.7-4.7x less CPU than the
    pruned search below does in numpy, once bm25s has compiled it (on a process's first query).  Below, or with
    ``compiled=False``, a query is scored with MaxScore (Turtle & Flood, 1995; Lucene prunes the same way): its terms are read
    from the largest possible contribution down (the rare terms first, whose lists are short), and once the
    contributions of the terms left cannot lift an unseen passage to the k-th best score so far, the long
    lists of the common terms are only looked up (binary search) for the passages already seen, which are
    dropped as soon as they cannot reach it either.  The final scores are then added over the query's terms in
    bm25s's order, so they are bm25s's float32 scores bit for bit, and a tie at the k-th place goes to the
    lower row (``benchmarks/bench_corpus.py bm25-real`` times this against bm25s's own ``retrieve``).
    """

    def __init__(self, folder: str | os.PathLike, compiled: bool | None = None) -> None:
        """``compiled``: score with bm25s's numba backend (:meth:`_top_compiled`); ``None`` does from
        :data:`COMPILED_FROM` passages up, where numba is installed.  Both give the same rows and scores."""
        import importlib.util
        import threading

        import bm25s

        self.folder = Path(folder)
        if not (self.folder / DONE).is_file():
            raise UserError(f"{self.folder}: no finished bm25 index (build it first)")
        info = json.loads((self.folder / DONE).read_text())
        self.lang, self.n = info["lang"], int(info["n"])
        self.analyzer = info.get("analyzer", "words")  # folders built before analyzers kept every word
        self.engine = bm25s.BM25.load(str(self.folder), mmap=True, show_progress=False)
        self.vocab: dict[str, int] = self.engine.vocab_dict
        # plain arrays over the same mapped pages: a numpy.memmap slice costs more than the column it reads
        self.data, self.indices = (np.asarray(self.engine.scores[k]) for k in ("data", "indices"))
        self.indptr = np.array(self.engine.scores["indptr"])  # 8 bytes a term, read on every term: in memory
        self.postings = np.diff(self.indptr)  # each term's
        self.maxscore = self._maxscore()
        if compiled is None:
            compiled = self.n >= COMPILED_FROM and importlib.util.find_spec("numba") is not None
        self.compiled = compiled
        if self.compiled:
            self.engine.backend = "numba"  # bm25s compiles its scoring on the first query
        self._local = threading.local()  # per thread, 4 bytes a passage, zero between queries

    def _maxscore(self) -> np.ndarray:
        """Each term's largest score; a folder built before it was recorded gets it computed once and saved."""
        path = self.folder / MAXSCORE
        if not path.is_file():
            starts = np.asarray(self.indptr[:-1])  # every term of the vocabulary has at least one posting
            tmp = path.with_suffix(".partial.npy")
            np.save(tmp, np.maximum.reduceat(self.data, starts) if len(starts) else np.zeros(0, np.float32))
            os.replace(tmp, path)
        return np.load(path)

    def query_ids(self, query: str) -> list[int]:
        """The query's term ids in order (repeats kept, unknown terms dropped), as bm25s scores them."""
        return [self.vocab[t] for t in analyze(query, self.lang, self.analyzer) if t in self.vocab]

    def _column(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.indptr[t], self.indptr[t + 1]
        return self.indices[lo:hi], self.data[lo:hi]

    def _lookup(self, t: int, rows: np.ndarray) -> np.ndarray:
        """Term ``t``'s scores of ``rows`` (sorted), 0 where it is absent: a binary search in its column."""
        col_rows, col_scores = self._column(t)
        out = np.zeros(len(rows), dtype=col_scores.dtype)
        if len(col_rows):
            at = np.minimum(np.searchsorted(col_rows, rows), len(col_rows) - 1)
            hit = col_rows[at] == rows
            out[hit] = col_scores[at[hit]]
        return out

    def top(self, ids: Sequence[int], k: int) -> Ranked:
        """The best ``k`` rows for the term ids ``ids`` (:meth:`query_ids`); rows sharing no term are left out."""
        if not len(ids) or k <= 0:
            return Ranked(np.zeros(0, np.int64), np.zeros(0, np.float32), 0)
        if self.compiled:
            return self._top_compiled([ids], k)[0]
        repeats: dict[int, int] = {}
        for t in ids:
            repeats[int(t)] = repeats.get(int(t), 0) + 1
        terms, mult = np.array(list(repeats), np.int64), np.array(list(repeats.values()), np.float64)
        bound = mult * self.maxscore[terms].astype(np.float64)
        order = np.argsort(-bound, kind="stable")
        left = np.r_[np.cumsum(bound[order][::-1])[::-1], 0.0]  # left[j]: the most terms order[j:] can add
        slack = 1 + 4 * (len(ids) + 1) * _ULP
        sums = getattr(self._local, "sums", None)
        if sums is None:
            sums = self._local.sums = np.zeros(self.n, dtype=self.data.dtype)
        seen, touched, read, theta, j = [], [], 0, 0.0, 0
        try:
            while j < len(order):  # essential terms: every posting added
                rows, scores = self._column(int(terms[order[j]]))
                now = sums[rows]
                seen.append(rows[now == 0])  # lucene scores are > 0: a zero sum is a row not seen yet
                sums[rows] = now + (scores * mult[order[j]].astype(scores.dtype) if mult[order[j]] > 1 else scores)
                touched.append(rows)
                read += len(rows)
                j += 1
                # the k-th best partial score is at most what the terms read so far can add: look only when the
                # terms left could fall below it
                if j < len(order) and left[j] * slack < (left[0] - left[j]) / slack:
                    seen = [np.concatenate(seen)]
                    if len(seen[0]) >= k:
                        theta = float(np.partition(sums[seen[0]], len(seen[0]) - k)[len(seen[0]) - k])
                        if left[j] * slack < theta / slack:
                            break
            cand = np.concatenate(seen)
            # the rest: only the rows seen count, dropped once they cannot reach the k-th best; a list is looked
            # up row by row (binary search) when that reads less than adding it whole
            for jj in range(j, len(order) + 1):
                if len(cand) > k:
                    partial = sums[cand]
                    theta = max(theta, float(np.partition(partial, len(cand) - k)[len(cand) - k]))
                    cand = cand[(partial.astype(np.float64) + left[jj]) * slack >= theta / slack]
                if jj == len(order):
                    break
                t, m = int(terms[order[jj]]), mult[order[jj]]
                size = int(self.indptr[t + 1] - self.indptr[t])
                if len(cand) * max(size.bit_length(), 1) < size:
                    sums[cand] += self._lookup(t, cand) * m.astype(self.data.dtype)
                    read += len(cand)
                else:
                    rows, scores = self._column(t)
                    sums[rows] = sums[rows] + scores * m.astype(scores.dtype)
                    touched.append(rows)
                    read += len(rows)
        finally:  # the array is this thread's next query's too: zero again whatever happened
            for rows in touched:
                sums[rows] = 0
        # bm25s's own sum, in the query's order with its repeats: adding a 0 for an absent term is exact
        total = np.zeros(len(cand), dtype=self.data.dtype)
        for t in ids:
            total += self._lookup(int(t), cand)
        read += len(ids) * len(cand)
        best = np.lexsort((cand, -total))[:k]
        best = best[total[best] > 0]
        return Ranked(cand[best].astype(np.int64), total[best], read)

    def top_many(self, queries: Sequence[Sequence[int]], k: int, threads: int = 1) -> list[Ranked]:
        """:meth:`top` of each query's term ids.  The compiled path scores a share of queries in one bm25s call
        (its per-call work paid once); ``threads`` > 1 splits the queries into that many shares searched side by
        side (bm25s's one-thread retrieval releases the GIL and compiles once, unlike its parallel one)."""
        def share(part: Sequence[Sequence[int]]) -> list[Ranked]:
            return self._top_compiled(part, k) if self.compiled else [self.top(q, k) for q in part]

        if threads > 1 and len(queries) > 1:
            from concurrent.futures import ThreadPoolExecutor

            cut = np.linspace(0, len(queries), min(threads, len(queries)) + 1).astype(int)
            with ThreadPoolExecutor(threads) as pool:
                return [r for part in pool.map(lambda a, z: share(queries[a:z]), cut[:-1], cut[1:]) for r in part]
        return share(queries)

    def _top_compiled(self, queries: Sequence[Sequence[int]], k: int, spare: int = 16, grow: int = 4) -> list[Ranked]:
        """bm25s's own compiled retrieval (every posting of the query's terms, in numba: 3.7-4.7x less CPU than
        MaxScore in numpy on real questions, docs/scale.md), with ctxcomp's tie rule on top: it asks for
        ``k + spare`` rows; where the last of them still ties the k-th score, rows beyond may tie too, so those
        queries are asked again for ``grow`` times as many rows until the last is below the k-th score (or
        every row is in hand); then the lower rows of a tie come first."""
        empty = Ranked(np.zeros(0, np.int64), np.zeros(0, np.float32), 0)
        ranked = [empty] * len(queries)
        if k <= 0:
            return ranked
        asked = [i for i, q in enumerate(queries) if len(q)]  # bm25s refuses a query with no known term
        want = min(k + spare, self.n)
        while asked:
            got = self.engine.retrieve([[int(t) for t in queries[i]] for i in asked], k=want, show_progress=False)
            rows, scores = got.documents.astype(np.int64), got.scores  # each query's best first
            # every row positive and the last one tying the k-th: the tie may run past what was asked
            tied = (scores[:, -1] > 0) & (scores[:, -1] == scores[:, k - 1]) if want < self.n else \
                np.zeros(len(asked), bool)
            order = np.lexsort((rows, -scores), axis=-1)[:, :k]  # per query: score down, then row up
            rows, scores = np.take_along_axis(rows, order, 1), np.take_along_axis(scores, order, 1)
            positive = (scores > 0).sum(1)  # a prefix of each row: scores are > 0 or, left out, 0
            read = self._postings_read([queries[i] for i in asked])
            for j in np.flatnonzero(~tied):
                ranked[asked[j]] = Ranked(rows[j, : positive[j]], scores[j, : positive[j]], int(read[j]))
            asked = [asked[j] for j in np.flatnonzero(tied)]
            want = min(want * grow, self.n)
        return ranked

    def _postings_read(self, queries: Sequence[Sequence[int]]) -> np.ndarray:
        """Per query, the postings of its distinct terms: in a few array operations for the whole batch."""
        terms = len(self.postings)
        owner = np.repeat(np.arange(len(queries), dtype=np.int64), [len(q) for q in queries])
        pairs = np.unique(owner * terms + np.fromiter(chain.from_iterable(queries), np.int64, len(owner)))
        return np.bincount(pairs // terms, weights=self.postings[pairs % terms], minlength=len(queries))

    def search(self, queries: Sequence[str], k: int, threads: int = 1) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per query, the best ``k`` scores and their row numbers (int64), best first (ties: the lower row
        first); passages sharing no term with the query are left out.  ``threads`` > 1 searches queries side by
        side (a gain only where cores are free: docs/scale.md)."""
        ranked = self.top_many([self.query_ids(q) for q in queries], k, threads)
        return [r.scores for r in ranked], [r.rows for r in ranked]


__all__ = ["COMPILED_FROM", "CORPUS_ANALYZER", "BM25Corpus", "Ranked", "build_bm25"]

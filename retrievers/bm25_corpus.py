"""BM25 over a corpus too large for memory: tokenized in blocks, written in bm25s's own format, memory-mapped.

``bm25s.BM25.index`` holds every document's tokens and the score triplets at
once (4 kB a passage, 86 GB at 21M).  Here the corpus is read block by block
from the passage store, twice:

1. tokenize each block (``retrievers.bm25.tokenize``, the in-memory
   retriever's own tokens), grow the vocabulary, and append each passage's
   distinct token ids and counts to two files on disk; count document
   frequencies and lengths;
2. score each (token, passage) pair with bm25s's own ``lucene`` formulas
   (``bm25s.scoring``) and write it at its place in the term-major (CSC)
   arrays, which are ``.npy`` files opened as memory maps.

The folder is bm25s's save format (``data/indices/indptr.csc.index.npy``,
``vocab.index.json``, ``params.index.json``), so ``bm25s.BM25.load(folder,
mmap=True)`` searches it, and the scores are those ``bm25s`` computes in
memory.  The folder is built under ``NAME.partial`` and renamed when whole:
a kill leaves no folder a later run takes for finished; the next run starts
over and says so.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from core.errors import UserError
from core.files import disk_error, write_atomic
from retrievers.bm25 import tokenize

DONE = "ctxcomp-bm25.json"
FILES = ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy")


def build_bm25(folder: str | os.PathLike, blocks: Callable[[], Iterable[Sequence[str]]], *, n: int,
               lang: str = "en", k1: float = 1.5, b: float = 0.75, source: str = "",
               on_block: Callable[[int], None] | None = None, say: Callable[[str], None] | None = None) -> Path:
    """Build the index of ``blocks()`` (lists of passage texts, ``n`` in all, in row order) into ``folder``.

    A finished folder of the same ``source`` is kept as it is; an unfinished one is started over.
    """
    import bm25s

    folder = Path(folder)
    if (folder / DONE).is_file() and json.loads((folder / DONE).read_text()).get("source") == source:
        if say is not None:
            say(f"bm25 index {folder}: already built")
        return folder
    part = folder.with_name(folder.name + ".partial")
    if part.exists():
        shutil.rmtree(part)
        if say is not None:
            say(f"bm25 index {folder}: an interrupted build was found; starting over")
    try:
        part.mkdir(parents=True)
        lengths, df, vocab = _pass_tokens(part, blocks(), n, lang, on_block)
        _pass_scores(part, lengths, df, k1, b)
        params = {"k1": k1, "b": b, "delta": 0.5, "method": "lucene", "idf_method": "lucene", "dtype": "float32",
                  "int_dtype": "int32", "num_docs": n, "version": bm25s.__version__, "backend": "numpy"}
        (part / "params.index.json").write_text(json.dumps(params, indent=4))
        (part / "vocab.index.json").write_text(json.dumps(vocab, ensure_ascii=False))
        for tmp in ("tokens.bin", "counts.bin"):
            (part / tmp).unlink()
        write_atomic(part / DONE, json.dumps({"source": source, "lang": lang, "n": n}))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(part, folder)
    except OSError as err:
        raise disk_error(part, err) from None
    return folder


def _pass_tokens(part: Path, blocks: Iterable[Sequence[str]], n: int, lang: str,
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
                ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in tokenize(text, lang)), dtype=np.int32)
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
    """Pass 2: bm25s's lucene score of every (token, passage) pair, written term-major into memory-mapped .npy."""
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
    data.flush()
    indices.flush()
    del data, indices, tokens, counts
    (part / "distinct.npy").unlink()


class BM25Corpus:
    """A built folder, loaded memory-mapped: ``search(queries, k)`` gives (scores, rows) as int64 row numbers.

    A query is scored only where its terms' columns have rows (``scores_of``), with bm25s's own sums; bm25s's
    ``get_scores`` fills and ranks a vector of every passage per query, which at 21M passages is most of a
    query's time (``benchmarks/bench_corpus.py bm25`` times the two side by side).
    """

    def __init__(self, folder: str | os.PathLike) -> None:
        import threading

        import bm25s

        self.folder = Path(folder)
        if not (self.folder / DONE).is_file():
            raise UserError(f"{self.folder}: no finished bm25 index (build it first)")
        info = json.loads((self.folder / DONE).read_text())
        self.lang, self.n = info["lang"], int(info["n"])
        self.engine = bm25s.BM25.load(str(self.folder), mmap=True, show_progress=False)
        self.vocab: dict[str, int] = self.engine.vocab_dict
        self._sums: np.ndarray | None = None  # 4 bytes a passage, zero between queries
        self._lock = threading.Lock()

    def scores_of(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores): every passage holding a token of ``ids`` (a row once per token it holds) and its
        score, the sum over ``ids`` of the columns' scores added in the same order as bm25s's ``np.add.at``, so
        the float32 sums are bm25s's bit for bit (lucene scores a missing term 0, so no other row scores)."""
        data, indices, indptr = (self.engine.scores[k] for k in ("data", "indices", "indptr"))
        with self._lock:
            if self._sums is None:
                self._sums = np.zeros(self.n, dtype=data.dtype)
            sums, touched = self._sums, []
            for t in ids:  # a column's rows are distinct, so a fancy-index add is exact
                rows = np.asarray(indices[indptr[t]: indptr[t + 1]])
                sums[rows] += np.asarray(data[indptr[t]: indptr[t + 1]])
                touched.append(rows)
            rows = np.concatenate(touched) if touched else np.zeros(0, np.int32)
            scores = sums[rows]
            sums[rows] = 0
        return rows.astype(np.int64), scores

    def search(self, queries: Sequence[str], k: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per query, the best ``k`` scores and their row numbers (int64), best first (ties: the lower row
        first); passages sharing no token with the query are left out."""
        all_scores, all_rows = [], []
        for query in queries:
            ids = [self.vocab[t] for t in tokenize(query, self.lang) if t in self.vocab]
            rows, scores = self.scores_of(ids)
            # a row appears once per query token it holds, so the best k distinct rows lie in the best k*len(ids)
            # entries: the k-th best distinct score there is the k-th best of all; every row scoring at least
            # that is kept, so a tie at the k-th place goes to the lower rows, whatever argpartition picked
            depth = k * max(len(ids), 1)
            if len(rows) > depth:
                keep = np.argpartition(-scores, depth - 1)[:depth]
                _, first = np.unique(rows[keep], return_index=True)
                best = scores[keep][first]  # one score per distinct row
                if len(best) >= k:
                    sel = scores >= np.partition(best, len(best) - k)[len(best) - k]
                    rows, scores = rows[sel], scores[sel]
            rows, first = np.unique(rows, return_index=True)
            scores = scores[first]
            order = np.lexsort((rows, -scores))[:k]
            order = order[scores[order] > 0]
            all_scores.append(scores[order].astype(np.float32))
            all_rows.append(rows[order])
        return all_scores, all_rows


__all__ = ["BM25Corpus", "build_bm25"]

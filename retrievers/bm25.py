"""BM25 over word tokens (English) or jieba tokens (Chinese), on rank-bm25 or bm25s.

Two engines with the same tokens:

* ``rank_bm25`` (``BM25Okapi``): Robertson idf ``log((N - df + .5) / (df + .5))``
  with negative idfs floored to ``0.25 × mean idf``, term weight
  ``tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl))``.  Its scores are computed by
  :class:`Okapi` (the same floats, bit for bit, built faster); fine for one
  LongBench context (tens of chunks) and corpora of thousands, slow beyond.
* ``bm25s`` (method ``lucene``): idf ``log(1 + (N - df + .5) / (df + .5))``,
  term weight ``tf / (tf + k1·(1 - b + b·dl/avgdl))``; scores precomputed in a
  sparse matrix, so it is the engine for open-domain corpora.

``backend='auto'`` picks ``bm25s`` from :data:`AUTO_BM25S_AT` chunks on.
A query or corpus that tokenizes to nothing scores 0 everywhere; the hits
are then the first ``k`` chunks in corpus order (a truncation-like fallback).

A titled chunk is indexed with the tokens of its title and of its text: an
open-domain question often names what the title names (on NQ-Open's gold
passages recall@1 rises from 0.66 to 0.78, docs/retrieval.md).
"""
from __future__ import annotations

import functools
import math
import operator
import re
from collections import Counter
from collections.abc import Sequence
from itertools import chain
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, NonNegativeFloat

from core.errors import ParamError
from core.progress import corpus_progress
from core.text import CJK_CHAR
from indexes.types import Chunk
from retrievers.base import Hit, Retriever, titled_text

AUTO_BM25S_AT = 20_000
_WORD = re.compile(r"\w+")


def detect_lang(texts: Sequence[str], sample_chars: int = 200_000) -> str:
    """``'zh'`` when CJK ideographs make up at least 30% of the word characters in a sample, else ``'en'``."""
    sample, size = [], 0
    for t in texts:
        sample.append(t)
        size += len(t)
        if size >= sample_chars:
            break
    joined = "".join(sample)
    if CJK_CHAR.search(joined) is None:  # no ideograph: English whatever the words (and without listing them)
        return "en"
    word_chars = sum(map(len, _WORD.findall(joined)))
    return "zh" if word_chars and len(CJK_CHAR.findall(joined)) / word_chars >= 0.3 else "en"


def tokenize(text: str, lang: str) -> list[str]:
    """Lowercase ``\\w+`` tokens for English; jieba words (punctuation and spaces dropped) for Chinese."""
    if lang == "zh":
        import jieba

        return [tok for tok in jieba.lcut(text.lower()) if _WORD.search(tok)]
    return _WORD.findall(text.lower())


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores, best first; ties in corpus order."""
    k = min(k, len(scores))
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    if k < len(scores) // 4:
        # argpartition picks arbitrarily among ties at the k-th score; take those in corpus order instead
        kth = -np.partition(-scores, k - 1)[k - 1]
        above = np.flatnonzero(scores > kth)
        cand = np.concatenate([above, np.flatnonzero(scores == kth)[: k - len(above)]])
        return cand[np.lexsort((cand, -scores[cand]))]
    return np.argsort(-scores, kind="stable")[:k]


class Okapi:
    """``rank_bm25.BM25Okapi(corpus, k1=k1, b=b)``'s ``get_scores``, the same floats bit for bit, made cheaper.

    A dry run builds hundreds of small indexes (one per example and setting) and searches a corpus of
    thousands of passages with every question (distractor mining), where rank_bm25's Python loops were most
    of its time: it counts terms token by token, takes two logs per distinct term, and scores each query term
    by looking it up in every document's counts.  Here terms are counted by ``Counter``, the logs are taken
    once per distinct document frequency, and a term's counts come from postings once scanning every
    document's counts has cost what building the postings does (:meth:`_term_counts`).  Every float comes
    from the same operations in the same order as rank_bm25 0.2.2's (``tests/retrievers/test_bm25.py`` checks
    equality, not closeness).  Documents and queries may be strings (``longbench_compat``): terms are then
    their characters.
    """

    def __init__(self, corpus: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75,
                 epsilon: float = 0.25) -> None:
        self.k1, self.b, self.corpus_size = k1, b, len(corpus)
        doc_len = [len(doc) for doc in corpus]
        self.avgdl = sum(doc_len) / self.corpus_size
        self._freqs = [Counter(doc) for doc in corpus]
        df = Counter(chain.from_iterable(self._freqs))  # term -> documents holding it, in first-seen order
        idf_of_df = {n: math.log(self.corpus_size - n + 0.5) - math.log(n + 0.5) for n in set(df.values())}
        idfs = [idf_of_df[n] for n in df.values()]
        self.idf = dict(zip(df, idfs))
        self.average_idf = functools.reduce(operator.add, idfs, 0) / len(idfs)  # summed in rank_bm25's order
        eps = epsilon * self.average_idf
        self.idf.update((term, eps) for term, idf in zip(df, idfs) if idf < 0)
        self._norm = k1 * (1 - b + b * np.array(doc_len) / self.avgdl)  # rank_bm25's per-term expression
        self._pairs = sum(map(len, self._freqs))  # (document, term) pairs: the postings' size
        self._scanned = 0
        self._postings: tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray] | None = None

    def get_scores(self, query: Sequence[str]) -> np.ndarray:
        score = np.zeros(self.corpus_size)
        for q in query:
            q_freq = self._term_counts(q)
            score += (self.idf.get(q) or 0) * (q_freq * (self.k1 + 1) / (q_freq + self._norm))
        return score

    def _term_counts(self, term: str) -> np.ndarray:
        """``term``'s count in each document (int64, as rank_bm25's list of counts becomes).

        One scan of every document's counts per term is cheapest for the few queries over a small index;
        once the scans add up to the postings' size (a corpus searched by many questions), the postings are
        built, and a term costs the documents that hold it."""
        if self._postings is None:
            self._scanned += self.corpus_size
            if self._scanned <= self._pairs:
                return np.array([f.get(term, 0) for f in self._freqs], dtype=np.int64)
            self._postings = self._build_postings()
        column, starts, docs, counts = self._postings
        q_freq = np.zeros(self.corpus_size, dtype=np.int64)
        i = column.get(term)
        if i is not None:
            q_freq[docs[starts[i]:starts[i + 1]]] = counts[starts[i]:starts[i + 1]]
        return q_freq

    def _build_postings(self) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray]:
        """Term -> column, and per column the documents holding the term and its counts (term-major)."""
        column = {term: i for i, term in enumerate(self.idf)}
        terms = np.fromiter(map(column.__getitem__, chain.from_iterable(self._freqs)), np.int64, self._pairs)
        counts = np.fromiter(chain.from_iterable(f.values() for f in self._freqs), np.int64, self._pairs)
        docs = np.repeat(np.arange(self.corpus_size), [len(f) for f in self._freqs])
        order = np.argsort(terms, kind="stable")
        starts = np.concatenate(([0], np.cumsum(np.bincount(terms, minlength=len(column)))))
        return column, starts, docs[order], counts[order]


class BM25Retriever(Retriever):
    """Okapi BM25 with real word tokens by default.

    ``longbench_compat=True`` reproduces the released LongBench script: raw
    strings go to ``rank_bm25.BM25Okapi``, which then iterates characters, so
    single characters are the terms.  That is off by default because character
    terms match almost everything and the gold chunk ranks far lower.
    ``use_title=False`` indexes a chunk's text alone.
    """

    calls_model = False

    def __init__(
        self,
        *,
        k1: NonNegativeFloat = 1.5,
        b: Annotated[float, Field(ge=0, le=1)] = 0.75,
        backend: Literal["auto", "rank_bm25", "bm25s"] = "auto",
        lang: Literal["auto", "en", "zh"] = "auto",
        longbench_compat: bool = False,
        use_title: bool = True,
    ) -> None:
        if longbench_compat and backend == "bm25s":
            raise ParamError("bm25: longbench_compat reproduces rank_bm25 on raw strings; it cannot use bm25s")
        self.k1, self.b = k1, b
        self.use_title = use_title
        self.backend, self.lang, self.longbench_compat = backend, lang, longbench_compat
        self._chunks: list[Chunk] = []
        self._engine: Any = None
        self._engine_name = ""
        self._lang_used = "en"
        self._empty = True

    @property
    def identity(self) -> str:
        mode = "chars-longbench" if self.longbench_compat else self._lang_used
        return (f"bm25(k1={self.k1},b={self.b},tokens={mode},engine={self._engine_name or self.backend},"
                f"title={self.use_title})")

    @property
    def label(self) -> str:
        name = "bm25-chars" if self.longbench_compat else "bm25"
        return name if self.use_title else f"{name}-notitle"

    def _tokens(self, text: str) -> Any:
        return text if self.longbench_compat else tokenize(text, self._lang_used)

    def _indexed_text(self, chunk: Chunk) -> str:
        """The title and the text, space-separated, so their tokens (or compat characters) are both indexed."""
        return titled_text(chunk, self.use_title)

    def index(self, chunks: Sequence[Chunk]) -> BM25Retriever:
        self._chunks = list(chunks)
        texts = [self._indexed_text(c) for c in self._chunks]
        self._lang_used = detect_lang(texts) if self.lang == "auto" else self.lang
        corpus = [self._tokens(t) for t in corpus_progress(texts, len(texts), "bm25: tokenize")]
        self._empty = sum(len(toks) for toks in corpus) == 0
        engine = self.backend
        if engine == "auto":
            engine = "bm25s" if len(corpus) >= AUTO_BM25S_AT and not self.longbench_compat else "rank_bm25"
        self._engine_name = engine
        self._engine = None
        if self._empty:
            return self
        if engine == "rank_bm25":
            self._engine = Okapi(corpus, k1=self.k1, b=self.b)
        else:
            import bm25s

            # token ids and the vocabulary, built in one pass over our tokens: bm25s then indexes from ids
            # (its fast path) and maps query tokens through the same vocabulary
            vocab: dict[str, int] = {}
            ids = [[vocab.setdefault(t, len(vocab)) for t in toks] for toks in corpus]
            self._engine = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
            self._engine.index((ids, vocab), show_progress=False)
        return self

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed chunk for ``query`` (zeros when nothing can match)."""
        tokens = self._tokens(query)
        if self._empty or len(tokens) == 0:
            return np.zeros(len(self._chunks), dtype=np.float64)
        if self._engine_name == "bm25s":
            return np.asarray(self._engine.get_scores(list(tokens)), dtype=np.float64)
        return np.asarray(self._engine.get_scores(tokens), dtype=np.float64)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.check_search(queries, k)
        results = []
        for query in queries:
            scores = self.scores(query)
            order = top_k_indices(scores, k)
            results.append([Hit(self._chunks[i], float(scores[i]), rank) for rank, i in enumerate(order)])
        return results

"""BM25 over word tokens (English) or jieba tokens (Chinese), on rank-bm25 or bm25s.

Two engines with the same tokens:

* ``rank_bm25`` (``BM25Okapi``): Robertson idf ``log((N - df + .5) / (df + .5))``
  with negative idfs floored to ``0.25 × mean idf``, term weight
  ``tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl))``.  Pure Python per query term,
  fine for one LongBench context (tens of chunks), slow for big corpora.
* ``bm25s`` (method ``lucene``): idf ``log(1 + (N - df + .5) / (df + .5))``,
  term weight ``tf / (tf + k1·(1 - b + b·dl/avgdl))``; scores precomputed in a
  sparse matrix, so it is the engine for open-domain corpora.

``backend='auto'`` picks ``bm25s`` from :data:`AUTO_BM25S_AT` chunks on.
A query or corpus that tokenizes to nothing scores 0 everywhere; the hits
are then the first ``k`` chunks in corpus order (a truncation-like fallback).

Two analyzers turn text into terms (``analyzer=``):

* ``words`` (the default here): lowercase ``\\w+`` words (jieba words for Chinese), every word kept;
* ``english``: Pyserini's default English analysis (Lucene's ``EnglishAnalyzer``) on those words: the
  possessive ``'s`` dropped, Lucene's 33 English stopwords removed (bm25s ships the same list as
  ``STOPWORDS_EN``), then the original Porter stemmer (nltk's ``ORIGINAL_ALGORITHM``, what Lucene's
  ``PorterStemFilter`` implements).  It is the default over a corpus (``retrievers.bm25_corpus``): the
  stopwords are the longest postings lists a question reads (docs/scale.md).

A titled chunk is indexed with the tokens of its title and of its text: an
open-domain question often names what the title names (on NQ-Open's gold
passages recall@1 rises from 0.66 to 0.78, docs/retrieval.md).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
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
_POSSESSIVE = re.compile(r"['\u2019]s\b")
ANALYZERS = ("words", "english")
Analyzer = Literal["words", "english"]


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


@lru_cache(maxsize=1)
def _english_stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN  # Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, 33 words

    return frozenset(STOPWORDS_EN)


@lru_cache(maxsize=1 << 20)  # a corpus's vocabulary repeats: each distinct word is stemmed once
def porter_stem(word: str) -> str:
    """The original Porter stemmer (Lucene's ``PorterStemFilter``; nltk's default mode adds its own extensions)."""
    return _porter().stem(word, to_lowercase=False)


@lru_cache(maxsize=1)
def _porter() -> Any:
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer(mode=PorterStemmer.ORIGINAL_ALGORITHM)


def analyze(text: str, lang: str, analyzer: str = "words") -> list[str]:
    """The terms BM25 indexes and queries with: :func:`tokenize`'s words, or Pyserini's English analysis of them."""
    if analyzer == "words":
        return tokenize(text, lang)
    if analyzer != "english" or lang != "en":
        raise ParamError(f"bm25: analyzer {analyzer!r} for lang {lang!r}; analyzers: words (any lang), english (en)")
    stop = _english_stopwords()
    return [porter_stem(w) for w in _WORD.findall(_POSSESSIVE.sub("", text.lower())) if w not in stop]


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


class BM25Retriever(Retriever):
    """Okapi BM25 with real word tokens by default.

    ``longbench_compat=True`` reproduces the released LongBench script: raw
    strings go to ``rank_bm25.BM25Okapi``, which then iterates characters, so
    single characters are the terms.  That is off by default because character
    terms match almost everything and the gold chunk ranks far lower.
    ``use_title=False`` indexes a chunk's text alone.
    """

    color = "#1f77b4"

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
        analyzer: Analyzer = "words",
    ) -> None:
        if longbench_compat and backend == "bm25s":
            raise ParamError("bm25: longbench_compat reproduces rank_bm25 on raw strings; it cannot use bm25s")
        if longbench_compat and analyzer != "words":
            raise ParamError("bm25: longbench_compat indexes raw characters; it takes no analyzer")
        self.analyzer = analyzer
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
        if self.analyzer != "words":  # the words analyzer keeps the identity (and cached results) it always had
            mode += f"-{self.analyzer}"
        return (f"bm25(k1={self.k1},b={self.b},tokens={mode},engine={self._engine_name or self.backend},"
                f"title={self.use_title})")

    @property
    def label(self) -> str:
        name = "bm25-chars" if self.longbench_compat else "bm25"
        return name if self.use_title else f"{name}-notitle"

    def _tokens(self, text: str) -> Any:
        return text if self.longbench_compat else analyze(text, self._lang_used, self.analyzer)

    def _indexed_text(self, chunk: Chunk) -> str:
        """The title and the text, space-separated, so their tokens (or compat characters) are both indexed."""
        return titled_text(chunk, self.use_title)

    def index(self, chunks: Sequence[Chunk]) -> BM25Retriever:
        self._chunks = list(chunks)
        texts = [self._indexed_text(c) for c in self._chunks]
        self._lang_used = detect_lang(texts) if self.lang == "auto" else self.lang
        analyze("", self._lang_used, self.analyzer)  # an analyzer the language has not: refused before any work
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
            from rank_bm25 import BM25Okapi

            self._engine = BM25Okapi(corpus, k1=self.k1, b=self.b)
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

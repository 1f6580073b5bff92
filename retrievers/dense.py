"""Dense retrieval: an encoder turns texts into unit vectors, a FAISS index finds neighbours.

Document embeddings go through the :class:`~indexes.cache.EmbeddingCache`, so
re-indexing a corpus the process (or an earlier run) has seen makes no encoder
call.  Scores are inner products of L2-normalised vectors (cosine similarity).

A titled chunk is embedded as ``title + " " + text``, the form Contriever's
passage encoder was trained on (its ``generate_passage_embeddings`` joins them
so); sentence-transformers models and OpenAI embeddings document no form of
their own, so they get the same.  The cache keys on the text actually encoded,
so titled and untitled embeddings of a chunk are separate entries.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from core.progress import corpus_progress
from indexes.cache import EmbeddingCache, shared_embedding_cache
from indexes.types import Chunk
from indexes.vector import FaissIndex
from retrievers.base import Hit, Retriever, titled_text
from retrievers.bm25 import top_k_indices
from retrievers.contract import check_vectors


@runtime_checkable
class Encoder(Protocol):
    """Texts to float32 arrays of shape (n, d), rows L2-normalised, in input order."""

    model_id: str

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray: ...


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def encode_sorted(
    texts: Sequence[str], batch_size: int, encode_batch: Callable[[list[str]], np.ndarray]
) -> np.ndarray:
    """Encode longest texts first in batches (less padding), return normalised rows in input order."""
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if len(texts) == 0:
        raise ValueError("nothing to encode")
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    parts = []
    for lo in corpus_progress(range(0, len(order), batch_size), len(order), "encode",
                              passages=lambda lo: min(batch_size, len(order) - lo)):
        batch = [texts[i] for i in order[lo : lo + batch_size]]
        parts.append(np.asarray(encode_batch(batch), dtype=np.float32))
    stacked = np.concatenate(parts, axis=0)
    out = np.empty_like(stacked)
    out[np.asarray(order)] = stacked
    return l2_normalize(out)


class DenseRetriever(Retriever):
    """Retrieve by cosine similarity of an :class:`Encoder`'s embeddings.

    ``cache=None`` uses the process-wide cache under ``$CTXCOMP_CACHE_DIR``;
    ``use_cache=False`` encodes everything afresh.  ``encoder_calls`` and
    ``texts_encoded`` count actual encoder work (a warm cache leaves them at 0).
    ``use_title=False`` embeds a chunk's text alone (hits always carry the
    original chunk, whatever was embedded).
    """

    def __init__(
        self,
        encoder: Encoder,
        *,
        index_kind: str = "flat",
        cache: EmbeddingCache | None = None,
        use_cache: bool = True,
        index_params: dict | None = None,
        use_title: bool = True,
    ) -> None:
        if not isinstance(encoder, Encoder):
            raise TypeError(f"{type(encoder).__name__} does not implement the Encoder protocol")
        self.encoder = encoder
        self.index_kind = index_kind
        self.index_params = dict(index_params or {})
        self._cache = cache
        self.use_cache = use_cache
        self.use_title = use_title
        self.encoder_calls = 0
        self.texts_encoded = 0
        self.texts_from_cache = 0
        self.encode_s = self.cached_encode_s = self.lookup_s = 0.0
        self._chunks: list[Chunk] = []
        self._index: FaissIndex | None = None

    @property
    def cache(self) -> EmbeddingCache | None:
        if not self.use_cache:
            return None
        if self._cache is None:
            self._cache = shared_embedding_cache()
        return self._cache

    @property
    def identity(self) -> str:
        return f"dense({self.encoder.model_id},index={self.index_kind},title={self.use_title})"

    @property
    def label(self) -> str:
        name = self.encoder.model_id.removeprefix("openai:").split("@")[0]
        name = name.rstrip("/").rsplit("/", 1)[-1].split(":")[0]
        return name if getattr(self, "use_title", True) else f"{name}-notitle"

    def warm_up(self) -> None:
        """An encoder that loads its model lazily may offer ``load()``; it runs here, before any timing."""
        load = getattr(self.encoder, "load", None)
        if callable(load):
            load()

    def _embed(self, texts: Sequence[str], role: str) -> np.ndarray:
        """Embeddings for ``texts``; cached ones are read, only the rest reach the encoder.

        Counts the work (``encoder_work``): texts encoded and the time it took, texts the cache served with
        the encoding time recorded when they were made, and the time reading the cache took.
        """
        encode = self.encoder.encode_documents if role == "doc" else self.encoder.encode_queries
        cache, key = self.cache, f"{self.encoder.model_id}|{role}"
        start = time.perf_counter()
        found = cache.get_many(key, texts) if cache is not None else [None] * len(texts)
        missing = [i for i, v in enumerate(found) if v is None]
        if cache is not None and len(missing) < len(texts):
            served = [texts[i] for i, v in enumerate(found) if v is not None]
            self.texts_from_cache += len(served)
            self.cached_encode_s += sum(cache.seconds_many(key, served))
        self.lookup_s += time.perf_counter() - start
        if not missing:
            return np.stack(found).astype(np.float32, copy=False)
        row_of: dict[str, int] = {}  # each distinct text once, in first-seen order
        rows = np.fromiter((row_of.setdefault(texts[i], len(row_of)) for i in missing), dtype=np.int64,
                           count=len(missing))
        unique = list(row_of)
        self.warm_up()  # loading is not encoding
        start = time.perf_counter()
        fresh = check_vectors(self.encoder, encode(unique), len(unique))
        elapsed = time.perf_counter() - start
        self.encoder_calls += 1
        self.texts_encoded += len(unique)
        self.encode_s += elapsed
        if cache is not None:
            cache.put_many(key, unique, fresh, seconds=elapsed / len(unique))
        if len(missing) == len(texts) and len(unique) == len(texts):
            return fresh  # nothing cached, nothing repeated: the encoder's rows are the answer, in order
        # whole arrays, not one row object per text: a 200k-passage corpus costs a second less
        out = np.empty((len(texts), fresh.shape[1]), dtype=np.float32)
        out[np.asarray(missing, dtype=np.int64)] = fresh[rows]
        cached = [i for i, v in enumerate(found) if v is not None]
        if cached:
            out[np.asarray(cached, dtype=np.int64)] = np.stack([found[i] for i in cached])
        return out

    def index(self, chunks: Sequence[Chunk]) -> DenseRetriever:
        self._chunks = list(chunks)
        self._index = None
        if not self._chunks:
            return self
        vectors = self._embed([titled_text(c, self.use_title) for c in self._chunks], "doc")
        self._index = FaissIndex(vectors.shape[1], self.index_kind, metric="ip", **self.index_params)
        self._index.add([str(i) for i in range(len(self._chunks))], vectors)
        return self

    def index_vectors(self, chunks: Sequence[Chunk], index: FaissIndex) -> DenseRetriever:
        """Adopt a prebuilt index over ``chunks`` instead of encoding them (e.g. one loaded from embedding shards).

        Row ``i`` of ``index`` must be ``chunks[i]``, stored under id ``str(i)``
        and embedded as :meth:`index` would (this encoder's document vectors of
        ``titled_text(chunk, use_title)``), so searching gives the hits
        :meth:`index` would.  Nothing is encoded; returns self.
        """
        chunks = list(chunks)
        if len(index) != len(chunks):
            raise ValueError(f"the index holds {len(index)} vectors for {len(chunks)} chunks")
        if index.metric != "ip":
            raise ValueError(f"a dense retriever scores by inner product; the index uses metric {index.metric!r}")
        self._chunks = chunks
        self._index = index if chunks else None
        return self

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.check_search(queries, k)
        if not queries:
            return []
        if self._index is None:
            return [[] for _ in queries]
        qvecs = self._embed(list(queries), "query")
        return [
            [Hit(self._chunks[int(i)], score, rank) for rank, (i, score) in enumerate(row)]
            for row in self._index.search(qvecs, k)
        ]

    def rank_candidates(self, queries: Sequence[str], candidates: Sequence[Sequence[Chunk]], k: int) -> list[list[Hit]]:
        """Rank each query's own candidate chunks, without an index over the corpus.

        The candidates of all queries are embedded together (one encoder call
        for those the cache lacks, each distinct text once), so a second stage
        over a first stage's top hits encodes only those hits.  Ties keep the
        candidates' given order.
        """
        if isinstance(queries, str):
            raise ValueError("rank_candidates takes a sequence of queries, not one string")
        if len(queries) != len(candidates):
            raise ValueError(f"got {len(queries)} queries for {len(candidates)} candidate lists")
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        texts = list(dict.fromkeys(titled_text(c, self.use_title) for group in candidates for c in group))
        if not texts:
            return [[] for _ in queries]
        row_of = {t: i for i, t in enumerate(texts)}
        doc_vecs = self._embed(texts, "doc")
        query_vecs = self._embed(list(queries), "query")
        results = []
        for qvec, group in zip(query_vecs, candidates):
            if not group:
                results.append([])
                continue
            rows = np.fromiter((row_of[titled_text(c, self.use_title)] for c in group), dtype=np.int64, count=len(group))
            scores = doc_vecs[rows] @ qvec
            order = top_k_indices(scores, k)
            results.append([Hit(group[i], float(scores[i]), rank) for rank, i in enumerate(order)])
        return results

"""The retriever contract, checked where a retriever's output enters ctxcomp (plugins are code we did not write).

Every caller indexes and searches through :class:`Checked`, so a ``search`` that returns a wrong shape stops
the command with one line naming the class, the query's position and the rule, before any bad record is
written (a run directory is left to resume once the plugin is fixed).  FAISS checks shapes once, at its
boundary; this is that boundary for retrievers and encoders.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from core.errors import PluginError
from indexes.types import Chunk
from retrievers.base import Hit, Retriever


def class_path(obj: Any) -> str:
    """``module:Class`` of ``obj``'s class: the name a config gives a plugin."""
    cls = type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


def _broken(retriever: Any, where: str, rule: str) -> PluginError:
    return PluginError(f"retriever {class_path(retriever)} broke the retriever contract at {where}: {rule} "
                       "(docs/plugins.md)")


def check_results(retriever: Any, queries: Sequence[str], k: int, results: Any,
                  corpus: dict[str, Chunk]) -> list[list[Hit]]:
    """``results`` of ``retriever.search(queries, k)`` when they keep the contract, else a ``PluginError``.

    The rules: a list with one list per query; at most ``k`` hits in each; each a ``Hit`` of a chunk of the
    indexed ``corpus`` (by ``chunk_id``) with a finite float score; ranks 0, 1, 2, ... and scores not
    increasing with rank.
    """
    n = len(queries)
    if not isinstance(results, list):
        raise _broken(retriever, "the whole result", f"search must return a list (one list of hits per query), "
                      f"got {type(results).__name__}")
    for q, hits in enumerate(results[:n]):
        where = f"query {q} of {n}"
        if isinstance(hits, Hit):
            raise _broken(retriever, where, "expected a list of hits for each query, got a Hit (a flat list of "
                          "hits? return one list per query)")
        if not isinstance(hits, list):
            raise _broken(retriever, where, f"expected a list of hits for each query, got {type(hits).__name__}")
        if len(hits) > k:
            raise _broken(retriever, where, f"{len(hits)} hits for k={k}; at most k")
        previous = math.inf
        for rank, hit in enumerate(hits):
            at = f"{where}, hit {rank}"
            if not isinstance(hit, Hit):
                raise _broken(retriever, at, f"expected Hit(chunk, score, rank), got {type(hit).__name__} "
                              f"{str(hit)[:40]}")
            chunk_id = getattr(hit.chunk, "chunk_id", None)
            indexed = corpus.get(chunk_id) if isinstance(chunk_id, str) else None
            if indexed is None or (indexed is not hit.chunk and indexed != hit.chunk):  # most hits hold the object
                raise _broken(retriever, at, f"its chunk {chunk_id!r} is not one of the {len(corpus)} indexed chunks")
            if not isinstance(hit.score, float) or not math.isfinite(hit.score):
                raise _broken(retriever, at, f"score must be a finite float, got {hit.score!r}")
            if hit.rank != rank:
                raise _broken(retriever, at, f"rank is {hit.rank!r}; ranks count 0, 1, 2, ... in list order")
            if hit.score > previous:
                raise _broken(retriever, at, f"score {hit.score:g} is above rank {rank - 1}'s {previous:g}; "
                              "scores must not increase with rank (best first)")
            previous = hit.score
    if len(results) != n:
        raise _broken(retriever, f"query {min(len(results), n)} of {n}",
                      f"search returned {len(results)} lists for {n} queries; one list per query")
    return results


class Checked:
    """A retriever indexed over ``chunks`` whose every ``search`` is checked against the contract.

    Build it with :meth:`index` (indexes and checks that ``index`` returned the retriever itself), or
    directly over a retriever indexed another way (embedding shards).
    """

    def __init__(self, retriever: Retriever, chunks: Sequence[Chunk]) -> None:
        self.retriever = retriever
        self.corpus = {c.chunk_id: c for c in chunks}

    @classmethod
    def index(cls, retriever: Retriever, chunks: Sequence[Chunk]) -> Checked:
        returned = retriever.index(chunks)
        if returned is not retriever:
            raise _broken(retriever, "index", f"index must return the retriever itself (self), got "
                          f"{type(returned).__name__}")
        return cls(retriever, chunks)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """``retriever.search(queries, k)``, checked."""
        return check_results(self.retriever, queries, k, self.retriever.search(queries, k), self.corpus)


def check_vectors(encoder: Any, vectors: Any, n: int) -> np.ndarray:
    """An encoder's output for ``n`` texts as float32 ``(n, d)`` when it is a finite floating array of that
    shape, else a ``PluginError`` naming the encoder's class and the rule."""
    name = f"encoder {class_path(encoder)} ({getattr(encoder, 'model_id', '?')})"
    if not isinstance(vectors, np.ndarray):
        raise PluginError(f"{name} returned {type(vectors).__name__}; it must return a numpy array of shape "
                          f"(n, d), float32 (docs/plugins.md)")
    if vectors.ndim != 2 or len(vectors) != n or vectors.shape[1] == 0:
        raise PluginError(f"{name} returned shape {vectors.shape} for {n} texts; it must return shape ({n}, d)")
    if not np.issubdtype(vectors.dtype, np.floating):
        raise PluginError(f"{name} returned dtype {vectors.dtype}; it must return float32")
    vectors = vectors.astype(np.float32, copy=False)
    if not np.isfinite(vectors).all():
        row = int(np.flatnonzero(~np.isfinite(vectors).all(axis=1))[0])
        raise PluginError(f"{name} returned a non-finite value in row {row} of {n}; vectors must be finite")
    return vectors

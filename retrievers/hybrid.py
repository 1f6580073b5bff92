"""Hybrid retrieval: reciprocal-rank fusion (RRF) of two or more retrievers.

RRF (Cormack, Clarke and Büttcher, SIGIR 2009) scores a document by
``sum_i w_i / (k_rrf + rank_i)`` over the rankings that contain it, ``rank_i``
1-based; ``k_rrf = 60`` is the paper's constant.  It needs no score
calibration between a sparse and a dense retriever, only their ranks, which is
why it is the usual way to combine BM25 with an embedding model.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import NonNegativeFloat, PositiveInt

from core.checks import Nested
from core.errors import ParamError
from core.registry import ComponentSpec, SpecLike
from indexes.types import Chunk
from retrievers.base import Hit, Retriever
from retrievers.registry import RETRIEVERS, make_retriever

DEFAULT_PARTS = ("bm25", "minilm")


def rrf_scores(rankings: Sequence[Sequence[int]], weights: Sequence[float], k_rrf: float) -> dict[int, float]:
    """Fused score per item: ``sum_i weights[i] / (k_rrf + rank)`` over the rankings (best first) holding it."""
    fused: dict[int, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k_rrf + rank)
    return fused


class HybridRetriever(Retriever):
    """Fuse the rankings of ``retrievers`` (default BM25 and MiniLM) by reciprocal rank.

    Each part ranks the whole corpus ``max(k, depth)`` deep, so a chunk one
    part puts just past ``k`` can still rise on the other's vote.  Ties in the
    fused score go to the chunk earlier in the corpus.
    """

    color = "#17becf"

    nested = {"retrievers": Nested(RETRIEVERS, many=True)}
    calls_model = False  # its stages decide

    def __init__(
        self,
        retrievers: Sequence[SpecLike] = DEFAULT_PARTS,
        k_rrf: NonNegativeFloat = 60,
        weights: Sequence[NonNegativeFloat] | None = None,
        depth: PositiveInt = 100,
    ) -> None:
        if isinstance(retrievers, (str, Mapping)) or len(retrievers) < 2:
            raise ParamError(f"hybrid: retrievers must list at least two retrievers, got {retrievers!r}")
        if weights is None:
            weights = [1.0] * len(retrievers)
        if len(weights) != len(retrievers):
            raise ParamError(f"hybrid: weights must be {len(retrievers)} numbers >= 0, one per retriever, got {weights!r}")
        self.parts: list[Retriever] = [
            make_retriever(ComponentSpec.parse(spec, f"hybrid: retrievers[{i}]")) for i, spec in enumerate(retrievers)
        ]
        self.k_rrf = float(k_rrf)
        self.weights = [float(w) for w in weights]
        self.depth = depth
        self._chunks: list[Chunk] = []
        self._position: dict[Chunk, int] = {}

    @property
    def identity(self) -> str:
        parts = ",".join(f"{p.identity}*{w:g}" for p, w in zip(self.parts, self.weights))
        return f"hybrid(rrf(k={self.k_rrf:g}),depth={self.depth},[{parts}])"

    @property
    def label(self) -> str:
        return "hybrid(" + "+".join(p.label for p in self.parts) + ")"

    def components(self) -> list[Retriever]:
        return list(self.parts)

    def index(self, chunks: Sequence[Chunk]) -> HybridRetriever:
        self._chunks = list(chunks)
        self._position = {}
        for i, chunk in enumerate(self._chunks):
            self._position.setdefault(chunk, i)
        for part in self.parts:
            part.index(self._chunks)
        return self

    def _positions(self, hits: Sequence[Hit]) -> list[int]:
        try:
            return [self._position[h.chunk] for h in hits]
        except KeyError as err:
            raise ValueError(f"a part of the hybrid returned a chunk it was not given: {err}") from None

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.check_search(queries, k)
        if not queries:
            return []
        depth = max(k, self.depth)
        per_part = [part.search(queries, depth) for part in self.parts]
        results = []
        for q in range(len(queries)):
            fused = rrf_scores([self._positions(hits[q]) for hits in per_part], self.weights, self.k_rrf)
            best = sorted(fused, key=lambda i: (-fused[i], i))[:k]
            results.append([Hit(self._chunks[i], fused[i], rank) for rank, i in enumerate(best)])
        return results

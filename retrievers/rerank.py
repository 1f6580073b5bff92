"""Two-stage retrieval: a cheap first stage picks candidates, a second stage orders only those.

The usual retrieve-then-rerank pipeline: BM25 over the whole corpus, then a
dense model that sees only BM25's top ``depth`` chunks per query.  The dense
model never embeds the rest of the corpus, so it can serve a corpus too big
to embed whole; recall is bounded by the first stage's recall at ``depth``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pydantic import PositiveInt

from core.checks import Nested
from core.registry import ComponentSpec, SpecLike
from indexes.types import Chunk
from retrievers.base import Hit, Retriever
from retrievers.registry import RETRIEVERS, make_retriever


@runtime_checkable
class CandidateRanker(Protocol):
    """A retriever that can rank given candidates per query without indexing a corpus (dense retrievers do)."""

    def rank_candidates(self, queries: Sequence[str], candidates: Sequence[Sequence[Chunk]], k: int) -> list[list[Hit]]: ...


class RerankRetriever(Retriever):
    """``first`` ranks the corpus, ``second`` re-ranks the first's top ``max(depth, k)`` per query.

    A second stage with ``rank_candidates`` (every dense retriever) embeds the
    candidates of a whole batch of queries at once, each distinct chunk once
    and cached ones not at all; any other retriever indexes each query's
    candidates on their own and searches them.
    """

    color = "#bcbd22"

    nested = {"first": Nested(RETRIEVERS), "second": Nested(RETRIEVERS)}
    calls_model = False  # its stages decide

    def __init__(self, first: SpecLike = "bm25", depth: PositiveInt = 100, second: SpecLike = "minilm") -> None:
        self.first: Retriever = make_retriever(ComponentSpec.parse(first, "rerank: first"))
        self.second: Retriever = make_retriever(ComponentSpec.parse(second, "rerank: second"))
        self.depth = depth

    @property
    def identity(self) -> str:
        return f"rerank({self.first.identity}@{self.depth}->{self.second.identity})"

    @property
    def label(self) -> str:
        return f"{self.first.label}>{self.second.label}@{self.depth}"

    def components(self) -> list[Retriever]:
        return [self.first, self.second]

    def index(self, chunks: Sequence[Chunk]) -> RerankRetriever:
        self.first.index(chunks)
        return self

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.check_search(queries, k)
        if not queries:
            return []
        candidates = [[h.chunk for h in hits] for hits in self.first.search(queries, max(self.depth, k))]
        if isinstance(self.second, CandidateRanker):
            return self.second.rank_candidates(queries, candidates, k)
        return [self.second.index(group).search([query], k)[0] if group else []
                for query, group in zip(queries, candidates)]

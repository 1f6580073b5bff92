"""What a dry run needs of a retriever without calling its model: a stand-in that ranks, and rankings kept.

``experiments.run.estimate`` builds the grid's compressors with these: :class:`LongestFirst` where the
retriever calls a model (what it keeps is then an upper bound), :class:`Remembered` and
:class:`RememberedChunker` where grid points share an example's split and ranking, so each is made once.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from indexes.types import Chunk
from retrievers.base import Hit, Retriever
from retrievers.contract import Checked


class LongestFirst(Retriever):
    """Stands in for a retriever that calls a model: ranks units by their length in the reader's tokens,
    longest first, so what a compressor keeps is the most it could keep."""

    calls_model = False

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count
        self._ranked: list[Hit] = []

    @property
    def identity(self) -> str:
        return "longest-first"

    def index(self, chunks: Sequence[Chunk]) -> "LongestFirst":
        sized = sorted(((self._count(c.text), i, c) for i, c in enumerate(chunks)), key=lambda t: (-t[0], t[1]))
        self._ranked = [Hit(c, float(n), rank) for rank, (n, _, c) in enumerate(sized)]
        return self

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.check_search(queries, k)
        return [list(self._ranked[:k]) for _ in queries]


class Remembered(Retriever):
    """A retriever that calls no model, its rankings kept: grid points that differ only in what they keep of a
    ranking, or in which order (``top_n``, a budget, ``order``), rank one example's units once."""

    calls_model = False

    def __init__(self, inner: Retriever, rankings: dict[Any, list[Hit]]) -> None:
        self.inner, self.rankings = inner, rankings
        self._chunks: list[Chunk] = []
        self._key: Any = None
        self._indexed: Any = None

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def label(self) -> str:
        return self.inner.label

    def index(self, chunks: Sequence[Chunk]) -> "Remembered":
        self._chunks = list(chunks)
        self._key = (self.inner.identity, tuple((c.chunk_id, c.title, c.text) for c in self._chunks))
        return self

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.check_search(queries, k)
        out = []
        for query in queries:
            ranked = self.rankings.get((self._key, query))
            if ranked is None or (len(ranked) < k and len(ranked) < len(self._chunks)):
                if self._indexed != self._key:  # the questions of one document share its index
                    self._checked = Checked.index(self.inner, self._chunks)  # the plugin's own output, checked
                    self._indexed = self._key
                ranked = self.rankings[(self._key, query)] = self._checked.search([query], k)[0]
            out.append(ranked[:k])
        return out


class RememberedChunker:
    """A chunker whose splits are kept, by its settings (its ``repr``), the text and the document id."""

    def __init__(self, inner: Any, kept: dict[Any, Any]) -> None:
        self.inner, self.kept = inner, kept

    def split(self, text: str, doc_id: str = "doc") -> list[Chunk]:
        key = ("split", repr(self.inner), doc_id, text)
        if key not in self.kept:
            self.kept[key] = self.inner.split(text, doc_id=doc_id)
        return list(self.kept[key])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


__all__ = ["LongestFirst", "Remembered", "RememberedChunker"]

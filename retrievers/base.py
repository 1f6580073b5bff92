"""The retriever contract: index chunks once, then search batches of queries."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Sequence

from core.style import class_colour
from indexes.types import Chunk

# colours for retrievers whose class names none: tab20's that no built-in retriever or compressor takes, so a
# plugin's line never wears a built-in's colour
PLUGIN_PALETTE = ("#aec7e8", "#98df8a", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5")


@dataclass(frozen=True)
class Hit:
    chunk: Chunk
    score: float
    rank: int  # 0-based position in the ranked list


def titled_text(chunk: Chunk, use_title: bool = True) -> str:
    """What a retriever indexes for ``chunk``: ``title + " " + text`` when it has a title and titles are on.

    An open-domain question often names what the title names (BM25 recall@1 on NQ-Open rises from 0.66 to
    0.78, docs/retrieval.md), so every built-in retriever indexes titles this way; plugins should too.
    """
    return f"{chunk.title} {chunk.text}" if use_title and chunk.title else chunk.text


class Retriever(ABC):
    """Index a set of chunks, then return ranked hits per query.

    ``search`` returns a list (one per query) of at most ``k`` hits, best
    first; fewer when the index holds fewer chunks.  Never pads with -1.
    ``calls_model``: False for a retriever whose own code calls no model or API
    (BM25; a hybrid or rerank, whose stages decide), so a dry run may run it.
    ``color``: the colour of a plot's line that names this retriever (:meth:`colour`).
    """

    calls_model: ClassVar[bool] = True
    color: ClassVar[str | None] = None

    @classmethod
    def colour(cls) -> str:
        """Its lines' colour in every plot: the class's own ``color`` (a subclass is another retriever, so it
        does not inherit its parent's), else a :data:`PLUGIN_PALETTE` colour fixed by its import path."""
        return vars(cls).get("color") or class_colour(cls, PLUGIN_PALETTE)

    @property
    def identity(self) -> str:
        """Names the model and settings that change scores (cache keys, reports)."""
        return type(self).__name__

    @property
    def label(self) -> str:
        """A short name for report rows; plugins default to their identity."""
        return self.identity

    def components(self) -> list["Retriever"]:
        """The retrievers this one combines (hybrid, rerank); none for a plain retriever."""
        return []

    def encoded_texts(self) -> int:
        """Texts this retriever and those inside it sent to an encoder so far (0 for lexical ones); lets a
        dry run show that a grid embeds each unique text once."""
        return int(getattr(self, "texts_encoded", 0)) + sum(r.encoded_texts() for r in self.components())

    def warm_up(self) -> None:
        """Load what loads lazily (an encoder's model), so no timing of the first query counts the loading."""
        for inner in self.components():
            inner.warm_up()

    def encoder_work(self) -> dict[str, float]:
        """Encoder work so far, this retriever and those inside it: ``calls`` (encoder batches), ``texts``
        encoded, ``hits`` (texts the embedding cache served), ``encode_s`` (time encoding), ``cached_s`` (the
        encoding time recorded for the cache-served texts), ``lookup_s`` (time reading the cache).  Zeros for
        lexical retrievers; a compressor reports the difference over one example."""
        own = {"calls": getattr(self, "encoder_calls", 0), "texts": getattr(self, "texts_encoded", 0),
               "hits": getattr(self, "texts_from_cache", 0), "encode_s": getattr(self, "encode_s", 0.0),
               "cached_s": getattr(self, "cached_encode_s", 0.0), "lookup_s": getattr(self, "lookup_s", 0.0)}
        for inner in self.components():
            for key, value in inner.encoder_work().items():
                own[key] += value
        return own

    @abstractmethod
    def index(self, chunks: Sequence[Chunk]) -> "Retriever":
        """Replace the indexed corpus with ``chunks``; returns self."""

    @abstractmethod
    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Ranked hits for each query, in query order."""

    @staticmethod
    def check_search(queries: Sequence[str], k: int) -> None:
        """The checks every ``search`` makes at its boundary: a batch of queries (not one string) and k > 0."""
        if isinstance(queries, str):
            raise ValueError("search takes a sequence of queries, not one string")
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")

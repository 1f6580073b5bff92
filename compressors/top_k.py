"""Keep the first k passages of a multi-document item, in the order they come.

The open-domain protocol hands each question the ranking of a corpus-wide
retriever as its passages; this compressor cuts that ranking at k, so one
grid over k gives the reader-accuracy-vs-k curve with every other setting
fixed.  The trace keeps the whole ranking with its scores.
"""
from __future__ import annotations

from pydantic import PositiveInt

from compressors.base import CompressedContext, Compressible, CompressionError, Compressor
from indexes.types import render_passage
from readers.base import Tokenizer


class TopKPassages(Compressor):
    """The first ``k`` passages (all of them when there are fewer), rendered as title line + text."""

    def __init__(self, k: PositiveInt, separator: str = "\n\n", tokenizer: Tokenizer | None = None) -> None:
        super().__init__(tokenizer)
        self.k, self.separator = k, separator

    @property
    def identity(self) -> str:
        return f"top_k(k={self.k},sep={self.separator!r})"

    @property
    def label(self) -> str:
        return f"top-{self.k}"

    def compress(self, item: Compressible) -> CompressedContext:
        passages = tuple(item.passages)
        if not passages:
            raise CompressionError(f"example {item.id!r}: top_k needs an item with passages (a ranked list)")
        kept = passages[: self.k]
        text = self.separator.join(render_passage(p) for p in kept)
        return CompressedContext(
            text=text,
            kept_chunks=tuple(p.doc_id for p in kept),
            scores=tuple(p.score if p.score is not None else float("nan") for p in kept),
            passages=kept,
            tokens_in=self.count_tokens(item.context),
            tokens_out=self.count_tokens(text),
            trace={"k": self.k, "ranking": [[p.doc_id, p.score] for p in passages]},
        )

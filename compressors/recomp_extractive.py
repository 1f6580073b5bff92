"""RECOMP's extractive compressor (Xu, Shi and Choi, ICLR 2024, arXiv 2310.04408): the context's sentences scored
against the query by a dual encoder, the best ones kept.

The published compressors are Contriever models fine-tuned to score a sentence by how much it helps the reader
answer: ``fangyuan/nq_extractive_compressor`` (default), ``fangyuan/tqa_extractive_compressor`` and
``fangyuan/hotpotqa_extractive_compressor``; a sentence and the query are each the mean of the encoder's last
hidden states, scored by inner product.  The defaults are FlashRAG's for its RECOMP refiner (the top 5 sentences,
inputs cut at 256 tokens).  Any other dual encoder is a ``retriever`` section (``minilm`` runs offline).

It is retrieval over sentences, so it is :class:`RetrievalCompressor` with a sentence per unit: the same budget
rule (sentences kept in score order while they fit: ``guaranteed``), the same orders, and the same embedding
cache, which is what scores a sentence once: every budget and reader of a grid re-uses its vector.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pydantic import PositiveInt

from compressors.base import CompressedContext, Compressible
from compressors.retrieval import Order, RetrievalCompressor
from compressors.spans import merge_spans
from core.checks import Nested
from core.errors import ParamError
from core.registry import SpecLike
from readers.base import Tokenizer
from retrievers.registry import RETRIEVERS

DEFAULT_MODEL = "fangyuan/nq_extractive_compressor"
OTHER_MODELS = ("fangyuan/tqa_extractive_compressor", "fangyuan/hotpotqa_extractive_compressor")
DEFAULT_TOP_N = 5
MAX_LENGTH = 256


class RecompExtractiveCompressor(RetrievalCompressor):
    """Keep the ``top_n`` sentences (or as many as a budget holds) a RECOMP dual encoder scores best for the query.

    Parameters
    ----------
    model: a Hugging Face id or a local folder of a Contriever-style encoder (mean pooling); default the
        published NQ compressor.
    retriever: instead of ``model``, any retriever section that scores the sentences (``minilm``,
        ``{name: sentence-transformers, params: {model: ...}}``).
    top_n: sentences kept (default 5); with a budget, a cap only when given.
    token_budget: keep sentences in score order while they fit this many reader tokens.
    order: ``score`` (best first, as FlashRAG's refiner) or ``document``.
    separator: placed between kept sentences (a space: the sentences read as one passage).
    device: where the default encoder runs.
    """

    nested = {"retriever": Nested(RETRIEVERS)}

    def __init__(
        self,
        model: str | Path | None = None,
        retriever: SpecLike | None = None,
        top_n: PositiveInt | None = None,
        token_budget: PositiveInt | None = None,
        order: Order = "score",
        separator: str = " ",
        device: str = "auto",
        tokenizer: Tokenizer | None = None,
    ) -> None:
        if model is not None and retriever is not None:
            raise ParamError("recomp_extractive: give model or retriever, not both")
        self.model = None if retriever is not None else str(model or DEFAULT_MODEL)
        encoder = retriever if retriever is not None else {
            "name": "contriever", "params": {"model": self.model, "max_length": MAX_LENGTH, "device": device,
                                             "use_title": False}}
        given = top_n
        top_n = top_n if top_n is not None or token_budget is not None else DEFAULT_TOP_N
        super().__init__(retriever=encoder, chunker="sentences", chunk_size=1, top_n=top_n, token_budget=token_budget,
                         order=order, separator=separator, unit="chunk", tokenizer=tokenizer)
        self.top_n_given = given  # under a budget axis only a given top_n caps the count, as in retrieval

    @property
    def identity(self) -> str:
        # The compression cache keys on the identity and the budget: the default top_n's part is named, so a
        # budget's compression made while the default still capped it (before 2026-12-06) is never served.
        default = ",top_n=default-without-budget" if self.top_n_given is None else ""
        return "recomp_extractive:" + super().identity + default

    def _label(self, top_n: int | None, token_budget: int | None) -> str:
        encoder = self.model or getattr(self.retriever, "label", None) or self.retriever.identity
        amount = f"top{top_n}" if top_n is not None else "any"
        if token_budget is not None:
            amount += f", <={token_budget} tokens"
        return f"recomp_extractive({encoder}, {amount} sentences, order={self.order})"

    def compress(self, item: Compressible, budget: int | None = None) -> CompressedContext:
        out = super().compress(item, budget)
        where = {chunk.chunk_id: (chunk.start, chunk.end) for chunk in self._units(item)[0]}
        return replace(out, kept_spans=merge_spans([where[c] for c in out.kept_chunks], item.context))

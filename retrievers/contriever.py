"""Contriever-family encoders (facebook/contriever, -msmarco, mcontriever): BERT + mean pooling.

Contriever embeds a text as the mean of its last hidden states over the
attention mask (Izacard et al., 2021); queries and documents share one
encoder.  LongBench's retrieval scripts use ``facebook/mcontriever`` this way.
Vectors are L2-normalised here so that the dense retriever's inner product is
cosine similarity, as in LongBench.  A titled chunk is embedded as
``title + " " + text``, the passage form Contriever's own embedding script uses
(``use_title=False`` embeds the text alone).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import PositiveInt

from core.devices import resolve_device
from indexes.cache import EmbeddingCache
from retrievers.dense import DenseRetriever, encode_sorted


def mean_pool(hidden: Any, mask: Any) -> Any:
    """Mean of ``hidden`` (b, t, d) over positions where ``mask`` (b, t) is 1."""
    mask = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)


class ContrieverEncoder:
    """A Hugging Face ``AutoModel`` with mean pooling; ``model`` is a hub id or a local path."""

    def __init__(
        self, model: str = "facebook/contriever", *, device: str = "auto", batch_size: int = 32, max_length: int = 512
    ) -> None:
        self.model = str(model)
        # names the cache entries: a non-default max_length truncates long chunks differently
        self.model_id = self.model if max_length == 512 else f"{self.model}:max_length={max_length}"
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self._model: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        if self._model is not None:
            return
        from transformers import AutoModel, AutoTokenizer

        self.device = resolve_device(self.device)
        self._tokenizer = AutoTokenizer.from_pretrained(self.model)
        self._model = AutoModel.from_pretrained(self.model).to(self.device).eval()

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        import torch

        batch = self._tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        ).to(self.device)
        with torch.inference_mode():
            hidden = self._model(**batch).last_hidden_state
            pooled = mean_pool(hidden, batch["attention_mask"])
        return pooled.float().cpu().numpy()

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        self._load()
        return encode_sorted(texts, self.batch_size, self._encode_batch)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode_documents(texts)


class ContrieverRetriever(DenseRetriever):
    """Dense retrieval with a Contriever-family model (default ``facebook/contriever``)."""

    default_model = "facebook/contriever"

    def __init__(
        self,
        *,
        model: str | None = None,
        device: str = "auto",
        batch_size: PositiveInt = 32,
        max_length: PositiveInt = 512,
        index_kind: str = "flat",
        cache: EmbeddingCache | None = None,
        use_cache: bool = True,
        use_title: bool = True,
    ) -> None:
        encoder = ContrieverEncoder(
            model or self.default_model, device=device, batch_size=batch_size, max_length=max_length
        )
        super().__init__(encoder, index_kind=index_kind, cache=cache, use_cache=use_cache, use_title=use_title)


class ContrieverMSMarcoRetriever(ContrieverRetriever):
    """Contriever fine-tuned on MS MARCO (Lost in the Middle's distractor retriever)."""

    default_model = "facebook/contriever-msmarco"


class MContrieverRetriever(ContrieverRetriever):
    """Multilingual Contriever, as LongBench's retrieval scripts use it."""

    default_model = "facebook/mcontriever"

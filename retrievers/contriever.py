"""Contriever-family encoders (facebook/contriever, -msmarco, mcontriever): BERT + mean pooling.

Contriever embeds a text as the mean of its last hidden states over the
attention mask (Izacard et al., 2021); queries and documents share one
encoder.  LongBench's retrieval scripts use ``facebook/mcontriever`` this way.
The encoder is sentence-transformers' own ``Transformer`` and mean ``Pooling``
modules (``retrievers.sentence_transformers``), and vectors are L2-normalised
so the dense retriever's inner product is cosine similarity, as in LongBench.
A titled chunk is embedded as ``title + " " + text``, the passage form
Contriever's own embedding script uses (``use_title=False`` embeds the text alone).
"""
from __future__ import annotations

from pydantic import PositiveInt

from core.devices import resolve_device
from indexes.cache import EmbeddingCache
from retrievers.dense import DenseRetriever
from retrievers.sentence_transformers import GPU_BATCH_FACTOR, Precision, SentenceTransformerEncoder

DEFAULT_MAX_LENGTH = 512
CPU_BATCH_SIZE = 32


def contriever_encoder(model: str, *, device: str = "auto", batch_size: int | None = None,
                       max_length: int = DEFAULT_MAX_LENGTH, dtype: Precision = "auto") -> SentenceTransformerEncoder:
    """A Hugging Face encoder with mean pooling; ``model`` is a hub id or a local path.

    Its cache id is the model name alone at the default ``max_length`` (a shorter one truncates long chunks
    differently, so it is named), so embeddings cached under that name stay valid.
    ``batch_size=None``: 32 texts on a CPU (512-token passages), :data:`GPU_BATCH_FACTOR` times that on a GPU.
    """
    model_id = model if max_length == DEFAULT_MAX_LENGTH else f"{model}:max_length={max_length}"
    gpu = resolve_device(device).startswith("cuda")
    batch = batch_size if batch_size is not None else CPU_BATCH_SIZE * (GPU_BATCH_FACTOR if gpu else 1)
    return SentenceTransformerEncoder(model, device=device, batch_size=batch, max_length=max_length,
                                      model_id=model_id, mean_pooling=True, dtype=dtype)


class ContrieverRetriever(DenseRetriever):
    """Dense retrieval with a Contriever-family model (default ``facebook/contriever``)."""

    color = "#8c564b"

    default_model = "facebook/contriever"

    def __init__(
        self,
        *,
        model: str | None = None,
        device: str = "auto",
        batch_size: PositiveInt | None = None,
        max_length: PositiveInt = DEFAULT_MAX_LENGTH,
        index_kind: str = "flat",
        cache: EmbeddingCache | None = None,
        use_cache: bool = True,
        use_title: bool = True,
        dtype: Precision = "auto",
    ) -> None:
        encoder = contriever_encoder(model or self.default_model, device=device, batch_size=batch_size,
                                     max_length=max_length, dtype=dtype)
        super().__init__(encoder, index_kind=index_kind, cache=cache, use_cache=use_cache, use_title=use_title)


class ContrieverMSMarcoRetriever(ContrieverRetriever):
    """Contriever fine-tuned on MS MARCO (Lost in the Middle's distractor retriever)."""

    color = "#c49c94"

    default_model = "facebook/contriever-msmarco"


class MContrieverRetriever(ContrieverRetriever):
    """Multilingual Contriever, as LongBench's retrieval scripts use it."""

    color = "#c5b0d5"

    default_model = "facebook/mcontriever"

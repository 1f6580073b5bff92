"""The Hugging Face models a compressor runs itself (a causal LM, a seq2seq summarizer), loaded once per process.

A grid builds one compressor per budget and reader, and a run may hold several compressors on the same LM
(LLMLingua, LongLLMLingua, Selective Context): they share one copy of the weights through this cache.
"""
from __future__ import annotations

import threading
from typing import Any, Literal

from core.errors import UserError

_models: dict[tuple[str, str, str, str], tuple[Any, Any]] = {}
_models_lock = threading.Lock()


def load_model(kind: Literal["causal", "seq2seq"], model: str, device: str, dtype: str, *,
               what: str) -> tuple[Any, Any]:
    """(model in eval mode on ``device``, tokenizer) for a hub id or local folder, loaded once per process for each
    (kind, model, device, dtype); a model that cannot be loaded is a ``UserError`` naming ``what`` and the id (the
    hub's own message, offline, does not say which model it looked for)."""
    key = (kind, model, device, dtype)
    with _models_lock:
        if key not in _models:
            from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

            from readers.hf_model import resolve_dtype

            auto = AutoModelForCausalLM if kind == "causal" else AutoModelForSeq2SeqLM
            try:
                tokenizer = AutoTokenizer.from_pretrained(model)
                lm = auto.from_pretrained(model, dtype=resolve_dtype(dtype, device)).to(device).eval()
            except OSError as err:
                raise UserError(f"{what}: could not load the model {model!r}: {err}") from None
            _models[key] = (lm, tokenizer)
        return _models[key]


__all__ = ["load_model"]

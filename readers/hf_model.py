"""What the Hugging Face reader reads off a ``transformers`` model, apart from running it: the keyword names its
signatures use (:class:`ModelKeywords`), its memory per token and the batch that fits, and the dtype to load.

Kept apart from ``readers.hf`` so that a compressor loading its own LM (``compressors.longllmlingua``) uses the same
rules without the reader.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Sequence

# The names a KV cache has gone by in transformers' signatures, newest first.
CACHE_KEYWORDS = ("cache", "past_key_values")
# ``logits_to_keep`` (``num_logits_to_keep`` before transformers 4.50): logits of the last positions only.
LOGITS_KEYWORDS = ("logits_to_keep", "num_logits_to_keep")


def _parameters(fn: Any) -> Any:
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def _first_named(fn: Any, names: Sequence[str]) -> str | None:
    params = _parameters(fn)
    return next((name for name in names if name in params), None)


@dataclass(frozen=True)
class ModelKeywords:
    """The keywords one loaded model takes, read from its signatures once.

    ``forward_cache``: the forward's KV-cache parameter (the prefill calls the forward with it);
    ``generate_cache``: the one ``generate`` hands on to the forward, which is what
    ``prepare_inputs_for_generation`` names (``generate`` validates its model kwargs against that signature);
    ``logits_to_keep``: the forward's parameter that computes the last position's logits only;
    ``cache_takes_config``: whether ``DynamicCache`` is built from the model's config.
    None where the model has no such parameter.
    """

    forward_cache: str | None
    generate_cache: str | None
    logits_to_keep: str | None
    cache_takes_config: bool

    @classmethod
    def of(cls, model: Any) -> ModelKeywords:
        from transformers import DynamicCache

        forward = _first_named(model.forward, CACHE_KEYWORDS)
        prepare = getattr(model, "prepare_inputs_for_generation", None)
        return cls(forward_cache=forward,
                   generate_cache=(_first_named(prepare, CACHE_KEYWORDS) if prepare is not None else None) or forward,
                   logits_to_keep=_first_named(model.forward, LOGITS_KEYWORDS),
                   cache_takes_config="config" in _parameters(DynamicCache.__init__))


def default_prefill_apart(device: str) -> bool:
    """Prefill each prompt alone on a CPU (its attention keeps the causal fast path only without a mask); on an
    accelerator the padded batch prefilled together is the fast one (docs/readers.md, "On a GPU")."""
    return device.split(":")[0] == "cpu"


def kv_bytes_per_token(config: Any, dtype_bytes: int) -> int:
    """Bytes one token's keys and values take across all layers (grouped-query heads counted once)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    return 2 * text.num_hidden_layers * kv_heads * head_dim * dtype_bytes


def activation_bytes_per_token(config: Any, dtype_bytes: int) -> int:
    """Transient bytes one token of a padded prefill takes inside one layer: the residual stream, the attention's
    query and output, and the MLP's gate and up projections (one layer at a time, so not times the layers)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    intermediate = getattr(text, "intermediate_size", None) or 4 * text.hidden_size
    return (4 * text.hidden_size + 3 * intermediate) * dtype_bytes


# Share of the free GPU memory (after the weights are loaded) that the default ``batch_tokens`` may fill: the
# rest is headroom for the allocator's fragmentation, the logits and whatever else shares the card.
GPU_MEMORY_SHARE = 0.5


def default_batch_tokens(config: Any, dtype_bytes: int, free_bytes: int, *, share: float = GPU_MEMORY_SHARE) -> int:
    """Padded tokens (prompts plus new tokens, over a batch) that fit ``share`` of ``free_bytes``: each costs
    its KV cache and, while the batch is prefilled, its activations."""
    per_token = kv_bytes_per_token(config, dtype_bytes) + activation_bytes_per_token(config, dtype_bytes)
    return max(1, int(free_bytes * share) // per_token)




def resolve_dtype(dtype: Any, device: str) -> Any:
    """``auto``: bfloat16 on GPU, float32 on CPU (CPU half precision is slow and lossy)."""
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, dtype) if isinstance(dtype, str) else dtype


__all__ = ["CACHE_KEYWORDS", "GPU_MEMORY_SHARE", "LOGITS_KEYWORDS", "ModelKeywords", "activation_bytes_per_token",
           "default_batch_tokens", "default_prefill_apart", "kv_bytes_per_token", "resolve_dtype"]

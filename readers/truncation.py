"""The one truncation of ctxcomp, in a tokenizer's tokens, and cutting outputs at stop strings.

Readers cut over-long prompts with it and the ``truncate`` compressor cuts
contexts with it, so "keep M tokens" means the same thing everywhere.

Policies:

- ``middle``: LongBench's rule, from ``pred.py``::

      if len(tokenized_prompt) > max_length:
          half = int(max_length / 2)
          prompt = decode(tokenized_prompt[:half]) + decode(tokenized_prompt[-half:])

  so an odd budget keeps ``2 * (M // 2)`` tokens, one fewer than ``M``, and
  the two halves are decoded separately and joined.  The instruction at both
  ends of a LongBench prompt survives; the middle of the context is dropped.
  (For ``M = 1`` the reference's ``[-0:]`` would keep everything; we keep nothing.)
- ``left``: drop tokens from the start (keep the end, where the question is).
- ``right``: drop tokens from the end (keep the start).
- ``none``: never truncate; the model sees the whole prompt.
"""
from __future__ import annotations

from typing import Sequence

from core.errors import ParamError
from readers.base import Tokenizer, TruncationPolicy

POLICIES: tuple[str, ...] = ("middle", "left", "right", "none")


def check_policy(policy: str) -> TruncationPolicy:
    if policy not in POLICIES:
        raise ParamError(f"unknown truncation policy {policy!r}; expected one of {', '.join(POLICIES)}")
    return policy  # type: ignore[return-value]


def middle_half(max_tokens: int) -> int:
    """Tokens kept at each end by LongBench's middle truncation: ``int(max_tokens / 2)``."""
    return max_tokens // 2


def truncate_ids(ids: Sequence[int], max_tokens: int, policy: TruncationPolicy) -> list[int]:
    """Return ``ids`` cut to at most ``max_tokens`` by ``policy`` (unchanged when it fits)."""
    check_policy(policy)
    ids = list(ids)
    if policy == "none" or len(ids) <= max_tokens:
        return ids
    if max_tokens <= 0:
        return []
    if policy == "middle":
        half = middle_half(max_tokens)
        return ids[:half] + ids[len(ids) - half :] if half else []
    if policy == "left":
        return ids[len(ids) - max_tokens :]
    return ids[:max_tokens]


def truncate_text(text: str, tokenizer: Tokenizer, max_tokens: int, policy: TruncationPolicy) -> tuple[str, bool]:
    """Truncate ``text`` to ``max_tokens`` tokens of ``tokenizer``; return (text, whether it was cut).

    Text that fits is returned verbatim (no encode/decode round trip); a
    middle cut decodes the two halves separately, as LongBench does.
    """
    check_policy(policy)
    if max_tokens < 0:
        raise ParamError(f"max_tokens must be >= 0, got {max_tokens}")
    if policy == "none":
        return text, False
    ids = tokenizer.encode(text)
    if len(ids) <= max_tokens:
        return text, False
    if policy == "middle":
        half = middle_half(max_tokens)
        if not half:
            return "", True
        return tokenizer.decode(ids[:half]) + tokenizer.decode(ids[len(ids) - half :]), True
    return tokenizer.decode(truncate_ids(ids, max_tokens, policy)), True


def prompt_budget(max_context: int, max_new_tokens: int) -> int:
    """Tokens left for the prompt once room for the answer is reserved."""
    budget = max_context - max_new_tokens
    if budget <= 0:
        raise ParamError(f"max_new_tokens={max_new_tokens} leaves no room for a prompt in max_context={max_context}")
    return budget


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """Cut ``text`` at the earliest occurrence of any stop string (which is not kept)."""
    cut = len(text)
    for s in stop:
        if s:
            pos = text.find(s)
            if pos != -1:
                cut = min(cut, pos)
    return text[:cut]

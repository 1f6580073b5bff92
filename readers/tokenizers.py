"""Tokenizers behind truncation and token accounting, all speaking the ``readers.base.Tokenizer`` protocol.

Readers count and truncate in their *own* model's tokens, so a budget of 3,500
tokens means the same thing to the truncation code and to the model.  When no
model tokenizer is available, :class:`WordTokenizer` is the one counting rule
(LongBench words; every CJK ideograph is a word).
"""
from __future__ import annotations

import os
import threading
from typing import Any, Sequence

from core.errors import ParamError
from core.text import end_pieces, word_pieces


class WordTokenizer:
    """LongBench words as tokens: the counting rule of every reader without a model tokenizer.

    A token is one word (a run of word characters, or one CJK ideograph) with
    the spaces and punctuation that follow it (``core.text.word_pieces``),
    so ``decode(encode(text)) == text`` and truncation keeps text verbatim.
    A 10,000-character Chinese text is 10,000 tokens here, not the handful of
    whitespace-separated runs it would be by ``str.split``.
    """

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._pieces: list[str] = []
        self._lock = threading.Lock()

    def encode(self, text: str) -> list[int]:
        return self._ids_of(word_pieces(text))

    def end_ids(self, text: str, head: int, tail: int) -> tuple[list[int], list[int]]:
        """``encode(text)[:head]`` and its last ``tail`` ids, without cutting the middle into words (what a middle
        truncation reads)."""
        first, last = end_pieces(text, head, tail)
        return self._ids_of(first), self._ids_of(last)

    def _ids_of(self, pieces: list[str]) -> list[int]:
        out = []
        for piece in pieces:
            idx = self._ids.get(piece)
            if idx is None:
                with self._lock:
                    idx = self._ids.get(piece)
                    if idx is None:
                        idx = self._ids[piece] = len(self._pieces)
                        self._pieces.append(piece)
            out.append(idx)
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self._pieces[i] for i in ids)

    def __repr__(self) -> str:
        return "WordTokenizer()"


class HFTokenizer:
    """A Hugging Face tokenizer (a hub id, a local folder, or an already loaded object).

    Special tokens are not added on encode: truncation works on the raw prompt
    and the model adds its own BOS when it tokenizes for generation.
    """

    def __init__(self, name_or_path: Any, **kwargs: Any) -> None:
        if isinstance(name_or_path, str | os.PathLike):
            from transformers import AutoTokenizer

            self.name = str(name_or_path)
            try:
                self.hf = AutoTokenizer.from_pretrained(self.name, **kwargs)
            except OSError as err:  # no network, a gated repo, a typo: the user's to fix, not a bug
                first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                raise ParamError(f"cannot load the tokenizer {self.name!r}: {first} (give a local folder, or "
                                 f"download it first on a machine with network)") from err
        else:
            self.hf = name_or_path
            self.name = getattr(name_or_path, "name_or_path", type(name_or_path).__name__)

    def encode(self, text: str) -> list[int]:
        return list(self.hf.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def __repr__(self) -> str:
        return f"HFTokenizer({self.name!r})"


class TiktokenTokenizer:
    """An OpenAI BPE via tiktoken, by encoding name (``cl100k_base``) or model name (``gpt-4o``).

    tiktoken downloads encoding files on first use; offline it needs them in
    ``TIKTOKEN_CACHE_DIR`` (copy the cache folder from a machine with network).
    """

    def __init__(self, encoding_or_model: str = "cl100k_base") -> None:
        import tiktoken

        self.name = encoding_or_model
        try:
            self.enc = tiktoken.get_encoding(encoding_or_model)
        except ValueError:
            self.enc = tiktoken.encoding_for_model(encoding_or_model)

    def encode(self, text: str) -> list[int]:
        return self.enc.encode(text, disallowed_special=())

    def decode(self, ids: Sequence[int]) -> str:
        return self.enc.decode(list(ids))

    def __repr__(self) -> str:
        return f"TiktokenTokenizer({self.name!r})"


def load_tokenizer(spec: Any) -> Any:
    """Turn a config value into a tokenizer.

    ``None`` or ``"words"`` -> :class:`WordTokenizer`;
    ``"tiktoken:<encoding or model>"`` -> :class:`TiktokenTokenizer`;
    any other string -> :class:`HFTokenizer` (hub id or local folder);
    an object with ``encode``/``decode`` is returned as is.
    """
    if spec is None or spec == "words":
        return WordTokenizer()
    if isinstance(spec, str | os.PathLike):
        spec = str(spec)
        if spec.startswith("tiktoken:"):
            return TiktokenTokenizer(spec.removeprefix("tiktoken:"))
        return HFTokenizer(spec)
    if hasattr(spec, "encode") and hasattr(spec, "decode"):
        return spec
    raise ParamError(f"cannot make a tokenizer from {spec!r}: give a name, a path or an object with encode/decode")

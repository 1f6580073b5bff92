"""Truncation to a token budget: the simplest compressor and the usual baseline.

It uses the project's one truncation (``readers.truncation``): LongBench's
middle rule (keep ``M // 2`` tokens at each end), or keep the start / the end.
The budget is in the reader's tokens (the runner injects the reader's
tokenizer); without one, in LongBench words (every CJK character a word), and
then the kept text is a verbatim prefix and suffix of the context.
"""
from __future__ import annotations

from typing import Literal

from pydantic import PositiveInt

from compressors.base import CompressedContext, Compressible, Compressor
from readers.base import Tokenizer
from readers.truncation import truncate_text

Policy = Literal["middle", "left", "right"]


class TruncateCompressor(Compressor):
    """Keep at most ``max_tokens`` of the context, cutting the side ``policy`` names.

    ``policy`` names the side that is cut, as Hugging Face's ``truncation_side``
    does: ``middle`` keeps both ends (LongBench), ``left`` keeps the end,
    ``right`` keeps the start.  Titled passages of multi-document items are not
    kept as units (``passages`` is empty).
    """

    def __init__(self, max_tokens: PositiveInt, policy: Policy = "middle", tokenizer: Tokenizer | None = None) -> None:
        super().__init__(tokenizer)
        self.max_tokens = max_tokens
        self.policy = policy

    @property
    def identity(self) -> str:
        return f"truncate(max_tokens={self.max_tokens},policy={self.policy})"

    @property
    def label(self) -> str:
        return f"truncate({self.max_tokens}, {self.policy})"

    def compress(self, item: Compressible) -> CompressedContext:
        text, cut = truncate_text(item.context, self.tokenizer, self.max_tokens, self.policy)  # type: ignore[arg-type]
        return CompressedContext(
            text=text,
            tokens_in=self.count_tokens(item.context),
            tokens_out=self.count_tokens(text),
            trace={"policy": self.policy, "max_tokens": self.max_tokens, "truncated": cut},
        )

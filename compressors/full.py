"""The full-context baseline: the reader sees the context exactly as published."""
from __future__ import annotations

from compressors.base import CompressedContext, Compressible, Compressor


class FullContext(Compressor):
    """No compression; the reference point every compressed run is compared with.

    Over-long prompts are still cut by the reader's own truncation (LongBench's
    middle truncation), not here, so the full baseline matches the papers.
    """

    calls_model = False
    color, marker, reference = "black", "*", True

    @property
    def label(self) -> str:
        return "full"

    def compress(self, item: Compressible) -> CompressedContext:
        tokens = self.count_tokens(item.context)
        return CompressedContext(
            text=item.context,
            passages=tuple(item.passages),
            tokens_in=tokens,
            tokens_out=tokens,
            kept_spans=((0, len(item.context)),) if item.context else (),
        )

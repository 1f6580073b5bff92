"""A model-free summarizer for tests of what summaries cost: the first words of the text it is asked to summarize.

It keeps within the request's ``max_new_tokens`` (its tokens are LongBench words), so a test can check the dry
run's bound on summaries against a real summarize run without loading a model.
"""
from __future__ import annotations

from collections.abc import Sequence

from readers.base import Generation, GenerationRequest, Reader
from readers.tokenizers import WordTokenizer


class FirstWords(Reader):
    """Summarizes the ``Text:`` block of a summarize prompt by its first ``max_new_tokens`` words."""

    max_context = 10**9
    truncation = "none"

    def __init__(self) -> None:
        self.tokenizer = WordTokenizer()

    @property
    def identity(self) -> str:
        return "first-words:v1"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for req in requests:
            text = req.prompt.split("Text:\n", 1)[-1].split("\n\n", 1)[0]
            ids = self.tokenizer.encode(text)[: req.max_new_tokens]
            summary = self.tokenizer.decode(ids).strip()
            out.append(Generation(text=summary, tokens_in=self.count_tokens(req.prompt),
                                  tokens_out=len(ids), latency_s=0.0))
        return out

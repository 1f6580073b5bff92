"""RECOMP's abstractive compressor (Xu, Shi and Choi, ICLR 2024, arXiv 2310.04408): a T5 summarizer, conditioned
on the query, writes what the reader should know; it may write nothing ("selective augmentation": the reader
then gets no context).

The published compressors are T5-large models distilled from GPT-3.5 summaries: ``fangyuan/nq_abstractive_compressor``
(default), ``fangyuan/tqa_abstractive_compressor`` and ``fangyuan/hotpotqa_abstractive``.  Their input is the
training script's (``train_hf_summarization_model.py`` in github.com/carriex/recomp):
``"Question: {question}\\n Document: {documents}\\n Summary: "``, cut at 1,024 tokens; the summary is decoded
greedily up to 512 tokens (the README's ``max_target_length``).  Any seq2seq model loads the same way.

The summary is a rewrite, so there are no kept spans (``kept_spans = None``).  With a budget the summary's
length is capped at that many summarizer tokens (``best_effort``: the reader's tokenizer may count a few more;
requested and achieved tokens are in the trace).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import PositiveInt

from compressors.base import BudgetSupport, CompressedContext, Compressible, CompressionError, Compressor, ModelWork
from compressors.models import load_model
from readers.base import Tokenizer

DEFAULT_MODEL = "fangyuan/nq_abstractive_compressor"
OTHER_MODELS = ("fangyuan/tqa_abstractive_compressor", "fangyuan/hotpotqa_abstractive")
TEMPLATE = "Question: {question}\n Document: {documents}\n Summary: "

def _load(model: str, device: str, dtype: str) -> tuple[Any, Any]:
    """(seq2seq model, tokenizer), once per process for each (model, device, dtype)."""
    return load_model("seq2seq", model, device, dtype, what="recomp_abstractive")


class RecompAbstractiveCompressor(Compressor):
    """Replace the context by a query-conditioned summary from a RECOMP T5 compressor (or nothing).

    Parameters
    ----------
    model: a Hugging Face id or a local folder of a seq2seq model (default the published NQ compressor).
    max_input_tokens: the input is cut here (1,024, as in training).
    max_new_tokens: the longest summary (512); a budget caps it lower.
    num_beams: 1 decodes greedily.
    device, dtype: where and how the model runs.
    """

    budget_support: ClassVar[BudgetSupport] = "best_effort"

    def __init__(
        self,
        model: str | Path = DEFAULT_MODEL,
        max_input_tokens: PositiveInt = 1024,
        max_new_tokens: PositiveInt = 512,
        num_beams: PositiveInt = 1,
        device: str = "auto",
        dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto",
        tokenizer: Tokenizer | None = None,
    ) -> None:
        super().__init__(tokenizer)
        self.model = str(model)
        self.max_input_tokens, self.max_new_tokens, self.num_beams = max_input_tokens, max_new_tokens, num_beams
        self.device, self.dtype = device, dtype
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        return (f"recomp_abstractive(model={self.model},dtype={self.dtype},in={self.max_input_tokens},"
                f"out={self.max_new_tokens},beams={self.num_beams})")

    @property
    def label(self) -> str:
        return f"recomp_abstractive({self.model})"

    def _model(self) -> tuple[Any, Any]:
        from core.devices import resolve_device

        return _load(self.model, resolve_device(self.device), self.dtype)

    def warm_up(self) -> None:
        with self._lock:
            self._model()

    def compress(self, item: Compressible, budget: int | None = None) -> CompressedContext:
        if not item.query or not item.query.strip():
            raise CompressionError(f"example {item.id!r}: RECOMP's summary is conditioned on the question; the query is empty")
        import torch

        prompt = TEMPLATE.format(question=item.query, documents=item.context)
        limit = min(self.max_new_tokens, budget) if budget is not None else self.max_new_tokens
        with self._lock:
            lm, tokenizer = self._model()
            start = time.perf_counter()
            inputs = tokenizer(prompt, max_length=self.max_input_tokens, truncation=True, return_tensors="pt").to(lm.device)
            with torch.no_grad():
                ids = lm.generate(**inputs, max_new_tokens=limit, num_beams=self.num_beams, do_sample=False)[0]
            elapsed = time.perf_counter() - start
        summary = tokenizer.decode(ids, skip_special_tokens=True).strip()
        tokens_in, tokens_out = self.count_tokens(item.context), self.count_tokens(summary)
        read, written = int(inputs["input_ids"].shape[1]), int((ids != tokenizer.pad_token_id).sum())
        trace = {"summary": summary, "model": self.model, "empty_summary": not summary,  # selective augmentation
                 "input_cut": read >= self.max_input_tokens, "summarizer_tokens_out": written,
                 "requested_tokens": budget, "achieved_tokens": tokens_out}
        if budget is not None:
            trace["over_budget"] = tokens_out > budget
        work = ModelWork(calls=1, tokens_in=read, tokens_out=written, model_s=elapsed)
        return CompressedContext(text=summary, tokens_in=tokens_in, tokens_out=tokens_out, trace=trace, budget=budget,
                                 work=work, kept_spans=None)

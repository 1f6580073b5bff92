"""The original LLMLingua (Jiang, Wu, Lin, Yang and Qiu, EMNLP 2023, arXiv 2310.05736): question-agnostic,
coarse-to-fine prompt compression by a small causal LM's perplexity, through the ``llmlingua`` package.

A budget controller first keeps the documents the LM finds most informative (the coarse level: each document
ranked by its perplexity, no question), while they fit the budget plus a slack; then an iterative token-level
pass, window by window of 200 LM tokens, drops the tokens with the least information, each window conditioned on
what the earlier windows kept.  These are ``PromptCompressor.compress_prompt``'s defaults (``rank_method=
"llmlingua"``, ``condition_in_question="none"``, documents in their order, no dynamic ratio), so this is
:class:`LongLLMLinguaCompressor` with those settings and no question: the same offline adapter (the model loaded
here, the reader's tokenizer for the counts, the key/value cache converted), the same ranking cache (the key
names the rank method, so the two never share an entry), and any causal LM (default the packaged SmolLM2).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, PositiveInt

from compressors.base import Compressible
from compressors.longllmlingua import CONTEXT_BUDGET, LongLLMLinguaCompressor
from core.registry import SpecLike
from readers.base import Tokenizer

# LLMLingua's settings: the package's defaults, said out loud so a change of default cannot change the method
SETTINGS = {"question": "", "rank_method": "llmlingua", "condition_in_question": "none", "condition_compare": False,
            "reorder_context": "original", "dynamic_context_compression_ratio": 0.0}


class LLMLinguaCompressor(LongLLMLinguaCompressor):
    """Prune the context's tokens with LLMLingua, question-agnostic, keeping about ``rate`` of them or
    ``target_token`` of them; the parameters are LongLLMLingua's less its question-aware ones."""

    color, marker = "#ff9896", "d"  # LongLLMLingua's hue, lighter: the same family in every plot
    method: ClassVar[str] = "llmlingua"

    needs_query: ClassVar[bool] = False

    def __init__(
        self,
        rate: Annotated[float, Field(gt=0, le=1)] | None = None,
        target_token: PositiveInt | None = None,
        model: str | Path | None = None,
        device: str = "auto",
        dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto",
        chunker: SpecLike = "longbench",
        chunk_size: PositiveInt = 200,
        context_budget: Annotated[str, Field(pattern=CONTEXT_BUDGET.pattern)] = "+100",
        use_cache: bool = True,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        super().__init__(rate=rate, target_token=target_token, model=model, device=device, dtype=dtype,
                         chunker=chunker, chunk_size=chunk_size, reorder="original", dynamic_ratio=0.0,
                         context_budget=context_budget, use_cache=use_cache, tokenizer=tokenizer)

    def settings(self, item: Compressible) -> dict[str, Any]:
        return dict(SETTINGS)

    def _question_settings(self) -> str:
        return ""

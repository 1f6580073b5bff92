"""Token-level compression: LongLLMLingua (Jiang et al., 2023, arXiv 2310.06839) through the ``llmlingua`` package.

A small causal LM reads the context with the question and drops the tokens it
finds least informative.  LongLLMLingua is the question-aware, coarse-to-fine
form: documents are ranked by how well each predicts the question
(``rank_method="longllmlingua"``), kept while they fit the budget, reordered
best first, and each is then pruned token by token, the better-ranked ones
less (``dynamic_context_compression_ratio``), with token scores conditioned on
the question (``condition_in_question="after_condition"``,
``condition_compare=True``).  The settings are those the package's README
gives for LongLLMLingua.

Why an adapter around ``llmlingua.PromptCompressor`` (version 0.2.2):

- its ``__init__`` calls ``tiktoken.encoding_for_model("gpt-3.5-turbo")``, which
  downloads ``cl100k_base`` (not shipped with tiktoken) only to count GPT-3.5
  tokens for its statistics, and it loads models with ``trust_remote_code=True``.
  We skip that ``__init__``, load the model ourselves, and give it the reader's
  tokenizer to count with, so its statistics are in the reader's tokens;
- it passes the key/value cache around as a list of (key, value) pairs, while
  transformers 5 returns a ``Cache`` object whose iteration yields triples
  (``ValueError: too many values to unpack``); :class:`_PairCacheModel`
  converts at the model call.

The LM's tokenizer must round-trip text (``decode(encode(x)) == x``, as byte
BPE tokenizers do): llmlingua asserts it where the question meets the context.
"""
from __future__ import annotations

import importlib.util
import re
import threading
import time
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, PositiveInt

from compressors.base import BudgetSupport, CompressedContext, Compressible, CompressionError, Compressor, ModelWork
from compressors.retrieval import split_context
from core.checks import Nested
from core.errors import ParamError, UserError
from core.progress import progress_note
from core.registry import ComponentSpec, SpecLike
from indexes.chunking import CHUNKERS, make_chunker
from indexes.types import render_passage
from readers.base import Tokenizer

REQUIREMENT = "llmlingua==0.2.2"  # the adapter below leans on this version's internals
CONTEXT_BUDGET = re.compile(r"^[+\-*]\s*\d+(\.\d+)?$")
DEFAULT_RATE = 0.5
# LongLLMLingua's documented settings (the package README's example)
SETTINGS = {
    "rank_method": "longllmlingua",
    "condition_in_question": "after_condition",
    "condition_compare": True,
}

_models: dict[tuple[str, str, str], tuple[Any, Any]] = {}
_models_lock = threading.Lock()


def _load(model: str, device: str, dtype: str) -> tuple[Any, Any]:
    """(model, tokenizer), loaded once per process for each (path, device, dtype)."""
    key = (model, device, dtype)
    with _models_lock:
        if key not in _models:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from readers.hf import resolve_dtype

            tokenizer = AutoTokenizer.from_pretrained(model)
            lm = AutoModelForCausalLM.from_pretrained(model, dtype=resolve_dtype(dtype, device)).to(device).eval()
            tokenizer.padding_side = "left"  # as llmlingua's own loader sets it
            if tokenizer.pad_token_id is None:
                tokenizer.pad_token_id = getattr(lm.config, "pad_token_id", None) or tokenizer.eos_token_id
            _models[key] = (lm, tokenizer)
        return _models[key]


class _PairCacheModel:
    """Calls a causal LM with the (key, value)-pair cache format llmlingua 0.2.2 was written for."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, input_ids: Any, attention_mask: Any = None, past_key_values: Any = None, use_cache: bool = True) -> Any:
        from transformers import Cache, DynamicCache

        if past_key_values is not None and not isinstance(past_key_values, Cache):
            pairs = [(k, v) for k, v in past_key_values]
            legacy = getattr(DynamicCache, "from_legacy_cache", None)  # transformers 4; gone in 5
            past_key_values = legacy(pairs) if legacy is not None else DynamicCache(pairs)
        out = self.model(input_ids, attention_mask=attention_mask, past_key_values=past_key_values, use_cache=use_cache)
        if isinstance(out.past_key_values, Cache):
            out.past_key_values = [(layer[0], layer[1]) for layer in out.past_key_values]
        return out


def _prompt_compressor(model: Any, tokenizer: Any, device: str, counter: Tokenizer) -> Any:
    """A ``PromptCompressor`` in the state its ``__init__`` and ``load_model`` leave it, minus the download."""
    from llmlingua import PromptCompressor

    pc = PromptCompressor.__new__(PromptCompressor)
    pc.__dict__.update(
        model_name=str(getattr(model, "name_or_path", "")), use_llmlingua2=False, retrieval_model=None,
        retrieval_model_name=None, open_api_config={}, cache_bos_num=10, prefix_bos_num=100,
        oai_tokenizer=counter, tokenizer=tokenizer, model=_PairCacheModel(model), device=device,
        context_idxs=[], max_position_embeddings=model.config.max_position_embeddings,
    )
    return pc


class LLMLinguaCompressor(Compressor):
    """Prune the context's tokens with LongLLMLingua, keeping about ``rate`` of them or ``target_token`` of them.

    Parameters
    ----------
    rate: share of the context's tokens to keep, in (0, 1] (default 0.5), in
        the LM's tokens, which is what llmlingua controls.
    target_token: instead, a budget in ``count_tokens`` units (the reader's
        tokens), turned into the same share of the LM's tokens; a context
        already within it is returned unchanged.  llmlingua aims at the budget
        but often lands over it (``trace.over_budget`` says so); nothing is
        cut afterwards.  A budget axis sets the same target per grid point
        (``budget_support = "best_effort"``: the runner records the overshoot).
    model: a local folder (or hub id) of the small causal LM; default the
        packaged SmolLM2-135M-Instruct converted by ``readers.smollm2``.
    device, dtype: where and how the LM runs (``auto``: GPU when there is one;
        bfloat16 there, float32 on CPU).
    chunker, chunk_size: how a context without titled passages is cut into
        the documents LongLLMLingua ranks (default LongBench's splitter, 200
        words); an item with passages uses each passage as a document.
    reorder: ``sort`` (best-ranked documents first, LongLLMLingua's setting),
        ``original`` or ``two_stage``.
    dynamic_ratio: how much more the worse-ranked documents are pruned (0.3).
    context_budget: slack of the document-level filter, an operator and a
        number applied to the LM-token target ("+100", "*1.2").
    """

    nested = {"chunker": Nested(CHUNKERS, injected=("size", "overlap"))}
    budget_support: ClassVar[BudgetSupport] = "best_effort"
    replaced_by_budget: ClassVar[tuple[str, ...]] = ("rate", "target_token")

    def __init__(
        self,
        rate: Annotated[float, Field(gt=0, le=1)] | None = None,
        target_token: PositiveInt | None = None,
        model: str | Path | None = None,
        device: str = "auto",
        dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto",
        chunker: SpecLike = "longbench",
        chunk_size: PositiveInt = 200,
        reorder: Literal["sort", "original", "two_stage"] = "sort",
        dynamic_ratio: Annotated[float, Field(ge=0, le=1)] = 0.3,
        context_budget: Annotated[str, Field(pattern=CONTEXT_BUDGET.pattern)] = "+100",
        tokenizer: Tokenizer | None = None,
    ) -> None:
        super().__init__(tokenizer)
        if importlib.util.find_spec("llmlingua") is None:
            raise UserError(f"the llmlingua compressor needs the package llmlingua: pip install {REQUIREMENT}")
        if rate is not None and target_token is not None:
            raise ParamError("llmlingua: give rate or target_token, not both")
        # context_budget: llmlingua evaluates "target_token" + context_budget with eval(), so its annotation lets
        # only an operator and a number through
        self.rate = float(rate) if rate is not None else (None if target_token is not None else DEFAULT_RATE)
        self.target_token = target_token
        self.model = str(model) if model is not None else None
        self.device, self.dtype = device, dtype
        self.chunk_size = chunk_size
        self.reorder, self.dynamic_ratio, self.context_budget = reorder, float(dynamic_ratio), context_budget
        self._chunker_spec = ComponentSpec.parse(chunker, "llmlingua: chunker")
        self._chunker = make_chunker(self._chunker_spec, chunk_size)
        self._compressor: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self.model or "smollm2-135m-instruct"

    @property
    def identity(self) -> str:
        amount = f"rate={self.rate:g}" if self.rate is not None else f"target_token={self.target_token}"
        return (f"llmlingua(longllmlingua,lm={self.model_id},dtype={self.dtype},{amount},reorder={self.reorder},"
                f"dynamic={self.dynamic_ratio:g},budget={self.context_budget},{self._chunker_spec.name}:{self.chunk_size})")

    @property
    def label(self) -> str:
        return f"llmlingua(rate={self.rate:g})" if self.rate is not None else f"llmlingua(<={self.target_token} tokens)"

    @property
    def line_label(self) -> str:
        return "llmlingua"

    def _prompt_compressor(self) -> Any:
        if self._compressor is None:
            from core.devices import resolve_device

            if self.model is None:
                from readers.smollm2 import converted_dir

                path = str(converted_dir()[0])
            else:
                path = self.model
            device = resolve_device(self.device)
            lm, lm_tokenizer = _load(path, device, self.dtype)
            self._compressor = _prompt_compressor(lm, lm_tokenizer, device, self.tokenizer)
        return self._compressor

    def warm_up(self) -> None:
        with self._lock:
            self._prompt_compressor()

    def _documents(self, item: Compressible) -> list[str]:
        passages = [p for p in (item.passages or ()) if p.text.strip()]
        if passages:
            return [render_passage(p) for p in passages]
        return [c.text.strip() for c in split_context(self._chunker, item)]

    def _run(self, pc: Any, item: Compressible, documents: list[str], target_lm: int) -> tuple[str, dict]:
        """One ``compress_prompt`` call at ``target_lm`` LM tokens; (pruned text, llmlingua's result)."""
        pc.context_idxs.clear()  # llmlingua appends each call's document ranking here
        try:
            result = pc.compress_prompt(
                documents, question=item.query, target_token=target_lm, reorder_context=self.reorder,
                dynamic_context_compression_ratio=self.dynamic_ratio, context_budget=self.context_budget,
                concate_question=False, **SETTINGS,
            )
        except AssertionError as err:  # llmlingua checks its inputs with assert
            raise CompressionError(f"example {item.id!r}: llmlingua refused the example: {err or 'an internal check failed'}") from None
        text = result["compressed_prompt"].strip()
        if not text:
            raise CompressionError(f"example {item.id!r}: llmlingua kept nothing of the context")
        return text, result

    def compress(self, item: Compressible, budget: int | None = None) -> CompressedContext:
        if not item.query or not item.query.strip():
            raise CompressionError(f"example {item.id!r}: LongLLMLingua ranks and prunes by the question; the query is empty")
        tokens_in = self.count_tokens(item.context)
        documents = self._documents(item)
        progress_note()(f"llmlingua: compressing example {item.id} ({len(documents)} documents)")
        joined = "\n\n".join(documents)
        target = budget if budget is not None else self.target_token
        if target is None:
            share = self.rate if self.rate is not None else DEFAULT_RATE
        else:
            share = target / max(self.count_tokens(joined), 1)
            if share >= 1:
                return CompressedContext(text=item.context, passages=tuple(item.passages), tokens_in=tokens_in,
                                         tokens_out=tokens_in, trace={"kept_text": item.context, "ratio": 1.0,
                                                                      "within_budget_already": True}, budget=budget)
        with self._lock:
            pc = self._prompt_compressor()
            start = time.perf_counter()
            lm_tokens = sum(pc.get_token_length(d, add_special_tokens=False) for d in documents)
            target_lm = max(1, round(share * lm_tokens))
            text, result = self._run(pc, item, documents, target_lm)
            elapsed = time.perf_counter() - start
            ranking = [int(i) for i in pc.context_idxs[-1]] if pc.context_idxs else []
            lm_tokens_out = pc.get_token_length(text, add_special_tokens=False)
        tokens_out = self.count_tokens(text)
        trace = {
            "kept_text": text,
            "ratio": tokens_in / tokens_out,
            "n_documents": len(documents),
            "ranking": ranking,  # document indices, best first, by LongLLMLingua's question-conditioned score
            "lm": self.model_id,
            "lm_tokens_in": lm_tokens,
            "lm_tokens_out": lm_tokens_out,
            "lm_target_tokens": target_lm,
            "llmlingua": {k: result[k] for k in ("origin_tokens", "compressed_tokens", "ratio", "rate") if k in result},
        }
        if target is not None:
            trace["over_budget"] = tokens_out > target
        return CompressedContext(text=text, tokens_in=tokens_in, tokens_out=tokens_out, trace=trace, budget=budget,
                                 work=ModelWork(calls=1, tokens_in=lm_tokens, model_s=elapsed))

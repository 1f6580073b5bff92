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

Scored once: the document ranking (one LM pass per document, conditioned on the question) does not depend on
the budget or on the reader, so :class:`RankingCache` keeps it per (scoring LM, versions, documents, question)
and every budget and reader of a grid re-uses it; the token-level pass conditions on what was kept so far and
runs per budget.  A slice of a longer pass is not bitwise the pass over the slice (the attention kernel splits
by sequence length), so nothing of the token-level pass is shared: outputs are byte for byte those of llmlingua
alone (``use_cache=False``).
"""
from __future__ import annotations

import functools
import importlib.util
import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, PositiveInt

from compressors.base import BudgetSupport, CompressedContext, Compressible, CompressionError, Compressor, ModelWork
from compressors.llmlingua_rankings import (
    CACHE_NAME,
    SCORER_PACKAGES,
    RankingCache,
    RankingLookup,
    ranking_key,
)
from compressors.models import load_model
from compressors.retrieval import split_context
from compressors.spans import align_kept_text
from core.checks import Nested
from core.errors import ParamError, UserError
from core.paths import cache_root
from core.progress import progress_note
from core.registry import ComponentSpec, SpecLike
from core.versions import versions_tag
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

def _load(model: str, device: str, dtype: str) -> tuple[Any, Any]:
    """(causal LM, tokenizer) as llmlingua's own loader prepares them: padding on the left, a pad token set."""
    lm, tokenizer = load_model("causal", model, device, dtype, what="llmlingua")
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token_id = getattr(lm.config, "pad_token_id", None) or tokenizer.eos_token_id
    return lm, tokenizer


_rankings: dict[Path, RankingCache] = {}
_rankings_lock = threading.Lock()


def shared_ranking_cache() -> RankingCache:
    """One ranking cache per cache directory, shared by every llmlingua compressor of the process (a grid builds
    one per budget and reader, and they must share it)."""
    directory = cache_root() / CACHE_NAME
    with _rankings_lock:
        if directory not in _rankings:
            _rankings[directory] = RankingCache(directory)
        return _rankings[directory]


class _PairCacheModel:
    """Calls a causal LM with the (key, value)-pair cache format llmlingua 0.2.2 was written for, under the cache
    keyword the model's forward names (``past_key_values`` through transformers 5.17, ``cache`` by 5.24)."""

    def __init__(self, model: Any) -> None:
        from readers.hf_model import ModelKeywords

        self.model = model
        self.cache_keyword = ModelKeywords.of(model).forward_cache or "past_key_values"

    def __call__(self, input_ids: Any, attention_mask: Any = None, past_key_values: Any = None, use_cache: bool = True) -> Any:
        from transformers import Cache, DynamicCache

        if past_key_values is not None and not isinstance(past_key_values, Cache):
            pairs = [(k, v) for k, v in past_key_values]
            legacy = getattr(DynamicCache, "from_legacy_cache", None)  # transformers 4; gone in 5
            past_key_values = legacy(pairs) if legacy is not None else DynamicCache(pairs)
        out = self.model(input_ids, attention_mask=attention_mask, use_cache=use_cache,
                         **{self.cache_keyword: past_key_values})
        cache = getattr(out, self.cache_keyword)
        if isinstance(cache, Cache):
            cache = [(layer[0], layer[1]) for layer in cache]
        return SimpleNamespace(logits=out.logits, past_key_values=cache)  # all llmlingua's causal-LM path reads


@functools.cache
def _ranking_once_class() -> type:
    """``PromptCompressor`` whose document ranking goes through a :class:`RankingCache` (``rankings``; None: as
    llmlingua alone); everything else, the token-level pass included, is llmlingua's own code."""
    from llmlingua import PromptCompressor

    class RankingOnceCompressor(PromptCompressor):
        rankings: RankingCache | None = None
        scorer = ""
        last_ranking: RankingLookup | None = None  # the lookup of the latest call, for its ModelWork

        def get_rank_results(self, context: list, question: str, rank_method: str, condition_in_question: str,
                             context_tokens_length: list) -> list:
            def score() -> list:
                return PromptCompressor.get_rank_results(self, context, question, rank_method, condition_in_question,
                                                         context_tokens_length)

            if self.rankings is None:
                return score()
            key = ranking_key(self.scorer, context, question, rank_method, condition_in_question)
            self.last_ranking = self.rankings.lookup(key, len(context), score)
            return list(self.last_ranking.order)  # control_context_budget reads the indices only

    return RankingOnceCompressor


def _prompt_compressor(model: Any, tokenizer: Any, device: str, counter: Tokenizer, scorer: str,
                       rankings: RankingCache | None) -> Any:
    """A ``PromptCompressor`` in the state its ``__init__`` and ``load_model`` leave it, minus the download, that
    ranks documents through ``rankings`` under the name ``scorer``."""
    cls = _ranking_once_class()
    pc = cls.__new__(cls)
    pc.__dict__.update(
        model_name=str(getattr(model, "name_or_path", "")), use_llmlingua2=False, retrieval_model=None,
        retrieval_model_name=None, open_api_config={}, cache_bos_num=10, prefix_bos_num=100,
        oai_tokenizer=counter, tokenizer=tokenizer, model=_PairCacheModel(model), device=device,
        context_idxs=[], max_position_embeddings=model.config.max_position_embeddings,
        scorer=scorer, rankings=rankings,
    )
    return pc


class LongLLMLinguaCompressor(Compressor):
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
    use_cache: rank the documents once per (LM, documents, question) and
        re-use the ranking for every budget and reader (:class:`RankingCache`;
        outputs are the same either way); False ranks afresh on every call,
        as llmlingua alone does.
    """

    nested = {"chunker": Nested(CHUNKERS, injected=("size", "overlap"))}
    budget_support: ClassVar[BudgetSupport] = "best_effort"
    color, marker = "#d62728", "D"
    method: ClassVar[str] = "longllmlingua"  # the name in identities and labels
    replaced_by_budget: ClassVar[tuple[str, ...]] = ("rate", "target_token")
    needs_query: ClassVar[bool] = True  # LongLLMLingua ranks and prunes by the question

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
        use_cache: bool = True,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        super().__init__(tokenizer)
        if importlib.util.find_spec("llmlingua") is None:
            raise UserError(f"the longllmlingua compressor needs the package llmlingua: pip install {REQUIREMENT}")
        if rate is not None and target_token is not None:
            raise ParamError("longllmlingua: give rate or target_token, not both")
        # context_budget: llmlingua evaluates "target_token" + context_budget with eval(), so its annotation lets
        # only an operator and a number through
        self.rate = float(rate) if rate is not None else (None if target_token is not None else DEFAULT_RATE)
        self.target_token = target_token
        self.model = str(model) if model is not None else None
        self.device, self.dtype = device, dtype
        self.chunk_size = chunk_size
        self.reorder, self.dynamic_ratio, self.context_budget = reorder, float(dynamic_ratio), context_budget
        self.use_cache = use_cache
        self._chunker_spec = ComponentSpec.parse(chunker, "longllmlingua: chunker")
        self._chunker = make_chunker(self._chunker_spec, chunk_size)
        self._compressor: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self.model or "smollm2-135m-instruct"

    def _question_settings(self) -> str:
        """The question-aware settings an identity names (LLMLingua, question-agnostic, has none)."""
        return f"reorder={self.reorder},dynamic={self.dynamic_ratio:g},"

    @property
    def identity(self) -> str:
        amount = f"rate={self.rate:g}" if self.rate is not None else f"target_token={self.target_token}"
        return (f"{self.method}(lm={self.model_id},dtype={self.dtype},{amount},{self._question_settings()}"
                f"budget={self.context_budget},{self._chunker_spec.name}:{self.chunk_size})")

    @property
    def label(self) -> str:
        return f"{self.method}(rate={self.rate:g})" if self.rate is not None else f"{self.method}(<={self.target_token} tokens)"

    @property
    def line_label(self) -> str:
        return self.method

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
            rankings = shared_ranking_cache() if self.use_cache else None
            self._compressor = _prompt_compressor(lm, lm_tokenizer, device, self.tokenizer, self.scorer(lm), rankings)
        return self._compressor

    def scorer(self, lm: Any) -> str:
        """What decides the LM's scores, for the ranking cache's key: the model (the packaged SmolLM2 by its file,
        so a key carries across machines; else the ``model`` given), its dtype, the device kind, the versions of
        llmlingua, torch and transformers."""
        if self.model is None:
            from readers.smollm2 import GGUF_NAME

            name = f"smollm2:{GGUF_NAME}"
        else:
            name = self.model
        return f"{name}|{lm.dtype}|{lm.device.type}|{versions_tag(SCORER_PACKAGES, own=False)}"

    def warm_up(self) -> None:
        with self._lock:
            self._prompt_compressor()

    def _documents(self, item: Compressible) -> list[str]:
        passages = [p for p in (item.passages or ()) if p.text.strip()]
        if passages:
            return [render_passage(p) for p in passages]
        return [c.text.strip() for c in split_context(self._chunker, item)]

    def settings(self, item: Compressible) -> dict[str, Any]:
        """What ``compress_prompt`` is given beside the documents and the target: LongLLMLingua's settings."""
        return {"question": item.query, "reorder_context": self.reorder,
                "dynamic_context_compression_ratio": self.dynamic_ratio, **SETTINGS}

    def _run(self, pc: Any, item: Compressible, documents: list[str], target_lm: int) -> tuple[str, dict]:
        """One ``compress_prompt`` call at ``target_lm`` LM tokens; (pruned text, llmlingua's result)."""
        pc.context_idxs.clear()  # llmlingua appends each call's document ranking here
        try:
            result = pc.compress_prompt(documents, target_token=target_lm, context_budget=self.context_budget,
                                        concate_question=False, **self.settings(item))
        except AssertionError as err:  # llmlingua checks its inputs with assert
            raise CompressionError(f"example {item.id!r}: llmlingua refused the example: {err or 'an internal check failed'}") from None
        text = result["compressed_prompt"].strip()
        if not text:
            raise CompressionError(f"example {item.id!r}: llmlingua kept nothing of the context")
        return text, result

    def compress(self, item: Compressible, budget: int | None = None) -> CompressedContext:
        if self.needs_query and (not item.query or not item.query.strip()):
            raise CompressionError(f"example {item.id!r}: LongLLMLingua ranks and prunes by the question; the query is empty")
        tokens_in = self.count_tokens(item.context)
        documents = self._documents(item)
        progress_note()(f"{self.line_label}: compressing example {item.id} ({len(documents)} documents)")
        joined = "\n\n".join(documents)
        target = budget if budget is not None else self.target_token
        if target is None:
            share = self.rate if self.rate is not None else DEFAULT_RATE
        else:
            share = target / max(self.count_tokens(joined), 1)
            if share >= 1:
                return CompressedContext(text=item.context, passages=tuple(item.passages), tokens_in=tokens_in,
                                         tokens_out=tokens_in, trace={"kept_text": item.context, "ratio": 1.0,
                                                                      "within_budget_already": True}, budget=budget,
                                         kept_spans=((0, len(item.context)),) if item.context else ())
        with self._lock:
            pc = self._prompt_compressor()
            start = time.perf_counter()
            lm_tokens = sum(pc.get_token_length(d, add_special_tokens=False) for d in documents)
            target_lm = max(1, round(share * lm_tokens))
            pc.last_ranking = None  # a single document is not ranked
            text, result = self._run(pc, item, documents, target_lm)
            elapsed = time.perf_counter() - start
            ranking = [int(i) for i in pc.context_idxs[-1]] if pc.context_idxs else []
            lookup: RankingLookup | None = pc.last_ranking
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
        if lookup is not None:
            trace["ranking_cached"] = lookup.cached
        if target is not None:
            trace["over_budget"] = tokens_out > target
        # a ranking the cache served counts at the LM time it took when made, so an arm's cost does not depend
        # on which budget or reader happened to run first
        recorded, served = (lookup.seconds, lookup.lookup_s) if lookup is not None and lookup.cached else (0.0, 0.0)
        work = ModelWork(calls=1, tokens_in=lm_tokens, model_s=elapsed - served + recorded, cached_model_s=recorded,
                         served_s=served)
        return CompressedContext(text=text, tokens_in=tokens_in, tokens_out=tokens_out, trace=trace, budget=budget,
                                 work=work, kept_spans=align_kept_text(item.context, text))

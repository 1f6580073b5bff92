"""LLMLingua-2 (Pan et al., Findings of ACL 2024, arXiv 2403.12968) through the ``llmlingua`` package.

A bidirectional encoder, distilled from GPT-4 compressions, labels each word keep or drop; the words whose keep
probability is above the percentile the rate asks for are kept, in order.  Question-agnostic and one pass.

The package's own ``PromptCompressor.compress_prompt_llmlingua2`` does the work, on a ``PromptCompressor`` built
as its ``__init__`` builds it minus two things that cannot run offline or safely:

- ``__init__`` loads ``tiktoken``'s GPT-3.5 encoding (a download) to weigh each word by its GPT-3.5 tokens when
  it sets the keep threshold and to read ``target_token``; here the reader's tokenizer does both, so ``rate`` and
  a budget are shares and counts of the reader's tokens (with cl100k_base the thresholds would differ a little);
- ``load_model`` passes ``trust_remote_code=True``; the encoder is loaded here without it.

The package picks its word rule (how subword tokens join into words) from the model's *name*
(``xlm-roberta-large`` or ``bert-base-multilingual-cased`` in it); a local folder is named anything, so the rule
is read from the model's config (``model_type``) and handed to the package under the name it looks for.

Scored once: the encoder's keep probabilities depend on the context alone, not on the rate, the budget or the
reader, so its forward passes are memoised per loaded model (keyed by the exact input ids and mask): every budget
of a grid after the first re-uses them, and the outputs are bitwise those of a fresh pass.
"""
from __future__ import annotations

import hashlib
import importlib.util
import threading
import time
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, ClassVar

from pydantic import Field, PositiveInt

from compressors.base import BudgetSupport, CompressedContext, Compressible, CompressionError, Compressor, ModelWork
from compressors.longllmlingua import REQUIREMENT
from compressors.spans import align_kept_text
from core.errors import ParamError, UserError
from readers.base import Tokenizer

DEFAULT_MODEL = "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"
OTHER_MODELS = ("microsoft/llmlingua-2-bert-base-multilingual-cased-meetingbank",)
DEFAULT_RATE = 0.5
# the package's word rule, chosen by these names in the model's name; the model's config says which applies
WORD_RULES = {"xlm-roberta": "xlm-roberta-large", "bert": "bert-base-multilingual-cased"}
MEMO_BATCHES = 256  # encoder batches kept per loaded model (50 chunks of 512 tokens' logits each at most)


class _MemoEncoder:
    """The token classifier, its forward passes memoised by their exact inputs (the keep probabilities of a
    context do not depend on the rate).  ``hits``, ``misses`` and ``recorded_s`` (the seconds the served passes
    took when they were made) count since the last ``reset``."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.config = model.config
        self._memo: OrderedDict[str, tuple[Any, float]] = OrderedDict()
        self.reset()

    def reset(self) -> None:
        self.hits = self.misses = 0
        self.recorded_s = 0.0

    def __call__(self, input_ids: Any, attention_mask: Any) -> SimpleNamespace:
        key = hashlib.sha256(input_ids.cpu().numpy().tobytes() + attention_mask.cpu().numpy().tobytes()).hexdigest()
        if key in self._memo:
            self._memo.move_to_end(key)
            logits, seconds = self._memo[key]
            self.hits += 1
            self.recorded_s += seconds
        else:
            start = time.perf_counter()
            logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
            seconds = time.perf_counter() - start
            self._memo[key] = (logits, seconds)
            while len(self._memo) > MEMO_BATCHES:
                self._memo.popitem(last=False)
            self.misses += 1
        return SimpleNamespace(loss=None, logits=logits)  # all the package's LLMLingua-2 path reads


_encoders: dict[tuple[str, str], tuple[_MemoEncoder, Any, str]] = {}
_encoders_lock = threading.Lock()


def word_rule(model_type: str, model: str) -> str:
    """The name under which the package applies the word rule of this kind of encoder."""
    if model_type not in WORD_RULES:
        raise UserError(f"llmlingua2: model {model!r} is a {model_type!r} encoder; LLMLingua-2's word rule is known "
                        f"for {' and '.join(WORD_RULES)} token classifiers only")
    return WORD_RULES[model_type]


def _load(model: str, device: str) -> tuple[_MemoEncoder, Any, str]:
    """(memoised encoder, tokenizer, word rule), loaded once per process for each (model, device).  The package
    adds its force-token placeholders to the tokenizer and grows the embeddings; that is done here, once, as its
    ``init_llmlingua2`` does it (same seed, same count), so every compressor sharing the model sees the same."""
    key = (model, device)
    with _encoders_lock:
        if key not in _encoders:
            import torch
            from llmlingua.utils import seed_everything
            from transformers import AutoModelForTokenClassification, AutoTokenizer

            try:
                tokenizer = AutoTokenizer.from_pretrained(model)
                encoder = AutoModelForTokenClassification.from_pretrained(model, dtype=torch.float32).to(device).eval()
            except OSError as err:
                raise UserError(f"llmlingua2: could not load the token classifier {model!r}: {err}") from None
            rule = word_rule(encoder.config.model_type, model)
            seed_everything(42)
            tokenizer.add_special_tokens({"additional_special_tokens": [f"[NEW{i}]" for i in range(100)]})
            encoder.resize_token_embeddings(len(tokenizer))
            _encoders[key] = (_MemoEncoder(encoder), tokenizer, rule)
        return _encoders[key]


def _prompt_compressor(encoder: _MemoEncoder, tokenizer: Any, rule: str, device: str, counter: Tokenizer,
                       max_batch_size: int) -> Any:
    """A ``PromptCompressor`` in the state ``__init__(use_llmlingua2=True)`` leaves it, with the reader's tokenizer
    where GPT-3.5's would be and the word rule's name where the model's would be."""
    from llmlingua import PromptCompressor

    pc = PromptCompressor.__new__(PromptCompressor)
    pc.__dict__.update(
        model_name=rule, use_llmlingua2=True, retrieval_model=None, retrieval_model_name=None, open_api_config={},
        cache_bos_num=10, prefix_bos_num=100, oai_tokenizer=counter, tokenizer=tokenizer, model=encoder,
        device=device, context_idxs=[], max_position_embeddings=encoder.config.max_position_embeddings,
        max_batch_size=max_batch_size, max_seq_len=512, max_force_token=100,
        special_tokens={v for k, v in tokenizer.special_tokens_map.items() if k != "additional_special_tokens"},
        added_tokens=[f"[NEW{i}]" for i in range(100)],
    )
    return pc


class LLMLingua2Compressor(Compressor):
    """Keep the words an LLMLingua-2 token classifier labels worth keeping, about ``rate`` of the context's tokens.

    Parameters
    ----------
    rate: share of the context's tokens to keep, in (0, 1] (default 0.5), in the reader's tokens (above).
    target_token: instead, a budget in the reader's tokens; a context already within it is returned unchanged.
        The package aims at it by a percentile of word probabilities, so it may land over or under
        (``budget_support = "best_effort"``: requested and achieved tokens are in the trace).
    model: a Hugging Face id or a local folder of an XLM-RoBERTa or BERT token classifier (default the published
        ``microsoft/llmlingua-2-xlm-roberta-large-meetingbank``).
    force_tokens: words always kept (the package's ``force_tokens``, e.g. ``["\\n", "?"]``), at most 100.
    force_reserve_digit: keep every word holding a digit.
    drop_consecutive: drop a force token repeated with nothing kept between.
    chunk_end_tokens: where the context may be cut into the encoder's 512-token windows.
    device: where the encoder runs (``auto``: GPU when there is one).
    max_batch_size: windows per encoder call.
    """

    budget_support: ClassVar[BudgetSupport] = "best_effort"
    replaced_by_budget: ClassVar[tuple[str, ...]] = ("rate", "target_token")

    def __init__(
        self,
        rate: Annotated[float, Field(gt=0, le=1)] | None = None,
        target_token: PositiveInt | None = None,
        model: str | Path = DEFAULT_MODEL,
        force_tokens: Annotated[list[str], Field(max_length=100)] | None = None,
        force_reserve_digit: bool = False,
        drop_consecutive: bool = False,
        chunk_end_tokens: tuple[str, ...] = (".", "\n"),
        device: str = "auto",
        max_batch_size: PositiveInt = 50,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        super().__init__(tokenizer)
        if importlib.util.find_spec("llmlingua") is None:
            raise UserError(f"the llmlingua2 compressor needs the package llmlingua: pip install {REQUIREMENT}")
        if rate is not None and target_token is not None:
            raise ParamError("llmlingua2: give rate or target_token, not both")
        self.rate = float(rate) if rate is not None else (None if target_token is not None else DEFAULT_RATE)
        self.target_token = target_token
        self.model = str(model)
        self.force_tokens = list(force_tokens or [])
        self.force_reserve_digit, self.drop_consecutive = force_reserve_digit, drop_consecutive
        self.chunk_end_tokens = list(chunk_end_tokens)
        self.device, self.max_batch_size = device, max_batch_size
        self._compressor: Any = None
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        amount = f"rate={self.rate:g}" if self.rate is not None else f"target_token={self.target_token}"
        return (f"llmlingua2(model={self.model},{amount},force={self.force_tokens},digits={self.force_reserve_digit},"
                f"drop_consecutive={self.drop_consecutive},ends={self.chunk_end_tokens})")

    @property
    def label(self) -> str:
        return f"llmlingua2(rate={self.rate:g})" if self.rate is not None else f"llmlingua2(<={self.target_token} tokens)"

    @property
    def line_label(self) -> str:
        return "llmlingua2"

    def _prompt_compressor(self) -> Any:
        if self._compressor is None:
            from core.devices import resolve_device

            device = resolve_device(self.device)
            encoder, tokenizer, rule = _load(self.model, device)
            self._compressor = _prompt_compressor(encoder, tokenizer, rule, device, self.tokenizer, self.max_batch_size)
        return self._compressor

    def warm_up(self) -> None:
        with self._lock:
            self._prompt_compressor()

    def compress(self, item: Compressible, budget: int | None = None) -> CompressedContext:
        tokens_in = self.count_tokens(item.context)
        target = budget if budget is not None else self.target_token
        if target is not None and tokens_in <= target:
            return CompressedContext(text=item.context, passages=tuple(item.passages), tokens_in=tokens_in,
                                     tokens_out=tokens_in, budget=budget, kept_spans=((0, len(item.context)),),
                                     trace={"kept_text": item.context, "ratio": 1.0, "within_budget_already": True,
                                            "requested_tokens": target})
        with self._lock:
            pc = self._prompt_compressor()
            pc.model.reset()
            start = time.perf_counter()
            result = pc.compress_prompt_llmlingua2(
                [item.context], rate=self.rate if target is None else DEFAULT_RATE,
                target_token=-1 if target is None else target, force_tokens=self.force_tokens,
                force_reserve_digit=self.force_reserve_digit, drop_consecutive=self.drop_consecutive,
                chunk_end_tokens=self.chunk_end_tokens)
            elapsed = time.perf_counter() - start
            hits, misses, recorded = pc.model.hits, pc.model.misses, pc.model.recorded_s
        text = result["compressed_prompt"].strip()
        if not text:
            raise CompressionError(f"example {item.id!r}: llmlingua2 kept nothing of the context")
        tokens_out = self.count_tokens(text)
        trace = {
            "kept_text": text, "ratio": tokens_in / tokens_out, "model": self.model,
            "requested_tokens": target if target is not None else round(self.rate * tokens_in),
            "achieved_tokens": tokens_out, "encoder_passes_cached": hits, "encoder_passes": hits + misses,
            "llmlingua": {k: result[k] for k in ("origin_tokens", "compressed_tokens", "ratio", "rate") if k in result},
        }
        if target is not None:
            trace["over_budget"] = tokens_out > target
        # a pass the memo served counts at the time it took when made (ModelWork's rule for cached results)
        work = ModelWork(calls=misses, cache_hits=hits, model_s=elapsed + recorded, cached_model_s=recorded)
        return CompressedContext(text=text, tokens_in=tokens_in, tokens_out=tokens_out, trace=trace, budget=budget,
                                 work=work, kept_spans=align_kept_text(item.context, text))

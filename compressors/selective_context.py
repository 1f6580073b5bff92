"""Selective Context (Li, Dong, Guerin and Lin, EMNLP 2023, arXiv 2310.06201): drop the least informative lexical
units, by the self-information a causal LM gives their tokens.

Implemented from the paper, checked against the authors' code (github.com/liyucheng09/Selective_Context,
``src/selective_context/__init__.py``).  Their package cannot run here: it loads spaCy's ``en_core_web_sm``
(not on PyPI) for its phrase units and GPT-2 from the hub at run time.  What this file does as theirs does:

- the context is split into sentences by their pattern (after ``.`` or ``?`` and whitespace, not after an
  abbreviation such as ``e.g.`` or ``Mr.``), and each sentence is scored alone: the self-information of each
  token is ``-log p(token | BOS, the sentence's earlier tokens)``;
- a unit's self-information is the mean of its tokens'; a sentence's is the mean over the sentence;
- the units below the ``reduce_ratio`` percentile of the units' self-information (``numpy.nanpercentile``)
  are dropped, the rest kept in order.

Where it differs, and why: the ``phrase`` unit (spaCy's noun chunks merged into its tokens) is replaced by
``word`` (whitespace-separated words: spaCy's tokens without the merge), since the parser cannot be had offline;
the LM is any causal LM (default the packaged SmolLM2, not GPT-2); kept units keep the context's own spacing (the
authors' code joins token units without the space between sentences and sentence units with a double space where
one was dropped).  Checked on real text (the first 2,500 characters of 4 L-Eval news articles, reduce ratios 0.2
and 0.5, SmolLM2 as the LM of both, the authors' ``SelectiveContext`` with its spaCy parser replaced by a
whitespace word splitter): the kept text was the same up to whitespace in 8 of 8 cases at token level, 8 of 8 at
sentence level and 7 of 8 for ``word`` against their ``phrase`` on words (one word, "of", kept here and dropped
there: their code spreads a token's information over the units it spans by character count, this one gives it
to the word where the token starts).

Scored once: a sentence's token self-information depends on the sentence and the LM alone, so it is memoised per
(LM, sentence) in the process; every ratio, budget and reader of a grid re-uses it.
"""
from __future__ import annotations

import hashlib
import re
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import Field, PositiveInt

from compressors.base import BudgetSupport, CompressedContext, Compressible, CompressionError, Compressor, ModelWork
from compressors.spans import merge_spans
from readers.base import Tokenizer

# the authors' sentence pattern, on the context as it is (their code first collapses whitespace; \s+ instead)
SENTENCE_END = re.compile(r"(?<!\w\.\w.)(?<![A-Z][a-z]\.)(?<=\.|\?)\s+")
DEFAULT_REDUCE = 0.35  # the authors' default share of units dropped
MEMO_SENTENCES = 100_000
Unit = Literal["token", "word", "sentence"]
Scored = tuple[tuple[int, int, float], ...]  # (start, end, self-information) of each token, in the sentence

_memo: OrderedDict[str, tuple[Scored, float]] = OrderedDict()
_memo_lock = threading.Lock()


def sentences(context: str) -> list[tuple[int, int]]:
    """[start, end) of each sentence, stripped, by the authors' pattern."""
    out, pos = [], 0
    for m in [*SENTENCE_END.finditer(context), None]:
        end = m.start() if m else len(context)
        text = context[pos:end]
        if text.strip():
            lead = len(text) - len(text.lstrip())
            out.append((pos + lead, pos + len(text.rstrip())))
        pos = m.end() if m else pos
    return out


def _units(unit: Unit, context: str, span: tuple[int, int], scored: Scored) -> list[tuple[int, int, float]]:
    """(start, end, self-information) of each unit of one sentence; a word's is the mean of the tokens that start
    in it (a token holding a space starts at its first other character)."""
    if unit == "token":
        return list(scored)
    if unit == "sentence":
        return [(span[0], span[1], float(np.mean([s for *_, s in scored])) if scored else float("nan"))]
    words = [(span[0] + m.start(), span[0] + m.end()) for m in re.finditer(r"\S+", context[span[0]:span[1]])]
    infos: list[list[float]] = [[] for _ in words]
    w = 0
    for start, end, info in scored:
        first = start + len(context[start:end]) - len(context[start:end].lstrip())
        while w < len(words) - 1 and first >= words[w][1]:
            w += 1
        if words:
            infos[w].append(info)
    return [(s, e, float(np.mean(i)) if i else float("nan")) for (s, e), i in zip(words, infos)]


class SelectiveContextCompressor(Compressor):
    """Drop the ``reduce_ratio`` least informative units (tokens, words or sentences) of the context.

    Parameters
    ----------
    reduce_ratio: share of the units dropped, a percentile of their self-information (default 0.35, the
        authors'); or ``target_token``, a budget in the reader's tokens turned into the share it asks to drop
        (units differ in length, so the kept count lands near it, not on it: ``budget_support = "best_effort"``;
        requested and achieved tokens are in the trace).
    unit: ``word`` (default: the authors' ``phrase`` without spaCy's noun chunks), ``token`` or ``sentence``.
    model: a local folder or hub id of the causal LM; default the packaged SmolLM2-135M-Instruct.
    device, dtype: where and how the LM runs.
    max_tokens: a sentence longer than this many LM tokens is scored in windows of it.
    """

    budget_support: ClassVar[BudgetSupport] = "best_effort"
    replaced_by_budget: ClassVar[tuple[str, ...]] = ("reduce_ratio", "target_token")

    def __init__(
        self,
        reduce_ratio: Annotated[float, Field(ge=0, lt=1)] | None = None,
        target_token: PositiveInt | None = None,
        unit: Unit = "word",
        model: str | Path | None = None,
        device: str = "auto",
        dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto",
        max_tokens: PositiveInt = 1024,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        super().__init__(tokenizer)
        if reduce_ratio is not None and target_token is not None:
            from core.errors import ParamError

            raise ParamError("selective_context: give reduce_ratio or target_token, not both")
        self.reduce_ratio = reduce_ratio if reduce_ratio is not None or target_token is not None else DEFAULT_REDUCE
        self.target_token = target_token
        self.unit: Unit = unit
        self.model = str(model) if model is not None else None
        self.device, self.dtype, self.max_tokens = device, dtype, max_tokens
        self._lm: Any = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self.model or "smollm2-135m-instruct"

    @property
    def identity(self) -> str:
        amount = f"reduce={self.reduce_ratio:g}" if self.reduce_ratio is not None else f"target_token={self.target_token}"
        return f"selective_context(lm={self.model_id},dtype={self.dtype},unit={self.unit},{amount},max={self.max_tokens})"

    @property
    def label(self) -> str:
        amount = f"-{self.reduce_ratio:.0%}" if self.reduce_ratio is not None else f"<={self.target_token} tokens"
        return f"selective_context({self.unit}, {amount})"

    @property
    def line_label(self) -> str:
        return f"selective_context({self.unit})"

    def _load(self) -> tuple[Any, Any, str]:
        if self._lm is None:
            from compressors.longllmlingua import _load
            from core.devices import resolve_device

            if self.model is None:
                from readers.smollm2 import GGUF_NAME, converted_dir

                path, name = str(converted_dir()[0]), f"smollm2:{GGUF_NAME}"
            else:
                path = name = self.model
            device = resolve_device(self.device)
            lm, tokenizer = _load(path, device, self.dtype)
            self._lm = (lm, tokenizer, f"{name}|{lm.dtype}|{lm.device.type}")
        return self._lm

    def warm_up(self) -> None:
        with self._lock:
            self._load()

    def _score(self, sentence: str) -> tuple[Scored, float, bool]:
        """Each token's (start, end, self-information) in ``sentence``, the LM seconds, whether the memo served."""
        lm, tokenizer, scorer = self._load()
        key = hashlib.sha256(f"{scorer}\n{self.max_tokens}\n{sentence}".encode()).hexdigest()
        with _memo_lock:
            if key in _memo:
                _memo.move_to_end(key)
                return (*_memo[key], True)
        import torch

        start = time.perf_counter()
        encoded = tokenizer(sentence, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
        bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        scored: list[tuple[int, int, float]] = []
        for at in range(0, len(ids), self.max_tokens):
            window = ids[at:at + self.max_tokens]
            with torch.no_grad():
                logits = lm(torch.tensor([[bos, *window]], device=lm.device)).logits[0, :-1].float()
            info = -torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(window, device=lm.device)[:, None])[:, 0]
            scored += [(s, e, float(v)) for (s, e), v in zip(offsets[at:at + self.max_tokens], info.tolist())]
        seconds = time.perf_counter() - start
        with _memo_lock:
            _memo[key] = (tuple(scored), seconds)
            while len(_memo) > MEMO_SENTENCES:
                _memo.popitem(last=False)
        return tuple(scored), seconds, False

    def compress(self, item: Compressible, budget: int | None = None) -> CompressedContext:
        context = item.context
        if not context.strip():
            raise CompressionError(f"example {item.id!r}: context is empty or whitespace; nothing to compress")
        tokens_in = self.count_tokens(context)
        target = budget if budget is not None else self.target_token
        if target is not None and tokens_in <= target:
            return CompressedContext(text=context, passages=tuple(item.passages), tokens_in=tokens_in,
                                     tokens_out=tokens_in, budget=budget, kept_spans=((0, len(context)),),
                                     trace={"ratio": 1.0, "within_budget_already": True, "requested_tokens": target})
        reduce = self.reduce_ratio if target is None else 1 - target / tokens_in
        units: list[tuple[int, int, float]] = []
        made = recorded = 0.0
        hits = misses = 0
        with self._lock:
            for span in sentences(context):
                scored, seconds, cached = self._score(context[span[0]:span[1]])
                hits, misses = hits + cached, misses + (not cached)
                if cached:
                    recorded += seconds
                else:
                    made += seconds
                shifted = tuple((span[0] + s, span[0] + e, v) for s, e, v in scored)
                units += _units(self.unit, context, span, shifted)
        threshold = np.nanpercentile([v for *_, v in units], reduce * 100)
        kept = [(s, e) for s, e, v in units if not v < threshold]  # the authors drop a unit when info < threshold
        spans = merge_spans(kept, context)
        text = " ".join(" ".join(context[s:e].split()) for s, e in spans)
        if not text:
            raise CompressionError(f"example {item.id!r}: selective_context kept nothing of the context")
        tokens_out = self.count_tokens(text)
        trace = {
            "ratio": tokens_in / tokens_out, "unit": self.unit, "lm": self.model_id, "n_units": len(units),
            "n_kept": len(kept), "reduce_ratio": round(reduce, 6), "threshold": float(threshold),
            "requested_tokens": target if target is not None else round((1 - reduce) * tokens_in),
            "achieved_tokens": tokens_out, "sentences_scored": misses, "sentences_cached": hits,
        }
        if target is not None:
            trace["over_budget"] = tokens_out > target
        work = ModelWork(calls=misses, cache_hits=hits, model_s=made + recorded, cached_model_s=recorded)
        return CompressedContext(text=text, tokens_in=tokens_in, tokens_out=tokens_out, trace=trace, budget=budget,
                                 work=work, kept_spans=spans)

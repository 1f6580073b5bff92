"""A local Hugging Face reader: causal or encoder-decoder models, greedy, batched.

What it does to each request, in order:

1. truncates the raw prompt (``truncation`` policy, in the model's tokens) so
   that prompt + chat-template overhead + ``max_new_tokens`` fits ``max_context``;
2. applies the chat template ONCE when the request (or the reader) asks for
   chat and the tokenizer has a template (LongBench's released retrieval
   script applied it twice -- a known bug we do not reproduce);
3. sorts the requests by length, cuts them into batches (``batch_size``
   prompts, and on a GPU ``batch_tokens`` padded tokens), left-pads causal
   models, generates (greedy unless ``temperature > 0``), and returns results
   in input order.  On a CPU a causal batch of prompts of different lengths is
   prefilled one prompt at a time and decoded together (``_prefill_apart``);
   on a GPU the padded batch is prefilled together, the faster way there.

Every keyword handed to the model or to ``generate`` that transformers renamed
between releases (the KV cache: ``past_key_values``, then ``cache``) is read
from the model's own signatures (:class:`ModelKeywords`), never from a version
number: a forward's ``**kwargs`` swallows a keyword it does not name without a
word, which is how transformers 5.17 ran on an empty cache.

``latency_s`` of a generation is its batch's wall time divided by the batch size.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, ClassVar, Sequence

from pydantic import PositiveInt

from core.devices import resolve_device
from readers.base import Generation, GenerationRequest, TruncationPolicy
from readers.hf_model import (
    ModelKeywords,
    default_batch_tokens,
    default_prefill_apart,
    resolve_dtype,
)
from readers.local import LocalReader
from readers.sizing import WORDS, ReaderSizing, from_tokenizer_file, hub_config
from readers.tokenizers import HFTokenizer, WordTokenizer
from readers.truncation import cut_at_stop

log = logging.getLogger(__name__)


CPU_BATCH_SIZE = 4  # prompts a batch on a CPU: what the study reads with (docs/readers.md, "Batching")
_CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")


def context_window(field: Callable[[str], Any], model_max_length: Any) -> int:
    """A model's window from its config's fields (``field(name)``), else its tokenizer's limit, else 4096: the
    loaded reader and its dry-run sizing read the same rule."""
    for name in _CONTEXT_FIELDS:
        value = field(name)
        if isinstance(value, int) and value > 0:
            return value
    limit = model_max_length
    return limit if isinstance(limit, int) and 0 < limit < 10**7 else 4096


def model_label(model: str) -> str:
    """A report row's name for a hub id or folder: its last part."""
    return model.rstrip("/").rsplit("/", 1)[-1]


class HFReader(LocalReader):
    """A ``transformers`` model read from a hub id or a local folder (``gguf_file`` for a GGUF file in it)."""

    backend_packages: ClassVar[tuple[str, ...]] = ("torch", "transformers")

    def __init__(
        self,
        model: str,
        *,
        tokenizer: Any = None,
        max_context: PositiveInt | None = None,
        truncation: TruncationPolicy = "middle",
        chat: bool | None = None,
        device: str = "auto",
        dtype: Any = "auto",
        batch_size: PositiveInt | None = None,
        gguf_file: str | None = None,
        model_kwargs: dict | None = None,
        prefill_apart: bool | None = None,
        batch_tokens: PositiveInt | None = None,
    ) -> None:
        from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

        self.model_name, self.gguf_file = str(model), gguf_file
        self.truncation = truncation
        self.device = resolve_device(device)
        on_cuda = self.device.startswith("cuda")
        # CPU: 4 prompts a batch, no token limit, each prompt prefilled alone (prefilling a padded batch is slower
        # there). CUDA: batches as large as ``batch_tokens`` allows (sized from free memory below), prefilled together.
        self.batch_size = batch_size if batch_size is not None else (None if on_cuda else CPU_BATCH_SIZE)
        self.prefill_apart = prefill_apart if prefill_apart is not None else default_prefill_apart(self.device)
        gguf = {"gguf_file": gguf_file} if gguf_file else {}
        config = AutoConfig.from_pretrained(self.model_name, **gguf)
        self.is_encoder_decoder = bool(getattr(config, "is_encoder_decoder", False))
        if tokenizer is None or isinstance(tokenizer, str):
            hf_tok = AutoTokenizer.from_pretrained(tokenizer or self.model_name, **({} if tokenizer else gguf))
        else:
            hf_tok = tokenizer
        hf_tok.padding_side = "right" if self.is_encoder_decoder else "left"
        if hf_tok.pad_token is None:
            hf_tok.pad_token = hf_tok.eos_token
        self.hf_tokenizer = hf_tok
        self.tokenizer = HFTokenizer(hf_tok)
        self.tokenizer_name = tokenizer if isinstance(tokenizer, str) else getattr(hf_tok, "name_or_path", "")
        self.chat = chat
        self.has_chat_template = bool(getattr(hf_tok, "chat_template", None))
        loader = AutoModelForSeq2SeqLM if self.is_encoder_decoder else AutoModelForCausalLM
        kwargs = {"dtype": resolve_dtype(dtype, self.device), **gguf, **(model_kwargs or {})}
        start = time.perf_counter()
        self.model = loader.from_pretrained(self.model_name, **kwargs).to(self.device).eval()
        self.load_s = time.perf_counter() - start
        self.keywords = ModelKeywords.of(self.model)
        self.batch_tokens = batch_tokens if batch_tokens is not None or not on_cuda else self._gpu_batch_tokens()
        self.revision = getattr(self.model.config, "_commit_hash", None)
        self.max_context = max_context or self._context_from(config, hf_tok)
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = hf_tok.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}

    def _gpu_batch_tokens(self) -> int:
        """The default ``batch_tokens`` on a GPU: what half its free memory holds, after the weights are loaded."""
        import torch

        free, _total = torch.cuda.mem_get_info(torch.device(self.device))
        return default_batch_tokens(self.model.config, self.model.dtype.itemsize, free)

    @staticmethod
    def _context_from(config: Any, tok: Any) -> int:
        return context_window(lambda name: getattr(config, name, None), getattr(tok, "model_max_length", None))

    @classmethod
    def sizing(cls, model: str, *, tokenizer: Any = None, max_context: int | None = None, truncation: str = "middle",
               gguf_file: str | None = None, **_: Any) -> ReaderSizing:
        """Its tokenizer and window from the model's files on this machine, without its weights (``readers.sizing``):
        exact when the tokenizer's ``tokenizer.json`` is there, LongBench words (said so) otherwise; a GGUF file's
        own tokenizer is read only with its weights, so it is counted in words too."""
        source = tokenizer if isinstance(tokenizer, str) else model
        config = {} if gguf_file else hub_config(model)
        window = max_context or context_window(config.get, hub_config(source, "tokenizer_config.json")
                                                .get("model_max_length"))
        if gguf_file and not isinstance(tokenizer, str):
            return ReaderSizing(WordTokenizer(), window, model_label(model), f"{WORDS} (the tokenizer in {gguf_file} "
                                "is read only with its weights; its model's tokens differ)", False, truncation)
        return from_tokenizer_file(source, max_context=window, label=model_label(model), truncation=truncation)

    @property
    def identity(self) -> str:
        return (f"hf:{self.model_name}:gguf={self.gguf_file}:rev={self.revision}:tokenizer={self.tokenizer_name}"
                f":dtype={self.dtype_tag}:chat={self.chat}:max_context={self.max_context}:truncation={self.truncation}")

    @property
    def label(self) -> str:
        return model_label(self.model_name)

    @property
    def dtype_tag(self) -> str:
        """The loaded weights' dtype, for ``identity``: bf16 on a GPU and fp32 on a CPU give different
        greedy outputs, so they must not share generation-cache entries."""
        return str(getattr(getattr(self, "model", None), "dtype", "none")).removeprefix("torch.")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_name!r}, max_context={self.max_context}, device={self.device!r})"

    # -- prompt preparation (chat choice and truncation: readers.local) -------
    def _render(self, prompt: str, chat: bool, system: str | None = None) -> list[int]:
        tok = self.hf_tokenizer
        if chat:
            messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
            text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return list(tok(text, add_special_tokens=False)["input_ids"])
        return list(tok(f"{system or ''}{prompt}", add_special_tokens=True)["input_ids"])

    # -- generation ------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        prepared = [self._prepare(r) for r in requests]
        results: list[Generation | None] = [None] * len(requests)
        for batch in self._batches(requests, [len(ids) for ids, _ in prepared]):
            self._run_batch(batch, requests, prepared, results)
        return results  # type: ignore[return-value]

    def _batches(self, requests: Sequence[GenerationRequest], lengths: Sequence[int]) -> list[list[int]]:
        """Request indices cut into batches, longest prompt first, so the prompts of a batch are of like length.

        A batch closes at ``batch_size`` prompts, at a change of temperature, or when one more prompt would take
        its padded size (prompts x (longest prompt + most new tokens)) past ``batch_tokens``; a prompt larger
        than ``batch_tokens`` on its own still runs, alone.
        """
        order = sorted(range(len(requests)), key=lambda i: (requests[i].temperature, -lengths[i]))
        batches: list[list[int]] = []
        batch: list[int] = []
        for i in order:
            if batch and (len(batch) == self.batch_size or requests[batch[0]].temperature != requests[i].temperature
                          or self._over_tokens(batch + [i], requests, lengths)):
                batches.append(batch)
                batch = []
            batch.append(i)
        if batch:
            batches.append(batch)
        return batches

    def _over_tokens(self, batch: list[int], requests: Sequence[GenerationRequest], lengths: Sequence[int]) -> bool:
        if self.batch_tokens is None:
            return False
        width = max(lengths[i] for i in batch) + max(requests[i].max_new_tokens for i in batch)
        return len(batch) * width > self.batch_tokens

    def _run_batch(self, batch: list[int], requests: Sequence[GenerationRequest],
                   prepared: list[tuple[list[int], bool]], results: list[Generation | None]) -> None:
        import torch

        reqs = [requests[i] for i in batch]
        enc = self.hf_tokenizer.pad({"input_ids": [prepared[i][0] for i in batch]}, padding=True, return_tensors="pt")
        enc = {k: v.to(self.model.device) for k, v in enc.items()}
        max_new = max(r.max_new_tokens for r in reqs)
        temperature = reqs[0].temperature
        options: dict[str, Any] = {"max_new_tokens": max_new, "pad_token_id": self.hf_tokenizer.pad_token_id}
        options.update({"do_sample": True, "temperature": temperature} if temperature > 0 else
                       {"do_sample": False, "temperature": None, "top_p": None, "top_k": None})
        if reqs[0].stop and all(r.stop == reqs[0].stop for r in reqs):
            options.update(stop_strings=list(reqs[0].stop), tokenizer=self.hf_tokenizer)  # stop early; cut below
        if self._step is not None:
            options["streamer"] = _StepStreamer(self._step, max_new, skip_prompt=not self.is_encoder_decoder)
        start = time.perf_counter()
        with torch.inference_mode():
            cache = self._prefill_apart(enc)
            if cache is not None:
                options[self.keywords.generate_cache] = cache
            out = self.model.generate(**enc, **options)
        elapsed = time.perf_counter() - start
        new = out if self.is_encoder_decoder else out[:, enc["input_ids"].shape[1]:]
        special = {self.hf_tokenizer.pad_token_id, getattr(self.model.config, "decoder_start_token_id", None)}
        for row, (i, req) in enumerate(zip(batch, reqs)):
            ids = new[row].tolist()
            if self.is_encoder_decoder and ids and ids[0] in special:
                ids = ids[1:]  # the decoder start token
            kept = []
            for t in ids[: req.max_new_tokens]:
                if t in self.eos_ids:
                    break
                kept.append(t)
            text = cut_at_stop(self.hf_tokenizer.decode(kept, skip_special_tokens=True), req.stop)
            results[i] = Generation(
                text=text, tokens_in=len(prepared[i][0]), tokens_out=len(kept), latency_s=elapsed / len(batch),
                truncated=prepared[i][1], meta={"batch_size": len(batch), "batch_latency_s": elapsed,
                      "prefill": "apart" if cache is not None else "together"},
            )
            self._finished(i, results[i])
        self._advance(len(batch))

    def _prefill_apart(self, enc: dict[str, Any]) -> Any:
        """The KV cache of each left-padded prompt, computed alone, merged into one cache for the batch; or None.

        A padded batch needs an attention mask, and with a mask torch's CPU attention loses its causal fast
        path: a batch of four ~4k-token prompts prefilled 1.5x slower than the same prompts one at a time
        (docs/readers.md, "Prefilled apart").  Decoding is where a batch pays (one read of the weights per step for
        every sequence), so each prompt but its last token is prefilled alone, the caches are left-padded with
        zeros that the mask hides, and ``generate`` decodes the batch from there.  Greedy outputs stay equal to
        batch 1's (tests/readers/test_hf.py).  Only for plain dynamic caches (not sliding windows) of models whose
        forward takes a cache and ``logits_to_keep`` by name and whose ``DynamicCache`` is built from the config
        (``ModelKeywords``), where this was checked; anything else prefills the padded batch together.
        """
        import torch
        from torch.nn.functional import pad

        ids, mask = enc["input_ids"], enc["attention_mask"]
        lengths = [int(n) for n in mask.sum(dim=1)]
        words = self.keywords
        if (not self.prefill_apart or self.is_encoder_decoder or min(lengths) < 2 or len(set(lengths)) == 1
                or None in (words.forward_cache, words.generate_cache, words.logits_to_keep)
                or not words.cache_takes_config):
            return None
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        width = ids.shape[1] - 1
        rows = []
        for row, n in enumerate(lengths):
            cache = DynamicCache(config=self.model.config)
            self.model(ids[row:row + 1, width + 1 - n:width], use_cache=True,
                       **{words.logits_to_keep: 1, words.forward_cache: cache})
            if not all(type(layer) is DynamicLayer and layer.keys is not None for layer in cache.layers):
                return None
            rows.append(cache)
        merged = DynamicCache(config=self.model.config)
        for i in range(len(rows[0].layers)):
            keys = [pad(c.layers[i].keys, (0, 0, width - c.layers[i].keys.shape[2], 0)) for c in rows]
            values = [pad(c.layers[i].values, (0, 0, width - c.layers[i].values.shape[2], 0)) for c in rows]
            merged.update(torch.cat(keys), torch.cat(values), i)
        return merged

    def close(self) -> None:
        self.model = None  # drop the weights (and GPU memory once collected)


class _StepStreamer:
    """A ``transformers`` streamer that only counts decoding steps, so progress moves inside a long batch."""

    def __init__(self, step: Callable[[int, int], None], total: int, *, skip_prompt: bool) -> None:
        self.step, self.total, self.done, self.skip_prompt = step, total, 0, skip_prompt

    def put(self, value: Any) -> None:
        if self.skip_prompt:  # the first put carries the prompt
            self.skip_prompt = False
            return
        self.done += 1
        self.step(self.done, self.total)

    def end(self) -> None:
        return None

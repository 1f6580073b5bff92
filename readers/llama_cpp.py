"""A GGUF file read in process by llama.cpp (llama-cpp-python): integer kernels on the quantized weights.

llama-cpp-python ships only a source package on PyPI; ``pip install
llama-cpp-python`` builds it with cmake and the local C++ compiler (the time
it takes and the flags are in docs/readers.md).  It is optional: importing
this module needs nothing; building a reader without the package is a
``ReaderError`` that says how to get it.

Requests are prepared as every in-process reader prepares them
(``readers.local``): the GGUF's own chat template (rendered with jinja2 as
transformers renders it) applied once, the prompt truncated in llama.cpp's
tokens.  Each request is read from an empty KV cache (llama-cpp-python would
otherwise reuse a shared prefix, which makes an output depend on the request
before it), greedy unless ``temperature > 0``, with no repeat penalty, one at
a time (the bindings decode one sequence per context).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, ClassVar, Sequence

from pydantic import PositiveInt

from readers.base import Generation, GenerationRequest, ReaderError, TruncationPolicy
from readers.local import LocalReader
from readers.truncation import cut_at_stop

INSTALL_HINT = "pip install llama-cpp-python (built from source; see docs/readers.md for the time and flags)"


def llama_cpp_version() -> str | None:
    """The installed llama-cpp-python's version, or None when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return None


def available_cores() -> int:
    """Cores this process may run on (the affinity mask, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class LlamaCppReader(LocalReader):
    """A GGUF file read by llama.cpp.

    ``max_context``: the context to allocate (default: the model's training context);
    ``n_threads``: threads for prompt and generation (default: every core this process may use);
    ``n_batch``: prompt tokens evaluated per step.
    """

    backend_packages: ClassVar[tuple[str, ...]] = ("llama-cpp-python",)

    def __init__(
        self,
        model_path: str | os.PathLike,
        *,
        max_context: PositiveInt | None = None,
        truncation: TruncationPolicy = "middle",
        chat: bool | None = None,
        n_threads: PositiveInt | None = None,
        n_batch: PositiveInt = 512,
    ) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as err:
            raise ReaderError(f"llama.cpp readers need llama-cpp-python: {INSTALL_HINT}") from err
        path = Path(model_path)
        if not path.is_file():
            raise ReaderError(f"GGUF file {path} not found")
        self.model_path, self.model_name = path, path.name
        self.truncation, self.chat = truncation, chat
        self.n_threads = n_threads or available_cores()
        start = time.perf_counter()
        self.llm = Llama(model_path=str(path), n_ctx=max_context or 0, n_threads=self.n_threads,
                         n_threads_batch=self.n_threads, n_batch=n_batch, verbose=False)
        self.load_s = time.perf_counter() - start
        self.max_context = self.llm.n_ctx()
        self.tokenizer = LlamaCppTokenizer(self.llm)
        self._formatter = self._chat_formatter()
        self.has_chat_template = self._formatter is not None
        self.eos_id = self.llm.token_eos()

    def _chat_formatter(self) -> Any:
        template = self.llm.metadata.get("tokenizer.chat_template")
        if not template:
            return None
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        def token_text(token_id: int) -> str:
            return self.llm._model.token_get_text(token_id) if token_id >= 0 else ""

        return Jinja2ChatFormatter(template, eos_token=token_text(self.llm.token_eos()),
                                   bos_token=token_text(self.llm.token_bos()), add_generation_prompt=True)

    @property
    def identity(self) -> str:
        size = self.model_path.stat().st_size
        return (f"llama_cpp:{self.model_name}:bytes={size}:llama_cpp={llama_cpp_version()}:chat={self.chat}"
                f":max_context={self.max_context}:truncation={self.truncation}")

    @property
    def label(self) -> str:
        return self.model_path.stem

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.model_path)!r}, max_context={self.max_context}, n_threads={self.n_threads})"

    def _render(self, prompt: str, chat: bool, system: str | None = None) -> list[int]:
        if chat:
            messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
            text = self._formatter(messages=messages).prompt
            return self.tokenizer.encode(text, special=True)
        ids = self.tokenizer.encode(f"{system or ''}{prompt}", special=False)
        bos = self.llm.token_bos()
        return [bos, *ids] if self.llm._model.add_bos_token() and bos >= 0 else ids

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        return [self._finished(i, self._one(req)) for i, req in enumerate(requests)]

    def _one(self, req: GenerationRequest) -> Generation:
        ids, truncated = self._prepare(req)
        start = time.perf_counter()
        self.llm.reset()  # an empty cache: the output is a function of this prompt alone
        out = self.llm.create_completion(prompt=ids, max_tokens=req.max_new_tokens, temperature=req.temperature,
                                         top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, stop=list(req.stop) or None)
        elapsed = time.perf_counter() - start
        usage = out.get("usage") or {}
        self._advance(1)
        return Generation(text=cut_at_stop(out["choices"][0]["text"], req.stop), tokens_in=len(ids),
                          tokens_out=usage.get("completion_tokens", 0), latency_s=elapsed, truncated=truncated,
                          meta={"finish_reason": out["choices"][0].get("finish_reason")})

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            llm.close()


class LlamaCppTokenizer:
    """llama.cpp's own tokenizer, so truncation counts the model's tokens."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def encode(self, text: str, *, special: bool = False) -> list[int]:
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=special))

    def decode(self, ids: Sequence[int]) -> str:
        return self.llm.detokenize(list(ids)).decode("utf-8", errors="ignore")


__all__ = ["LlamaCppReader", "LlamaCppTokenizer", "available_cores", "llama_cpp_version"]

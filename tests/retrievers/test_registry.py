"""Retriever registry: short names, import paths, plugins, close-match errors."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.errors import UnknownComponentError
from indexes.chunking import passages_to_chunks
from indexes.types import Passage
from retrievers.bm25 import BM25Retriever
from retrievers.registry import RETRIEVERS, make_retriever

HERE = Path(__file__).resolve().parent


def test_short_names_are_registered():
    assert {"bm25", "contriever", "contriever-msmarco", "mcontriever", "minilm",
            "sentence-transformers", "openai"} <= set(RETRIEVERS.names())
    assert RETRIEVERS.get("bm25") is BM25Retriever
    r = make_retriever("bm25", k1=1.2, b=0.5)
    assert (r.k1, r.b) == (1.2, 0.5)


def test_model_defaults_per_short_name():
    from retrievers.contriever import ContrieverRetriever

    for name, model in [("contriever", "facebook/contriever"), ("contriever-msmarco", "facebook/contriever-msmarco"),
                        ("mcontriever", "facebook/mcontriever")]:
        r = make_retriever(name)  # builds without loading weights
        assert isinstance(r, ContrieverRetriever) and r.encoder.model_id == model


def test_import_path_and_close_match_error():
    assert RETRIEVERS.get("retrievers.bm25:BM25Retriever") is BM25Retriever
    with pytest.raises(UnknownComponentError, match="contriever"):
        RETRIEVERS.get("contreiver")
    with pytest.raises(UnknownComponentError, match="cannot import"):
        RETRIEVERS.get("nosuchpkg.mod:Thing")
    with pytest.raises(UnknownComponentError, match="not a Retriever"):
        RETRIEVERS.get("indexes.vector:FaissIndex")


def test_plugin_example_loads_by_import_path(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    r = make_retriever("plugin_example:TfidfRetriever", max_ngram=2)
    chunks = passages_to_chunks([Passage("the cat sat on the mat"), Passage("paris is the capital of france")])
    (hits,) = r.index(chunks).search(["capital of france"], 1)
    assert hits[0].chunk.chunk_id == "p1#0" and hits[0].score > 0
    assert r.identity.startswith("tfidf")


def test_importing_the_registry_is_cheap():
    code = "import sys, retrievers.registry; print(any(m in sys.modules for m in ('torch', 'faiss', 'transformers', 'sentence_transformers')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=HERE.parents[1], check=True)
    assert out.stdout.strip() == "False"

"""Short names for retrievers; entries are lazy ``"module:Class"`` strings so importing this is cheap.

A config may also name a retriever by import path (``"mypkg.retr:MyRetriever"``)
or a third-party package may register one under the entry-point group
``ctxcomp.retrievers``.
"""
from __future__ import annotations

from typing import Any

from core.registry import ComponentSpec, Registry
from retrievers.base import Retriever

RETRIEVERS: Registry[Retriever] = Registry("retrievers", Retriever)

RETRIEVERS.add("bm25", "retrievers.bm25:BM25Retriever")
RETRIEVERS.add("contriever", "retrievers.contriever:ContrieverRetriever")
RETRIEVERS.add("contriever-msmarco", "retrievers.contriever:ContrieverMSMarcoRetriever")
RETRIEVERS.add("mcontriever", "retrievers.contriever:MContrieverRetriever")
RETRIEVERS.add("sentence-transformers", "retrievers.sentence_transformers:SentenceTransformerRetriever")
RETRIEVERS.add("minilm", "retrievers.sentence_transformers:MiniLMRetriever")
RETRIEVERS.add("openai", "retrievers.openai_embeddings:OpenAIEmbeddingRetriever")
RETRIEVERS.add("hybrid", "retrievers.hybrid:HybridRetriever")
RETRIEVERS.add("rerank", "retrievers.rerank:RerankRetriever")


def make_retriever(spec: Any, **params: Any) -> Retriever:
    """A retriever from a short name, an entry point, ``"pkg.mod:Class"`` or a ``{name, params}`` section."""
    return RETRIEVERS.build(ComponentSpec.parse(spec, "retriever").with_params(**params))

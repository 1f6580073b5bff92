"""A real run that holds every shipped compressor, for ``show`` and ``view``: synthetic multi-document QA read by
the model-free extractive reader, LongLLMLingua scored by a tiny local Llama built here (no download)."""
from __future__ import annotations

from pathlib import Path

from tests.support.tiny_lm import build_tiny_lm

N_EXAMPLES = 4
BM25 = {"name": "bm25", "params": {"backend": "rank_bm25"}}
OTHER_BM25 = {"name": "bm25", "params": {"backend": "rank_bm25", "k1": 0.9, "b": 0.3}}


def all_arms_config(tiny_lm: str) -> dict:
    """Every compressor the registry ships: truncate, retrieval in both orders and with the hybrid and rerank
    retrievers, summarize generic and query-focused, LongLLMLingua and top_k, beside full."""
    retrieval = {"retriever": BM25, "top_n": 2, "unit": "chunk", "chunk_size": 30}
    return {
        "name": "all_arms",
        "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": N_EXAMPLES, "num_docs": 4,
                                                         "words_per_doc": 40}}],
        "compressors": [
            "full",
            {"name": "truncate", "params": {"max_tokens": 60, "policy": "right"}},
            {"name": "retrieval", "params": retrieval},
            {"name": "retrieval", "label": "retrieval-document-order", "params": {**retrieval, "order": "document"}},
            {"name": "retrieval", "label": "hybrid", "params": {**retrieval, "retriever": {
                "name": "hybrid", "params": {"retrievers": [BM25, OTHER_BM25]}}}},
            {"name": "retrieval", "label": "rerank", "params": {**retrieval, "retriever": {
                "name": "rerank", "params": {"first": BM25, "second": OTHER_BM25, "depth": 5}}}},
            {"name": "summarize", "params": {"chunk_size": 60, "max_summary_words": 20}},
            {"name": "summarize", "label": "summarize-query-focused",
             "params": {"chunk_size": 60, "max_summary_words": 20, "query_focused": True}},
            {"name": "longllmlingua", "params": {"model": tiny_lm, "device": "cpu", "chunk_size": 40, "rate": 0.5}},
            {"name": "top_k", "params": {"k": 2}},
        ],
        "readers": ["extractive"],
    }


def tiny_lm(folder: Path) -> str:
    """The tiny Llama (seeded weights, a byte-level BPE trained on two sentences: many tokens per word)."""
    return build_tiny_lm(folder / "tiny-lm", [
        "The capital of France is Paris. Rivers run to the sea.",
        "A question asks for a fact; a document may hold the answer.",
    ])


def make_all_arms_run(folder: Path, lm: str) -> Path:
    """Run the grid of every compressor into ``folder / "run"``; returns the run directory."""
    from experiments import evaluate

    run_dir = folder / "run"
    evaluate(all_arms_config(lm), run_dir, report=False, progress=False)
    return run_dir


def make_cut_run(folder: Path, lm: str) -> Path:
    """A run whose reader's window cuts the full context and not the retrieval arm: the tiny Llama read as an
    ``hf`` reader with a 600-token window (about half a full prompt)."""
    from experiments import evaluate

    config = {
        "name": "cut",
        "tasks": [{"name": "nq_multidoc", "max_new_tokens": 4,
                   "synthetic": {"kind": "multidoc_qa", "n": N_EXAMPLES, "num_docs": 4, "words_per_doc": 40}}],
        "compressors": ["full", {"name": "retrieval", "params": {"retriever": BM25, "top_n": 1, "unit": "chunk",
                                                                  "chunk_size": 20}}],
        "readers": [{"name": "hf", "label": "tiny", "params": {"model": lm, "device": "cpu", "max_context": 600}}],
    }
    run_dir = folder / "cut-run"
    evaluate(config, run_dir, report=False, progress=False)
    return run_dir

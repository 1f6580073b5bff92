"""Retrieval on its own: index a corpus, retrieve the top k per query, measure recall@k and MRR.

Inputs are a JSONL corpus (``id``, ``text``[, ``title``]) with JSONL queries
(``id``, ``query``[, ``answers``]), or one Lost in the Middle QA file whose
deduplicated passages are the corpus and whose questions are the queries.
A hit is relevant when it contains one of the query's answers (DPR's
``has_answer``).  Limiting the queries never shrinks the corpus.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.progress import progress_bar
from experiments.data.sources import iter_records
from experiments.protocols.corpus import CORPUS_SEED, index_order, load_litm_corpus
from indexes.chunking import passages_to_chunks
from indexes.types import Chunk, whole_chunk
from retrievers.base import Hit
from retrievers.metrics import hit_has_answer, mrr, recall_at_k

SUMMARY_KS = (1, 5, 20)
BATCH = 64


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    answers: tuple[str, ...] = field(default_factory=tuple)


def load_corpus(path: str | Path) -> list[Chunk]:
    """A JSONL corpus as chunks in ``index_order`` (a file's order may follow its questions); ids must be unique."""
    chunks, seen = [], set()
    for where, obj in iter_records(path):
        doc_id = str(where.get(obj, "id", (str, int)))
        if doc_id in seen:
            raise where.error("id", f"duplicate id {doc_id!r}")
        seen.add(doc_id)
        text = where.get(obj, "text", str)
        title = where.get(obj, "title", str, required=False) or ""
        chunks.append(whole_chunk(doc_id, text, title))
    if not chunks:
        raise UserError(f"{path}: the corpus is empty")
    return index_order(chunks)


def _answers(where: Any, obj: dict) -> tuple[str, ...]:
    answers = obj.get("answers", [])
    if isinstance(answers, str):
        return (answers,)
    return where.strings(obj, "answers", required=False) if answers else ()


def load_queries(path: str | Path, limit: int | None = None) -> list[Query]:
    queries = []
    for where, obj in iter_records(path):
        if limit is not None and len(queries) >= limit:
            break
        queries.append(Query(str(where.get(obj, "id", (str, int))), where.get(obj, "query", str), _answers(where, obj)))
    return queries


def litm_corpus_and_queries(path: str | Path, limit: int | None = None) -> tuple[list[Chunk], list[Query]]:
    """Every passage of the file once (by title and text) as the corpus -- all of it, whatever ``limit`` is, in
    ``index_order``, ids ``litm{i}`` by that order -- and its first ``limit`` questions as queries."""
    questions, passages = load_litm_corpus(path)
    chunks = passages_to_chunks(index_order(passages), doc_prefix="litm")
    queries = [Query(f"q{i}", q.query, q.answers) for i, q in enumerate(questions)]
    return chunks, queries[:limit] if limit is not None else queries


def litm_questions(path: str | Path, limit: int | None = None) -> list[Query]:
    """The first ``limit`` questions of a Lost in the Middle file as queries (ids ``q0``, ``q1``, ... as
    :func:`litm_corpus_and_queries` gives them), its passages left out: another corpus is searched."""
    from experiments.tasks.litm import load_litm_qa

    questions = load_litm_qa(str(path))[:limit] if limit is not None else load_litm_qa(str(path))
    return [Query(f"q{i}", q.query, q.answers) for i, q in enumerate(questions)]


def retrieve_all(engine: Any, queries: Sequence[Query], depth: int,
                 on_hits: Callable[[Query, list[Hit], list[bool]], None] | None = None,
                 progress: bool = True) -> list[list[bool]]:
    """Search every query ``depth`` deep in batches; per query, whether each hit holds an answer."""
    relevance: list[list[bool]] = []
    with progress_bar(len(queries), "retrieve", unit="q", enabled=progress) as bar:
        for lo in range(0, len(queries), BATCH):
            group = list(queries[lo: lo + BATCH])
            for q, hits in zip(group, engine.search([q.text for q in group], depth)):
                rel = [hit_has_answer(h.chunk.text, q.answers) for h in hits]
                relevance.append(rel)
                if on_hits is not None:
                    on_hits(q, hits, rel)
            bar.update(len(group))
    return relevance


def summarize(relevance: Sequence[Sequence[bool]], k: int) -> dict[str, Any]:
    """recall@1/5/20 up to ``k`` (no recall deeper than the k asked for), recall@k, MRR (within the top k) and n."""
    shown = [n for n in SUMMARY_KS if n <= k]
    recall = recall_at_k(relevance, sorted({*shown, k}))
    out: dict[str, Any] = {f"recall@{n}": recall[n] for n in shown}
    out.update({"recall@k": recall[k], "k": k, "mrr": mrr(relevance), "n": len(relevance), "corpus_seed": CORPUS_SEED})
    return out

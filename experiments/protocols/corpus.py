"""A passage corpus and a retriever over it, answering with the passages themselves (open-domain protocols)."""
from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from core.errors import ParamError, UserError
from core.registry import ComponentSpec
from experiments.data.records import Example
from experiments.tasks.litm import load_litm_qa
from indexes.types import Chunk, Passage, unique_passages
from retrievers.base import Retriever
from retrievers.contract import Checked

# (retriever section, chunks) -> a retriever indexed over exactly those chunks, in order
IndexWith = Callable[[Any, Sequence[Chunk]], Retriever]
T = TypeVar("T")
# The seed of the order an open-domain corpus is indexed in (recorded as ``corpus_seed`` in what it makes).
CORPUS_SEED = 0


def index_order(items: Sequence[T], seed: int = CORPUS_SEED) -> list[T]:
    """``items`` in a seeded random order, the order an open-domain corpus is indexed in.

    A Lost in the Middle file lists passages in question order, so in file order the first questions' own
    passages come first: a retriever that answers in index order, a tie broken by position and BM25's
    empty-query fallback would all favour the questions a ``limit`` keeps.  A permutation drawn from the seed
    alone says nothing about which question a passage belongs to.
    """
    return random.Random(seed).sample(list(items), len(items))


def load_litm_corpus(path: str | Path) -> tuple[list[Example], list[Passage]]:
    """A Lost in the Middle QA file as (questions, corpus): every passage of the file, deduplicated by (title, text).

    With ``nq-open-oracle.jsonl.gz`` the corpus is the questions' gold
    passages (2,655 passages, 2,600 distinct), a small real Wikipedia corpus
    in which every question has its answer-bearing passage.  The corpus is
    always the whole file: limiting questions never shrinks it.
    """
    stat = Path(path).stat()
    questions, corpus = _read_corpus(str(path), stat.st_size, stat.st_mtime_ns)
    return list(questions), list(corpus)


@functools.lru_cache(maxsize=4)
def _read_corpus(path: str, size: int, mtime_ns: int) -> tuple[tuple[Example, ...], tuple[Passage, ...]]:
    """One read of a corpus file per version of it (several tasks of a run draw distractors from one file)."""
    questions = load_litm_qa(path)
    return tuple(questions), tuple(unique_passages(p for ex in questions for p in ex.passages))


class PassageIndex:
    """A retriever over whole passages that answers with the passages themselves, best first.

    Passages are deduplicated by (title, text) and given unique chunk ids, so
    a hit maps back to exactly one passage even when the source reuses ids.
    Each hit comes back with its retrieval ``score``.

    ``index_with(retriever, chunks)`` builds the indexed retriever another way
    (embedding shards: ``experiments.run.sharding.ShardPlan.index``); it must
    search as ``make_retriever(retriever).index(chunks)`` would.
    """

    def __init__(self, passages: Sequence[Passage], retriever: Any = "bm25", *,
                 index_with: IndexWith | None = None) -> None:
        from indexes.chunking import passages_to_chunks
        from retrievers.registry import make_retriever

        self.passages = unique_passages(passages)
        if not self.passages:
            raise UserError("cannot index an empty corpus")
        ids = [p.doc_id for p in self.passages]
        if len(set(ids)) != len(ids) or not all(ids):
            self.passages = [replace(p, doc_id=f"c{i}") for i, p in enumerate(self.passages)]
        chunks = passages_to_chunks(self.passages)
        self._by_chunk = {c.chunk_id: p for c, p in zip(chunks, self.passages)}
        if index_with is None:
            self.retriever = make_retriever(retriever)
            self._checked = Checked.index(self.retriever, chunks)
        else:
            self.retriever = index_with(retriever, chunks)
            self._checked = Checked(self.retriever, chunks)

    def __len__(self) -> int:
        return len(self.passages)

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """The top ``k`` passages per query, best first, each carrying its score."""
        return [
            [self._by_chunk[h.chunk.chunk_id].scored(round(float(h.score), 6)) for h in hits]
            for hits in self._checked.search(list(queries), k)
        ]


SHARED_INDEXES = 2  # the lexical indexes kept by shared_passage_index (a corpus of a few thousand passages each)
_shared: dict[tuple[tuple[Passage, ...], str], PassageIndex] = {}


def shared_passage_index(passages: Sequence[Passage], retriever: Any = "bm25") -> PassageIndex:
    """``PassageIndex(passages, retriever)``, built once per process for equal passages and an equal retriever
    section: the tasks of a config that draw distractors from one corpus (study_cpu's BM25 sweeps at 10 and 20
    documents) index it once.  Searching does not change an index, so sharing one changes no result.

    Only a retriever that calls no model (BM25, and hybrids of such) is kept, the last ``SHARED_INDEXES`` of
    them: a dense one would hold its model for the rest of the process, and its embeddings are cached on disk
    anyway.  A section that is not plain JSON is never shared.
    """
    try:
        spec = ComponentSpec.parse(retriever, "retriever")
        key = (tuple(passages), json.dumps([spec.name, spec.params, spec.label], sort_keys=True))
    except (ParamError, TypeError, ValueError):
        return PassageIndex(passages, retriever)  # not a section to share: built here (and refused here, if bad)
    index = _shared.get(key)
    if index is None:
        index = PassageIndex(passages, retriever)
        if not _calls_model(index.retriever):
            while len(_shared) >= SHARED_INDEXES:
                del _shared[next(iter(_shared))]  # the oldest
            _shared[key] = index
    return index


def _calls_model(retriever: Retriever) -> bool:
    return retriever.calls_model or any(_calls_model(inner) for inner in retriever.components())

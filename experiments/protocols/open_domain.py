"""Open-domain QA (Lost in the Middle, Fig. 11): each question gets the top passages of a corpus-wide retrieval.

The paper retrieves k passages per NQ-Open question (Contriever over
Wikipedia) and shows that readers saturate long before recall does.  It
released no code for the figure; ctxcomp rebuilds it as an ordinary run: the
task's questions are given the ``depth`` best passages of one index over the
whole corpus (in rank order, each with its score), and the ``top_k``
compressor keeps the first k of them for every k of the grid.  Each
prediction then records whether its kept passages contain an answer
(``answer_in_context``: recall@k) and its score (accuracy@k); the report
draws the two curves (``experiments.report.curve``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from core.errors import UserError
from core.progress import progress_bar
from experiments.data.records import Example, render_litm_documents
from experiments.protocols.corpus import CORPUS_SEED, IndexWith, PassageIndex, index_order
from indexes.types import Passage

SEARCH_BATCH = 256


def open_domain_examples(questions: Sequence[Example], corpus: Sequence[Passage], *, retriever: Any = "bm25",
                         depth: int = 50, progress: bool = False, index_with: IndexWith | None = None,
                         index: PassageIndex | None = None) -> list[Example]:
    """The questions with their own passages replaced by the ``depth`` best passages of the whole corpus.

    The corpus is indexed in ``index_order`` (seeded, recorded as ``corpus_seed`` in each example's meta), never
    in file order, so no tie or fallback favours the passages of the questions a limit keeps.

    ``index_with``: how the corpus index is built, when not by ``retriever.index`` (see ``PassageIndex``);
    it changes where the vectors are computed, never which passages a question gets.  ``index``: a built
    index to search instead (a corpus on disk: ``experiments.protocols.large_corpus``); ``corpus`` is then unused.
    """
    if depth < 1:
        raise UserError(f"open_domain depth must be >= 1, got {depth}")
    if not questions:
        raise UserError("no questions to retrieve for")
    # a corpus on disk (``index``) is searched as built; one in memory is indexed in the seeded order
    index = index if index is not None else PassageIndex(index_order(corpus), retriever, index_with=index_with)
    out: list[Example] = []
    with progress_bar(len(questions), f"retrieve ({index.retriever.label})", unit="q", leave=False,
                      enabled=progress) as bar:
        for lo in range(0, len(questions), SEARCH_BATCH):
            batch = list(questions[lo: lo + SEARCH_BATCH])
            for q, hits in zip(batch, index.search([q.query for q in batch], depth)):
                out.append(replace(
                    q, passages=tuple(hits), context=render_litm_documents(hits),
                    meta={**q.meta, "protocol": "open_domain", "retriever": index.retriever.identity,
                          "retriever_label": index.retriever.label,
                          "corpus_size": len(index), "corpus_seed": CORPUS_SEED},
                ))
            bar.update(len(batch))
    return out

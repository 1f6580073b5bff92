"""Lost in the Middle multi-document QA protocols (Liu et al., 2023, arXiv 2307.03172).

The paper moves the one answer-bearing ("gold") document through the
positions of a k-document context whose other documents are distractors: the
top retrieved passages that do NOT contain an answer, in decreasing
relevance.  Closed-book (no documents) and oracle (gold only) bound the curve.

These functions only rearrange ``Example`` records; prompting, reading and
scoring stay in the runner, so a sweep runs through the same pipe as any task.
"""
from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import replace
from typing import Any, Iterable, Sequence

from core.errors import UserError
from experiments.data.records import Example, render_litm_documents, swept_id
from experiments.protocols.corpus import shared_passage_index
from indexes.text import has_answer
from indexes.types import Passage, unique_passages

DISTRACTOR_METHODS = ("retriever", "random")


def gold_passage(example: Example) -> Passage:
    """The example's answer-bearing passage (``is_gold``); a clear error when there is none."""
    for passage in example.passages:
        if passage.is_gold:
            return passage
    raise UserError(f"example {example.id!r} ({example.source or 'no source'}) has no gold passage (is_gold)")


def distractors(example: Example) -> list[Passage]:
    """The non-gold passages, in their given (relevance) order."""
    return [p for p in example.passages if not p.is_gold]


def _with_passages(example: Example, passages: Sequence[Passage], suffix: str, **meta: Any) -> Example:
    return replace(
        example,
        id=f"{example.id}{suffix}",
        passages=tuple(passages),
        context=render_litm_documents(passages),
        meta={**example.meta, **meta},
    )


def with_gold_at(example: Example, position: int, num_docs: int) -> Example:
    """The gold passage at 0-based ``position`` among ``num_docs`` documents.

    The other ``num_docs - 1`` documents are the first distractors in their
    given order, as the paper's ``gold_at_{position}`` files are built.
    """
    if num_docs < 1:
        raise UserError(f"num_docs must be >= 1, got {num_docs}")
    if not 0 <= position < num_docs:
        raise UserError(f"gold position {position} is outside 0..{num_docs - 1}")
    gold = gold_passage(example)
    others = distractors(example)
    if len(others) < num_docs - 1:
        raise UserError(
            f"example {example.id!r} has {len(others)} distractors, {num_docs} documents need {num_docs - 1}; "
            "add distractors first (experiments.protocols.litm.add_distractors)"
        )
    docs = others[: num_docs - 1]
    docs.insert(position, gold)
    return _with_passages(example, docs, swept_id("", "gold", position), protocol="gold_position",
                          gold_position=position, num_docs=num_docs)


def litm_qa_record(example: Example) -> dict[str, Any]:
    """The example as one line of the paper's QA files (``question, answers, ctxs``), so loaders read it back."""
    return {
        "question": example.query,
        "answers": list(example.answers),
        "ctxs": [
            {"title": p.title, "text": p.text, "hasanswer": p.has_answer or p.is_gold, "isgold": p.is_gold}
            for p in example.passages
        ],
        "nq_annotated_gold": example.meta.get("nq_annotated_gold"),
    }


def closed_book(example: Example) -> Example:
    """The question with no documents: what the reader knows without reading."""
    return replace(example, id=f"{example.id}@closedbook", passages=(), context="",
                   meta={**example.meta, "protocol": "closed_book", "num_docs": 0})


def oracle(example: Example) -> Example:
    """The gold passage alone: the upper bound of reading."""
    return _with_passages(example, [gold_passage(example)], "@oracle", protocol="oracle",
                          gold_position=0, num_docs=1)


def position_sweep(examples: Iterable[Example], positions: Sequence[int], num_docs: int) -> list[Example]:
    """Every example with the gold at every position, position-major (all of position p, then the next)."""
    examples = list(examples)
    return [with_gold_at(ex, p, num_docs) for p in positions for ex in examples]


def add_distractors(
    examples: Sequence[Example],
    corpus_passages: Sequence[Passage],
    num_docs: int,
    retriever: Any = "bm25",
    *,
    method: str = "retriever",
    seed: int = 0,
) -> list[Example]:
    """Give gold-only examples ``num_docs - 1`` distractors: gold first, then the distractors.

    ``method='retriever'`` mirrors the paper's construction (the top Contriever
    hits over Wikipedia that do not contain an answer, in decreasing relevance)
    with ``retriever`` (BM25 by default) over ``corpus_passages``.
    ``method='random'`` draws them uniformly from the corpus, as the paper's
    appendix B does to separate position from relevance; each example's draw
    is seeded by ``seed`` and its id, so it does not depend on the others.
    Either way a passage is skipped when it contains any answer (DPR's
    ``has_answer``) or is the example's own gold passage.
    """
    if num_docs < 1:
        raise UserError(f"num_docs must be >= 1, got {num_docs}")
    if method not in DISTRACTOR_METHODS:
        raise UserError(f"distractors must be one of {', '.join(DISTRACTOR_METHODS)}, got {method!r}")
    need = num_docs - 1
    unique = unique_passages(corpus_passages)
    if need > len(unique):
        raise UserError(f"{num_docs} documents need {need} distractors but the corpus has {len(unique)} passages")
    golds = {ex.id: gold_passage(ex) for ex in examples}

    def usable(ex: Example, p: Passage) -> bool:
        gold = golds[ex.id]
        return (p.title, p.text) != (gold.title, gold.text) and not has_answer(p.text, ex.answers)

    def build(ex: Example, picked: list[Passage]) -> Example:
        picked = [replace(p, is_gold=False, has_answer=False, score=None) for p in picked]
        return _with_passages(ex, [golds[ex.id], *picked], "", gold_position=0, num_docs=num_docs,
                              distractors=method)

    if method == "random":
        out = []
        for ex in examples:
            rng = random.Random(int(hashlib.sha256(f"{seed}:{ex.id}".encode()).hexdigest()[:16], 16))
            order = rng.sample(range(len(unique)), len(unique))
            picked = list(itertools.islice((unique[i] for i in order if usable(ex, unique[i])), need))
            if len(picked) < need:
                raise UserError(f"example {ex.id!r}: only {len(picked)} corpus passages lack the answer, {need} needed")
            out.append(build(ex, picked))
        return out
    index = shared_passage_index(unique, retriever)  # several sweeps over one corpus index it once
    out_by_id: dict[str, Example] = {}
    pending = list(examples)
    k = min(len(index), max(4 * need, need + 20))
    while pending:
        ranked = index.search([ex.query for ex in pending], k)
        retry: list[Example] = []
        for ex, hits in zip(pending, ranked):
            picked = [p for p in hits if usable(ex, p)][:need]
            if len(picked) == need:
                out_by_id[ex.id] = build(ex, picked)
            elif k >= len(index):
                raise UserError(f"example {ex.id!r}: only {len(picked)} of the corpus's passages lack the answer, "
                                f"{need} distractors needed")
            else:
                retry.append(ex)
        pending = retry
        k = min(len(index), k * 4)
    return [out_by_id[ex.id] for ex in examples]


def gold_sweep(examples: list[Example], task: Any) -> list[Example]:
    """A config's ``sweep`` section on multi-document examples: the gold document through each position among
    ``num_docs`` (distractors added from the task's file where the examples lack them), plus the closed-book
    and oracle arms it asks for.  ``task``: the run config's task (its ``key``, ``file`` and ``sweep``)."""
    section = task.sweep
    num_docs = section.num_docs or max(len(ex.passages) for ex in examples)
    if any(len(distractors(ex)) < num_docs - 1 for ex in examples):
        if section.distractors is None:
            raise UserError(f"task {task.key!r}: {num_docs} documents need distractors these examples lack; "
                            "add `distractors: {method: retriever}` (or `random`) to the sweep")
        from experiments.protocols.corpus import load_litm_corpus

        d = section.distractors
        _, corpus = load_litm_corpus(task.file)  # the whole file, whatever `limit` keeps
        examples = add_distractors(examples, corpus, num_docs, d.retriever.spec, method=d.method, seed=d.seed)
    out = position_sweep(examples, section.positions, num_docs)
    if section.closed_book:
        out += [closed_book(ex) for ex in examples]
    if section.oracle:
        out += [oracle(ex) for ex in examples]
    return out

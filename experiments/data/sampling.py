"""Seeded, nested samples of a task's questions: ``sample: {n: 48, seed: 0, by: document}``.

``limit: N`` keeps the first N questions of a file, and an L-Eval file asks several questions of each
document, so ``limit: 6`` can be five questions on one document: an interval over them says little about the
task.  A sample instead puts the whole pool in one seeded order and keeps its first ``n``:

- ``by: document`` orders the documents (``Example.cluster``) and the questions within each document, then
  deals the questions round-robin: one question from every document before a second from any, so a sample of
  n covers min(n, documents) documents;
- ``by: none`` orders the questions alone (a plain seeded sample).

``deal: whole`` (with ``by: document``) keeps each document's questions together instead: the sample of n is the
first documents in seeded order, each whole, until it holds at least n questions.  A run that grows its sample
(``ctxcomp run --until-decided``) deals this way, so a later look never adds a question to a document an
earlier look already tested: each look extends the documents the last one saw and changes none of them.

Every order is a function of the seed and the example's id and cluster only (a keyed hash, not a random
stream), so it does not depend on the file's order, the Python or numpy version, or ``n``: the sample of n is
a prefix of the sample of any larger n with the same seed.  Growing n therefore adds questions and never drops
one, and every generation a smaller sample made is reused.
"""
from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import zip_longest
from typing import Literal, TypeVar

from experiments.data.records import Example

E = TypeVar("E", bound=Example)
SampleBy = Literal["document", "none"]
SampleDeal = Literal["round-robin", "whole"]


def _rank(seed: int, kind: str, key: str) -> bytes:
    return hashlib.blake2b(f"{seed}\x00{kind}\x00{key}".encode("utf-8"), digest_size=8).digest()


def sample_order(examples: Sequence[E], *, seed: int, by: SampleBy = "document",
                 deal: SampleDeal = "round-robin") -> list[E]:
    """Every example of the pool in sampling order; the sample of n is its first n (with ``deal: whole``, its
    first n rounded up to the end of a document)."""
    if by == "none":
        return sorted(examples, key=lambda ex: _rank(seed, "question", ex.id))
    groups: dict[str, list[E]] = defaultdict(list)
    for ex in examples:
        groups[ex.cluster].append(ex)
    documents = sorted(groups, key=lambda doc: _rank(seed, "document", doc))
    queues = [sorted(groups[doc], key=lambda ex: _rank(seed, "question", ex.id)) for doc in documents]
    if deal == "whole":
        return [ex for queue in queues for ex in queue]
    return [ex for round_ in zip_longest(*queues) for ex in round_ if ex is not None]


def dealt_bound(sizes: Iterable[int], n: int) -> int:
    """The most questions a round-robin sample of ``n`` (``by: document``) can deal one document, from the
    pool's questions per document alone: the fewest rounds r with sum(min(size, r)) >= n, since round r
    deals one question to every document that still has one.  Known before any score, so it can bound a
    document's sum in the betting test (one question a document while n does not exceed the documents)."""
    sizes = sorted(sizes)
    n = min(n, sum(sizes))
    rounds, dealt, left = 0, 0, len(sizes)
    for size in sizes:  # raise r to each size in turn; every document not yet exhausted takes one more a round
        step = size - rounds
        if dealt + step * left >= n:
            return rounds + -(-(n - dealt) // left) if left else rounds
        dealt += step * left
        rounds, left = size, left - 1
    return rounds


def draw_sample(examples: Sequence[E], n: int, *, seed: int, by: SampleBy = "document",
                deal: SampleDeal = "round-robin") -> list[E]:
    """The first ``n`` examples of ``sample_order`` (all of them when the pool is smaller); dealt whole, every
    document it enters is taken whole."""
    if deal == "whole" and by != "document":
        raise ValueError("deal='whole' keeps each document's questions together: it needs by='document'")
    order = sample_order(examples, seed=seed, by=by, deal=deal)
    end = n
    while deal == "whole" and 0 < end < len(order) and order[end].cluster == order[end - 1].cluster:
        end += 1
    return order[:end]


__all__ = ["SampleBy", "SampleDeal", "dealt_bound", "draw_sample", "sample_order"]

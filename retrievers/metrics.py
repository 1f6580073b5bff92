"""Retrieval metrics as pure functions of ranked relevance judgements (inputs are never changed).

A hit is relevant when it contains an answer string (Lost in the Middle's
``hasanswer``: SQuAD-normalised tokens); relevance is a per-query list of
booleans in rank order.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from indexes.text import has_answer


def hit_has_answer(hit_text: str, answers: Sequence[str]) -> bool:
    """True when an answer occurs in the hit as a run of whole normalised tokens (DPR / Lost in the Middle ``hasanswer``)."""
    return has_answer(hit_text, tuple(answers))


def _check_ks(ks: Iterable[int]) -> list[int]:
    ks = list(ks)
    if not ks or any(not isinstance(k, int) or k <= 0 for k in ks):
        raise ValueError(f"ks must be positive ints, got {ks}")
    return ks


def recall_at_k(ranked: Sequence[Sequence[bool]], ks: Iterable[int]) -> dict[int, float]:
    """Fraction of queries with at least one relevant hit in their top ``k`` (0.0 for no queries)."""
    ks = _check_ks(ks)
    if not ranked:
        return {k: 0.0 for k in ks}
    return {k: sum(any(row[:k]) for row in ranked) / len(ranked) for k in ks}


def reciprocal_rank(row: Sequence[bool]) -> float:
    """1 / (1-based rank of the first relevant hit), 0.0 when none is relevant."""
    return next((1.0 / (i + 1) for i, rel in enumerate(row) if rel), 0.0)


def mrr(ranked: Sequence[Sequence[bool]]) -> float:
    """Mean reciprocal rank over queries (0.0 for no queries)."""
    return sum(reciprocal_rank(row) for row in ranked) / len(ranked) if ranked else 0.0


def relevance_by_answers(hit_texts: Sequence[Sequence[str]], answers: Sequence[Sequence[str]]) -> list[list[bool]]:
    """Per query, whether each ranked hit text contains one of that query's answers."""
    if len(hit_texts) != len(answers):
        raise ValueError(f"{len(hit_texts)} ranked lists for {len(answers)} answer lists")
    return [[hit_has_answer(t, ans) for t in texts] for texts, ans in zip(hit_texts, answers)]

"""Retrieval metrics on hand-made judgements."""
from __future__ import annotations

import copy

import pytest

from retrievers.metrics import hit_has_answer, mrr, recall_at_k, relevance_by_answers


def test_hit_has_answer_uses_squad_normalisation():
    assert hit_has_answer("It was built by The Beatles, in 1962.", ["beatles"])
    assert hit_has_answer("The U.S.A. is large", ["USA"])
    assert not hit_has_answer("The Beatle", ["beatles"])
    assert not hit_has_answer("anything", [""])


def test_recall_and_mrr_by_hand():
    ranked = [[False, True, False], [False, False, False], [True, False, True]]
    frozen = copy.deepcopy(ranked)
    assert recall_at_k(ranked, [1, 2, 3]) == {1: pytest.approx(1 / 3), 2: pytest.approx(2 / 3), 3: pytest.approx(2 / 3)}
    assert mrr(ranked) == pytest.approx((1 / 2 + 0 + 1) / 3)
    assert ranked == frozen
    assert recall_at_k([], [5]) == {5: 0.0} and mrr([]) == 0.0
    with pytest.raises(ValueError):
        recall_at_k(ranked, [0])


def test_relevance_by_answers():
    assert relevance_by_answers([["Paris, France", "Rome"]], [["paris"]]) == [[True, False]]

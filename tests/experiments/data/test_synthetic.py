"""Synthetic multi-document QA: deterministic, answerable from the gold passage only, retrievable by BM25."""
from __future__ import annotations

from experiments.data.synthetic import make_multidoc_qa
from indexes.text import contains_answer


def test_deterministic_and_well_formed():
    a = make_multidoc_qa(12, num_docs=5, words_per_doc=60, seed=3)
    assert a == make_multidoc_qa(12, num_docs=5, words_per_doc=60, seed=3)
    assert a[0].context != make_multidoc_qa(1, num_docs=5, words_per_doc=60, seed=4)[0].context
    for ex in a:
        assert ex.task == "nq_multidoc" and len(ex.passages) == 5
        gold = [p for p in ex.passages if p.is_gold]
        assert len(gold) == 1 and ex.passages[ex.meta["gold_position"]] is gold[0]
        assert contains_answer(gold[0].text, ex.answers)
        assert not any(contains_answer(p.text, ex.answers) for p in ex.passages if not p.is_gold)
        assert all(len(p.text.split()) >= 60 and p.text.endswith(".") for p in ex.passages)
    assert sorted({ex.meta["gold_position"] for ex in a}) == [0, 1, 2, 3, 4]


def test_bm25_finds_gold_at_rank_one():
    from indexes.chunking import passages_to_chunks
    from retrievers.registry import make_retriever

    examples = make_multidoc_qa(30, num_docs=10, seed=0)
    hits_at_1 = 0
    for ex in examples:
        retriever = make_retriever("bm25").index(passages_to_chunks(ex.passages))
        top = retriever.search([ex.query], 1)[0][0]
        hits_at_1 += top.chunk.text == next(p.text for p in ex.passages if p.is_gold)
    assert hits_at_1 / len(examples) >= 0.8

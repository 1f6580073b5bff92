"""Lost in the Middle protocols: gold placement, closed-book/oracle, distractor mining, accuracy by position."""
from __future__ import annotations

import pytest

from core.errors import UserError
from experiments.data.records import Example
from experiments.protocols import litm
from indexes.text import has_answer
from indexes.types import Passage

ORACLE = "lost_in_the_middle/nq-open-oracle.jsonl.gz"


def _example(n_distractors: int = 4) -> Example:
    gold = Passage("Paris is the capital of France.", "France", "g", is_gold=True, has_answer=True)
    others = [Passage(f"Distractor number {i}.", f"D{i}", f"d{i}") for i in range(n_distractors)]
    return Example(id="q1", task="nq_multidoc", query="What is the capital of France?", context="",
                   answers=("Paris",), passages=(others[0], gold, *others[1:]))


def test_with_gold_at_places_gold_and_keeps_distractor_order():
    ex = litm.with_gold_at(_example(), 2, 4)
    assert [p.doc_id for p in ex.passages] == ["d0", "d1", "g", "d2"]
    assert ex.id == "q1@gold2"
    assert ex.meta["gold_position"] == 2 and ex.meta["num_docs"] == 4
    lines = ex.context.split("\n")
    assert lines[2] == "Document [3](Title: France) Paris is the capital of France."
    assert lines[0] == "Document [1](Title: D0) Distractor number 0."


@pytest.mark.parametrize("position,num_docs", [(-1, 4), (4, 4), (0, 7)])
def test_with_gold_at_rejects_bad_positions_and_too_few_distractors(position, num_docs):
    with pytest.raises(ValueError):
        litm.with_gold_at(_example(), position, num_docs)


def test_closed_book_and_oracle():
    cb = litm.closed_book(_example())
    assert cb.passages == () and cb.context == "" and cb.id.endswith("@closedbook")
    orc = litm.oracle(_example())
    assert [p.doc_id for p in orc.passages] == ["g"]
    assert orc.context == "Document [1](Title: France) Paris is the capital of France."


def test_position_sweep_is_position_major():
    examples = [_example(), _example()]
    swept = litm.position_sweep(examples, [0, 3], 4)
    assert [e.meta["gold_position"] for e in swept] == [0, 0, 3, 3]
    assert swept[2].passages[3].is_gold


def test_add_distractors_on_synthetic_corpus():
    corpus = [Passage(f"The river {name} flows north past {town}.", name, f"c{i}")
              for i, (name, town) in enumerate([("Alder", "Brook"), ("Birch", "Cove"), ("Cedar", "Dale"),
                                               ("Elm", "Paris"), ("Fir", "Glen")])]
    gold = Passage("The river Oak flows past Paris.", "Oak", "g", is_gold=True, has_answer=True)
    ex = Example(id="q", task="nq_multidoc", query="Which town does the river Oak flow past?", context="",
                 answers=("Paris",), passages=(gold,))
    out = litm.add_distractors([ex], [*corpus, gold], 4)[0]
    assert out.passages[0] == gold and len(out.passages) == 4
    assert all(not has_answer(p.text, ex.answers) for p in out.passages[1:])  # "Elm ... Paris" is skipped
    assert "Elm" not in [p.title for p in out.passages]


def test_add_distractors_on_real_oracle(shared_data):
    from experiments.protocols.corpus import load_litm_corpus

    questions, corpus = load_litm_corpus(shared_data / ORACLE)
    built = litm.add_distractors(questions[:50], corpus, 10)
    assert len(built) == 50
    for original, ex in zip(questions[:50], built):
        assert len(ex.passages) == 10 and ex.passages[0].is_gold
        assert ex.passages[0].text == litm.gold_passage(original).text
        assert not any(has_answer(p.text, ex.answers) for p in ex.passages[1:])
        assert len({p.text for p in ex.passages}) == 10
    swept = litm.with_gold_at(built[0], 9, 10)
    assert swept.passages[9].is_gold and swept.context.count("Document [") == 10


def test_random_distractors_are_seeded_per_example_and_lack_the_answer(shared_data):
    from experiments.protocols.corpus import load_litm_corpus

    questions, corpus = load_litm_corpus(shared_data / ORACLE)
    a = litm.add_distractors(questions[:20], corpus, 10, method="random", seed=3)
    b = litm.add_distractors(questions[5:20], corpus, 10, method="random", seed=3)
    c = litm.add_distractors(questions[:20], corpus, 10, method="random", seed=4)
    assert [p.text for p in a[5].passages] == [p.text for p in b[0].passages]  # independent of the other examples
    assert [p.text for p in a[0].passages] != [p.text for p in c[0].passages]
    for ex in a:
        assert ex.passages[0].is_gold and ex.meta["distractors"] == "random"
        assert not any(has_answer(p.text, ex.answers) for p in ex.passages[1:])
    bm25 = litm.add_distractors(questions[:20], corpus, 10)
    overlap = sum(len({p.text for p in x.passages[1:]} & {p.text for p in y.passages[1:]}) for x, y in zip(a, bm25))
    assert overlap < 20  # random draws are not the retriever's top hits (9 x 20 = 180 distractors each)


def test_unknown_distractor_method_is_refused():
    with pytest.raises(UserError, match="distractors must be one of"):
        litm.add_distractors([_example()], [Passage("x", "y")], 2, method="nearest")


def test_sweeps_over_one_corpus_share_its_index_and_only_for_equal_inputs():
    from experiments.protocols.corpus import shared_passage_index

    corpus = [Passage(f"The river R{i} flows past T{i}.", f"R{i}", f"c{i}") for i in range(6)]
    index = shared_passage_index(corpus, "bm25")
    assert shared_passage_index(list(corpus), {"name": "bm25"}) is index  # equal passages, an equal section
    assert shared_passage_index(corpus[:5], "bm25") is not index  # other passages...
    other = shared_passage_index(corpus, {"name": "bm25", "params": {"k1": 0.9}})  # ...or other parameters
    assert other is not index and other.retriever.k1 == 0.9
    changed = [*corpus[:5], Passage("The river R5 flows past T6.", "R5", "c5")]
    assert shared_passage_index(changed, "bm25").search(["T6"], 1)[0][0].text.endswith("T6.")
    with pytest.raises(UserError, match="k1 must be a number"):  # not JSON: not shared, refused by the parameter check
        shared_passage_index(corpus, {"name": "bm25", "params": {"k1": object()}})
    tfidf = "tests.retrievers.plugin_example:TfidfRetriever"  # a plugin that does not say it calls no model
    assert shared_passage_index(corpus, tfidf) is not shared_passage_index(corpus, tfidf)  # is not kept

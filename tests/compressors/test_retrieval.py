"""Retrieval compression with real BM25 on hand-made contexts whose right answers are known."""
from __future__ import annotations

import pytest

from compressors.base import CompressionError
from compressors.retrieval import RetrievalCompressor
from indexes.types import Passage

# Eight sentences of eight words each; with chunk_size=8 every sentence is its own chunk.
SENTENCES = [
    "Heavy rain fell over the northern hills today.",  # 0
    "The bakery sold fresh bread every single morning.",  # 1
    "Zephyr station sent a brief status report yesterday.",  # 2  (zephyr)
    "Farmers planted wheat along the river valley slowly.",  # 3
    "The launch code of Zephyr station changed twice.",  # 4  (zephyr, launch)
    "Children played football in the quiet park outside.",  # 5
    "Zephyr station launch code is exactly forty seven.",  # 6  (zephyr, launch, exactly)
    "Old trains still cross the mountain pass weekly.",  # 7
]
CONTEXT = " ".join(SENTENCES)
QUERY = "What exactly is the launch code of Zephyr station?"


def _retrieval(**params):
    return RetrievalCompressor(retriever="bm25", chunker="longbench", chunk_size=8, **params)


def test_chunks_are_sentences(make_item):
    out = _retrieval(top_n=8).compress(make_item(CONTEXT, QUERY))
    assert out.trace["n_chunks"] == 8


def test_gold_sentence_is_kept_first(make_item):
    out = _retrieval(top_n=1).compress(make_item(CONTEXT, QUERY, id="gold"))
    assert out.kept_chunks == ("gold#6",)
    assert "forty seven" in out.text
    assert out.tokens_in == 64 and out.tokens_out == 8
    assert [unit for unit, _ in out.trace["ranking"]][0] == "gold#6"
    assert len([unit for unit, _ in out.trace["ranking"]]) == 8  # the whole ranking is traced, not only the kept part
    assert out.trace["chunker"] == "longbench:8"
    assert out.trace["retriever"].startswith("bm25(")


def test_score_order_then_document_order(make_item):
    # Query-term overlap: #6 has zephyr+launch+exactly, #4 zephyr+launch, #2 zephyr only.
    by_score = _retrieval(top_n=3).compress(make_item(CONTEXT, QUERY, id="e"))
    assert by_score.kept_chunks == ("e#6", "e#4", "e#2")
    assert list(by_score.scores) == sorted(by_score.scores, reverse=True)
    assert by_score.text == "\n\n".join([SENTENCES[6], SENTENCES[4], SENTENCES[2]])

    by_doc = _retrieval(top_n=3, order="document").compress(make_item(CONTEXT, QUERY, id="e"))
    assert by_doc.kept_chunks == ("e#2", "e#4", "e#6")
    assert by_doc.text == "\n\n".join([SENTENCES[2], SENTENCES[4], SENTENCES[6]])
    assert [unit for unit, _ in by_doc.trace["ranking"]][:3] == ["e#6", "e#4", "e#2"]  # ranking unchanged


def test_fewer_chunks_than_top_n_keeps_all(make_item):
    out = _retrieval(top_n=50).compress(make_item(" ".join(SENTENCES[:2]), "bakery bread"))
    assert sorted(out.kept_chunks) == ["ex-1#0", "ex-1#1"]


def test_token_budget_keeps_the_ranked_prefix_that_fits(make_item):
    # 8 words per chunk, separator adds no words: 20 words fit two chunks, not three.
    out = _retrieval(token_budget=20).compress(make_item(CONTEXT, QUERY, id="b"))
    assert out.kept_chunks == ("b#6", "b#4")
    assert out.tokens_out == 16
    # top_n and token_budget together: both limits apply.
    assert _retrieval(token_budget=100, top_n=1).compress(make_item(CONTEXT, QUERY, id="b")).kept_chunks == ("b#6",)
    # default without a budget is LongBench's N=3
    assert len(_retrieval().compress(make_item(CONTEXT, QUERY)).kept_chunks) == 3


def test_passage_units_keep_titles(make_item):
    passages = (
        Passage("A river runs through the old town.", title="Riverton"),
        Passage("The Zephyr station launch code is forty seven.", title="Zephyr station"),
        Passage("Wheat grows well in the valley.", title="Valley farming"),
    )
    context = "\n".join(f"{p.title}\n{p.text}" for p in passages)
    item = make_item(context, QUERY, passages=passages)
    out = _retrieval(top_n=1).compress(item)
    assert out.passages == (passages[1],)
    assert out.kept_chunks == ("p1#0",)
    assert out.text == "Zephyr station\nThe Zephyr station launch code is forty seven."
    assert out.trace["chunker"] == "passages"

    both = _retrieval(top_n=2, order="document").compress(item)
    assert [p.title for p in both.passages] == sorted([p.title for p in both.passages], key=[q.title for q in passages].index)

    as_chunks = _retrieval(top_n=1, unit="chunk").compress(item)
    assert as_chunks.passages == ()


def test_passage_unit_without_passages_is_an_error(make_item):
    with pytest.raises(CompressionError, match="no-passages"):
        _retrieval(unit="passage").compress(make_item(CONTEXT, QUERY, id="no-passages"))


def test_longbench_compat_joins_in_score_order_without_separator(make_item):
    comp = _retrieval(top_n=2, longbench_compat=True)
    assert "chars-longbench" in comp.retriever.identity
    out = comp.compress(make_item(CONTEXT, QUERY))
    ranked = [unit for unit, _ in out.trace["ranking"]]
    # LongBench chunks keep the delimiter's trailing space (every sentence but the last has one).
    by_id = {f"ex-1#{i}": s + (" " if i < 7 else "") for i, s in enumerate(SENTENCES)}
    assert out.text == by_id[ranked[0]] + by_id[ranked[1]]
    assert "\n" not in out.text
    with pytest.raises(ValueError, match="longbench_compat"):
        _retrieval(longbench_compat=True, order="document")


def test_retriever_is_built_once_and_reindexed_per_example(make_item):
    comp = _retrieval(top_n=1)
    retriever = comp.retriever
    first = comp.compress(make_item(CONTEXT, QUERY, id="one"))
    second = comp.compress(make_item(" ".join(SENTENCES[:4]), "bakery bread morning", id="two"))
    assert comp.retriever is retriever
    assert first.kept_chunks == ("one#6",)
    assert second.kept_chunks == ("two#1",)
    assert all(cid.startswith("two#") for cid in [unit for unit, _ in second.trace["ranking"]])


def test_retriever_section_with_params(make_item):
    comp = RetrievalCompressor(retriever={"name": "bm25", "params": {"k1": 1.2}}, chunk_size=8, top_n=1)
    assert "k1=1.2" in comp.retriever.identity
    with pytest.raises(ValueError, match="name"):
        RetrievalCompressor(retriever={"params": {}})


@pytest.mark.parametrize("context, query", [("   \n ", QUERY), (CONTEXT, "  ")])
def test_empty_context_or_query_names_the_example(make_item, context, query):
    with pytest.raises(CompressionError, match="bad-7"):
        _retrieval().compress(make_item(context, query, id="bad-7"))


def test_a_token_budget_below_the_best_chunk_is_an_error_not_an_empty_context():
    from compressors.base import CompressionError
    from compressors.registry import make_compressor

    class Item:
        id = "ex-budget"
        query = "Where is the tower?"
        context = "The tower stands in the old harbour district of the city. " * 5
        passages = ()
        lang = "en"

    comp = make_compressor("retrieval", retriever="bm25", chunker="words", chunk_size=20, token_budget=3)
    with pytest.raises(CompressionError, match=r"ex-budget.*token_budget=3"):
        comp.compress(Item())


def test_long_passages_are_chunked_and_every_piece_keeps_its_title(make_item):
    long_text = " ".join(f"Filler sentence number {i} about rivers." for i in range(30))
    passages = (Passage("Short passage about the Velmora harbour.", "Velmora"),
                Passage(long_text + " The launch code of Zephyr station is 4417.", "Zephyr station"))
    comp = RetrievalCompressor(retriever="bm25", chunker="words", chunk_size=40, top_n=1)
    out = comp.compress(make_item("ignored", query="launch code of Zephyr station", passages=passages))
    (kept,) = out.passages
    assert kept.title == "Zephyr station" and "4417" in kept.text and len(kept.text.split()) <= 40
    assert out.kept_chunks[0].startswith("p1#") and out.kept_chunks[0] != "p1#0"
    assert out.text.startswith("Zephyr station\n")


SETTINGS = ("chunk_size", "top_n", "token_budget", "order", "separator", "unit", "longbench_compat")


@pytest.mark.parametrize("params", [{}, {"chunk_size": 200}, {"top_n": 7}, {"token_budget": 300},
                                    {"token_budget": 300, "top_n": 2}, {"order": "document", "separator": " | "},
                                    {"longbench_compat": True}])
def test_the_settings_read_without_building_are_the_ones_an_instance_uses(params):
    """One source for the chunking defaults: the report and the dry run read a point's settings from the class
    (``resolved_params``) without building it; they must be what the compressor built from them does."""
    built = RetrievalCompressor(**params)
    resolved = RetrievalCompressor.resolved_params(params)
    assert {name: resolved[name] for name in SETTINGS} == {name: getattr(built, name) for name in SETTINGS}

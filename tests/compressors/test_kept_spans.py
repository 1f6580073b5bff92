"""Every built-in compressor says what it kept as spans of the original context (``CompressedContext.kept_spans``),
so the view highlights it without knowing the compressor: the spans hold exactly the text the reader sees."""
from __future__ import annotations

import pytest

from compressors.registry import make_compressor
from compressors.spans import align_kept_text, edge_spans, normalized
from indexes.types import Passage, render_passage
from tests.support.first_words import FirstWords

WORDS = " ".join(f"w{i}" for i in range(200))
PASSAGES = tuple(Passage(text=f"passage {i} says the code is {i * 7} and more words follow here", title=f"T{i}",
                         doc_id=f"d{i}") for i in range(6))
MULTI = "\n\n".join(render_passage(p) for p in PASSAGES)


def _pieces(context: str, spans) -> list[str]:
    return [context[s:e] for s, e in spans]


def test_full_keeps_the_whole_context_and_nothing_of_an_empty_one(make_item):
    assert make_compressor("full").compress(make_item(WORDS)).kept_spans == ((0, len(WORDS)),)
    assert make_compressor("full").compress(make_item("")).kept_spans == ()


@pytest.mark.parametrize("policy, head, tail", [("right", 20, 0), ("left", 0, 20), ("middle", 10, 10)])
def test_truncate_keeps_the_edges_its_policy_names(make_item, policy, head, tail):
    out = make_compressor({"name": "truncate", "params": {"max_tokens": 20, "policy": policy}}).compress(make_item(WORDS))
    words = WORDS.split()
    kept = " ".join(_pieces(WORDS, out.kept_spans)).split()
    assert kept == words[:head] + words[len(words) - tail:]
    assert out.kept_spans == normalized(out.kept_spans)


def test_retrieval_chunks_are_their_own_spans_in_either_order(make_item):
    item = make_item(WORDS, query="w150 w151 w3")
    for order in ("score", "document"):
        out = make_compressor({"name": "retrieval", "params": {"chunk_size": 20, "top_n": 2, "order": order}}).compress(item)
        assert sorted(p.strip() for p in _pieces(WORDS, out.kept_spans)) == sorted(out.text.split("\n\n"))
        spans = out.trace["unit_spans"]
        assert set(out.kept_chunks) <= set(spans) and len(spans) == out.trace["n_chunks"]


def test_retrieval_passage_units_are_found_in_the_rendered_context(make_item):
    item = make_item(MULTI, query="code is 21", passages=PASSAGES)
    out = make_compressor({"name": "retrieval", "params": {"top_n": 2}}).compress(item)
    assert sorted(_pieces(MULTI, out.kept_spans)) == sorted(p.text for p in out.passages)


def test_top_k_keeps_its_passages_spans_and_ranks_every_passage_with_one(make_item):
    out = make_compressor({"name": "top_k", "params": {"k": 3}}).compress(make_item(MULTI, passages=PASSAGES))
    assert _pieces(MULTI, out.kept_spans) == [p.text for p in PASSAGES[:3]]
    assert set(out.trace["unit_spans"]) == {p.doc_id for p in PASSAGES}


def test_a_summary_keeps_no_span_but_sets_each_summary_beside_its_chunk(make_item):
    out = make_compressor({"name": "summarize", "params": {"chunk_size": 50}}, reader=FirstWords()).compress(
        make_item(WORDS))
    assert out.kept_spans is None
    for s in out.trace["summaries"]:
        assert WORDS[s["start"]:s["end"]].split()[:3] == s["summary"].split()[:3]


def test_the_span_helpers():
    assert normalized([(5, 9), (0, 3), (2, 4), (9, 9), (9, 12)]) == ((0, 4), (5, 9), (9, 12))
    context = "the cat sat on the mat"
    assert edge_spans(context, "the cat mat", head=True, tail=True) == ((0, 7), (18, 22))
    assert edge_spans(context, "the cat", head=True, tail=False) == ((0, 7),)
    assert align_kept_text(context, "cat mat") == ((4, 7), (19, 22))


def test_punctuation_a_pruner_glued_onto_a_word_is_aligned_where_each_was_kept():
    """LLMLingua-2 joins what it keeps, so "2012" and the "." ending a later sentence come out as "2012."; matched
    whole, that piece jumped to the one place the context spells "2012." and every word after it was lost."""
    context = "Welcome to our 2012 conference call. The outlook is good. Revenue for 2012. Costs fell."
    spans = align_kept_text(context, "Welcome 2012. outlook good. Costs")
    kept = [context[s:e] for s, e in spans]
    assert kept[:2] == ["Welcome", "2012"] and context.index("2012") == spans[1][0]
    assert "outlook" in kept and "Costs" in kept  # nothing after the glued piece is lost

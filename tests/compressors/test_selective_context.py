"""Selective Context: self-information of tokens, words or sentences from a causal LM, the least informative
dropped by percentile; a tiny local Llama, offline."""
from __future__ import annotations

import pytest

from compressors.registry import make_compressor
from compressors.selective_context import sentences
from tests.support.tiny_lm import build_tiny_lm

CONTEXT = ("The river rises in the hills near Zürich. Mills were built along it in 1820, e.g. the old Weber mill. "
           "Mr. Weber sold it in 1901? The town grew around the mills.\nToday the mills are museums and cafés.")


class Item:
    def __init__(self, context: str) -> None:
        self.id, self.context, self.query, self.passages, self.lang = "ex", context, "", (), "en"


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> str:
    return build_tiny_lm(tmp_path_factory.mktemp("lm") / "tiny", [CONTEXT] * 4)


def compressor(tiny_lm, **params):
    return make_compressor({"name": "selective_context", "params": {"model": tiny_lm, "device": "cpu", **params}})


def test_sentences_follow_the_authors_pattern():
    spans = sentences(CONTEXT)
    assert [CONTEXT[s:e][:12] for s, e in spans] == ["The river ri", "Mills were b", "Mr. Weber so", "The town gre",
                                                      "Today the mi"]
    # "e.g." and "Mr." end no sentence; "?" does, and so does "." before a newline; each span is stripped
    assert all(CONTEXT[e - 1] in ".?" and not CONTEXT[s].isspace() for s, e in spans)


@pytest.mark.parametrize("unit", ["token", "word", "sentence"])
def test_drops_the_share_of_units_asked_and_says_where_the_rest_is(tiny_lm, unit):
    out = compressor(tiny_lm, unit=unit, reduce_ratio=0.5).compress(Item(CONTEXT))
    n, kept = out.trace["n_units"], out.trace["n_kept"]
    assert n >= 4 and n / 2 - 1 <= kept <= n / 2 + 1  # a percentile splits the units in half, ties aside
    spans = out.kept_spans
    assert all(0 <= s < e <= len(CONTEXT) for s, e in spans) and all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
    assert out.text == " ".join(" ".join(CONTEXT[s:e].split()) for s, e in spans)
    if unit == "sentence":
        assert {s for s, _ in spans} <= {s for s, _ in sentences(CONTEXT)}


def test_more_reduction_keeps_less_and_the_scores_are_computed_once(tiny_lm):
    light = compressor(tiny_lm, reduce_ratio=0.2).compress(Item(CONTEXT))
    heavy = compressor(tiny_lm, reduce_ratio=0.7).compress(Item(CONTEXT))
    assert heavy.tokens_out < light.tokens_out < light.tokens_in
    assert heavy.trace["sentences_cached"] == 5 and heavy.trace["sentences_scored"] == 0  # every sentence re-used
    assert heavy.work.calls == 0 and heavy.work.cache_hits == 5


def test_a_budget_is_aimed_at_and_recorded(tiny_lm):
    comp = compressor(tiny_lm)
    assert comp.budget_support == "best_effort"
    out = comp.compress(Item(CONTEXT), 20)
    assert out.budget == 20 and out.trace["requested_tokens"] == 20 and out.trace["achieved_tokens"] == out.tokens_out
    assert abs(out.tokens_out - 20) <= 8 and out.trace["over_budget"] == (out.tokens_out > 20)
    whole = comp.compress(Item(CONTEXT), 10**4)
    assert whole.text == CONTEXT and whole.kept_spans == ((0, len(CONTEXT)),)


@pytest.mark.slow
def test_smollm2_on_a_real_news_article_drops_the_share_asked():
    import json

    from tests.conftest import SHARED_DATA

    path = SHARED_DATA / "leval" / "news_summ.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    article = json.loads(path.read_text(encoding="utf-8").splitlines()[0])["input"][:3000]
    comp = make_compressor({"name": "selective_context", "params": {"reduce_ratio": 0.35, "device": "cpu"}})
    out = comp.compress(Item(article))
    n, kept = out.trace["n_units"], out.trace["n_kept"]
    assert n > 300 and abs(kept - 0.65 * n) <= 0.02 * n  # a percentile of distinct float scores: ties are rare
    assert set(out.text.split()) <= set(article.split()) and out.tokens_out < out.tokens_in
    again = make_compressor({"name": "selective_context", "params": {"reduce_ratio": 0.6, "device": "cpu"}}
                            ).compress(Item(article))
    assert again.trace["sentences_scored"] == 0 and again.tokens_out < out.tokens_out

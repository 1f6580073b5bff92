"""RECOMP's extractive compressor: sentences scored against the query by a dual encoder, the best kept."""
from __future__ import annotations

import json

import pytest

from compressors.registry import make_compressor
from core.errors import UserError
from tests.conftest import SHARED_DATA
from tests.support.tiny_encoder import build_tiny_encoder

CONTEXT = ("The river rises in the hills. Mills were built along it in 1820. The town grew around the mills. "
           "A bridge was opened in 1901! Floods came every spring; the bridge held. Today the mills are museums.")


class Item:
    def __init__(self, context: str, query: str) -> None:
        self.id, self.context, self.query, self.passages, self.lang = "ex", context, query, (), "en"


@pytest.fixture(scope="module")
def tiny_contriever(tmp_path_factory) -> str:
    """A tiny BERT read as a Contriever (mean pooling), built here."""
    return build_tiny_encoder(tmp_path_factory.mktemp("enc") / "tiny", "bert", [CONTEXT] * 3, vocab_size=200)


def test_keeps_whole_sentences_as_spans_of_the_context(tiny_contriever):
    comp = make_compressor({"name": "recomp_extractive", "params": {"model": tiny_contriever, "top_n": 2,
                                                                    "order": "document", "device": "cpu"}})
    out = comp.compress(Item(CONTEXT, "When was the bridge opened?"))
    assert len(out.kept_chunks) == 2 and len(out.trace["ranking"]) == 7  # seven sentences (";" ends one) scored, two kept
    sentences = [CONTEXT[s:e] for s, e in out.kept_spans]
    assert " ".join(sentences) == out.text or sentences == [out.text]  # neighbours merge into one span
    assert all(CONTEXT[s - 2:s] in ("", ". ", "! ", "; ") for s, _ in out.kept_spans)


def test_a_budget_keeps_sentences_while_they_fit_and_the_label_names_the_model(tiny_contriever):
    comp = make_compressor({"name": "recomp_extractive", "params": {"model": tiny_contriever, "device": "cpu"}})
    assert comp.budget_support == "guaranteed" and comp.top_n == 5
    out = comp.compress(Item(CONTEXT, "When was the bridge opened?"), 12)
    assert 0 < out.tokens_out <= 12 and out.budget == 12
    assert comp.label.startswith(f"recomp_extractive({tiny_contriever}, top5")


def test_on_a_budget_axis_the_default_top_n_does_not_cap_and_a_given_one_does(tiny_contriever):
    params = {"model": tiny_contriever, "device": "cpu"}
    item, budget = Item(CONTEXT, "When was the bridge opened?"), 200  # room for all seven sentences
    out = make_compressor({"name": "recomp_extractive", "params": params}).compress(item, budget)
    assert len(out.kept_chunks) == 7 and out.tokens_out <= budget  # the budget decides, not the default 5
    capped = make_compressor({"name": "recomp_extractive", "params": {**params, "top_n": 2}}).compress(item, budget)
    assert len(capped.kept_chunks) == 2
    five = make_compressor({"name": "recomp_extractive", "params": {**params, "top_n": 5}})
    assert five.identity != make_compressor({"name": "recomp_extractive", "params": params}).identity  # cache keys


def test_the_published_id_goes_through_the_real_loading_path(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    comp = make_compressor({"name": "recomp_extractive", "params": {"device": "cpu"}})
    with pytest.raises(UserError, match="could not load the encoder .fangyuan/nq_extractive_compressor"):
        comp.compress(Item(CONTEXT, "When was the bridge opened?"))


@pytest.mark.slow
def test_minilm_ranks_answer_sentences_above_the_worst_on_real_wikipedia_pages():
    """L-Eval's NQ pages (their first 12,000 characters, where the answer is in them): the 5 sentences kept hold
    the answer more often than the 5 scored worst."""
    path = SHARED_DATA / "leval" / "natural_question.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    comp = make_compressor({"name": "recomp_extractive", "params": {"retriever": "minilm", "top_n": 5}})
    best = worst = asked = 0
    for line in path.read_text(encoding="utf-8").splitlines()[:10]:
        doc = json.loads(line)
        item = Item(doc["input"][:12000], doc["instructions"][0])
        answer = doc["outputs"][0].lower()
        if answer not in item.context.lower():
            continue
        out = comp.compress(item)
        text_of = {chunk.chunk_id: chunk.text for chunk in comp._units(item)[0]}
        bottom = " ".join(text_of[chunk_id] for chunk_id, _ in out.trace["ranking"][-5:])
        asked += 1
        best += answer in out.text.lower()
        worst += answer in bottom.lower()
    assert asked >= 5 and best > worst, (asked, best, worst)

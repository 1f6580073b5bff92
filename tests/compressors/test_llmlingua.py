"""The original LLMLingua (question-agnostic, coarse-to-fine) through the llmlingua package: a tiny local Llama;
it keeps what the package's compress_prompt keeps with its own defaults."""
from __future__ import annotations

import pytest

from compressors.registry import make_compressor
from tests.compressors.test_longllmlingua import CONTEXT, SENTENCES, CharTokenizer
from tests.support.tiny_lm import build_tiny_lm

pytest.importorskip("llmlingua")


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    return build_tiny_lm(tmp_path_factory.mktemp("tiny-bpe-llama"), SENTENCES)


def compressor(tiny_lm, **params):
    return make_compressor({"name": "llmlingua", "params": {"model": tiny_lm, "device": "cpu", "chunk_size": 40,
                                                            **params}}, tokenizer=CharTokenizer())


def test_keeps_what_the_package_keeps_with_its_defaults_whatever_the_question(tiny_lm, make_item):
    import compressors.longllmlingua as adapter

    comp = compressor(tiny_lm, use_cache=False)
    for budget in (150, 300, 600):
        ours = comp.compress(make_item(CONTEXT, "What is the capital of France?"), budget)
        other = comp.compress(make_item(CONTEXT, "Where do cats sit?"), budget)
        # the package alone, defaults untouched (rank_method="llmlingua", no question, original order)
        lm, lm_tokenizer = adapter._load(tiny_lm, "cpu", "auto")
        pc = adapter._prompt_compressor(lm, lm_tokenizer, "cpu", CharTokenizer(), "x", None)
        documents = comp._documents(make_item(CONTEXT))
        target = max(1, round(budget / len("\n\n".join(documents)) * sum(
            pc.get_token_length(d, add_special_tokens=False) for d in documents)))
        alone = pc.compress_prompt(documents, target_token=target, concate_question=False)["compressed_prompt"]
        assert ours.text == other.text == alone.strip(), budget
        assert ours.tokens_out < ours.tokens_in and ours.budget == budget


def test_needs_no_question_and_says_where_the_kept_tokens_are(tiny_lm, make_item):
    out = compressor(tiny_lm, rate=0.4).compress(make_item(CONTEXT, ""))
    spans = out.kept_spans
    assert spans and all(0 <= s < e <= len(CONTEXT) for s, e in spans)
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
    kept = "".join(CONTEXT[s:e] for s, e in spans)
    assert "".join(out.text.split()) == "".join(kept.split())  # every kept character found, in order
    assert out.trace["ranking"] and out.trace["lm"] == tiny_lm


def test_the_label_and_parameters_are_llmlinguas_not_longllmlinguas(tiny_lm):
    comp = compressor(tiny_lm)
    assert comp.label == "llmlingua(rate=0.5)" and comp.line_label == "llmlingua" and comp.budget_support == "best_effort"
    assert comp.identity.startswith("llmlingua(lm=")
    with pytest.raises(Exception, match="unknown parameter 'reorder'"):
        make_compressor({"name": "llmlingua", "params": {"reorder": "sort"}})


@pytest.mark.slow
def test_smollm2_compresses_a_real_wikipedia_page_near_the_budget():
    import json

    from tests.conftest import SHARED_DATA

    path = SHARED_DATA / "leval" / "natural_question.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    page = " ".join(json.loads(path.read_text(encoding="utf-8").splitlines()[0])["input"].split()[:1200])

    class Page:
        id, context, query, passages, lang = "nq0", page, "", (), "en"

    out = make_compressor({"name": "llmlingua", "params": {"device": "cpu"}}).compress(Page(), 300)
    assert out.tokens_out < out.tokens_in / 2 and out.trace["over_budget"] == (out.tokens_out > 300)
    assert len(out.trace["ranking"]) == out.trace["n_documents"] > 1 and out.kept_spans

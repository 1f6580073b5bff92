"""RECOMP's abstractive compressor on a tiny T5 built here from a config, with a tokenizer trained here."""
from __future__ import annotations

import pytest

from compressors.recomp_abstractive import TEMPLATE
from compressors.registry import make_compressor
from core.errors import UserError

CONTEXT = ("The river rises in the hills. Mills were built along it in 1820. A bridge was opened in 1901. "
           "Today the mills are museums.")
QUESTION = "When was the bridge opened?"


class Item:
    def __init__(self, context: str, query: str) -> None:
        self.id, self.context, self.query, self.passages, self.lang = "ex", context, query, (), "en"


def build_tiny_t5(folder, texts, silent: bool = False) -> str:
    """A 2-layer T5 with seeded weights and a Unigram tokenizer trained on ``texts``; ``silent``: its output layer
    is zero, so every logit ties and greedy decoding picks the pad token: the summary decodes to nothing."""
    import torch
    from tokenizers import SentencePieceUnigramTokenizer
    from transformers import T5Config, T5ForConditionalGeneration, T5TokenizerFast

    unigram = SentencePieceUnigramTokenizer()
    unigram.train_from_iterator(list(texts), vocab_size=120, unk_token="<unk>", show_progress=False,
                                special_tokens=["<pad>", "</s>", "<unk>"])
    tokenizer = T5TokenizerFast(tokenizer_object=unigram._tokenizer, eos_token="</s>", unk_token="<unk>",
                                pad_token="<pad>", extra_ids=0)
    config = T5Config(vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=2,
                      pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                      decoder_start_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = T5ForConditionalGeneration(config)
    if silent:
        with torch.no_grad():
            model.lm_head.weight.zero_()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def tiny_t5(tmp_path_factory) -> str:
    texts = [TEMPLATE.format(question=QUESTION, documents=CONTEXT)] * 3
    return build_tiny_t5(tmp_path_factory.mktemp("t5") / "tiny", texts)


def test_writes_a_summary_conditioned_on_the_question_with_no_spans(tiny_t5):
    comp = make_compressor({"name": "recomp_abstractive", "params": {"model": tiny_t5, "device": "cpu",
                                                                     "max_new_tokens": 12}})
    out = comp.compress(Item(CONTEXT, QUESTION))
    assert out.kept_spans is None and out.text == out.trace["summary"] and not out.trace["empty_summary"]
    assert 0 < out.trace["summarizer_tokens_out"] <= 13 and out.work.calls == 1 and out.work.tokens_in > 20
    other = comp.compress(Item(CONTEXT, "Who built the mills?"))
    assert other.work.tokens_in != out.work.tokens_in or other.text != out.text  # the question is read


def test_a_budget_caps_the_summary_and_is_recorded(tiny_t5):
    comp = make_compressor({"name": "recomp_abstractive", "params": {"model": tiny_t5, "device": "cpu"}})
    out = comp.compress(Item(CONTEXT, QUESTION), 3)
    assert out.budget == 3 and out.trace["requested_tokens"] == 3 and out.trace["summarizer_tokens_out"] <= 4
    assert out.trace["over_budget"] == (out.tokens_out > 3)


def test_an_empty_summary_is_selective_augmentation_recorded(tmp_path):
    silent = build_tiny_t5(tmp_path / "silent", [CONTEXT, QUESTION] * 3, silent=True)
    out = make_compressor({"name": "recomp_abstractive", "params": {"model": silent, "device": "cpu",
                                                                    "max_new_tokens": 5}}).compress(Item(CONTEXT, QUESTION))
    assert out.text == "" and out.tokens_out == 0 and out.trace["empty_summary"] is True


def test_the_published_id_goes_through_the_real_loading_path(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    comp = make_compressor({"name": "recomp_abstractive", "params": {"device": "cpu"}})
    with pytest.raises(UserError, match="fangyuan/nq_abstractive_compressor"):
        comp.warm_up()

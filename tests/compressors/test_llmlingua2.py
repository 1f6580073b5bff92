"""LLMLingua-2 through the llmlingua package, offline: tiny XLM-RoBERTa and BERT token classifiers built here, on
real L-Eval text; what the compressor keeps equals what the package alone keeps."""
from __future__ import annotations

import json
import os

import pytest

from compressors.registry import make_compressor
from core.errors import UserError
from readers.tokenizers import WordTokenizer
from tests.conftest import SHARED_DATA
from tests.support.tiny_encoder import build_tiny_encoder

pytest.importorskip("llmlingua")
LEVAL = ("financial_qa", "natural_question", "gov_report_summ", "news_summ")
RATES = (0.3, 0.5, 0.8)


def _cut(text: str, chars: int) -> str:
    return text[:chars].rsplit(" ", 1)[0]


@pytest.fixture(scope="module")
def contexts() -> list[str]:
    """20 one-document contexts: the first 3,000 characters of the first 5 documents of each L-Eval file."""
    files = [SHARED_DATA / "leval" / f"{name}.jsonl" for name in LEVAL]
    if not all(f.is_file() for f in files):
        pytest.skip(f"L-Eval files not found in {SHARED_DATA / 'leval'}")
    out = []
    for path in files:
        docs = [json.loads(line)["input"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        out += [_cut(doc, 3000) for doc in docs[:5]]
    return out


@pytest.fixture(scope="module", params=["xlm-roberta", "bert"])
def encoder(request, tmp_path_factory, contexts) -> tuple[str, str]:
    """(a folder the package recognises by its name, a link to it under a name it does not)."""
    kind = request.param
    named = tmp_path_factory.mktemp("enc") / {"xlm-roberta": "tiny-xlm-roberta-large",
                                             "bert": "tiny-bert-base-multilingual-cased"}[kind]
    build_tiny_encoder(named, kind, contexts[::4])
    plain = named.parent / "my-encoder"
    os.symlink(named, plain)
    return str(named), str(plain)


@pytest.fixture(scope="module")
def reference(encoder, monkeypatch_module):
    """The package alone, on the folder named as it needs; GPT-3.5's tokenizer (a download) replaced by the
    counter our compressor is given, which is what weighs words in both."""
    import llmlingua.prompt_compressor as pcm

    monkeypatch_module.setattr(pcm.tiktoken, "encoding_for_model", lambda name: WordTokenizer())
    return pcm.PromptCompressor(model_name=encoder[0], use_llmlingua2=True, device_map="cpu")


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.mark.slow  # 120 compressions by each side, about a minute on 2 busy cores
def test_keeps_what_the_package_keeps_on_20_real_contexts_at_3_rates(encoder, reference, contexts):
    compared = 0
    for rate in RATES:
        ours = make_compressor({"name": "llmlingua2", "params": {"model": encoder[1], "rate": rate, "device": "cpu"}},
                               tokenizer=WordTokenizer())
        for i, context in enumerate(contexts):
            expected = reference.compress_prompt([context], rate=rate)["compressed_prompt"].strip()
            out = ours.compress(_Item(f"c{i}", context))
            assert out.text == expected, (rate, i)
            assert 0 < out.tokens_out < out.tokens_in
            compared += 1
    assert compared == 60


def test_kept_spans_are_the_kept_words_in_the_context(encoder, contexts):
    out = make_compressor({"name": "llmlingua2", "params": {"model": encoder[1], "rate": 0.4, "device": "cpu"}}
                          ).compress(_Item("c", contexts[1]))
    spans = out.kept_spans
    assert spans and all(0 <= s < e <= len(contexts[1]) for s, e in spans)
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))  # sorted, apart
    kept = "".join(contexts[1][s:e] for s, e in spans)
    assert sum(len(w) for w in out.text.split()) <= len(kept) < len(contexts[1])


def test_a_budget_is_aimed_at_and_recorded_and_shares_the_encoder_passes(encoder, contexts):
    comp = make_compressor({"name": "llmlingua2", "params": {"model": encoder[1], "device": "cpu"}})
    item = _Item("c", contexts[2])
    first, second = comp.compress(item, 200), comp.compress(item, 100)
    assert first.budget == 200 and first.trace["requested_tokens"] == 200
    assert first.trace["achieved_tokens"] == first.tokens_out and second.tokens_out < first.tokens_out
    assert second.trace["encoder_passes_cached"] == second.trace["encoder_passes"] > 0  # scored once
    assert second.work.cache_hits > 0 and second.work.calls == 0
    whole = comp.compress(item, 10**6)
    assert whole.text == item.context and whole.kept_spans == ((0, len(item.context)),)


def test_the_published_id_goes_through_the_real_loading_path(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    comp = make_compressor({"name": "llmlingua2", "params": {"device": "cpu"}})
    assert comp.model == "microsoft/llmlingua-2-xlm-roberta-large-meetingbank"
    with pytest.raises(UserError, match="microsoft/llmlingua-2-xlm-roberta-large-meetingbank"):
        comp.warm_up()


class _Item:
    def __init__(self, id: str, context: str, query: str = "") -> None:
        self.id, self.context, self.query, self.passages, self.lang = id, context, query, (), "en"

"""LongLLMLingua through the llmlingua package, offline: a tiny local Llama, and (slow) the packaged SmolLM2."""
from __future__ import annotations

import gzip
import json

import pytest

from compressors.base import CompressionError
from compressors.registry import COMPRESSORS, make_compressor
from core.errors import ParamError
from indexes.types import Passage
from tests.support.tiny_lm import build_tiny_lm

pytest.importorskip("llmlingua")

# the adapter passes the KV cache under the keyword the model's forward names: transformers 5.24 deprecates
# past_key_values= (removed in 5.40), so a call under the old name fails here
pytestmark = pytest.mark.filterwarnings("error:.*past_key_values.*:FutureWarning")

SENTENCES = [
    "Paris is the capital of France. It has many museums and the Eiffel tower.",
    "The cat sat on the mat. Dogs bark at night and sleep in the day.",
    "Berlin is the capital of Germany. It is known for its long history.",
    "Rivers run to the sea, and the sea is never full.",
]
CONTEXT = " ".join(SENTENCES * 4)
QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    """A 2-layer Llama with random (seeded) weights and a byte-level BPE tokenizer trained here, which round-trips text."""
    return build_tiny_lm(tmp_path_factory.mktemp("tiny-bpe-llama"), SENTENCES)


class CharTokenizer:
    """One token per character, so counts are easy to state."""

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(map(chr, ids))


def is_subsequence(short: str, long: str) -> bool:
    it = iter(long)
    return all(c in it for c in short)


def compressor(tiny_lm, **params):
    return make_compressor({"name": "longllmlingua", "params": {"model": tiny_lm, "device": "cpu", "chunk_size": 40, **params}},
                           tokenizer=CharTokenizer())


def test_rate_keeps_about_that_share_of_the_tokens_and_only_deletes(tiny_lm, make_item):
    item = make_item(CONTEXT, QUESTION)
    shares = {}
    for rate in (0.3, 0.6):
        out = compressor(tiny_lm, rate=rate, reorder="original").compress(item)
        shares[rate] = out.tokens_out / out.tokens_in
        assert abs(shares[rate] - rate) <= 0.15, (rate, shares[rate])
        # token deletion in the original document order: what is left is a subsequence of the documents
        chunks = make_compressor({"name": "longllmlingua", "params": {"model": tiny_lm, "chunk_size": 40}})._documents(item)
        assert is_subsequence(out.text, "\n\n".join(chunks))
        assert out.trace["kept_text"] == out.text and out.trace["ratio"] == pytest.approx(out.tokens_in / out.tokens_out)
    assert shares[0.3] < shares[0.6]


def test_counts_with_the_injected_tokenizer_and_keeps_llmlinguas_stats(tiny_lm, make_item):
    item = make_item(CONTEXT, QUESTION)
    comp = compressor(tiny_lm, rate=0.5)
    out = comp.compress(item)
    assert (out.tokens_in, out.tokens_out) == (len(CONTEXT), len(out.text))
    documents = comp._documents(item)
    assert out.trace["n_documents"] == len(documents) > 1
    # llmlingua counts "instruction, documents, question" joined by blank lines, here in the injected (character) tokens
    assert out.trace["llmlingua"]["origin_tokens"] == len("\n\n".join(["", *documents, QUESTION]).strip())
    assert out.trace["llmlingua"]["compressed_tokens"] == len(out.text)


def test_a_budget_is_in_reader_tokens_and_a_context_within_it_is_untouched(tiny_lm, make_item):
    item = make_item(CONTEXT, QUESTION)
    comp = compressor(tiny_lm, target_token=len(CONTEXT) + 10)
    out = comp.compress(item)
    assert out.text == CONTEXT and out.tokens_out == out.tokens_in and comp._compressor is None  # no model loaded
    out = compressor(tiny_lm, target_token=len(CONTEXT) // 3).compress(item)
    assert out.tokens_out < out.tokens_in and out.trace["over_budget"] == (out.tokens_out > len(CONTEXT) // 3)


def test_titled_passages_are_the_documents(tiny_lm, make_item):
    passages = tuple(Passage(text, title=f"Doc {i}") for i, text in enumerate(SENTENCES))
    item = make_item("\n\n".join(f"Doc {i}\n{t}" for i, t in enumerate(SENTENCES)), QUESTION, passages=passages)
    out = compressor(tiny_lm, rate=0.5).compress(item)
    assert out.trace["n_documents"] == 4 and out.passages == ()


def test_same_input_same_output(tiny_lm, make_item):
    item = make_item(CONTEXT, QUESTION)
    assert compressor(tiny_lm, rate=0.4).compress(item).text == compressor(tiny_lm, rate=0.4).compress(item).text


def test_an_empty_question_fails_the_example(tiny_lm, make_item):
    with pytest.raises(CompressionError, match="query is empty"):
        compressor(tiny_lm).compress(make_item(CONTEXT, "  "))


@pytest.mark.parametrize("params, message", [
    ({"rate": 0}, "rate must be greater than 0, got 0"),
    ({"rate": 1.5}, "rate must be less than or equal to 1, got 1.5"),
    ({"rate": 0.5, "target_token": 100}, "not both"),
    ({"target_token": 0}, "target_token must be greater than 0"),
    ({"reorder": "random"}, "reorder must be 'sort', 'original' or 'two_stage', got 'random'"),
    ({"dtype": "fp8"}, "dtype must be 'auto', 'float32', 'bfloat16' or 'float16'"),
    ({"dynamic_ratio": 2}, "dynamic_ratio must be"),
    ({"context_budget": "+__import__('os').getpid()"}, "context_budget must match pattern"),  # llmlingua eval()s it
])
def test_bad_values_are_param_errors(params, message):
    with pytest.raises(ParamError, match=message):
        make_compressor({"name": "longllmlingua", "params": params})


def test_registered_and_checked_without_loading_a_model():
    comp = make_compressor("longllmlingua")
    assert comp.rate == 0.5 and comp._compressor is None and comp.label == "longllmlingua(rate=0.5)"
    assert "longllmlingua" in comp.identity and "smollm2" in comp.identity
    assert make_compressor("longllmlingua", rate=0.3).identity != comp.identity
    with pytest.raises(ParamError, match="compressor 'longllmlingua' > chunker 'words': unknown parameter 'bogus'"):
        COMPRESSORS.check({"name": "longllmlingua", "params": {"chunker": {"name": "words", "params": {"bogus": 1}}}},
                          injected=("tokenizer", "reader"))


def test_without_the_package_the_error_says_how_to_install_it(monkeypatch):
    import importlib.util

    from core.errors import UserError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llmlingua" else real(name, *a))
    with pytest.raises(UserError, match="pip install llmlingua==0.2.2"):
        make_compressor("longllmlingua")


@pytest.mark.slow
def test_smollm2_ranks_the_gold_passage_first(shared_data, make_item):
    """Real NQ-Open questions: the gold passage among four other questions' gold passages, a third of the LM tokens asked.

    LongLLMLingua ranks documents by how well each predicts the question, so the passage that answers it should
    come first far more often than the 1 in 5 of chance; token pruning may still cut into the answer itself
    (e.g. one of three words of a name), so answers survive less often.
    """
    from readers.base import ReaderError
    from readers.smollm2 import gguf_path

    try:
        gguf_path()
    except ReaderError as err:
        pytest.skip(str(err))
    path = shared_data / "lost_in_the_middle" / "nq-open-oracle.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for _, line in zip(range(25), fh)]
    comp = make_compressor({"name": "longllmlingua", "params": {"rate": 0.33, "device": "cpu"}})
    first = kept = 0
    for i in range(0, 25, 5):
        group = rows[i: i + 5]
        passages = tuple(Passage(r["ctxs"][0]["text"], title=r["ctxs"][0]["title"]) for r in group)
        for j in (0, 3):  # the gold passage first and fourth
            item = make_item("\n\n".join(f"{p.title}\n{p.text}" for p in passages), group[j]["question"],
                             id=f"nq{i + j}", passages=passages)
            out = comp.compress(item)
            assert out.trace["lm_tokens_out"] < 0.6 * out.trace["lm_tokens_in"]
            first += out.trace["ranking"][0] == j
            kept += any(a.lower() in out.text.lower() for a in group[j]["answers"])
    print(f"\ngold passage ranked first {first} of 10; answer kept in {kept} of 10")
    assert first >= 8 and kept >= 5


def test_a_budget_sets_the_target_and_an_overshoot_is_recorded_not_cut(tiny_lm, make_item):
    comp = compressor(tiny_lm)
    assert comp.budget_support == "best_effort" and comp.line_label == "longllmlingua"
    item = make_item(CONTEXT, QUESTION)
    for budget in (5, len(CONTEXT) // 2):
        out = comp.compress(item, budget)
        assert out.budget == budget and out.over_budget == (out.tokens_out > budget) == out.trace["over_budget"]
        assert out.work.calls == 1 and out.work.tokens_in == out.trace["lm_tokens_in"] > 0
    assert comp.compress(item, 5).over_budget  # five characters cannot hold what llmlingua keeps
    whole = comp.compress(item, len(CONTEXT) + 10)  # the documents joined by blank lines are a little longer
    assert whole.text == CONTEXT and not whole.over_budget and whole.work.calls == 0


# -- the ranking, scored once ----------------------------------------------------------------------------------------

# ten titled documents of two or three sentences: budgets below keep from one to most of them
DOCUMENTS = tuple(Passage(" ".join(SENTENCES[(i + j) % 4] for j in range(2 + i % 2)), title=f"Doc {i}") for i in range(10))
BUDGETS = (60, 150, 300, 600)  # characters (CharTokenizer); about 2,300 of them in all
WORD_BUDGETS = (15, 40, 80, 160)  # words (WordTokenizer); about 400 in all


def documents_item(make_item):
    context = "\n\n".join(f"{p.title}\n{p.text}" for p in DOCUMENTS)
    return make_item(context, QUESTION, passages=DOCUMENTS)


class ForwardCounter:
    """Counts the LM's forward passes and the tokens fed to them (a hook on the torch module itself)."""

    def __init__(self, comp):
        self.calls = self.tokens = 0
        lm = comp._prompt_compressor().model.model  # the transformers model inside _PairCacheModel
        self._handle = lm.register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, module, args, kwargs):
        ids = args[0] if args else kwargs["input_ids"]
        self.calls += 1
        self.tokens += int(ids.shape[1])

    def close(self):
        self._handle.remove()


def compress_counted(comp, item, budget):
    """(output, forward passes, tokens fed) of one call."""
    counter = ForwardCounter(comp)
    try:
        out = comp.compress(item, budget)
    finally:
        counter.close()
    return out, counter.calls, counter.tokens


def comparable(out):
    """Everything a call returns except timings and where its ranking came from."""
    trace = {k: v for k, v in out.trace.items() if k != "ranking_cached"}
    return out.text, out.tokens_in, out.tokens_out, out.budget, trace, out.work.calls, out.work.tokens_in


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A cache folder of this test's own, and no ranking cache held in memory from an earlier test."""
    import compressors.longllmlingua as module

    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(module, "_rankings", {})
    return tmp_path


def test_every_budget_and_reader_reuses_one_ranking_and_the_outputs_are_byte_identical(tiny_lm, make_item, own_cache):
    from readers.tokenizers import WordTokenizer

    item = documents_item(make_item)
    grid = [(counter, budget) for counter, budgets in ((CharTokenizer(), BUDGETS), (WordTokenizer(), WORD_BUDGETS))
            for budget in budgets]

    def run(use_cache):  # one compressor per (reader, budget), as a run's grid builds them
        outs = []
        for counter, budget in grid:
            comp = make_compressor({"name": "longllmlingua", "params": {"model": tiny_lm, "device": "cpu", "chunk_size": 40,
                                                                     "use_cache": use_cache}}, tokenizer=counter)
            outs.append(compress_counted(comp, item, budget))
        return outs

    uncached, cached = run(False), run(True)
    # llmlingua alone, byte for byte: text, counts and trace, for every budget and both tokenizations
    assert [comparable(o) for o, _, _ in cached] == [comparable(o) for o, _, _ in uncached]
    assert len({o.text for o, _, _ in uncached}) >= 6  # the budgets keep different amounts
    assert all(o.trace["n_documents"] == len(DOCUMENTS) for o, _, _ in cached)
    # the first call scores the ranking; no later call makes a ranking pass: one LM pass per document fewer than
    # llmlingua alone, and the same number of tokens fewer (each document with the question) every time
    assert cached[0][1:] == uncached[0][1:]
    assert [u[1] - c[1] for u, c in zip(uncached[1:], cached[1:])] == [len(DOCUMENTS)] * (len(grid) - 1)
    saved = {u[2] - c[2] for u, c in zip(uncached[1:], cached[1:])}
    assert len(saved) == 1 and saved.pop() > cached[0][0].trace["lm_tokens_in"]  # every document, and more
    assert [o.trace["ranking_cached"] for o, _, _ in cached] == [False] + [True] * (len(grid) - 1)
    # a served ranking counts at the LM time it took when it was scored, not at its near-zero fetch
    first = cached[0][0].work
    assert first.cached_model_s == 0 and all(o.work.cached_model_s > 0 for o, _, _ in cached[1:])
    assert len({o.work.cached_model_s for o, _, _ in cached[1:]}) == 1


def test_a_new_process_reads_the_ranking_from_disk(tiny_lm, make_item, own_cache):
    import compressors.longllmlingua as module

    item = documents_item(make_item)
    scored, calls, _ = compress_counted(compressor(tiny_lm), item, BUDGETS[1])
    assert not scored.trace["ranking_cached"]
    module._rankings.clear()  # what a new process starts with; the disk entry stays
    comp = compressor(tiny_lm)
    again, calls_again, _ = compress_counted(comp, item, BUDGETS[1])
    assert comparable(again) == comparable(scored) and again.trace["ranking_cached"]
    assert calls - calls_again == len(DOCUMENTS)
    assert module.shared_ranking_cache().hits == 1 and len(module.shared_ranking_cache()) == 1


def test_another_lm_or_llmlingua_version_ranks_afresh(tiny_lm, make_item, own_cache, tmp_path_factory, monkeypatch):
    import core.versions

    item = documents_item(make_item)
    assert not compressor(tiny_lm).compress(item, BUDGETS[0]).trace["ranking_cached"]
    assert compressor(tiny_lm).compress(item, BUDGETS[0]).trace["ranking_cached"]
    other_lm = build_tiny_lm(tmp_path_factory.mktemp("other-tiny-lm"), SENTENCES)
    assert not compressor(other_lm).compress(item, BUDGETS[0]).trace["ranking_cached"]
    real = core.versions.package_version
    monkeypatch.setattr(core.versions, "package_version", lambda d: "9.9.9" if d == "llmlingua" else real(d))
    assert not compressor(tiny_lm).compress(item, BUDGETS[0]).trace["ranking_cached"]


@pytest.mark.parametrize("entry", ['{"order": [[0, 1.5]], "seconds": 0.1}', "not json", '{"seconds": 1}'])
def test_an_entry_that_does_not_rank_these_documents_is_scored_again(tiny_lm, make_item, own_cache, entry):
    import compressors.longllmlingua as module

    item = documents_item(make_item)
    scored = compressor(tiny_lm).compress(item, BUDGETS[2])
    cache = module.shared_ranking_cache()
    (key,) = list(cache._store.iterkeys())
    cache._store.set(key, entry)
    module._rankings.clear()
    again = compressor(tiny_lm).compress(item, BUDGETS[2])
    assert comparable(again) == comparable(scored) and not again.trace["ranking_cached"]
    assert module.shared_ranking_cache().misses == 1  # and the entry is whole again
    module._rankings.clear()
    assert compressor(tiny_lm).compress(item, BUDGETS[2]).trace["ranking_cached"]

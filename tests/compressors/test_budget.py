"""The budget hook: every compressor that guarantees a budget keeps within it, over many random contexts and budgets,
in word, character and byte-level BPE tokens; a budget for a compressor that takes none is a one-line error."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compressors.base import CompressionError, Compressor
from compressors.registry import COMPRESSORS, make_compressor
from core.errors import ParamError
from indexes.types import Passage
from readers.extractive import ExtractiveReader
from readers.tokenizers import HFTokenizer, WordTokenizer

WORDS = ["alpha", "beta", "gamma", "delta", "naïve", "café", "北京", "天安门", "x", "42", "don't", "re-use", "Zürich",
         "😀", "ümlaut", "q?", "end.", "\n", "\n\n", "  "]


class CharTokenizer:
    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(map(chr, ids))


@pytest.fixture(scope="module")
def bpe():
    """A byte-level BPE trained here on the test's words: decoding a cut can split a character's bytes, and
    re-encoding the join can take more tokens than were kept, which ``Compressor.fit`` must absorb."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([" ".join(WORDS * 3)] * 20, trainers.BpeTrainer(
        vocab_size=320, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return HFTokenizer(PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False))


TOKENIZERS = {"words": WordTokenizer, "chars": CharTokenizer}


def _context(draw_words: list[str], sentence_every: int) -> str:
    out = []
    for i, w in enumerate(draw_words):
        out.append(w)
        out.append(". " if i % sentence_every == sentence_every - 1 else " ")
    return "".join(out).strip() or "alpha"


contexts = st.builds(_context, st.lists(st.sampled_from(WORDS), min_size=1, max_size=120), st.integers(1, 9))
budgets = st.integers(1, 200)

# every registered compressor that guarantees its budget, built for a random item (query, passages)
GUARANTEED = {
    "truncate middle": {"name": "truncate", "params": {"policy": "middle"}},
    "truncate left": {"name": "truncate", "params": {"policy": "left"}},
    "truncate right": {"name": "truncate", "params": {"policy": "right"}},
    "retrieval score": {"name": "retrieval", "params": {"retriever": "bm25", "chunker": "words", "chunk_size": 7}},
    "retrieval document": {"name": "retrieval", "params": {"retriever": "bm25", "chunker": "words", "chunk_size": 7,
                                                           "order": "document"}},
    "retrieval passages": {"name": "retrieval", "params": {"retriever": "bm25", "unit": "passage"}},
    "summarize": {"name": "summarize", "params": {"chunker": "words", "chunk_size": 9, "query_focused": True}},
    "top_k": {"name": "top_k"},
    "recomp_extractive": {"name": "recomp_extractive", "params": {"retriever": "bm25"}},  # BM25 scoring, for speed
}


def test_every_compressor_that_guarantees_a_budget_is_in_the_property_test():
    guaranteed = {name for name, cls in COMPRESSORS.items() if cls.budget_support == "guaranteed"}
    assert guaranteed == {spec["name"] for spec in GUARANTEED.values()}
    assert {name: cls.budget_support for name, cls in COMPRESSORS.items() if cls.budget_support != "guaranteed"} == {
        "full": "none", "longllmlingua": "best_effort", "llmlingua": "best_effort", "llmlingua2": "best_effort",
        "selective_context": "best_effort", "recomp_abstractive": "best_effort"}


class Item:
    def __init__(self, context: str, query: str, passages: tuple[Passage, ...] = ()) -> None:
        self.id, self.context, self.query, self.passages, self.lang = "ex", context, query, passages, "en"


def _check(compressor: Compressor, item: Item, budget: int) -> None:
    try:
        out = compressor.compress(item, budget)
    except CompressionError:  # a budget smaller than any unit: the example fails, it is never over budget
        return
    assert out.budget == budget
    assert out.tokens_out == compressor.count_tokens(out.text)
    assert out.tokens_out <= budget, (out.text, out.tokens_out, budget)
    assert not out.over_budget
    assert out.tokens_in == compressor.count_tokens(item.context)


@pytest.mark.parametrize("tokens", ["words", "chars", "bpe"])
@pytest.mark.parametrize("name", list(GUARANTEED))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(context=contexts, budget=budgets, query_words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
def test_no_compressor_that_guarantees_a_budget_exceeds_it(name, tokens, bpe, context, budget, query_words):
    tokenizer = bpe if tokens == "bpe" else TOKENIZERS[tokens]()
    spec = GUARANTEED[name]
    reader = ExtractiveReader() if spec["name"] == "summarize" else None
    compressor = make_compressor(spec, tokenizer=tokenizer, reader=reader)
    sentences = [s for s in context.split(". ") if s.strip()]
    passages = tuple(Passage(s, title=f"T{i}", doc_id=f"p{i}") for i, s in enumerate(sentences))
    _check(compressor, Item(context, " ".join(query_words), passages), budget)


def test_a_ratio_sized_budget_is_kept_too(make_item):
    comp = make_compressor({"name": "truncate", "params": {"policy": "middle"}})
    item = make_item(" ".join(f"w{i}" for i in range(101)))
    out = comp.compress(item, 101 // 4)
    assert (out.tokens_in, out.tokens_out, out.budget) == (101, 24, 25)  # middle: 2 * (25 // 2) tokens
    assert out.ratio == pytest.approx(101 / 24)


def test_retrieval_keeps_ranked_chunks_while_they_fit_and_top_n_caps_them_only_when_given(make_item):
    context = "a b c. d e f. g h i. j k l. m n o."
    comp = make_compressor({"name": "retrieval", "params": {"retriever": "bm25", "chunker": "words", "chunk_size": 3}})
    assert len(comp.compress(make_item(context, "a"), 15).kept_chunks) == 5  # no default top_n=3 on a budget
    capped = make_compressor({"name": "retrieval", "params": {"retriever": "bm25", "chunker": "words", "chunk_size": 3,
                                                              "top_n": 2}})
    assert len(capped.compress(make_item(context, "a"), 15).kept_chunks) == 2
    assert comp.line_label == "retrieval(bm25, 3x any, order=score)" and capped.line_label.endswith("3x2, order=score)")


def test_a_label_says_any_number_of_chunks_in_words_never_with_the_significance_star():
    """``100x*`` read as a significant result in a report whose ``*`` marks an interval that excludes 0."""
    params = {"retriever": "bm25", "chunker": "words", "chunk_size": 100, "token_budget": 512, "order": "document"}
    comp = make_compressor({"name": "retrieval", "params": params})
    assert comp.label == "retrieval(bm25, 100x any, <=512 tokens, order=document)"
    assert "*" not in comp.label + comp.line_label


def test_summarize_gives_each_summary_an_equal_share_and_flags_a_cut(make_item):
    reader = ExtractiveReader()
    comp = make_compressor({"name": "summarize", "params": {"chunker": "words", "chunk_size": 10,
                                                            "query_focused": True}}, reader=reader)
    item = make_item(" ".join(f"w{i}" for i in range(40)), "w3")
    requests = comp._requests(item, comp._chunker.split(item.context, "d"), 20)
    # 4 chunks, separators of 0 word tokens: 20 // 4 = 5 tokens each, 0.75 words per token -> 3 words asked
    assert {r.max_new_tokens for r in requests} == {5} and all("at most 3 words" in r.prompt for r in requests)
    out = comp.compress(item, 20)
    assert out.tokens_out <= 20 and "truncated" in out.trace


@pytest.mark.parametrize("spec, budgeted, message", [
    ({"name": "full"}, True, "takes no token budget"),
    ({"name": "truncate", "params": {"max_tokens": 9}}, True, "max_tokens and the budget axis both set the size"),
    ({"name": "retrieval", "params": {"token_budget": 9}}, True, "token_budget and the budget axis"),
    ({"name": "longllmlingua", "params": {"rate": 0.5}}, True, "rate and the budget axis"),
    ({"name": "truncate"}, False, "give max_tokens, or put it on a budget axis"),
    ({"name": "top_k"}, False, "give k, or put it on a budget axis"),
])
def test_the_budget_hook_refuses_in_one_line(spec, budgeted, message):
    cls = COMPRESSORS.get(spec["name"])
    with pytest.raises(ParamError, match=message) as err:
        cls.check_budget(spec.get("params", {}), budgeted, what=f"compressor {spec['name']!r}")
    assert "\n" not in str(err.value)
    COMPRESSORS.get("retrieval").check_budget({"top_n": 3}, True)  # a cap on the count combines with a budget


def test_a_plugin_declares_its_budget_through_the_same_hook(make_item):
    class FirstWords(Compressor):
        budget_support = "guaranteed"

        def compress(self, item, budget=None):
            from compressors.base import CompressedContext

            text, _ = self.fit(item.context, budget or 10, "right")
            return CompressedContext(text=text, tokens_in=self.count_tokens(item.context),
                                     tokens_out=self.count_tokens(text), budget=budget)

    assert FirstWords().compress(make_item("a b c d e f"), 2).text == "a b "
    FirstWords.check_budget({}, True)
    with pytest.raises(ParamError, match="takes no token budget"):
        type("NoBudget", (FirstWords,), {"budget_support": "none"}).check_budget({}, True)

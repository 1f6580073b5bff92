"""The two baselines: full context is untouched; truncation keeps exactly the words the policy says."""
from __future__ import annotations

import pytest

from compressors.full import FullContext
from compressors.registry import make_compressor
from compressors.truncate import TruncateCompressor
from core.errors import ParamError
from indexes.types import Passage

TEN = " ".join(f"w{i}" for i in range(10))


def test_full_context_is_unchanged_and_keeps_passages(make_item):
    passages = (Passage("alpha beta", title="A"), Passage("gamma", title="B"))
    item = make_item("alpha beta\ngamma  delta", passages=passages)
    out = FullContext().compress(item)
    assert out.text == "alpha beta\ngamma  delta"
    assert out.passages == passages
    assert out.tokens_in == out.tokens_out == 4
    assert out.ratio == 1.0


class CharTokenizer:
    """One token per character: a stand-in for a reader's tokenizer whose units are not words."""

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(map(chr, ids))


@pytest.mark.parametrize(
    "policy, max_tokens, expected",
    [
        ("right", 4, "w0 w1 w2 w3 "),
        ("left", 4, "w6 w7 w8 w9"),
        ("middle", 4, "w0 w1 w8 w9"),
        ("middle", 5, "w0 w1 w8 w9"),  # LongBench: int(5 / 2) = 2 words from each end
    ],
)
def test_truncate_keeps_the_words_the_policy_names(make_item, policy, max_tokens, expected):
    out = TruncateCompressor(max_tokens=max_tokens, policy=policy).compress(make_item(TEN))
    assert out.text == expected
    assert out.tokens_in == 10
    assert out.tokens_out == len(expected.split())
    assert out.trace["truncated"] is True


def test_truncate_leaves_fitting_text_verbatim(make_item):
    text = "a  b\n\nc"
    out = TruncateCompressor(max_tokens=3).compress(make_item(text))
    assert out.text == text
    assert out.trace["truncated"] is False


def test_truncate_keeps_original_whitespace_inside_the_kept_part(make_item):
    assert TruncateCompressor(3, "right").compress(make_item("a b\nc d\ne f")).text == "a b\nc "
    assert TruncateCompressor(3, "left").compress(make_item("a b\nc d\ne f")).text == "d\ne f"


def test_truncate_budget_is_in_the_reader_tokenizers_units(make_item):
    out = TruncateCompressor(max_tokens=5, policy="right", tokenizer=CharTokenizer()).compress(make_item("aa bb cc dd"))
    assert (out.text, out.tokens_in, out.tokens_out) == ("aa bb", 11, 5)


def test_truncate_counts_each_cjk_character_as_a_word(make_item):
    # 10,000 characters of Chinese are 10,000 LongBench words, not the 1 whitespace "word" they were counted as
    long_chinese = "我爱北京天安门" * 1500
    out = TruncateCompressor(200, "right").compress(make_item(long_chinese))
    assert out.tokens_in == 10_500 and out.tokens_out == 200 and out.text == long_chinese[:200]
    assert TruncateCompressor(2, "left").compress(make_item("我爱北京天安门")).text == "安门"


@pytest.mark.parametrize("bad", [{"max_tokens": 0}, {"max_tokens": 10, "policy": "both"}])
def test_truncate_rejects_bad_settings(bad):
    with pytest.raises(ParamError, match="compressor 'truncate': (max_tokens|policy) must be"):
        make_compressor({"name": "truncate", "params": bad})

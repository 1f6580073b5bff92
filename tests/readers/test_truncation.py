"""The one truncation rule, checked against LongBench's pred.py behaviour and on real tokenizers."""
from __future__ import annotations

import random

import pytest

from core.errors import ParamError
from core.text import count_words
from readers.tokenizers import HFTokenizer, WordTokenizer, load_tokenizer
from readers.truncation import cut_at_stop, prompt_budget, truncate_ids, truncate_text

IDS = list(range(10))


def pred_py_middle(ids, max_length, decode):
    """LongBench pred.py, as the paper's code behaves: over the limit, keep int(max_length / 2) tokens from
    each end, decode the two halves separately and join the strings (the test oracle, not our code)."""
    if len(ids) <= max_length:
        return None
    half = int(max_length / 2)
    return decode(ids[:half]) + decode(ids[-half:])


def test_truncate_ids_policies_by_hand():
    assert truncate_ids(IDS, 4, "middle") == [0, 1, 8, 9]
    assert truncate_ids(IDS, 5, "middle") == [0, 1, 8, 9]  # LongBench: half = int(5/2) = 2 from each end
    assert truncate_ids(IDS, 4, "left") == [6, 7, 8, 9]
    assert truncate_ids(IDS, 4, "right") == [0, 1, 2, 3]
    assert truncate_ids(IDS, 4, "none") == IDS
    assert truncate_ids(IDS, 10, "middle") == IDS
    assert truncate_ids(IDS, 1, "middle") == []  # pred.py's ids[-0:] would keep everything here
    with pytest.raises(ParamError, match="unknown truncation policy"):
        truncate_ids(IDS, 4, "centre")


@pytest.mark.parametrize("tokenizer_kind", ["wordpiece", "words"])
def test_middle_truncation_equals_longbench_pred_py(tokenizer_kind, wordpiece_tokenizer):
    tok = HFTokenizer(wordpiece_tokenizer) if tokenizer_kind == "wordpiece" else WordTokenizer()
    rng = random.Random(7)
    vocab = "the river flows into lake Quastin 北京 是 中国 的 首都 , . ! 1984 don't e-mail".split()
    checked = 0
    for _ in range(200):
        text = " ".join(rng.choice(vocab) for _ in range(rng.randint(5, 80)))
        ids = tok.encode(text)
        budget = rng.randint(2, len(ids) + 5)
        expected = pred_py_middle(ids, budget, tok.decode)
        got, cut = truncate_text(text, tok, budget, "middle")
        if expected is None:
            assert (got, cut) == (text, False)
        else:
            assert cut and got == expected
            checked += 1
    assert checked > 100


def test_truncate_text_on_wordpiece(wordpiece_tokenizer):
    tok = HFTokenizer(wordpiece_tokenizer)
    text = "alpha beta gamma delta epsilon zeta eta theta"
    assert truncate_text(text, tok, 100, "middle") == (text, False)
    cut, was_cut = truncate_text(text, tok, 4, "middle")
    assert was_cut and cut == "alpha betaeta theta"  # halves decoded separately, then joined, as LongBench does
    assert truncate_text(text, tok, 3, "left") == ("zeta eta theta", True)
    assert truncate_text(text, tok, 3, "right") == ("alpha beta gamma", True)
    assert truncate_text(text, tok, 3, "none") == (text, False)
    assert len(tok.encode(truncate_text(text * 5, tok, 7, "left")[0])) <= 7


def test_word_tokenizer_counts_longbench_words_and_keeps_text_verbatim():
    tok = WordTokenizer()
    chinese = "这是一个很长的中文句子，没有空格。" * 50
    assert len(tok.encode(chinese)) == count_words(chinese) == 15 * 50  # every ideograph a word; str.split says 1
    text = "Alpha,  beta\n\ngamma -- delta!"
    assert tok.decode(tok.encode(text)) == text
    assert truncate_text(text, tok, 2, "middle") == ("Alpha,  delta!", True)
    assert truncate_text(text, tok, 2, "right") == ("Alpha,  beta\n\n", True)
    assert truncate_text("!!! ...", tok, 0, "middle") == ("!!! ...", False)  # no words: nothing to cut


def test_tokenizer_specs_and_helpers():
    assert isinstance(load_tokenizer(None), WordTokenizer)
    assert isinstance(load_tokenizer("words"), WordTokenizer)
    ws = WordTokenizer()
    assert load_tokenizer(ws) is ws
    with pytest.raises(ParamError):
        load_tokenizer(42)
    with pytest.raises(ParamError, match=r"cannot load the tokenizer '/nonexistent/tokenizer-folder': "):
        load_tokenizer("/nonexistent/tokenizer-folder")  # a path that is neither a folder nor a reachable hub id
    assert prompt_budget(100, 30) == 70
    with pytest.raises(ParamError, match="no room"):
        prompt_budget(10, 10)
    assert cut_at_stop("answer\nQuestion: next", ["\n", "Question"]) == "answer"
    assert cut_at_stop("no stop here", ["\n"]) == "no stop here"

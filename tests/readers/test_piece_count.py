"""Token counts summed over pre-tokens equal whole encodes, for the tokenizer forms that allow it, and nothing
else is counted that way.  Tokenizers are trained here, offline, with the ``tokenizers`` library."""
from __future__ import annotations

import pytest
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from readers.piece_count import PieceCounter
from readers.sizing import JsonTokenizer

# Llama 3's split pattern (its tokenizer.json), then byte-level mapping without a second split
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's 2026; they'll say 12345 and 3.14!",
    "def f(x):\n    return x ** 2  # squares\n\n\tTabs\tand   spaces   ",
    "中文文本测试，这是一个句子。 Émigré naïve café ß ﬁ 😀 ١٢٣ ½ Ⅻ",
    "2a8d601d-1d69-4e64-9f90-8ad825a74195: \"value\" {\"key\": [1, 2, 3]}",
] * 20
TEXTS = CORPUS[:4] + [
    " leading space", "trailing spaces   ", "\n\n\n", "", "a" * 500, " ".join(CORPUS[:4]) * 30,
    "WORDS never seen in training: zyxwv qqqq Kjeldahl 987654321",
    "an added token <|im_start|> inside",
]


def trained(tmp_path, pre, normalizer=None) -> str:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    if normalizer is not None:
        tok.normalizer = normalizer
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return str(path)


GPT2 = lambda: pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)  # noqa: E731
LLAMA3 = lambda: pre_tokenizers.Sequence([  # noqa: E731
    pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


@pytest.mark.parametrize("pre", [GPT2, LLAMA3], ids=["gpt2-byte-level", "llama3-split"])
def test_sums_over_pre_tokens_equal_whole_encodes(tmp_path, pre):
    tokenizer = JsonTokenizer(trained(tmp_path, pre()))
    assert tokenizer.pieces is not None, "this form should be counted by pieces"
    for text in TEXTS * 2:  # the second pass counts from pieces seen already
        assert tokenizer.count(text) == len(tokenizer.encode(text)), text[:60]
    assert tokenizer.pieces is not None and tokenizer.checked == JsonTokenizer.checks


def test_a_text_with_an_added_token_is_encoded(tmp_path):
    counter = PieceCounter.of(Tokenizer.from_file(path := trained(tmp_path, GPT2())), path)
    assert counter is not None and counter("an added token <|im_start|> inside") is None


@pytest.mark.parametrize("case", ["normalizer", "prefix-space", "metaspace"])
def test_other_forms_are_not_counted_by_pieces(tmp_path, case):
    if case == "normalizer":
        path = trained(tmp_path, GPT2(), normalizers.NFKC())
    elif case == "prefix-space":
        path = trained(tmp_path, pre_tokenizers.ByteLevel(add_prefix_space=True))
    else:
        path = trained(tmp_path, pre_tokenizers.Metaspace())
    tokenizer = JsonTokenizer(path)
    assert tokenizer.pieces is None
    assert [tokenizer.count(t) for t in TEXTS] == [len(tokenizer.encode(t)) for t in TEXTS]


def test_a_count_that_differs_from_the_whole_encode_switches_the_sums_off(tmp_path):
    tokenizer = JsonTokenizer(trained(tmp_path, GPT2()))
    tokenizer.pieces = lambda text: 10**6  # a counter that is wrong
    text = TEXTS[0]
    assert tokenizer.count(text) == len(tokenizer.encode(text)) and tokenizer.pieces is None


@pytest.mark.parametrize("pre", [GPT2, LLAMA3], ids=["gpt2-byte-level", "llama3-split"])
def test_a_middle_cut_from_the_ends_alone_is_the_whole_encodes_cut(tmp_path, pre):
    from readers.sizing import CountingTokenizer, ReaderSizing
    from readers.truncation import truncate_text

    path = trained(tmp_path, pre())
    plain = JsonTokenizer(path)
    counting = CountingTokenizer(ReaderSizing(JsonTokenizer(path), 2048, "t", "its tokenizer", True))
    long = " ".join(CORPUS[:4]) * 30
    for text in TEXTS[:4] * 2 + [long]:  # the first counts pass the checks; the later cuts read the ends alone
        counting.count_all([text], keep=True)
        for budget in (0, 1, 2, 7, 64, 301, 10**6):
            assert truncate_text(text, counting, budget, "middle") == truncate_text(text, plain, budget, "middle")
    assert counting.tokenizer.pieces is not None and not counting.kept  # no context's whole ids were made
    ids = plain.encode(long)
    assert counting.tokenizer.end_ids(long, 5, 9) == (ids[:5], ids[-9:])


def test_the_ascii_pattern_cuts_ascii_text_as_the_unicode_one():
    import random
    import re

    import regex

    from readers.piece_count import GPT2_ASCII, GPT2_PATTERN

    rng = random.Random(0)
    fast, full = re.compile(GPT2_ASCII), regex.compile(GPT2_PATTERN)
    for _ in range(5000):  # every ASCII character, contractions and runs of spaces among them
        text = "".join(chr(rng.randrange(128)) if rng.random() < 0.5 else
                       rng.choice(["'s", "'ll", " ", "  ", "a", "Z9", "\n\n", "x'S", "\x1c "]) for _ in range(rng.randint(0, 30)))
        assert fast.findall(text) == full.findall(text), repr(text)


def test_text_beyond_ascii_is_cut_as_the_unicode_pattern_cuts_it(tmp_path):
    import random

    import regex

    from readers.piece_count import GPT2_PATTERN

    counter = PieceCounter.of(Tokenizer.from_file(path := trained(tmp_path, GPT2())), path)
    full = regex.compile(GPT2_PATTERN)
    rng = random.Random(0)
    alphabet = ["'s", "'ré", "'ès", " ", "\u00a0", "\u2028", "\x85", "\x1c", "é", "ß", "中文", "١٢", "½", "Ⅻ", "\u0301",
                "’", "“", "—", "😀", "a", "Z9", "\t", "\n\n", "\ud800", "ǅ", "ſ"]
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        assert counter.pieces_of(text) == full.findall(text), repr(text)


@pytest.mark.parametrize("pre", [GPT2, LLAMA3], ids=["gpt2-byte-level", "llama3-split"])
def test_end_ids_from_windows_equal_the_whole_encodes_ends_on_random_texts(tmp_path, pre):
    import random

    path = trained(tmp_path, pre())
    counter = PieceCounter.of(Tokenizer.from_file(path), path)
    whole = JsonTokenizer(path)
    rng = random.Random(0)
    alphabet = ["'s", "'ll", " ", "   ", "\n", " \n\n", "\t", "word", "Word", "é", "中文", "12345", "3.14", "...", "’",
                "don't", "x", "\u00a0", "😀"]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3000)))
        ids = whole.encode(text)
        for head, tail in [(1, 1), (7, 3), (rng.randint(1, 400), rng.randint(1, 400)), (len(ids), len(ids))]:
            assert counter.end_ids(text, head, tail) == (ids[:head], ids[max(0, len(ids) - tail):]), (text[:60], head, tail)

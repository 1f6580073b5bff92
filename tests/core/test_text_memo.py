"""Counting long texts sentence by sentence, with each sentence's count kept, gives every count unchanged."""
import random

from core import text as T


def test_counts_by_sentences_equal_counts_of_the_whole():
    rng = random.Random(0)
    words = ["alpha", "Beta", "x1", "中文", "ß", "İstanbul", "naïve", "3.14", "e.g.", "a. b", "", "...", ". .", "\n",
             "don't", "ﬁ"]
    ends = [". ", " ", ".", "", "\n", ".  ", "。"]
    for _ in range(400):
        text = " ".join(rng.choice(words) + rng.choice(ends) for _ in range(rng.randint(0, 3000)))
        for _ in range(2):  # the second time from the kept counts
            assert T.count_words(text) == T._unicode_words(text)
            assert T.count_pieces(text) == T._unicode_pieces(text) == len(T.word_pieces(text))
    assert T._WORDS_SEEN and T._PIECES_SEEN  # long texts were counted by parts


def test_the_kept_counts_stay_bounded(monkeypatch):
    monkeypatch.setattr(T, "_MEMO_ENTRIES", 50)
    monkeypatch.setattr(T, "_WORDS_SEEN", {})
    text = ". ".join(f"sentence número {i} of many" for i in range(2000))  # not ASCII: counted by parts
    assert T.count_words(text) == T._unicode_words(text) == 10_000
    assert 0 < len(T._WORDS_SEEN) <= 50

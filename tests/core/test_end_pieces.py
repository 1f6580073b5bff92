"""A middle truncation in LongBench words reads the two ends of a text without cutting its middle into words."""
import random

from core.text import end_pieces, word_pieces
from readers.tokenizers import WordTokenizer


def test_end_pieces_are_the_ends_of_word_pieces():
    rng = random.Random(1)
    words = ["alpha", "Beta", "x1", "中文", "ß", "naïve", "3.14", " ", "  ", "...", "\n", "don't", "_", "中"]
    for _ in range(3000):
        text = "".join(rng.choice(words) for _ in range(rng.randint(0, 400)))
        pieces = word_pieces(text)
        for head, tail in [(0, 0), (1, 1), (3, 7), (50, 50), (1000, 1000), (rng.randint(0, 300), rng.randint(0, 300))]:
            first, last = end_pieces(text, head, tail)
            assert first == pieces[:head], (text[:80], head)
            assert last == (pieces[max(0, len(pieces) - tail):] if tail else []), (text[:80], tail)


def test_word_tokenizer_end_ids_decode_as_the_whole_encodes_ends():
    tokenizer = WordTokenizer()
    text = "  Leading space. " + " ".join(f"word{i}, 中文{i}" for i in range(3000)) + " end."
    ids = tokenizer.encode(text)
    first, last = tokenizer.end_ids(text, 100, 77)
    assert first == ids[:100] and last == ids[-77:]

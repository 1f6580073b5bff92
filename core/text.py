"""The counting rule for text without a model tokenizer: LongBench words.

A word is every CJK ideograph on its own, otherwise a maximal run of word
characters (what survives LongBench's ``re.split(r"\\W", ...)``).  The one
ideograph range is LongBench's (``[\\u4e00-\\u9fa5]``); every other place that
asks "is this Chinese?" uses the same range.
"""
from __future__ import annotations

import itertools
import re

CJK = "\u4e00-\u9fa5"
CJK_CHAR = re.compile(f"[{CJK}]")
WORD = re.compile(rf"[{CJK}]|[^\W{CJK}]+")
_ASCII_WORD = re.compile(r"\w+", re.ASCII)
# each byte of ASCII text as b"w" when `_ASCII_WORD` matches it (a word character), else b" "
_WORD_MARKS = bytes(0x77 if i < 128 and _ASCII_WORD.match(chr(i)) else 0x20 for i in range(256))
_WIDE_WORD_CHAR = re.compile(r"[^\W\x00-\x7f]")  # a word character outside ASCII (é, ß, Ω)


def _count_runs(text: str) -> int:
    """The runs of word characters in ``text`` (``len(re.findall(r"\\w+", text))``), several times faster: the
    runs are not made.

    Outside ASCII, each word character becomes "a" and every other character "?", which keeps every run; then
    every byte is marked word or not (in C), and a word starts at a word byte that opens the text or follows a
    non-word one.  Dry runs count every prompt of a grid, so this is where their word counting goes.
    """
    data = text.encode("ascii") if text.isascii() else _WIDE_WORD_CHAR.sub("a", text).encode("ascii", "replace")
    marks = data.translate(_WORD_MARKS)
    return marks.count(b" w") + marks.startswith(b"w")


def word_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the words :func:`count_words` counts, in order."""
    return [m.span() for m in WORD.finditer(text)]


def count_words(text: str) -> int:
    """Words in LongBench's sense; the counting rule wherever no model tokenizer is available.

    The text is lowercased first, as LongBench's splitter does (it can change
    the count only for the rare characters whose lowercase form is longer).
    """
    return count_pieces(text if text.isascii() else text.lower())  # lowercasing ASCII changes no word


def count_pieces(text: str) -> int:
    """``len(word_pieces(text))`` (the word tokens of a reader without a model tokenizer), without making them."""
    ideographs = 0
    if not text.isascii():  # each ideograph is a word of its own, and it ends the run of word characters before it
        text, ideographs = CJK_CHAR.subn(" ", text)
    return ideographs + _count_runs(text)


def word_pieces(text: str) -> list[str]:
    """``text`` cut before every word, so ``"".join(pieces) == text`` and ``len(pieces) == count_words(text)``.

    Leading non-word characters ride with the first word; a text without
    words has no pieces.  Truncating a list of pieces keeps text verbatim.
    """
    starts = [m.start() for m in WORD.finditer(text)]
    if not starts:
        return []
    bounds = [0, *starts[1:], len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def end_pieces(text: str, head: int, tail: int) -> tuple[list[str], list[str]]:
    """The first ``head`` and the last ``tail`` of :func:`word_pieces`, finding only the words they hold: a middle
    truncation of a long text reads its two ends, and cutting the whole text into words was most of its cost."""
    first: list[str] = []
    if head > 0:
        starts = [m.start() for m in itertools.islice(WORD.finditer(text), head + 1)]
        if starts:
            bounds = [0, *starts[1:]] + ([] if len(starts) > head else [len(text)])
            first = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    last: list[str] = []
    if tail > 0:
        window = 8 * tail + 64
        while True:  # a window from the end that holds ``tail`` whole words, doubled until it does
            at = max(0, len(text) - window)
            starts = [m.start() for m in WORD.finditer(text, at)]
            if at > 0:
                starts = starts[1:]  # the first match may begin inside a word
            if len(starts) > tail or at == 0:
                break
            window *= 2
        if len(starts) <= tail:
            last = word_pieces(text)[-tail:]
        else:
            bounds = [*starts[-tail:], len(text)]
            last = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    return first, last


__all__ = ["CJK", "CJK_CHAR", "WORD", "count_pieces", "count_words", "end_pieces", "word_pieces", "word_spans"]

"""The counting rule for text without a model tokenizer: LongBench words.

A word is every CJK ideograph on its own, otherwise a maximal run of word
characters (what survives LongBench's ``re.split(r"\\W", ...)``).  The one
ideograph range is LongBench's (``[\\u4e00-\\u9fa5]``); every other place that
asks "is this Chinese?" uses the same range.
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Callable

CJK = "\u4e00-\u9fa5"
CJK_CHAR = re.compile(f"[{CJK}]")
WORD = re.compile(rf"[{CJK}]|[^\W{CJK}]+")
# ASCII text: each byte made a word mark (b"w") or a gap (b" "), so its words are the gaps followed by a mark
_ASCII_MARKS = b"".join(b"w" if re.fullmatch(rb"\w", bytes([c])) else b" " for c in range(256))


def word_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the words :func:`count_words` counts, in order."""
    return [m.span() for m in WORD.finditer(text)]


def count_words(text: str) -> int:
    """Words in LongBench's sense; the counting rule wherever no model tokenizer is available.

    The text is lowercased first, as LongBench's splitter does (it can change
    the count only for the rare characters whose lowercase form is longer).
    """
    if text.isascii():  # no ideograph, and lowercasing makes no non-word a word
        return _count_ascii_words(text)
    return _by_sentences(text, _unicode_words, _WORDS_SEEN)


def count_pieces(text: str) -> int:
    """``len(word_pieces(text))`` (the word tokens of a reader without a model tokenizer), without making them."""
    if text.isascii():
        return _count_ascii_words(text)
    return _by_sentences(text, _unicode_pieces, _PIECES_SEEN)


def _count_ascii_words(text: str) -> int:
    """The words of an ASCII text (maximal runs of ``[A-Za-z0-9_]``) counted in C loops, without making a string
    per word: about 6x faster than ``findall``, which was the largest share of a key-value dry run's counting."""
    marks = text.encode("ascii").translate(_ASCII_MARKS)
    return marks.count(b" w") + marks.startswith(b"w")


def _unicode_words(text: str) -> int:
    return _count_ascii_words(text) if text.isascii() else len(WORD.findall(text.lower()))


def _unicode_pieces(text: str) -> int:
    return _count_ascii_words(text) if text.isascii() else len(WORD.findall(text))


_SEPARATOR = ". "  # no word character: the words of a text are the words of its parts split here
_MEMO_LONGER_THAN, _MEMO_PART_MAX, _MEMO_ENTRIES = 4096, 2048, 200_000
_WORDS_SEEN: dict[str, int] = {}
_PIECES_SEEN: dict[str, int] = {}


def _by_sentences(text: str, count: Callable[[str], int], memo: dict[str, int]) -> int:
    """``count(text)`` of a text that is not all ASCII, as the sum over its parts between sentence ends, each
    part's count kept: one accented name sends a whole text down the slow path, yet its sentences recur across a
    corpus's examples (a Lost in the Middle sweep reorders the same documents 18,585 times), and counting them
    once each was most of such a dry run.  Exact: no word runs across ". "."""
    if len(text) <= _MEMO_LONGER_THAN:
        return count(text)
    total = 0
    for part in text.split(_SEPARATOR):
        n = memo.get(part)
        if n is None:
            n = count(part)
            if len(part) <= _MEMO_PART_MAX:
                if len(memo) >= _MEMO_ENTRIES:
                    memo.clear()
                memo[part] = n
        total += n
    return total


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

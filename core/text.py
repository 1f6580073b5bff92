"""The counting rule for text without a model tokenizer: LongBench words.

A word is every CJK ideograph on its own, otherwise a maximal run of word
characters (what survives LongBench's ``re.split(r"\\W", ...)``).  The one
ideograph range is LongBench's (``[\\u4e00-\\u9fa5]``); every other place that
asks "is this Chinese?" uses the same range.
"""
from __future__ import annotations

import re

CJK = "\u4e00-\u9fa5"
CJK_CHAR = re.compile(f"[{CJK}]")
WORD = re.compile(rf"[{CJK}]|[^\W{CJK}]+")


def word_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the words :func:`count_words` counts, in order."""
    return [m.span() for m in WORD.finditer(text)]


def count_words(text: str) -> int:
    """Words in LongBench's sense; the counting rule wherever no model tokenizer is available.

    The text is lowercased first, as LongBench's splitter does (it can change
    the count only for the rare characters whose lowercase form is longer).
    """
    return len(WORD.findall(text.lower()))


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


__all__ = ["CJK", "CJK_CHAR", "WORD", "count_words", "word_pieces", "word_spans"]

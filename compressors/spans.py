"""Where a compressor's kept text sits in the original context: the ``CompressedContext.kept_spans`` helpers.

A compressor knows what it kept while it keeps it; these turn that knowledge into sorted, non-overlapping
``[start, end)`` character spans of the example's context, so the view can highlight any compressor's choice
(a plugin's as well as a built-in's) without knowing how it chose.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

from indexes.types import Passage

Span = tuple[int, int]
_WORD = re.compile(r"\S+")
WORD_LOOKAHEAD = 200  # context words searched for the next kept word before it counts as a fragment


def normalized(spans: Iterable[Span]) -> tuple[Span, ...]:
    """``spans`` sorted, empty ones dropped and overlapping ones merged (touching ones stay apart, so the units a
    compressor kept keep their edges)."""
    out: list[Span] = []
    for start, end in sorted((int(s), int(e)) for s, e in spans if e > s):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return tuple(out)


def passage_offsets(context: str, passages: Sequence[Passage]) -> list[int | None]:
    """Where each passage's text starts in ``context`` (searched in order; ``None`` when it is not there)."""
    out: list[int | None] = []
    cursor = 0
    for p in passages:
        at = context.find(p.text, cursor) if p.text else -1
        if at < 0 and p.text:
            at = context.find(p.text)
        out.append(at if at >= 0 else None)
        if at >= 0:
            cursor = at + len(p.text)
    return out


def edge_spans(context: str, kept: str, *, head: bool, tail: bool) -> tuple[Span, ...]:
    """What a truncation kept of ``context``: a prefix of it (``head``), a suffix (``tail``), or both joined.

    The kept text is split where its first part starts the context and the rest ends it; where several
    splits fit (``w9 w190`` after ``w9 w10``), the first that falls between words on both sides is taken.
    A tokenizer whose round trip is not verbatim loses only the characters where the two differ."""
    prefix = len(os.path.commonprefix([context, kept])) if head else 0
    suffix = len(os.path.commonprefix([context[::-1], kept[::-1]])) if tail else 0
    if not tail:
        return normalized([(0, prefix)])
    if not head:
        return normalized([(len(context) - suffix, len(context))])
    lo, hi = max(0, len(kept) - suffix), min(prefix, len(kept))

    def between_words(k: int) -> bool:
        start = len(context) - (len(kept) - k)
        ends = k >= len(context) or context[k].isspace() or (k > 0 and kept[k - 1].isspace())
        starts = start in (0, len(context)) or context[start - 1].isspace() or context[start].isspace()
        return ends and starts

    if lo > hi:  # not a verbatim prefix and suffix: what matches at each end
        split = prefix
        rest = len(os.path.commonprefix([context[split:][::-1], kept[split:][::-1]]))
        return normalized([(0, split), (len(context) - rest, len(context))])
    split = next((k for k in range(lo, hi + 1) if between_words(k)), hi)
    return normalized([(0, split), (len(context) - (len(kept) - split), len(context))])


def word_spans(context: str, kept_text: str) -> tuple[Span, ...]:
    """The context's words that a token-dropping compressor (LongLLMLingua) kept: its kept text aligned word by
    word with the context, in order (a kept word that is only part of a context word marks that word).  A kept
    "word" may be pieces of several; one found in none of the next ``WORD_LOOKAHEAD`` context words is passed
    over.  Neighbours separated by whitespace only become one span."""
    words = list(_WORD.finditer(context))
    found: list[Span] = []
    at = 0
    for kept in (m.group() for m in _WORD.finditer(kept_text)):
        for i in range(at, min(len(words), at + WORD_LOOKAHEAD)):
            word = words[i].group()
            if word == kept or (len(kept) > 2 and kept in word):
                found.append((words[i].start(), words[i].end()))
                at = i + 1
                break
    merged: list[Span] = []
    for s, e in found:
        if merged and not context[merged[-1][1]:s].strip():
            merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return tuple(merged)

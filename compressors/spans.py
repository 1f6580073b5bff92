"""Where a compressor's kept text sits in the original context: the ``CompressedContext.kept_spans`` helpers.

A compressor knows what it kept while it keeps it; these turn that knowledge into sorted, non-overlapping
``[start, end)`` character spans of the example's context, so the view can highlight any compressor's choice
(a plugin's as well as a built-in's) without knowing how it chose.

A token pruner (the LLMLingua family, Selective Context) returns only its kept text: the context's words or
word pieces, in order, joined by spaces or run together where whitespace tokens were dropped ("PhysicsThe").
``align_kept_text`` finds where each piece came from, left to right: each whitespace-separated piece is consumed
as a run of fragments, each the longest prefix of what is left that occurs at or after the current place.  That
is exact for whole kept words and a close reading for pieces of words; a fragment found nowhere ahead (a
normaliser changed it) is passed over, never matched backwards.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

from indexes.types import Passage

Span = tuple[int, int]


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


def _longest_prefix_at(context: str, piece: str, start: int) -> tuple[int, int]:
    """(where, length) of the longest prefix of ``piece`` found in ``context`` at or after ``start``; length 0
    when not even its first character is.  A prefix found means every shorter one is, so bisect the length."""
    lo, hi, where = 0, len(piece), -1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        found = context.find(piece[:mid], start)
        if found >= 0:
            lo, where = mid, found
        else:
            hi = mid - 1
    return where, lo


def merge_spans(spans: list[tuple[int, int]], context: str) -> tuple[Span, ...]:
    """Sorted spans with neighbours that only whitespace separates joined, so a kept sentence is one span."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and (start <= merged[-1][1] or not context[merged[-1][1]:start].strip()):
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return tuple(merged)


def align_kept_text(context: str, kept_text: str) -> tuple[Span, ...]:
    """The spans of ``context`` that ``kept_text`` (a pruner's output, in order) was cut from."""
    spans: list[tuple[int, int]] = []
    at = 0
    # a pruner glues punctuation kept from later onto a word ("2012" + "." of a later sentence = "2012."): words
    # and punctuation marks are aligned one by one, so the glued piece cannot match whole far ahead
    for piece in re.findall(r"\w+|[^\w\s]", kept_text):
        rest = piece
        while rest:
            where, length = _longest_prefix_at(context, rest, at)
            if length == 0:
                rest = rest[1:]  # a character the context does not have ahead: pass over it
                continue
            spans.append((where, where + length))
            at = where + length
            rest = rest[length:]
    return merge_spans(spans, context)

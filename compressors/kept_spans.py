"""What a token pruner kept, as character spans of the context (``CompressedContext.kept_spans``).

A pruner returns only its kept text: the context's words or word pieces, in order, joined by spaces or run
together where whitespace tokens were dropped ("PhysicsThe").  Nothing in that text says where each piece came
from, so it is aligned with the context here, left to right: each whitespace-separated piece is consumed as a
run of fragments, each fragment the longest prefix of what is left that occurs at or after the current place.
The alignment is exact for whole kept words (LLMLingua-2, Selective Context) and a close reading for token
fragments (LLMLingua's pieces of words); a fragment found nowhere ahead (a normaliser changed it) is passed
over, never matched backwards.
"""
from __future__ import annotations

Spans = tuple[tuple[int, int], ...]


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


def merge_spans(spans: list[tuple[int, int]], context: str) -> Spans:
    """Sorted spans with neighbours that only whitespace separates joined, so a kept sentence is one span."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and (start <= merged[-1][1] or not context[merged[-1][1]:start].strip()):
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return tuple(merged)


def align_kept_text(context: str, kept_text: str) -> Spans:
    """The spans of ``context`` that ``kept_text`` (a pruner's output, in order) was cut from."""
    spans: list[tuple[int, int]] = []
    at = 0
    for piece in kept_text.split():
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


__all__ = ["Spans", "align_kept_text", "merge_spans"]

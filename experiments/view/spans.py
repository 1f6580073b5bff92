"""Where each arm's kept text sits in an example's original context, for ``ctxcomp view``.

A trace names the units a compressor kept (chunk ids such as ``"ex7#3"`` or
``"p2#0"``, or passage doc ids for ``top_k``), not their text.  The view
re-splits the example's context with the arm's own chunker (its parameters
from ``grid.json``) to find the character span of every unit, exactly as the
compressor split it: the chunkers keep exact offsets, so
``context[start:end]`` is the unit's text.  LongLLMLingua keeps words, not
units: its kept text is aligned word by word with the context.

Nothing here runs a model or reads a config: the examples come from the
caller (``ctxcomp view`` reloads them from the run's config).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from experiments.data.records import Example, Prediction, Trace

DEFAULT_CHUNKER = "longbench"
DEFAULT_CHUNK_SIZE = 500  # the retrieval and summarize compressors' default
_WORD = re.compile(r"\S+")
LINGUA_LOOKAHEAD = 200  # context words searched for the next kept word before it counts as a fragment


def passage_offsets(example: Example) -> list[int | None]:
    """Where each passage's text starts in the context (searched in order; ``None`` when it is not there)."""
    out: list[int | None] = []
    cursor = 0
    for p in example.passages:
        at = example.context.find(p.text, cursor) if p.text else -1
        if at < 0 and p.text:
            at = example.context.find(p.text)
        out.append(at if at >= 0 else None)
        if at >= 0:
            cursor = at + len(p.text)
    return out


def _chunker(params: Mapping[str, Any], trace: Mapping[str, Any]):
    """The arm's chunker, built as the compressor built it (params from grid.json; the trace's name:size else)."""
    from indexes.chunking import make_chunker

    spec: Any = params.get("chunker")
    size = params.get("chunk_size")
    if spec is None and isinstance(trace.get("chunker"), str) and ":" in trace["chunker"]:
        name, _, given = trace["chunker"].partition(":")
        spec, size = name, size or (int(given) if given.isdigit() else None)
    spec = spec or DEFAULT_CHUNKER
    compat = {"compat": True} if params.get("longbench_compat") and spec == "longbench" else {}
    return make_chunker(spec, int(size or DEFAULT_CHUNK_SIZE), **compat)


def unit_spans(example: Example, kind: str, params: Mapping[str, Any], trace: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Every unit the arm's compressor could keep, by id, as a [start, end) span of the context."""
    if kind == "top_k":
        offsets = passage_offsets(example)
        spans: dict[str, tuple[int, int]] = {}
        for p, at in zip(example.passages, offsets):
            if at is not None and p.doc_id and p.doc_id not in spans:
                spans[p.doc_id] = (at, at + len(p.text))
        return spans
    if kind not in ("retrieval", "summarize") or not example.context.strip():
        return {}
    chunker = _chunker(params, trace)
    unit = params.get("unit", "auto")
    if kind == "retrieval" and example.passages and (unit == "passage" or unit == "auto" or trace.get("chunker") == "passages"):
        spans = {}
        for i, (p, at) in enumerate(zip(example.passages, passage_offsets(example))):
            if at is None:
                continue
            parts = chunker.split(p.text, doc_id=f"p{i}") if p.text.strip() else []
            if len(parts) <= 1:
                spans[f"p{i}#0"] = (at, at + len(p.text))
            else:
                spans.update({c.chunk_id: (at + c.start, at + c.end) for c in parts})
        return spans
    return {c.chunk_id: (c.start, c.end) for c in chunker.split(example.context, doc_id=str(example.id))}


def ranked_units(ranking: Any) -> list[tuple[str, float | None]] | None:
    """A trace's ranking as ``(unit, score)`` rows, best first; None when it is not a ranking.

    Retrieval, its hybrid and rerank retrievers and ``top_k`` keep ``[unit id, score]`` pairs (``top_k``'s score
    may be null); LongLLMLingua keeps the bare indices of its documents, best first, with no score: those read
    ``document i`` (0-based, in the example's order)."""
    if not isinstance(ranking, list):
        return None
    rows: list[tuple[str, float | None]] = []
    for entry in ranking:
        if isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[0], (str, int)):
            unit, score = entry
        elif isinstance(entry, (str, int)) and not isinstance(entry, bool):
            unit, score = entry, None
        else:
            return None
        unit = f"document {unit}" if isinstance(unit, int) and not isinstance(unit, bool) else str(unit)
        rows.append((unit, float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None))
    return rows


def lingua_spans(context: str, kept_text: str) -> list[tuple[int, int]]:
    """The context's words that LongLLMLingua kept: its kept text aligned word by word, in order (a kept word
    that is only part of a context word marks that word).  LongLLMLingua drops tokens, so a kept "word" may be
    pieces of several; one found in none of the next ``LINGUA_LOOKAHEAD`` context words is passed over."""
    words = list(_WORD.finditer(context))
    out: list[tuple[int, int]] = []
    at = 0
    for kept in (m.group() for m in _WORD.finditer(kept_text)):
        for i in range(at, min(len(words), at + LINGUA_LOOKAHEAD)):
            word = words[i].group()
            if word == kept or (len(kept) > 2 and kept in word):
                out.append((words[i].start(), words[i].end()))
                at = i + 1
                break
    merged: list[tuple[int, int]] = []
    for s, e in out:  # neighbours separated by whitespace only become one span
        if merged and not context[merged[-1][1]:s].strip():
            merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


def prompt_spans(context: str, prompt: str, policy: str) -> list[tuple[int, int]]:
    """What a truncation kept, found in the prompt: the context's longest prefix (``policy`` ``right`` cuts the
    end), longest suffix (``left``) or both (``middle``) that the prompt holds word for word."""
    def longest(piece) -> int:
        lo, hi = 0, len(context)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if piece(mid) in prompt else (lo, mid - 1)
        return lo

    head = longest(lambda n: context[:n]) if policy in ("right", "middle") else 0
    if head == len(context):
        return [(0, head)]
    tail = longest(lambda n: context[len(context) - n:]) if policy in ("left", "middle") else 0
    return [(s, e) for s, e in ((0, head), (len(context) - tail, len(context))) if e - s > 0]


_CHUNKING = ("chunker", "chunk_size", "unit", "longbench_compat")  # what decides a compressor's units


_MEMO: dict[tuple[Any, ...], tuple[Example, Any]] = {}


def _memo(example: Example, key: tuple[Any, ...], compute: Any) -> Any:
    """``compute()`` once per example (by identity: hashing an example hashes all its passages) and ``key``."""
    full = (id(example), *key)
    hit = _MEMO.get(full)
    if hit is not None and hit[0] is example:
        return hit[1]
    if len(_MEMO) > 100_000:
        _MEMO.clear()
    value = compute()
    _MEMO[full] = (example, value)
    return value


def _cached_spans(example: Example, kind: str, chunking: str, trace_chunker: str) -> dict[str, tuple[int, int]]:
    """``unit_spans`` once per example and chunking: arms that differ only in how many units they keep share it."""
    return _memo(example, ("spans", kind, chunking, trace_chunker), lambda: unit_spans(
        example, kind, json.loads(chunking), {"chunker": trace_chunker} if trace_chunker else {}))


def _bearing(example: Example, start: int, end: int, answers: tuple[str, ...]) -> bool:
    from indexes.text import has_answer

    return _memo(example, ("bearing", start, end, answers), lambda: has_answer(example.context[start:end], answers))


def arm_detail(example: Example | None, pred: Prediction | None, trace: Trace | None,
               point: Mapping[str, Any] | None, prompt: str | None = None) -> dict[str, Any]:
    """What the view shows of one arm on one example: kept spans, the ranking with scores and answer-bearing
    units, the summaries beside their chunks, LongLLMLingua's kept words, and the rest of the trace."""
    comp = (point or {}).get("compressor") or {}
    kind = (pred.compressor_kind if pred else "") or (trace.compressor_kind if trace else "") or comp.get("name", "")
    inner: dict[str, Any] = dict(trace.trace or {}) if trace else {}
    kept_ids = list(trace.kept_chunks if trace else (pred.kept_chunks if pred else []))
    out: dict[str, Any] = {"kind": kind, "kept_ids": kept_ids, "identity": trace.compressor_identity if trace else ""}
    context = example.context if example else ""
    spans: dict[str, tuple[int, int]] = {}
    if example is not None:
        params = comp.get("params") or {}
        chunking = json.dumps({k: params.get(k) for k in _CHUNKING}, sort_keys=True, default=str)
        try:
            spans = _cached_spans(example, kind, chunking, str(inner.get("chunker", "")))
        except Exception as err:  # noqa: BLE001 - a plugin chunker the view cannot rebuild: say so, show the rest
            out["note"] = f"the kept units could not be located ({type(err).__name__}: {err})"
    answers = list(pred.answers) if pred else []
    if kind == "full" and context:
        out["kept"] = [[0, len(context), "whole context"]]
    elif kind == "longllmlingua" and context and isinstance(inner.get("kept_text"), str):
        out["kept"] = [[s, e, ""] for s, e in lingua_spans(context, inner.pop("kept_text"))]
        out["kept_words"] = True
    elif kind == "truncate" and context and prompt and isinstance(inner.get("policy"), str):
        out["kept"] = [[s, e, "kept"] for s, e in prompt_spans(context, prompt, inner["policy"])]
        out["note"] = "kept text located in the prompt (the longest part of the context it holds verbatim)"
    elif spans:
        out["kept"] = [[*spans[u], u] for u in kept_ids if u in spans]
        missing = [u for u in kept_ids if u not in spans]
        if missing:
            out["note"] = f"{len(missing)} kept unit(s) not located in the context: {', '.join(missing[:5])}"
    ranking = inner.pop("ranking", None)
    ranked = ranked_units(ranking)
    if ranked:
        kept, rows, first = set(kept_ids), [], None
        for i, (unit, score) in enumerate(ranked):
            span = spans.get(unit)
            bearing = bool(span and answers and _bearing(example, *span, tuple(answers)))
            if bearing and first is None:
                first = i + 1
            rows.append([unit, score, unit in kept, bearing if span else None])
        out["ranking"], out["first_answer_rank"] = rows, first
    elif ranking is not None:
        inner["ranking"] = ranking
    summaries = inner.pop("summaries", None)
    if isinstance(summaries, list):
        out["summaries"] = [[str(s.get("chunk_id", "")), *(spans.get(str(s.get("chunk_id")), (None, None))),
                             str(s.get("summary", "")), s.get("tokens_out")] for s in summaries if isinstance(s, dict)]
    out["trace"] = inner
    return out

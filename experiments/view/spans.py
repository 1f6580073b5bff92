"""Where each arm's kept text sits in an example's original context, for ``ctxcomp view``.

The compressor said it when it ran (``CompressedContext.kept_spans``, stored with the prediction's trace):
``[start, end)`` character spans of the context.  A trace may also say where each ranked unit sits
(``unit_spans``: unit id -> ``[start, end]``) and where each summary's chunk does (``start`` / ``end`` keys),
which the view uses to mark answer-bearing units and to set each summary beside its chunk.  Nothing here knows a compressor, re-splits a context or aligns
text: a plugin's spans are shown exactly as a built-in's.

Nothing here runs a model or reads a config: the examples come from the
caller (``ctxcomp view`` reloads them from the run's config).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from experiments.data.records import Example, Prediction, Trace


def ranked_units(ranking: Any) -> list[tuple[str, float | None]] | None:
    """A trace's ranking as ``(unit, score)`` rows, best first; None when it is not a ranking.

    A row is ``[unit id, score]`` (the score may be null) or a bare document index (best first, no score),
    which reads ``document i`` (0-based, in the example's order)."""
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


def unit_spans(trace: Mapping[str, Any], length: int) -> dict[str, tuple[int, int]]:
    """The trace's ``unit_spans`` (unit id -> ``[start, end]``) that lie in a context of ``length`` characters."""
    raw = trace.get("unit_spans")
    if not isinstance(raw, Mapping):
        return {}
    return {str(unit): (span[0], span[1]) for unit, span in raw.items()
            if isinstance(span, (list, tuple)) and len(span) == 2 and all(isinstance(x, int) for x in span)
            and 0 <= span[0] <= span[1] <= length}


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


def _bearing(example: Example, start: int, end: int, answers: tuple[str, ...]) -> bool:
    from indexes.text import has_answer

    return _memo(example, ("bearing", start, end, answers), lambda: has_answer(example.context[start:end], answers))


def arm_detail(example: Example | None, pred: Prediction | None, trace: Trace | None,
               point: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the view shows of one arm on one example: the spans the compressor said it kept, the ranking with
    scores and answer-bearing units, the summaries beside their chunks, and the rest of the trace.  A trace
    written before compressors said what they kept shows no highlight."""
    comp = (point or {}).get("compressor") or {}
    kind = (pred.compressor_kind if pred else "") or (trace.compressor_kind if trace else "") or comp.get("name", "")
    inner: dict[str, Any] = dict(trace.trace or {}) if trace else {}
    kept_ids = list(trace.kept_chunks if trace else (pred.kept_chunks if pred else []))
    out: dict[str, Any] = {"kind": kind, "kept_ids": kept_ids, "identity": trace.compressor_identity if trace else ""}
    context = example.context if example else ""
    answers = tuple(pred.answers) if pred else ()
    ranking = inner.pop("ranking", None)
    ranked = ranked_units(ranking)
    spans = unit_spans(inner, len(context)) if example is not None else {}
    inner.pop("unit_spans", None)
    unit_at = {span: unit for unit, span in spans.items()}
    if trace is not None and trace.kept_spans is not None and context:
        kept_spans = [(int(s), int(e)) for s, e in trace.kept_spans if 0 <= s < e <= len(context)]
        out["kept"] = [[s, e, unit_at.get((s, e), "")] for s, e in kept_spans]
        out["kept_all"] = kept_spans == [(0, len(context))]  # nothing to pick out: the whole context
        if len(kept_spans) < len(trace.kept_spans):
            out["note"] = f"{len(trace.kept_spans) - len(kept_spans)} kept span(s) lie outside this context"
    if ranked:
        kept, rows, first = set(kept_ids), [], None
        for i, (unit, score) in enumerate(ranked):
            span = spans.get(unit)
            bearing = bool(span and answers and example is not None and _bearing(example, *span, answers))
            if bearing and first is None:
                first = i + 1
            rows.append([unit, score, unit in kept, bearing if span else None])
        out["ranking"], out["first_answer_rank"] = rows, first
    elif ranking is not None:
        inner["ranking"] = ranking
    summaries = inner.pop("summaries", None)
    if isinstance(summaries, list):
        out["summaries"] = [[str(s.get("chunk_id", "")), *_span_of(s, len(context)), str(s.get("summary", "")),
                             s.get("tokens_out")] for s in summaries if isinstance(s, dict)]
    out["trace"] = inner
    return out


def _span_of(entry: Mapping[str, Any], length: int) -> tuple[int | None, int | None]:
    """A trace entry's ``start`` / ``end`` in the context, (None, None) where it has none or they lie outside."""
    start, end = entry.get("start"), entry.get("end")
    if isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= length:
        return start, end
    return None, None

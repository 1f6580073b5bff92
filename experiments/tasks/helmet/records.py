"""HELMET's published records.

- KILT RAG (``data/kilt/*.jsonl``): ``question, answers, ctxs[{title, text, has_answer?, ...}]``, one
  multi-document item each, the gold passage's 0-based position recorded as ``gold_position``; PopQA records
  (``s_pop``, page views) above the task's popularity bound are left out (:func:`popqa_threshold`).  They share
  Lost in the Middle's fields, so they are read as HELMET only when the task says so, as every run does.
- Summarization: ∞Bench's En.Sum records with ``keypoints`` (HELMET's ``longbook_sum_eng_keypoints`` merged in),
  or Multi-LexSum's ``sources, summary/short, summary/long, summary/short_keypoints``.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from core.text import count_words
from experiments.data.records import Example
from indexes.types import Passage


def _id(record: dict, where: Any, field: str) -> str:
    value = where.get(record, field, (str, int))
    return str(value)


def _gold(ctx: dict) -> bool:
    return bool(ctx.get("is_gold") or ctx.get("isgold") or ctx.get("gold"))


def render_helmet_documents(passages) -> str:
    """HELMET's ``passage_template`` ``Document (Title: {title}): {text}``, joined by blank lines."""
    return "\n\n".join(f"Document (Title: {p.title}): {p.text}" for p in passages)


POPQA_THRESHOLD = 3.0  # HELMET configs/rag/kilt_popqa.yaml: datasets: kilt_popqa_3


def popqa_threshold(task: str) -> float | None:
    """The popularity bound of a PopQA task (None: not PopQA), read from its name as HELMET ``data.py``
    ``load_data`` reads ``kilt_popqa_3`` (``float(dataset.split("_")[-1])``): ``helmet_popqa_4`` keeps
    log10(s_pop) < 4, ``helmet_popqa_inf`` keeps every record, and a name without a number ends at HELMET's 3."""
    if "popqa" not in task:
        return None
    try:
        return float(task.rsplit("_", 1)[-1])
    except ValueError:
        return POPQA_THRESHOLD


def _too_popular(record: dict, where: Any, threshold: float) -> bool:
    """HELMET ``load_qa`` keeps a PopQA record when ``math.log10(s_pop) < threshold``; True: leave it out."""
    s_pop = where.get(record, "s_pop", (int, float))
    if s_pop <= 0:
        raise where.error("s_pop", f"must be a positive number of page views, got {s_pop}")
    return math.log10(s_pop) >= threshold


def rag(record: dict, where: Any, task: str | None) -> list[Example]:
    name = task or "helmet_rag"
    threshold = popqa_threshold(name)
    if threshold is not None and _too_popular(record, where, threshold):
        return []
    example_id = str(record.get("id") or f"{name}-{where.line}")
    ctxs = where.get(record, "ctxs", list)
    if not ctxs:
        raise where.error("ctxs", "is empty; a RAG item needs passages")
    passages = []
    for i, ctx in enumerate(ctxs):
        if not isinstance(ctx, dict) or not isinstance(ctx.get("text"), str):
            raise where.error(f"ctxs[{i}].text", "missing or not a string")
        passages.append(Passage(text=ctx["text"], title=str(ctx.get("title") or ""),
                                doc_id=str(ctx.get("id") or f"{example_id}-doc{i}"),
                                is_gold=_gold(ctx), has_answer=bool(ctx.get("has_answer", ctx.get("hasanswer", False)))))
    marked = [i for i, p in enumerate(passages) if p.is_gold] or [i for i, p in enumerate(passages) if p.has_answer]
    meta: dict[str, Any] = {"num_docs": len(passages)}
    if marked and not passages[marked[0]].is_gold:  # the answer-bearing passage is the gold one the sweeps move
        passages[marked[0]] = replace(passages[marked[0]], is_gold=True)
    if marked:
        meta["gold_position"] = marked[0]
        meta["depth"] = round(marked[0] / max(1, len(passages) - 1), 4)
    if "depth" in record and isinstance(record["depth"], (int, float)):
        meta["helmet_depth"] = record["depth"]
    context = render_helmet_documents(passages)
    return [Example(id=example_id, task=name, query=where.text(record, "question"), context=context,
                    answers=where.strings(record, "answers"), passages=tuple(passages), length=count_words(context),
                    source=where.source, meta=meta)]


def summ(record: dict, where: Any, task: str | None) -> list[Example]:
    name = task or "helmet_summ"
    if "sources" in record:  # Multi-LexSum: the precision judge reads the long summary (eval_gpt4_summ.py)
        sources = where.strings(record, "sources")
        context = "\n\n".join(sources)
        summary = where.get(record, "summary/short", str)
        expert = where.get(record, "summary/long", str)
        keypoints = where.strings(record, "summary/short_keypoints", required=False)
    else:  # ∞Bench En.Sum with HELMET's key points
        context = where.text(record, "context")
        raw = where.get(record, "answer", (list, str))
        summary = raw if isinstance(raw, str) else where.strings(record, "answer")[0]
        expert = summary
        keypoints = where.strings(record, "keypoints", required=False)
    if not context.strip():
        raise where.error("sources" if "sources" in record else "context", "is empty (or only whitespace)")
    meta = {"expert_summary": expert, "keypoints": json.dumps(list(keypoints), ensure_ascii=False)}
    return [Example(id=_id(record, where, "id"), task=name, query="", context=context, answers=(summary,),
                    length=count_words(context), source=where.source, meta=meta)]


def is_summ(record: dict) -> bool:
    keys = set(record)
    return "sources" in keys or "keypoints" in keys or "summary/short" in keys

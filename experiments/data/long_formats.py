"""Converters for the newer long-context benchmarks' published records: LongBench v2, ∞Bench, HELMET, RULER.

Each takes (record, where, task) like the converters of ``loaders.py`` (``where`` turns a field problem into a
``DataError`` naming file, line and field) and returns ``Example`` records.  Fields, as published:

- LongBench v2 (``THUDM/LongBench-v2`` ``data.json``): ``_id, domain, sub_domain, difficulty, length, question,
  choice_A..choice_D, answer, context``;
- ∞Bench (``xinrongzhang2022/InfiniteBench`` ``*.jsonl``): ``id, context, input, answer, options``; En.MC's
  answers become ``[option text, letter]`` as its ``get_answer`` makes them;
- HELMET KILT RAG (``data/kilt/*.jsonl``): ``question, answers, ctxs[{title, text, has_answer?, ...}]``, one
  multi-document item each, the gold passage's 0-based position recorded as ``gold_position``; PopQA records
  (``s_pop``, page views) above the task's popularity bound are left out (:func:`popqa_threshold`);
- HELMET summarization: ∞Bench's En.Sum records with ``keypoints`` (HELMET's ``longbook_sum_eng_keypoints``
  merged in), or Multi-LexSum's ``sources, summary/short, summary/long, summary/short_keypoints``;
- RULER (``ctxcomp build ruler``): RULER's output fields ``index, input, outputs, length, answer_prefix`` and the
  parts the project keeps apart so compressors can work: ``context``, ``query``, ``question``, ``kind``, ...
"""
from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

from core.text import count_words
from experiments.data.records import Example, document_cluster
from indexes.types import Passage

LETTERS = "ABCD"


def _id(record: dict, where: Any, field: str) -> str:
    value = where.get(record, field, (str, int))
    return str(value)


def longbench_v2(record: dict, where: Any, task: str | None) -> list[Example]:
    name = task or "longbench_v2"
    answer = where.get(record, "answer", str)
    if answer not in LETTERS:
        raise where.error("answer", f"expected one of A, B, C, D, got {answer!r}")
    context = where.text(record, "context")
    meta = {key: where.get(record, key, str) for key in ("domain", "sub_domain", "difficulty", "length")}
    meta.update({f"choice_{x}": where.get(record, f"choice_{x}", str) for x in LETTERS})
    meta["length_bucket"] = meta["length"]  # short / medium / long: the report's length table
    return [Example(id=where.get(record, "_id", str), task=name, query=where.text(record, "question"),
                    context=context, answers=(answer,), length=count_words(context), source=where.source, meta=meta,
                    cluster=document_cluster(context))]


def infinitebench(record: dict, where: Any, task: str | None) -> list[Example]:
    name = task or "infinitebench"
    raw = where.get(record, "answer", (list, str))
    answers = [raw] if isinstance(raw, str) else list(where.strings(record, "answer"))
    options = where.strings(record, "options", required=False)
    meta: dict[str, Any] = {}
    if options:
        if len(options) != 4:
            raise where.error("options", f"expected 4 options, got {len(options)}")
        if not answers or answers[0] not in options:
            raise where.error("answer", "the answer is not one of the options")
        if len(answers) == 1:
            answers.append(LETTERS[options.index(answers[0])])  # get_answer: [text, letter]
        meta.update({f"OPTION_{x}": o for x, o in zip(LETTERS, options)})
    context = where.text(record, "context")
    return [Example(id=_id(record, where, "id"), task=name, query=where.get(record, "input", str), context=context,
                    answers=tuple(answers), lang="zh" if name.endswith("zh_qa") else "en",
                    length=count_words(context), source=where.source, meta=meta,
                    cluster=document_cluster(context))]  # ∞Bench asks several questions of one book


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


def helmet_rag(record: dict, where: Any, task: str | None) -> list[Example]:
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


def helmet_summ(record: dict, where: Any, task: str | None) -> list[Example]:
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


def ruler(record: dict, where: Any, task: str | None) -> list[Example]:
    name = task or str(record.get("task") or "ruler")
    context = where.text(record, "context")
    meta: dict[str, Any] = {"query": where.get(record, "query", str)}
    for key in ("kind", "type_needle_v", "num_v", "singular", "max_length", "depth", "haystack", "length"):
        if key in record:
            meta[key] = record[key] if isinstance(record[key], (str, int, float, bool)) else json.dumps(record[key])
    meta["length_bucket"] = where.get(record, "max_length", int)
    return [Example(id=where.get(record, "id", str), task=name, query=where.text(record, "question"),
                    context=context, answers=where.strings(record, "outputs"), length=count_words(context),
                    source=where.source, meta=meta)]


def hf_features(family: str | None):
    """The column types to read a family's hub dataset with, where its files disagree among themselves (None:
    as the hub says). ∞Bench's task files type ``answer`` and ``options`` differently, so HELMET's ``data.py``
    loads ``xinrongzhang2022/infinitebench`` with these features; so does ctxcomp."""
    if family != "infinitebench":
        return None
    from datasets import Features, Sequence, Value

    return Features({"id": Value("int64"), "context": Value("string"), "input": Value("string"),
                     "answer": Sequence(Value("string")), "options": Sequence(Value("string"))})


CONVERTERS = {"longbench_v2": longbench_v2, "infinitebench": infinitebench, "helmet_rag": helmet_rag,
              "helmet_summ": helmet_summ, "ruler": ruler}


def detect(record: dict) -> str | None:
    """The family of a record of these benchmarks, from its fields (None: not one of them).

    HELMET's RAG records share Lost in the Middle's fields, so they are read as HELMET only when the task
    (or ``family``) says so, as every run does.
    """
    keys = set(record)
    if {"choice_A", "difficulty", "_id"} <= keys:
        return "longbench_v2"
    if {"outputs", "context", "question"} <= keys and "answer_prefix" in keys:
        return "ruler"
    if "sources" in keys or "keypoints" in keys or "summary/short" in keys:
        return "helmet_summ"
    if {"context", "input", "answer"} <= keys and "id" in keys:
        return "infinitebench"
    return None

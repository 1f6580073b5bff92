"""LongBench v2's published records (``THUDM/LongBench-v2`` ``data.json``): ``_id, domain, sub_domain, difficulty,
length, question, choice_A..choice_D, answer, context``."""
from __future__ import annotations

from typing import Any

from core.text import count_words
from experiments.data.records import Example, document_cluster

LETTERS = "ABCD"


def convert(record: dict, where: Any, task: str | None) -> list[Example]:
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


def detect(record: dict) -> bool:
    return {"choice_A", "difficulty", "_id"} <= set(record)

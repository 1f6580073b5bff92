"""RULER records as ``ctxcomp build ruler`` writes them: RULER's output fields ``index, input, outputs, length,
answer_prefix`` and the parts the project keeps apart so compressors can work: ``context``, ``query``,
``question``, ``kind``, ..."""
from __future__ import annotations

import json
from typing import Any

from core.text import count_words
from experiments.data.records import Example


def convert(record: dict, where: Any, task: str | None) -> list[Example]:
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


def detect(record: dict) -> bool:
    return {"outputs", "context", "question", "answer_prefix"} <= set(record)

"""M4LE records (``instruction, input, answers`` and the length fields ``ctxcomp build m4le`` writes)."""
from __future__ import annotations

from core.text import count_words
from experiments.data.records import Example
from experiments.data.sources import Where


def convert(record: dict, where: Where, task: str | None) -> list[Example]:
    name = task or "m4le"
    answers = record.get("answers")
    if isinstance(answers, str):
        answers = [answers]
        record = {**record, "answers": answers}
    context = where.text(record, "input")
    meta = {key: record.get(key) for key in ("input_length", "total_length", "length_bucket", "task", "metric")}
    return [
        Example(
            id=f"{name}-{where.line}", task=name, query=where.get(record, "instruction", str), context=context,
            answers=where.strings(record, "answers"), lang=str(record.get("lang", "en")),
            length=count_words(context), source=where.source, meta=meta,
        )
    ]


def detect(record: dict) -> bool:
    keys = set(record)
    return "instruction" in keys and bool(keys & {"input_length", "total_length", "length_bucket"})

"""LongBench's published records (``_id, input, context, answers, length, dataset, language, all_classes``)."""
from __future__ import annotations

from core.text import count_words
from experiments.data.records import Example
from experiments.data.sources import Where


def convert(record: dict, where: Where, task: str | None) -> list[Example]:
    dataset = task or where.get(record, "dataset", str)
    length = where.get(record, "length", int, required=False)
    context = where.text(record, "context")
    language = record.get("language")
    lang = language if isinstance(language, str) and language else "en"
    return [
        Example(
            id=where.get(record, "_id", str),
            task=dataset,
            query=where.get(record, "input", str),
            context=context,
            answers=where.strings(record, "answers"),
            lang=lang,
            all_classes=where.strings(record, "all_classes", required=False),
            length=length if length is not None else count_words(context),
            source=where.source,
            meta={"language": lang, "dataset": record.get("dataset", dataset)},
        )
    ]


def detect(record: dict) -> bool:
    """``context`` with LongBench's ``_id`` or ``all_classes`` (LongBench v2's records, with choices, are not)."""
    keys = set(record)
    return "context" in keys and ("_id" in keys or "all_classes" in keys) and "choice_A" not in keys

"""∞Bench's published records (``xinrongzhang2022/InfiniteBench`` ``*.jsonl``): ``id, context, input, answer,
options``; En.MC's answers become ``[option text, letter]`` as its ``get_answer`` makes them."""
from __future__ import annotations

from typing import Any

from core.text import count_words
from experiments.data.records import Example, document_cluster

LETTERS = "ABCD"


def _id(record: dict, where: Any, field: str) -> str:
    value = where.get(record, field, (str, int))
    return str(value)


def convert(record: dict, where: Any, task: str | None) -> list[Example]:
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


def detect(record: dict) -> bool:
    """``id, context, input, answer`` without HELMET's key points (HELMET's En.Sum records carry them)."""
    keys = set(record)
    return {"context", "input", "answer", "id"} <= keys and not keys & {"keypoints", "sources", "summary/short"}


def hub_features():
    """∞Bench's task files type ``answer`` and ``options`` differently, so HELMET's ``data.py`` loads
    ``xinrongzhang2022/infinitebench`` with these column types; so does ctxcomp."""
    from datasets import Features, Sequence, Value

    return Features({"id": Value("int64"), "context": Value("string"), "input": Value("string"),
                     "answer": Sequence(Value("string")), "options": Sequence(Value("string"))})

"""Lost in the Middle's published records: multi-document QA (``question, answers, ctxs``) and key-value
retrieval (``ordered_kv_records, key, value``)."""
from __future__ import annotations

from core.text import count_words
from experiments.data.records import Example, render_litm_documents, render_litm_kv
from experiments.data.sources import Where
from indexes.types import Passage

QA, KV = "litm_qa", "litm_kv"  # the families: multi-document QA, key-value retrieval


def qa(record: dict, where: Where, task: str | None) -> list[Example]:
    name = task or "nq_multidoc"
    ctxs = where.get(record, "ctxs", list)
    example_id = f"{name}-{where.line}"
    passages = []
    for i, ctx in enumerate(ctxs):
        if not isinstance(ctx, dict):
            raise where.error(f"ctxs[{i}]", f"expected an object, got {type(ctx).__name__}")
        text = ctx.get("text")
        if not isinstance(text, str):
            raise where.error(f"ctxs[{i}].text", "missing or not a string")
        passages.append(
            Passage(
                text=text,
                title=ctx.get("title") or "",
                doc_id=str(ctx.get("id") or f"{example_id}-doc{i}"),
                is_gold=bool(ctx.get("isgold", False)),
                has_answer=bool(ctx.get("hasanswer", False)),
            )
        )
    context = render_litm_documents(passages)
    return [
        Example(
            id=example_id, task=name, query=where.text(record, "question"), context=context,
            answers=where.strings(record, "answers"), passages=tuple(passages), length=count_words(context),
            source=where.source, meta={"nq_annotated_gold": record.get("nq_annotated_gold")},
        )
    ]


def kv(record: dict, where: Where, task: str | None) -> list[Example]:
    name = task or "kv_retrieval"
    return [_litm_kv_example(record, where, name, f"{name}-{where.line}")]


def _litm_kv_example(record: dict, where: Where, task: str, example_id: str, length: int | None = None) -> Example:
    """The one record-to-example function for key-value data, published or generated.

    The queried key must occur exactly once and ``value`` must be its value,
    as the paper's ``get_kv_retrieval_prompt`` requires; otherwise the
    example could not be answered from its context and would score as a
    reader error.
    """
    records = where.get(record, "ordered_kv_records", list)
    pairs = []
    for i, pair in enumerate(records):
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[0], str)
                and isinstance(pair[1], str)):
            raise where.error(f"ordered_kv_records[{i}]", "expected a [key, value] pair of strings")
        pairs.append(f'"{pair[0]}": "{pair[1]}"')
    keys = [pair[0] for pair in records]
    if len(set(keys)) != len(keys):
        raise where.error("ordered_kv_records", "has duplicate keys")
    key = where.text(record, "key")
    if key not in keys:
        raise where.error("key", f"{key!r} is not among the {len(keys)} ordered_kv_records")
    key_index = keys.index(key)
    value = where.get(record, "value", str)
    if value != records[key_index][1]:
        raise where.error("value", f"{value!r} is not the value of the key in ordered_kv_records")
    passages = tuple(Passage(text=text, doc_id=f"{example_id}-kv{i}") for i, text in enumerate(pairs))
    context = render_litm_kv(pairs)
    return Example(
        id=example_id, task=task, query=key, context=context, answers=(value,),
        passages=passages, length=count_words(context) if length is None else length, source=where.source,
        meta={"ordered_kv_records": [list(pair) for pair in records], "key_index": key_index},
    )


def litm_kv_example(record: dict, example_id: str, source: str = "", length: int | None = None) -> Example:
    """A record in the published key-value format as an ``Example``, exactly as ``load_litm_kv`` builds one;
    ``length``: its words when already known (the same pairs in another order count the same)."""
    return _litm_kv_example(record, Where(source or example_id, None), "kv_retrieval", example_id, length)


def is_qa(record: dict) -> bool:
    keys = set(record)
    return "ctxs" in keys and "question" in keys


def is_kv(record: dict) -> bool:
    return "ordered_kv_records" in record

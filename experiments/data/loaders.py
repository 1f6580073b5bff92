"""Read benchmark files into ``Example`` records, failing loudly on bad input.

Every error names the file, the 1-based line (record index for ``.json``
arrays) and the field, so a broken line in a 2,000-line file is found at once.
Loaders know file formats (families), not tasks: prompts, metrics and the
L-Eval length instruction belong to ``experiments.tasks``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from core.errors import UserError
from core.text import count_words
from experiments.data import long_formats
from experiments.data.records import Example, document_cluster, render_litm_documents, render_litm_kv
from experiments.data.sources import DataError, Where, iter_records
from indexes.types import Passage

FAMILIES = ("longbench", "leval", "m4le", "litm_qa", "litm_kv", "longbench_v2", "infinitebench", "helmet_rag",
            "helmet_summ", "ruler")


def _word_count(text: str) -> int:
    """A context's length when the file gives none: LongBench words (the project's one counting rule)."""
    return count_words(text)


# ----------------------------------------------------------------- converters: one record -> examples


def _longbench(record: dict, where: Where, task: str | None) -> list[Example]:
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
            length=length if length is not None else _word_count(context),
            source=where.source,
            meta={"language": lang, "dataset": record.get("dataset", dataset)},
        )
    ]


def _leval(record: dict, where: Where, task: str | None) -> list[Example]:
    name = task or "leval"
    instructions = where.strings(record, "instructions")
    outputs = where.strings(record, "outputs")
    if len(instructions) != len(outputs):
        raise where.error("outputs", f"{len(outputs)} outputs for {len(instructions)} instructions")
    document = where.text(record, "input")
    evaluation = where.get(record, "evaluation", str, required=False)
    cluster = document_cluster(document)  # L-Eval asks several questions of one document
    examples = []
    for i, (instruction, output) in enumerate(zip(instructions, outputs)):
        examples.append(
            Example(
                id=f"{name}-{where.line}-{i}", task=name, query=instruction, context=document, answers=(output,),
                length=_word_count(document), source=where.source, cluster=cluster,
                # the reference's word count feeds L-Eval's length instruction (a prompt matter, see tasks)
                meta={"evaluation": evaluation, "source": record.get("source"), "reference_words": len(output.split())},
            )
        )
    return examples


def _m4le(record: dict, where: Where, task: str | None) -> list[Example]:
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
            length=_word_count(context), source=where.source, meta=meta,
        )
    ]


def _litm_qa(record: dict, where: Where, task: str | None) -> list[Example]:
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
            answers=where.strings(record, "answers"), passages=tuple(passages), length=_word_count(context),
            source=where.source, meta={"nq_annotated_gold": record.get("nq_annotated_gold")},
        )
    ]


def _litm_kv(record: dict, where: Where, task: str | None) -> list[Example]:
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
        passages=passages, length=_word_count(context) if length is None else length, source=where.source,
        meta={"ordered_kv_records": [list(pair) for pair in records], "key_index": key_index},
    )


def litm_kv_example(record: dict, example_id: str, source: str = "", length: int | None = None) -> Example:
    """A record in the published key-value format as an ``Example``, exactly as ``load_litm_kv`` builds one;
    ``length``: its words when already known (the same pairs in another order count the same)."""
    return _litm_kv_example(record, Where(source or example_id, None), "kv_retrieval", example_id, length)


_CONVERTERS: dict[str, Callable[..., list[Example]]] = {
    "longbench": _longbench,
    "leval": _leval,
    "m4le": _m4le,
    "litm_qa": _litm_qa,
    "litm_kv": _litm_kv,
    **long_formats.CONVERTERS,
}


def detect_family(record: dict) -> str | None:
    """Which benchmark a record belongs to, from its fields."""
    keys = set(record)
    newer = long_formats.detect(record)
    if newer is not None:
        return newer
    if "ordered_kv_records" in keys:
        return "litm_kv"
    if "ctxs" in keys and "question" in keys:
        return "litm_qa"
    if {"instructions", "outputs"} <= keys:
        return "leval"
    if "context" in keys and ("_id" in keys or "all_classes" in keys):
        return "longbench"
    if "instruction" in keys and keys & {"input_length", "total_length", "length_bucket"}:
        return "m4le"
    return None


def _default_task_name(family: str, path: Path) -> str | None:
    """The task name used in ids when the caller gave none (LongBench takes it per record from ``dataset``)."""
    if family == "leval":
        return f"leval_{path.name.split('.')[0]}"
    if family == "longbench":
        return None
    return {"m4le": "m4le", "litm_qa": "nq_multidoc", "litm_kv": "kv_retrieval"}.get(family)


def load_examples(
    path: str | Path, family: str | None = None, task: str | None = None, *, limit: int | None = None
) -> list[Example]:
    """Load any supported file as ``Example`` records named ``task``.

    ``family`` (one of :data:`FAMILIES`) fixes the format; without it the
    format comes from the first record's fields.  ``limit`` keeps the first
    ``limit`` examples.
    """
    if limit is not None and limit < 0:
        raise UserError(f"limit must be >= 0, got {limit}")
    if family is not None and family not in FAMILIES:
        raise UserError(f"unknown data family {family!r}; known: {', '.join(FAMILIES)}")
    path = Path(path)
    examples: list[Example] = []
    for where, record in iter_records(path):
        if limit is not None and len(examples) >= limit:
            break
        fam = family or detect_family(record)
        if fam is None:
            raise where.error(None, f"cannot tell the benchmark from the fields {sorted(record)}; pass a task")
        family = fam
        examples.extend(_CONVERTERS[fam](record, where, task or _default_task_name(fam, path)))
    if not examples and limit != 0:
        raise DataError(str(path), None, None, "holds no records (the file is empty or only blank lines)")
    return examples[:limit] if limit is not None else examples


def examples_from_records(records: list[dict], family: str, task: str, source: str) -> list[Example]:
    """Records made in memory (a generator's) read by the family's converter, exactly as from a file;
    ``source`` names them in errors and in each example's ``source`` (``source:index``)."""
    examples: list[Example] = []
    for index, record in enumerate(records):
        examples.extend(_CONVERTERS[family](record, Where(f"{source}:{index}", None), task))
    return examples


def load_litm_qa(path: str | Path, task: str = "nq_multidoc") -> list[Example]:
    """Lost in the Middle multi-document QA (``question, answers, ctxs[title,text,hasanswer,isgold]``)."""
    return load_examples(path, "litm_qa", task)


def load_litm_kv(path: str | Path, task: str = "kv_retrieval") -> list[Example]:
    """Lost in the Middle key-value retrieval (``ordered_kv_records, key, value``)."""
    return load_examples(path, "litm_kv", task)


def load_hf(dataset_id: str, name: str | None = None, split: str = "test", *, family: str | None = None,
            task: str | None = None) -> list[Example]:
    """Load from the Hugging Face hub (e.g. ``THUDM/LongBench``, ``hotpotqa``); needs network or a local cache."""
    from datasets import load_dataset

    features = long_formats.hf_features(family)
    rows = load_dataset(dataset_id, name, split=split, **({"features": features} if features is not None else {}))
    examples: list[Example] = []
    label = f"hf:{dataset_id}" + (f"/{name}" if name else "") + f"[{split}]"
    for index, row in enumerate(rows, start=1):
        record, where = dict(row), Where(label, index)
        fam = family or detect_family(record)
        if fam is None:
            raise where.error(None, f"cannot tell the benchmark from the fields {sorted(record)}; pass a task")
        examples.extend(_CONVERTERS[fam](record, where, task))
    return examples

"""Lost in the Middle (nelson-liu/lost-in-the-middle): multi-document QA and key-value retrieval.

The prompt files beside this one are the paper's ``prompts/*.prompt``; the kept passages are rendered as its
documents / JSON pairs; a config's ``sweep`` moves the gold document (or the queried key) through positions
(``experiments.protocols.litm``, ``experiments.protocols.kv``); ``ctxcomp build kv`` and ``ctxcomp build sweep``
write such files (``commands.py``).
"""
from __future__ import annotations

import functools
from pathlib import Path

from compressors.base import CompressedContext
from experiments.data.records import Example, render_litm_documents, render_litm_kv
from experiments.tasks.benchmark import Benchmark, RecordFormat, folder_prompted_tasks
from experiments.tasks.litm import records
from experiments.tasks.loading import load_examples
from experiments.tasks.prompts import PromptOptions, fill_template, text_of
from experiments.tasks.specs import TaskSpec


@functools.cache
def tasks() -> tuple[TaskSpec, ...]:
    return tuple(TaskSpec(
        name=name, family="litm_kv" if name == "kv_retrieval" else "litm_qa", category=info["category"],
        lang="en", metric=info["metric"], prompt_version=info.get("prompt_version", 1),
        max_new_tokens=info["max_new_tokens"], prompt=default, variants=variants, source="experiments/tasks/litm",
    ) for name, info, default, variants in folder_prompted_tasks(__name__))


def prompt(spec: TaskSpec, context: CompressedContext | str, example: Example, options: PromptOptions) -> str:
    """The paper's prompt: the kept passages as documents (QA; closed book when none) or JSON pairs (KV),
    the question also before them with ``query_aware``."""
    passages = () if isinstance(context, str) else context.passages
    template = spec.template("query_aware" if options.query_aware else "default")
    if spec.family == records.KV:
        data = render_litm_kv(p.text for p in passages) if passages else text_of(context)
        return fill_template(template, formatted_kv_records=data, key=example.query)
    documents = render_litm_documents(passages) if passages else text_of(context)
    if not documents.strip():
        return fill_template(spec.template("closed_book"), question=example.query)
    return fill_template(template, search_results=documents, question=example.query)


def sweep(spec: TaskSpec, examples: list[Example], task) -> list[Example]:
    """The config's ``sweep``: each queried key through positions (KV), or the gold document (QA)."""
    if spec.family == records.KV:
        from experiments.protocols.kv import key_position_sweep

        return key_position_sweep(examples, task.sweep.positions)
    from experiments.protocols.litm import gold_sweep

    return gold_sweep(examples, task)


def load_litm_qa(path: str | Path, task: str = "nq_multidoc") -> list[Example]:
    """Lost in the Middle multi-document QA (``question, answers, ctxs[title,text,hasanswer,isgold]``)."""
    return load_examples(path, records.QA, task)


def load_litm_kv(path: str | Path, task: str = "kv_retrieval") -> list[Example]:
    """Lost in the Middle key-value retrieval (``ordered_kv_records, key, value``)."""
    return load_examples(path, records.KV, task)


BENCHMARK = Benchmark(
    name="litm",
    formats=(RecordFormat(records.QA, records.qa, detect=records.is_qa, default_task=lambda stem: "nq_multidoc",
                          open_domain=True),
             RecordFormat(records.KV, records.kv, detect=records.is_kv, default_task=lambda stem: "kv_retrieval")),
    tasks=tasks,
    prompt=prompt,
    sweep=sweep,
    metrics=("experiments.tasks.litm.metrics",),
    commands={"kv": "experiments.tasks.litm.commands:build_kv", "sweep": "experiments.tasks.litm.commands:build_sweep"},
)

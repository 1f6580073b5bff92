"""HELMET (princeton-nlp/HELMET): its RAG and summarization tasks (``data.py``'s prompts), records and metrics.

RAG prompts show the kept passages as ``Document (Title: t): text``; summarization fills ``{context}``.
"""
from __future__ import annotations

import functools

from compressors.base import CompressedContext
from core.files import load_yaml
from experiments.data.records import Example
from experiments.tasks.benchmark import Benchmark, RecordFormat, folder_text
from experiments.tasks.helmet import records
from experiments.tasks.prompts import PromptOptions, fill_template, text_of
from experiments.tasks.specs import TaskSpec

RAG, SUMM = "helmet_rag", "helmet_summ"


@functools.cache
def tasks() -> tuple[TaskSpec, ...]:
    data = load_yaml(folder_text(__name__, "tasks.yaml"))
    out = []
    for name, info in data["tasks"].items():
        rag = info["kind"] == "rag"
        out.append(TaskSpec(
            name=name, family=RAG if rag else SUMM, category=info["category"], lang="en",
            metric=info["metric"], prompt_version=info.get("prompt_version", 1), max_new_tokens=info["max_new_tokens"],
            prompt=data["rag_prompt"] if rag else info["prompt"], chat=False if rag else True,
            judge=info.get("judge"), source="experiments/tasks/helmet",
        ))
    return tuple(out)


def prompt(spec: TaskSpec, context: CompressedContext | str, example: Example, options: PromptOptions) -> str:
    if spec.family == SUMM:
        return fill_template(spec.prompt, context=text_of(context))
    passages = () if isinstance(context, str) else context.passages
    documents = records.render_helmet_documents(passages) if passages else text_of(context)
    return fill_template(spec.prompt, context=documents, question=example.query)


BENCHMARK = Benchmark(
    name="helmet",
    formats=(RecordFormat(RAG, records.rag), RecordFormat(SUMM, records.summ, detect=records.is_summ)),
    tasks=tasks,
    prompt=prompt,
    metrics=("experiments.tasks.helmet.metrics",),
)

"""∞Bench (OpenBMB/InfiniteBench): its tasks (``src/prompt.py``'s chat templates), records and metrics.

``{question}``/``{input}`` are the record's ``input``, ``{OPTION_A..D}`` its options; chunks a compressor kept
of the example are shown in LongBench v2's RAG format (``Retrieved chunk i: ...``, document order).
"""
from __future__ import annotations

import functools

from compressors.base import CompressedContext
from core.files import load_yaml
from experiments.data.records import Example
from experiments.tasks.benchmark import Benchmark, RecordFormat, folder_text
from experiments.tasks.infinitebench import records
from experiments.tasks.prompts import PromptOptions, context_text, fill_template
from experiments.tasks.specs import TaskSpec


@functools.cache
def tasks() -> tuple[TaskSpec, ...]:
    data = load_yaml(folder_text(__name__, "tasks.yaml"))
    return tuple(TaskSpec(
        name=name, family="infinitebench", category=info["category"], lang=info["lang"], metric=info["metric"], prompt_version=info.get("prompt_version", 1),
        max_new_tokens=info["max_new_tokens"], prompt=info["prompt"], system=data["system"],
        retrieved_chunks=True, source=f"experiments/tasks/infinitebench ({info['source_task']})",
    ) for name, info in data["tasks"].items())


def prompt(spec: TaskSpec, context: CompressedContext | str, example: Example, options: PromptOptions) -> str:
    fields = {"context": context_text(spec, context, example)[0], "question": example.query, "input": example.query}
    fields.update({k: str(v) for k, v in example.meta.items() if k.startswith("OPTION_")})
    return fill_template(spec.prompt, **fields)


BENCHMARK = Benchmark(
    name="infinitebench",
    formats=(RecordFormat("infinitebench", records.convert, detect=records.detect, hub_features=records.hub_features),),
    tasks=tasks,
    prompt=prompt,
    metrics=("experiments.tasks.infinitebench.metrics",),
)

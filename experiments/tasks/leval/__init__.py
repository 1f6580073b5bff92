"""L-Eval (OpenLMLab/LEval): its tasks, records and metrics.

``tasks.yaml`` holds L-Eval's system prompts and user templates (``Baselines/LEval_config.py``,
``Baselines/turbo16k-test.py``); configs may name a task without its ``leval_`` prefix.
"""
from __future__ import annotations

import functools

from core.files import load_yaml
from experiments.tasks.benchmark import Benchmark, RecordFormat, folder_text
from experiments.tasks.leval import records
from experiments.tasks.specs import TaskSpec


@functools.cache
def tasks() -> tuple[TaskSpec, ...]:
    data = load_yaml(folder_text(__name__, "tasks.yaml"))
    return tuple(TaskSpec(
        name=f"leval_{name}", family="leval", category=info["category"], lang="en", metric=info["metric"], prompt_version=info.get("prompt_version", 1),
        max_new_tokens=data["max_new_tokens"], prompt=data["templates"][info["template"]],
        system=data["systems"][info["system"]], length_instruction=info.get("length_instruction", False),
        length_sentence=data["length_sentence"], source="experiments/tasks/leval",
    ) for name, info in data["tasks"].items())


BENCHMARK = Benchmark(
    name="leval",
    formats=(RecordFormat("leval", records.convert, detect=records.detect,
                          default_task=lambda stem: f"leval_{stem}"),),
    tasks=tasks,
    aliases=lambda spec: (spec.name.removeprefix("leval_"),),
    metrics=("experiments.tasks.leval.metrics",),
)

"""LongBench (THUDM/LongBench): its tasks, records and metrics.

``dataset2prompt.json`` and ``dataset2maxlen.json`` are byte for byte as released (``config/``), typos
included; ``prompt_fixes.json`` holds the opt-in corrections (``TaskConfig.prompt_fixes``).  A config may
name a task ``<task>_e`` for LongBench-E's files; their records name their task in ``dataset``.
"""
from __future__ import annotations

import functools
import json

from core.files import load_yaml
from experiments.scoring.registry import length_bucket
from experiments.tasks.benchmark import Benchmark, RecordFormat, folder_text
from experiments.tasks.longbench import records
from experiments.tasks.specs import TaskSpec


@functools.cache
def tasks() -> tuple[TaskSpec, ...]:
    prompts = json.loads(folder_text(__name__, "dataset2prompt.json"))
    maxlen = json.loads(folder_text(__name__, "dataset2maxlen.json"))
    fixes = json.loads(folder_text(__name__, "prompt_fixes.json"))
    return tuple(TaskSpec(
        name=name, family="longbench", category=info["category"], lang=info["lang"], metric=info["metric"], prompt_version=info.get("prompt_version", 1),
        max_new_tokens=maxlen[name], prompt=prompts[name], first_line_only=info.get("first_line_only", False),
        chat=info.get("chat"), fixes=tuple(tuple(f) for f in fixes.get(name, ())),
        source="experiments/tasks/longbench",
    ) for name, info in load_yaml(folder_text(__name__, "tasks.yaml"))["tasks"].items())


BENCHMARK = Benchmark(
    name="longbench",
    formats=(RecordFormat("longbench", records.convert, detect=records.detect),),
    tasks=tasks,
    aliases=lambda spec: (f"{spec.name}_e",),
    # LongBench-E's files hold several tasks; each record names its own in ``dataset``
    record_task=lambda spec, name: None if name.endswith("_e") else spec.name,
    length_bucket=length_bucket,
    metrics=("experiments.tasks.longbench.metrics",),
)

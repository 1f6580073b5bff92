"""M4LE: its tasks (``tasks.yaml``: ours, M4LE released no generic template), records and data builder
(``build.py``; ``commands.py``: ``ctxcomp build m4le``)."""
from __future__ import annotations

import functools

from core.files import load_yaml
from experiments.tasks.benchmark import Benchmark, RecordFormat, folder_text
from experiments.tasks.m4le import records
from experiments.tasks.specs import TaskSpec


@functools.cache
def tasks() -> tuple[TaskSpec, ...]:
    return tuple(TaskSpec(name=name, family="m4le", lang="en", source="experiments/tasks/m4le", **info)
                 for name, info in load_yaml(folder_text(__name__, "tasks.yaml"))["tasks"].items())


BENCHMARK = Benchmark(
    name="m4le",
    formats=(RecordFormat("m4le", records.convert, detect=records.detect, default_task=lambda stem: "m4le"),),
    tasks=tasks,
    commands={"m4le": "experiments.tasks.m4le.commands:build_m4le"},
)

"""Task specifications in one registry, filled by the benchmarks (``experiments.tasks.<benchmark>/``).

A task says what a benchmark asks and how it is judged: its prompt
template(s), metric, max new tokens, and the few switches the reference
scripts apply (LongBench's first-line rule and no-chat tasks, L-Eval's system
prompt and length instruction).  Each benchmark's folder reads its tasks from its own data files
(``tasks.yaml`` and the references' prompt files, kept byte for byte so parity tests compare files).

A new task on an existing benchmark is one YAML file: name it in a config by path (``tasks: [{name:
./mytask.yaml, path: ...}]``) or register it under the entry-point group ``ctxcomp.tasks`` (a ``TaskSpec``
object).  A new benchmark is a folder, or a plugin (``experiments.tasks.benchmark``).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Mapping

import yaml

from core.errors import UnknownComponentError, UserError
from core.files import load_yaml
from core.registry import Registry
from experiments.tasks.benchmark import benchmark_of, benchmarks, families


@dataclass(frozen=True)
class TaskSpec:
    """One task.

    ``prompt`` is the user template (``{context}`` and ``{input}``, or the Lost
    in the Middle fields); ``variants`` holds alternatives by name
    (``query_aware``, ``closed_book``).  ``system`` goes to chat readers as a
    system message.  ``first_line_only``: LongBench's eval.py scores only the
    first line.  ``chat=False`` where LongBench feeds the raw prompt;
    ``None`` lets the reader decide.  ``length_instruction``: L-Eval's
    output-length sentence is added to the query by default.
    """

    name: str
    family: str
    category: str
    lang: str
    metric: str
    max_new_tokens: int
    prompt: str
    variants: Mapping[str, str] = field(default_factory=dict)
    first_line_only: bool = False
    chat: bool | None = None
    system: str | None = None
    length_instruction: bool = False
    length_sentence: str = ""
    fixes: tuple[tuple[str, str], ...] = ()  # opt-in (old, new) corrections of the released prompt
    source: str = ""
    # a second request that sees the first answer (LongBench v2's CoT: variant "followup", $COT$), its tokens
    followup_max_new_tokens: int = 0
    # kept chunks of a compressor are shown as LongBench v2's "Retrieved chunk i: ..." (variant "rag" if any)
    retrieved_chunks: bool = False
    judge: str | None = None  # the rubric `ctxcomp judge --protocol score` applies (HELMET's, by domain)
    # bumped by hand when this task's prompts change; it keys the task's cached generations (``readers.cache``),
    # so a change to one prompt asks again only its own task
    prompt_version: int = 1

    def template(self, variant: str = "default") -> str:
        if variant == "default":
            return self.prompt
        if variant not in self.variants:
            raise UserError(f"task {self.name!r} has no {variant!r} prompt; it has: default, {', '.join(self.variants)}")
        return self.variants[variant]

    def with_fixes(self) -> "TaskSpec":
        """The spec with its released prompt's known typos corrected (an opt-in departure from the reference)."""
        prompt = self.prompt
        for old, new in self.fixes:
            prompt = prompt.replace(old, new)
        return replace(self, prompt=prompt)

    @classmethod
    def from_file(cls, path: str | Path) -> "TaskSpec":
        """A task from one YAML file: ``name, family, category, lang, metric, max_new_tokens, prompt``, and any
        optional field a built-in task uses (``variants``, ``fixes`` as ``[old, new]`` pairs, ``judge``, ...)."""
        path = Path(path)
        try:
            data = load_yaml(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as err:
            raise UserError(f"cannot read task file {path}: {err}") from None
        if not isinstance(data, dict):
            raise UserError(f"task file {path} must hold a mapping")
        allowed = {f.name for f in fields(cls)} - {"source"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise UserError(f"task file {path}: unknown key {', '.join(unknown)}; accepted: {', '.join(sorted(allowed))}")
        if "fixes" in data:
            data["fixes"] = _pairs(path, data["fixes"])
        try:
            spec = cls(**data, source=str(path))
        except TypeError as err:
            raise UserError(f"task file {path}: {err}") from None
        if spec.family not in families():
            raise UserError(f"task file {path}: family must be one of {', '.join(families())}, got {spec.family!r}")
        return spec


def _pairs(path: Path, value: object) -> tuple[tuple[str, str], ...]:
    """``fixes`` as the released prompt's (old, new) corrections; a clear error for any other shape."""
    if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
                                              for p in value):
        raise UserError(f"task file {path}: fixes must be a list of [old, new] string pairs, got {value!r}")
    return tuple((old, new) for old, new in value)


def _add_benchmark_tasks() -> None:
    for bench in benchmarks():
        for spec in bench.tasks():
            TASKS.add(spec.name, spec)


TASKS: Registry[TaskSpec] = Registry("tasks", TaskSpec, discover=_add_benchmark_tasks)


def _named() -> dict[str, TaskSpec]:
    """Every benchmark's tasks by the names configs give them: their own (a benchmark a plugin module registered
    after the registry was filled is found here too) and their aliases (LongBench-E's ``<task>_e``, L-Eval's
    names without ``leval_``)."""
    out: dict[str, TaskSpec] = {}
    for bench in benchmarks():
        for spec in bench.tasks():
            out.update(dict.fromkeys((spec.name, *bench.aliases(spec)), spec))
    return out


def get_task(name: str) -> TaskSpec:
    """A task by name; a benchmark's aliases, paths to task files and import paths are accepted."""
    if isinstance(name, str) and name.endswith((".yaml", ".yml")):
        return TaskSpec.from_file(name)
    if name in TASKS:
        return TASKS.get(name)
    named = _named()
    if isinstance(name, str) and name in named:
        return named[name]
    if not isinstance(name, str) or not name or ":" in name:  # an import path, or the registry's one-line error
        return _checked(TASKS.get(name))
    short = {alias for alias in named if not alias.endswith("_e")}  # LongBench-E's would double the list
    known = sorted({*TASKS.names(), *short})
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownComponentError(f"unknown task {name!r}.{hint} Known (with the shorter names configs use): "
                                f"{', '.join(known)}; or give a task file (.yaml) or an import path "
                                "'package.module:Name'.")


def _checked(spec: TaskSpec) -> TaskSpec:
    """A task named by import path: its module may register its benchmark on import, so its family is asked now."""
    benchmark_of(spec.family)
    return spec


__all__ = ["TASKS", "TaskSpec", "get_task"]

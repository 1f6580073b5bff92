"""Task specifications, read from the data files beside this module, in one registry.

A task says what a benchmark asks and how it is judged: its prompt
template(s), metric, max new tokens, and the few switches the reference
scripts apply (LongBench's first-line rule and no-chat tasks, L-Eval's system
prompt and length instruction).  The templates are the references' own files
or strings, kept as data so parity tests compare files:

- ``longbench/dataset2prompt.json`` and ``dataset2maxlen.json``: byte for byte
  as released (THUDM/LongBench ``config/``), typos included; ``prompt_fixes.json``
  holds the opt-in corrections (``TaskConfig.prompt_fixes``);
- ``leval/tasks.yaml``: L-Eval's system prompts and user templates
  (``Baselines/LEval_config.py``, ``Baselines/turbo16k-test.py``);
- ``litm/*.prompt``: Lost in the Middle's prompt files;
- ``m4le/tasks.yaml``: ours (M4LE released no generic template);
- ``longbench_v2/*.txt``: LongBench v2's ``prompts/`` byte for byte (THUDM/LongBench);
- ``infinitebench/tasks.yaml``: ∞Bench's ``src/prompt.py`` chat templates (OpenBMB/InfiniteBench);
- ``helmet/tasks.yaml``: HELMET's ``data.py`` RAG and summarization prompts (princeton-nlp/HELMET);
- ``ruler/tasks.yaml``: RULER's ``scripts/data/synthetic/constants.py`` templates (NVIDIA/RULER).

A new task is one YAML file: name it in a config by path (``tasks: [{name:
./mytask.yaml, path: ...}]``) or register it under the entry-point group
``ctxcomp.tasks`` (a ``TaskSpec`` object).
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Mapping

import yaml

from core.errors import UnknownComponentError, UserError
from core.files import load_yaml
from core.registry import Registry
from experiments.data.loaders import FAMILIES


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
        """A task from one YAML file: ``name, family, category, lang, metric, max_new_tokens, prompt`` (+ optional fields)."""
        path = Path(path)
        try:
            data = load_yaml(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as err:
            raise UserError(f"cannot read task file {path}: {err}") from None
        if not isinstance(data, dict):
            raise UserError(f"task file {path} must hold a mapping")
        allowed = set(cls.__dataclass_fields__) - {"source", "fixes", "followup_max_new_tokens", "retrieved_chunks", "judge"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise UserError(f"task file {path}: unknown key {', '.join(unknown)}; accepted: {', '.join(sorted(allowed))}")
        try:
            spec = cls(**data, source=str(path))
        except TypeError as err:
            raise UserError(f"task file {path}: {err}") from None
        if spec.family not in FAMILIES:
            raise UserError(f"task file {path}: family must be one of {', '.join(FAMILIES)}, got {spec.family!r}")
        return spec


TASKS: Registry[TaskSpec] = Registry("tasks", TaskSpec)


def _data(*parts: str) -> str:
    return (files("experiments.tasks").joinpath(*parts)).read_text(encoding="utf-8")


def _load_longbench() -> None:
    prompts = json.loads(_data("longbench", "dataset2prompt.json"))
    maxlen = json.loads(_data("longbench", "dataset2maxlen.json"))
    fixes = json.loads(_data("longbench", "prompt_fixes.json"))
    for name, info in load_yaml(_data("longbench", "tasks.yaml"))["tasks"].items():
        TASKS.add(name, TaskSpec(
            name=name, family="longbench", category=info["category"], lang=info["lang"], metric=info["metric"],
            max_new_tokens=maxlen[name], prompt=prompts[name], first_line_only=info.get("first_line_only", False),
            chat=info.get("chat"), fixes=tuple(tuple(f) for f in fixes.get(name, ())),
            source="experiments/tasks/longbench",
        ))


def _load_leval() -> None:
    data = load_yaml(_data("leval", "tasks.yaml"))
    for name, info in data["tasks"].items():
        TASKS.add(f"leval_{name}", TaskSpec(
            name=f"leval_{name}", family="leval", category=info["category"], lang="en", metric=info["metric"],
            max_new_tokens=data["max_new_tokens"], prompt=data["templates"][info["template"]],
            system=data["systems"][info["system"]], length_instruction=info.get("length_instruction", False),
            length_sentence=data["length_sentence"], source="experiments/tasks/leval",
        ))


def _load_litm() -> None:
    for name, info in load_yaml(_data("litm", "tasks.yaml"))["tasks"].items():
        prompts = {variant: _data("litm", file) for variant, file in info["prompts"].items()}
        TASKS.add(name, TaskSpec(
            name=name, family="litm_kv" if name == "kv_retrieval" else "litm_qa", category=info["category"],
            lang="en", metric=info["metric"], max_new_tokens=info["max_new_tokens"], prompt=prompts.pop("default"),
            variants=prompts, source="experiments/tasks/litm",
        ))


def _load_m4le() -> None:
    for name, info in load_yaml(_data("m4le", "tasks.yaml"))["tasks"].items():
        TASKS.add(name, TaskSpec(name=name, family="m4le", lang="en", source="experiments/tasks/m4le", **info))


def _load_longbench_v2() -> None:
    for name, info in load_yaml(_data("longbench_v2", "tasks.yaml"))["tasks"].items():
        prompts = {variant: _data("longbench_v2", file) for variant, file in info["prompts"].items()}
        TASKS.add(name, TaskSpec(
            name=name, family="longbench_v2", category=info["category"], lang="en", metric=info["metric"],
            max_new_tokens=info["max_new_tokens"], prompt=prompts.pop("default"), variants=prompts,
            followup_max_new_tokens=info.get("followup_max_new_tokens", 0), retrieved_chunks=True,
            source="experiments/tasks/longbench_v2",
        ))


def _load_infinitebench() -> None:
    data = load_yaml(_data("infinitebench", "tasks.yaml"))
    for name, info in data["tasks"].items():
        TASKS.add(name, TaskSpec(
            name=name, family="infinitebench", category=info["category"], lang=info["lang"], metric=info["metric"],
            max_new_tokens=info["max_new_tokens"], prompt=info["prompt"], system=data["system"],
            retrieved_chunks=True, source=f"experiments/tasks/infinitebench ({info['source_task']})",
        ))


def _load_helmet() -> None:
    data = load_yaml(_data("helmet", "tasks.yaml"))
    for name, info in data["tasks"].items():
        rag = info["kind"] == "rag"
        TASKS.add(name, TaskSpec(
            name=name, family="helmet_rag" if rag else "helmet_summ", category=info["category"], lang="en",
            metric=info["metric"], max_new_tokens=info["max_new_tokens"],
            prompt=data["rag_prompt"] if rag else info["prompt"], chat=False if rag else True,
            judge=info.get("judge"), source="experiments/tasks/helmet",
        ))


def _load_ruler() -> None:
    data = load_yaml(_data("ruler", "tasks.yaml"))
    for name, info in data["tasks"].items():
        kind = info["kind"]
        TASKS.add(name, TaskSpec(
            name=name, family="ruler", category=info["category"], lang="en", metric=info["metric"],
            max_new_tokens=data["tokens_to_generate"][kind],
            prompt=data["templates"][kind] + data["answer_prefixes"][kind], source=f"experiments/tasks/ruler ({kind})",
        ))


for _load in (_load_longbench, _load_leval, _load_litm, _load_m4le, _load_longbench_v2, _load_infinitebench,
              _load_helmet, _load_ruler):
    _load()


def get_task(name: str) -> TaskSpec:
    """A task by name; ``<longbench>_e`` (LongBench-E), bare L-Eval names and paths to task files are accepted."""
    if isinstance(name, str) and name.endswith((".yaml", ".yml")):
        return TaskSpec.from_file(name)
    if name in TASKS:
        return TASKS.get(name)
    if name.endswith("_e") and name[:-2] in TASKS and TASKS.get(name[:-2]).family == "longbench":
        return TASKS.get(name[:-2])
    if f"leval_{name}" in TASKS:
        return TASKS.get(f"leval_{name}")
    if not isinstance(name, str) or not name or ":" in name:  # an import path, or the registry's one-line error
        return TASKS.get(name)
    known = sorted({*TASKS.names(), *(n.removeprefix("leval_") for n in TASKS.names() if n.startswith("leval_"))})
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownComponentError(f"unknown task {name!r}.{hint} Known (L-Eval's also without leval_, as configs "
                                f"name them): {', '.join(known)}; or give a task file (.yaml) or an import path "
                                "'package.module:Name'.")


__all__ = ["TASKS", "TaskSpec", "get_task"]

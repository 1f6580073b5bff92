"""Run configuration: a YAML file parsed into typed models and expanded into a grid.

Precedence is defaults < file < CLI overrides; the resolved config is written
back into the run directory.  Lists inside a component's ``params`` expand
into a grid (product), except keys named in ``zip`` which are paired, so
LongBench's 200x7 / 500x3 is ``{chunk_size: [200, 500], top_n: [7, 3], zip: [chunk_size, top_n]}``.

A budget axis: ``budget: [256, 512]`` (tokens of context, in the reader's
tokens) or ``ratio: [2, 4, 8]`` (each example's context tokens divided by the
ratio) at the top level applies to every compressor that takes a budget
(``Compressor.budget_support``); the others (``full``, the reference) run once
at their own size.  A compressor section may give its own ``budget`` or
``ratio`` list instead, or ``budget: []`` to run once at its own parameters.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, PositiveInt, ValidationError, field_validator, model_validator

from core.errors import UserError
from core.files import write_atomic
from core.paths import safe_name
from experiments.run.sections import (
    DEFAULT_MARGIN,
    ComponentConfig,
    CompressorConfig,
    ContrastConfig,
    PathText,
    Ratio,
    TaskConfig,
    _Strict,
    budget_points,
)

__all__ = ["ConfigError", "RunConfig", "ANALYSIS_ONLY", "EXECUTION", "Price", "apply_overrides", "dump_config",
           "load_config", "parse_config", "yaml_problem"]


def yaml_problem(path: Path, err: Exception) -> str:
    """One line for a YAML error: the file, the line, what is wrong (not YAML's caret drawing)."""
    mark = getattr(err, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark else str(path)
    return f"invalid YAML in {where}: {' '.join(str(getattr(err, 'problem', None) or err).split())}"


# settings that change what a report says, never what is predicted: a run continues when only these differ
ANALYSIS_ONLY = ("contrasts", "margin", "prices")
# how a run is carried out, not what it predicts: a run continued (or resumed) with other values is the same run
EXECUTION = ("batch_size",)


class Price(_Strict):
    """What a model's tokens cost, in dollars per million (a provider's price list; check it, it changes)."""

    input_per_1m: float = Field(ge=0)
    output_per_1m: float = Field(0.0, ge=0)


class ConfigError(UserError):
    """A config file is invalid; the message names the file and the offending key."""


class RunConfig(_Strict):
    name: str = "run"
    output_dir: PathText | None = None
    tasks: list[TaskConfig]
    compressors: list[CompressorConfig] = Field(default_factory=lambda: [CompressorConfig(name="full")])
    readers: list[ComponentConfig]
    batch_size: int = Field(8, gt=0)
    save_prompts: bool = True
    contrasts: list[ContrastConfig] = Field(default_factory=list)
    budget: list[PositiveInt] | None = None
    ratio: list[Ratio] | None = None
    # non-inferiority margin in score points (reports only, like contrasts)
    margin: float = Field(DEFAULT_MARGIN, ge=0)
    # dollars per million tokens by reader label or model name, for `ctxcomp plan` and `--max-cost` (analysis only)
    prices: dict[str, Price] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _axis(self) -> "RunConfig":
        budget_points(self)
        return self

    @property
    def default_dir(self) -> Path:
        """Where a run goes when no ``--out`` is given: ``output_dir``, else ``runs/<name>`` (a safe file name)."""
        return Path(self.output_dir or f"runs/{safe_name(self.name)}")

    def same_run(self, other: "RunConfig") -> bool:
        """Whether ``other`` asks for the same predictions, or more of them: it may plan other contrasts or
        another margin, and a task's ``sample`` may have grown (a larger n of the same seed holds every
        question of the smaller one, ``experiments.data.sampling``), which continues the run."""
        if len(self.tasks) != len(other.tasks):
            return False
        tasks = [mine.model_copy(update={"sample": theirs.sample}) if _grown(mine, theirs) else mine
                 for mine, theirs in zip(self.tasks, other.tasks)]
        analysis = {name: getattr(other, name) for name in ANALYSIS_ONLY + EXECUTION}
        return self.model_copy(update={**analysis, "tasks": tasks}) == other

    @field_validator("tasks", "readers")
    @classmethod
    def _non_empty(cls, value: list) -> list:
        if not value:
            raise ValueError("must list at least one entry")
        return value

    @model_validator(mode="after")
    def _compressor_tasks_exist(self) -> "RunConfig":
        keys = {t.key for t in self.tasks}
        for i, comp in enumerate(self.compressors):
            unknown = sorted(set(comp.tasks or ()) - keys)
            if unknown:
                raise ValueError(f"compressors.{i} ({comp.name}): tasks {unknown} are not tasks of this config "
                                 f"(task keys: {sorted(keys)})")
        return self

    @field_validator("tasks")
    @classmethod
    def _unique_task_keys(cls, tasks: list[TaskConfig]) -> list[TaskConfig]:
        keys = [t.key for t in tasks]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise ValueError(f"tasks {dupes} appear more than once; give each variant a distinct `label`")
        return tasks


def _grown(mine: TaskConfig, theirs: TaskConfig) -> bool:
    """Whether ``theirs`` draws a sample of the same seed and kind as ``mine``, of at least its size."""
    a, b = mine.sample, theirs.sample
    return a is not None and b is not None and (a.seed, a.by, a.deal) == (b.seed, b.by, b.deal) and b.n >= a.n


def _format_validation_error(err: ValidationError, source: str) -> str:
    """One line for one problem (``invalid config FILE: key: message``), an indented list for several."""
    lines = [f"invalid config {source}:"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key"
        elif e["type"] == "literal_error":
            msg = f"{msg} (got {e.get('input')!r})"
        lines.append(f"  {loc}: {msg}")
    if len(lines) == 2:
        return f"{lines[0]} {lines[1].strip()}"
    return "\n".join(lines)


def parse_config(data: dict[str, Any], source: str = "<config>") -> RunConfig:
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Read a YAML config, apply CLI overrides (dotted keys), and validate it."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(yaml_problem(path, err)) from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"config {path} is not UTF-8: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config {path} must be a mapping at the top level, got {type(data).__name__}")
    return parse_config(apply_overrides(data, overrides or {}), str(path))


def apply_overrides(data: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` (a config in the YAML layout) with each dotted key (``tasks.0.limit``) set."""
    data = copy.deepcopy(data)
    for dotted, value in overrides.items():
        _set_dotted(data, dotted, value)
    return data


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """``tasks.0.limit=5``: dict keys by name, list items by index; missing levels are created,
    and a short form such as ``- full`` becomes ``{name: full}`` so its params can be set."""
    keys = dotted.split(".")
    node: Any = data
    for depth, key in enumerate(keys):
        where = ".".join(keys[:depth]) or "the config"
        if isinstance(node, list):
            if not key.isdigit() or int(key) >= len(node):
                raise ConfigError(f"--set {dotted}: {where} has no item {key!r} (it has {len(node)})")
            key = int(key)  # type: ignore[assignment]
        elif not isinstance(node, dict):
            raise ConfigError(f"--set {dotted}: {where} is neither a mapping nor a list")
        if depth == len(keys) - 1:
            node[key] = value
            return
        child = node[key] if isinstance(node, list) else node.get(key)
        if child is None or isinstance(child, str):
            child = {} if child is None else {"name": child}
            node[key] = child
        node = child


def dump_config(config: RunConfig, path: Path) -> None:
    """Write the resolved config (every default filled in) beside the results."""
    write_atomic(path, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, allow_unicode=True))

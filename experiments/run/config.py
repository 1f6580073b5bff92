"""Run configuration: a YAML file parsed into typed models and expanded into a grid.

Precedence is defaults < file < CLI overrides; the resolved config is written
back into the run directory.  Lists inside a component's ``params`` expand
into a grid (product), except keys named in ``zip`` which are paired, so
LongBench's 200x7 / 500x3 is ``{chunk_size: [200, 500], top_n: [7, 3], zip: [chunk_size, top_n]}``.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.errors import UserError
from core.files import write_atomic
from core.paths import safe_name
from core.registry import ComponentSpec
from experiments.data.catalog import known_data_name, local_file


def yaml_problem(path: Path, err: Exception) -> str:
    """One line for a YAML error: the file, the line, what is wrong (not YAML's caret drawing)."""
    mark = getattr(err, "problem_mark", None)
    where = f"{path}:{mark.line + 1}" if mark else str(path)
    return f"invalid YAML in {where}: {' '.join(str(getattr(err, 'problem', None) or err).split())}"


class ConfigError(UserError):
    """A config file is invalid; the message names the file and the offending key."""


def _usable_path(value: str) -> str:
    if "\x00" in value:
        raise ValueError("holds a NUL character, which no file name can")
    return value


PathText = Annotated[str, AfterValidator(_usable_path)]  # a path the run will open or make


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ComponentConfig(_Strict):
    """A component by registry name (or ``pkg.module:Class``) with its own parameters only."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    label: str | None = None
    zip: list[str] = Field(default_factory=list)
    # a compressor may apply to some tasks only (their keys); None: every task. Not part of the config hash.
    tasks: list[str] | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    def applies_to(self, task_key: str) -> bool:
        return self.tasks is None or task_key in self.tasks

    @field_validator("params")
    @classmethod
    def _no_secrets(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Refuse API keys written into a config: the config is copied into every run directory."""
        for path, key, value in _walk(params):
            secret_name = _SECRET_KEY.search(key) and not key.endswith(("_env", "_file"))
            if secret_name or (isinstance(value, str) and value.startswith(("sk-", "Bearer "))):
                raise ValueError(
                    f"{path} looks like a secret; configs are copied into run directories, so give the name of an "
                    "environment variable (api_key_env) or a key file outside the run directory (api_key_file) instead"
                )
        return params

    @property
    def spec(self) -> ComponentSpec:
        """The section as the registries take it."""
        return ComponentSpec(self.name, dict(self.params), self.label)

    @model_validator(mode="after")
    def _zip_keys_are_lists(self) -> "ComponentConfig":
        lengths = set()
        for key in self.zip:
            if key not in self.params or not isinstance(self.params[key], list):
                raise ValueError(f"zip key {key!r} must name a list-valued entry of params")
            lengths.add(len(self.params[key]))
        if len(lengths) > 1:
            raise ValueError(f"zip keys {self.zip} must have lists of equal length, got lengths {sorted(lengths)}")
        return self


_SECRET_KEY = re.compile(r"(^|_)(api_?key|secret|password|token)$", re.IGNORECASE)


def _walk(node: Any, prefix: str = "params"):
    """(dotted path, key, value) for every entry of nested dicts and lists."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield f"{prefix}.{key}", str(key), value
            yield from _walk(value, f"{prefix}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield f"{prefix}.{i}", "", value
            yield from _walk(value, f"{prefix}.{i}")


class SyntheticSource(_Strict):
    """Data the project makes itself (offline quickstart, KV sweeps)."""

    kind: Literal["multidoc_qa", "kv"]
    n: int = Field(20, gt=0)
    num_docs: int = Field(10, gt=0)
    num_keys: int = Field(20, gt=1)
    words_per_doc: int = Field(80, gt=5)
    seed: int = 0


class DistractorConfig(_Strict):
    """Where gold-only examples get their distractors: the top hits of a retriever that lack the answer
    (the paper's construction), or passages drawn at random (its appendix B); both from the task's own file."""

    method: Literal["retriever", "random"] = "retriever"
    retriever: ComponentConfig = Field(default_factory=lambda: ComponentConfig(name="bm25"))
    seed: int = 0


class SweepConfig(_Strict):
    """Lost in the Middle: move the gold document (or KV key) through these positions."""

    positions: list[int]
    num_docs: int | None = None
    closed_book: bool = False
    oracle: bool = False
    distractors: DistractorConfig | None = None


class OpenDomainConfig(_Strict):
    """Open-domain QA (LITM Fig. 11): each question gets the ``depth`` best passages of one retriever over a corpus.

    ``corpus``: a Lost in the Middle QA file whose passages form the corpus
    (default: the task's own file, all of it, whatever ``limit`` says).
    """

    retriever: ComponentConfig = Field(default_factory=lambda: ComponentConfig(name="bm25"))
    depth: int = Field(50, gt=0)
    corpus: PathText | None = None


class RulerSource(_Strict):
    """RULER-style examples generated in place (``experiments.protocols.ruler``), ``n`` per length.

    ``lengths`` are targets in ``tokenizer``'s tokens (``words``; ``tiktoken:NAME``; a Hugging Face id or
    folder; ``reader:NAME``: the tokenizer of that reader, e.g. ``reader:smollm2``).  ``haystack``: ``essay``
    (the project's own prose, or the text file ``essay``), ``noise``.  ``qa_source``: the QA file (a data name
    or path) whose passages the ``qa`` task pads with.
    """

    lengths: list[Annotated[int, Field(ge=256)]]
    n: int = Field(10, gt=0)
    seed: int = 0
    tokenizer: str = "words"
    haystack: Literal["essay", "noise"] = "essay"
    essay: str | None = None
    qa_source: str | None = None


class ChunksConfig(_Strict):
    """Cut each example's context into untitled passages before compression (LongBench v2 / ∞Bench RAG arms:
    OP-RAG's 128-token chunks), so a retrieval compressor keeps whole chunks and the prompt can show them as
    ``Retrieved chunk i``.  ``chunker``: a chunker section (``tokens`` needs ``params: {tokenizer: ...}``)."""

    size: int = Field(128, gt=0)
    chunker: ComponentConfig = Field(default_factory=lambda: ComponentConfig(name="words"))


class TaskConfig(_Strict):
    """One task: which spec (prompt, metric, max new tokens) and where its examples come from."""

    name: str
    label: str | None = None
    path: PathText | None = None
    data: Annotated[str, AfterValidator(known_data_name)] | None = None  # a name from `ctxcomp data list`
    hf: str | None = None
    hf_name: str | None = None
    split: str = "test"
    synthetic: SyntheticSource | None = None
    ruler: RulerSource | None = None
    chunks: ChunksConfig | None = None
    limit: int | None = Field(None, gt=0)
    length_instruction: bool | None = None
    query_aware: bool = False
    prompt_fixes: bool = False
    max_new_tokens: int | None = Field(None, gt=0)
    sweep: SweepConfig | None = None
    open_domain: OpenDomainConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @property
    def key(self) -> str:
        """The name this task has in predictions and reports (``label`` tells two variants of one spec apart)."""
        return self.label or self.name

    @property
    def file(self) -> str | None:
        """``path`` as written, or the ``data`` name's file in the data directory (one line naming
        ``ctxcomp data get`` when it is missing); None for hub and generated data."""
        return str(local_file(self.data)) if self.data is not None else self.path

    @model_validator(mode="after")
    def _one_source(self) -> "TaskConfig":
        given = [k for k in ("path", "data", "hf", "synthetic", "ruler") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"task {self.name!r} needs exactly one of path, data, hf, synthetic, ruler "
                             f"(got {given or 'none'})")
        if self.sweep is not None and self.open_domain is not None:
            raise ValueError(f"task {self.name!r}: a sweep and open_domain do not combine; use two tasks")
        return self


class ContrastConfig(_Strict):
    """A comparison planned with the run: ``arm`` minus ``against``, paired on the example, for every reader
    and every task both rows scored.  Both are compressor rows as the report labels them
    (``ctxcomp run --dry-run`` lists the labels).  Reports only: changing contrasts never re-runs anything."""

    arm: str
    against: str


class RunConfig(_Strict):
    name: str = "run"
    output_dir: PathText | None = None
    tasks: list[TaskConfig]
    compressors: list[ComponentConfig] = Field(default_factory=lambda: [ComponentConfig(name="full")])
    readers: list[ComponentConfig]
    batch_size: int = Field(8, gt=0)
    save_prompts: bool = True
    contrasts: list[ContrastConfig] = Field(default_factory=list)

    @property
    def default_dir(self) -> Path:
        """Where a run goes when no ``--out`` is given: ``output_dir``, else ``runs/<name>`` (a safe file name)."""
        return Path(self.output_dir or f"runs/{safe_name(self.name)}")

    def same_run(self, other: "RunConfig") -> bool:
        """Whether ``other`` asks for the same predictions (it may plan other contrasts)."""
        return self.model_copy(update={"contrasts": other.contrasts}) == other

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

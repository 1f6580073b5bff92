"""The sections a run config is made of: components, compressors with their budget axes, tasks and their sources.

``experiments.run.config`` puts them together into a ``RunConfig`` and reads
the YAML file; every section refuses what it cannot run (unknown keys, values
out of range, a secret written into ``params``) when the file is read, before
anything loads.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from core.registry import ComponentSpec
from experiments.data.catalog import known_data_name, local_file


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


Ratio = Annotated[float, Field(gt=1)]
# The default non-inferiority margin, in score points (0-100): see docs/metrics.md ("How much can go").
DEFAULT_MARGIN = 5.0


class Budget(_Strict):
    """One point of a budget axis: ``tokens`` of context in the reader's tokens, or a ``ratio``: each example
    gets ``floor(context tokens / ratio)`` (at least 1), computed when it is compressed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tokens: PositiveInt | None = None
    ratio: Ratio | None = None

    @model_validator(mode="after")
    def _one(self) -> "Budget":
        if (self.tokens is None) == (self.ratio is None):
            raise ValueError("a budget is either tokens or a ratio")
        return self

    def for_context(self, context_tokens: int) -> int:
        """The token budget of one example whose context counts ``context_tokens``."""
        if self.tokens is not None:
            return self.tokens
        return max(1, int(context_tokens // self.ratio))  # type: ignore[operator]

    def as_key(self) -> dict[str, Any]:
        """What the config hash and grid.json hold: ``{"tokens": 512}`` or ``{"ratio": 4.0}``."""
        return {"tokens": self.tokens} if self.tokens is not None else {"ratio": float(self.ratio)}  # type: ignore[arg-type]


def budget_points(owner: Any) -> list[Budget] | None:
    """The budget axis of a run config or a compressor section (``None``: not given there); one of
    ``budget`` and ``ratio``, each value once."""
    if owner.budget is not None and owner.ratio is not None:
        raise ValueError("give budget or ratio, not both")
    for name in ("budget", "ratio"):
        values = getattr(owner, name)
        if values is not None and len(set(values)) != len(values):
            raise ValueError(f"{name} lists a value twice: {values}")
    if owner.budget is not None:
        return [Budget(tokens=b) for b in owner.budget]
    if owner.ratio is not None:
        return [Budget(ratio=r) for r in owner.ratio]
    return None


class CompressorConfig(ComponentConfig):
    """A compressor section: a component and, optionally, its own budget axis (``budget: []``: none)."""

    budget: list[PositiveInt] | None = None
    ratio: list[Ratio] | None = None

    @model_validator(mode="after")
    def _axis(self) -> "CompressorConfig":
        budget_points(self)
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


class ChunksConfig(_Strict):
    """Cut each example's context into untitled passages before compression (LongBench v2 / ∞Bench RAG arms:
    OP-RAG's 128-token chunks), so a retrieval compressor keeps whole chunks and the prompt can show them as
    ``Retrieved chunk i``.  ``chunker``: a chunker section (``tokens`` needs ``params: {tokenizer: ...}``)."""

    size: int = Field(128, gt=0)
    chunker: ComponentConfig = Field(default_factory=lambda: ComponentConfig(name="words"))


class SampleConfig(_Strict):
    """A seeded sample of a task's questions (``experiments.data.sampling``): ``by: document`` deals questions
    round-robin over documents, ``by: none`` samples questions alone; the sample of ``n`` is a prefix of the
    sample of any larger ``n`` with the same seed, so a run can grow without asking its reader again.
    ``deal: whole`` takes whole documents until the sample holds ``n`` questions (what ``--until-decided`` uses,
    so no look adds questions to a document an earlier look tested)."""

    n: PositiveInt
    seed: int = 0
    by: Literal["document", "none"] = "document"
    deal: Literal["round-robin", "whole"] = "round-robin"

    @model_validator(mode="after")
    def _whole_by_document(self) -> "SampleConfig":
        if self.deal == "whole" and self.by != "document":
            raise ValueError("sample: `deal: whole` keeps each document's questions together; it needs `by: document`")
        return self


def generator_params(task: str, section: dict[str, Any]) -> BaseModel:
    """A ``generate:`` section validated by the model of task ``task``'s benchmark (one line when it generates
    nothing)."""
    from experiments.tasks.benchmark import generator_of

    return generator_of(task).params.model_validate(section)


def _known_metric(name: str) -> str:
    """A metric's name when the metric registry knows it; otherwise its one line with the closest names."""
    from experiments.scoring.registry import get_metric

    get_metric(name)
    return name


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
    # examples the task's benchmark makes, validated by its own model (``Benchmark.generator.params``)
    generate: dict[str, Any] | None = None
    chunks: ChunksConfig | None = None
    limit: int | None = Field(None, gt=0)
    sample: SampleConfig | None = None
    length_instruction: bool | None = None
    query_aware: bool = False
    prompt_fixes: bool = False
    max_new_tokens: int | None = Field(None, gt=0)
    # scores with this metric (a name from `ctxcomp list metrics`) instead of the task's own
    metric: Annotated[str, AfterValidator(_known_metric)] | None = None
    sweep: SweepConfig | None = None
    open_domain: OpenDomainConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, dict) and "ruler" in value:
            if value["ruler"] is not None:
                raise ValueError("a task's generator section is `generate:`; write `generate:` where it says `ruler:`")
            value = {k: v for k, v in value.items() if k != "ruler"}  # the empty key every earlier run dir's config.yaml holds
        return {"name": value} if isinstance(value, str) else value

    @field_validator("generate")
    @classmethod
    def _benchmark_params(cls, value: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
        """The section as the task's benchmark validates it (an error's location names the field in it); kept as
        written, so the saved config is the user's."""
        if value is not None and "name" in info.data:
            generator_params(info.data["name"], value)
        return value

    @property
    def generated(self) -> bool:
        """Whether a generator makes this task's examples (its size is then the generator's, not a file's)."""
        return self.synthetic is not None or self.generate is not None

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
        given = [k for k in ("path", "data", "hf", "synthetic", "generate") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"task {self.name!r} needs exactly one of path, data, hf, synthetic, generate "
                             f"(got {given or 'none'})")
        if self.sweep is not None and self.open_domain is not None:
            raise ValueError(f"task {self.name!r}: a sweep and open_domain do not combine; use two tasks")
        if self.sample is not None and self.limit is not None:
            raise ValueError(f"task {self.name!r}: `limit` (the first N questions) and `sample` (a seeded sample of "
                             "n) do not combine; keep one")
        if self.sample is not None and self.generate is not None:
            raise ValueError(f"task {self.name!r}: `sample` draws from a file's questions; a generated task's "
                             "size is set in its `generate:` section")
        return self


class ContrastConfig(_Strict):
    """A comparison planned with the run: ``arm`` minus ``against``, paired on the example, for every reader
    and every task both rows scored.  Both are compressor rows as the report labels them
    (``ctxcomp run --dry-run`` lists the labels).  Reports only: changing contrasts never re-runs anything."""

    arm: str
    against: str

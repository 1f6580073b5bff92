"""A benchmark as one registered object, found in its own folder under ``experiments/tasks/`` or as a plugin.

Each folder ``experiments/tasks/<name>/`` holds a benchmark's spec (``tasks.yaml`` and its prompt files), its
record converters, prompts, metrics and generator, and its ``__init__.py`` defines ``BENCHMARK``, a
:class:`Benchmark`.  The shared code (loading, prompting, running, reporting) asks that object and never
switches on a benchmark's name or family, so a benchmark added as a folder, as an entry point of the group
``ctxcomp.benchmarks``, or by a module that a task's import path names (it calls :func:`register_benchmark`),
gets everything a built-in gets.
"""
from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from typing import TYPE_CHECKING, Any, Protocol

from core.errors import UserError
from core.files import load_yaml
from core.registry import Registry, import_target

if TYPE_CHECKING:
    from pydantic import BaseModel

    from compressors.base import CompressedContext
    from experiments.data.records import Example
    from experiments.tasks.prompts import PromptOptions
    from experiments.tasks.specs import TaskSpec


class Converter(Protocol):
    """One published record as ``Example`` records; ``where`` (``experiments.data.sources.Where``) turns a field
    problem into an error naming file, line and field; ``task`` names the examples (None: the format's default)."""

    def __call__(self, record: dict, where: Any, task: str | None) -> list["Example"]: ...


@dataclass(frozen=True)
class RecordFormat:
    """A family: one shape of published record a benchmark reads.

    ``detect``: whether a record has this shape, from its fields (None: only read when a task names the
    family).  ``default_task``: the task name given to examples when a file is read without one, from the
    file's stem (None: the converter decides).  ``hub_features``: the column types to read the family's hub
    dataset with, where its files disagree among themselves.  ``open_domain``: its examples carry a question
    and gold-marked passages, as the open-domain protocol needs.
    """

    family: str
    convert: Converter
    detect: Callable[[dict], bool] | None = None
    default_task: Callable[[str], str | None] = lambda stem: None
    hub_features: Callable[[], Any] | None = None
    open_domain: bool = False


@dataclass(frozen=True)
class ReportTable:
    """A table of a benchmark's own in the report and the view (LongBench v2's ``result.py`` table): ``build``
    takes the report's cells and prediction lines and gives (header, rows), no rows where none of its tasks ran."""

    title: str
    build: Callable[[Any, Any], tuple[list[str], list[list[str]]]]


PromptFn = Callable[["TaskSpec", "CompressedContext | str", "Example", "PromptOptions"], str]


@dataclass(frozen=True)
class Generator:
    """How a benchmark makes examples from a config task's ``generate:`` section, so the shared code never knows
    which benchmark generates or what its section holds.

    ``params``: the pydantic model the section is validated with when the config is read (an error names the
    task's place in the config and the field).  ``make(spec, params, limit, source)``: the examples, ``limit``
    (None: all) per the benchmark's own unit, each example's ``source`` set to ``source``.  ``reads``: the files a
    section makes the generator read (data names or paths), recorded with their sha256 in the run's manifest.
    """

    params: type["BaseModel"]
    make: Callable[["TaskSpec", Any, "int | None", str], list["Example"]]
    reads: Callable[[Any], Iterable["str | None"]] = lambda params: ()


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: its record formats, its tasks, how its prompts are built, and its optional hooks.

    ``tasks``: its task specs (read from its folder's data when first asked).  ``prompt``: the user prompt of
    one example (None: the task's template with ``{context}`` and ``{input}`` filled).  ``followup``: the second
    request of a two-step task.  ``aliases``: the other names a config may give one of its tasks.
    ``record_task``: the task name its converter gives examples when a config names ``name`` (None: each
    record says).  ``generator``: examples made from a config task's ``generate:`` section (None: the benchmark
    reads its examples from files only).  ``sweep``: examples moved through positions by a config's ``sweep``
    section (None: the gold document's sweep).  ``length_bucket``: the bucket of a context length when its
    examples carry none.  ``report_tables``: its own tables, by name.  ``metrics``: the modules that register its
    metrics (imported with the benchmark, so a metric name resolves whichever registry is asked first).
    ``commands``: its ``ctxcomp build`` commands by name, each a typer command function or its
    ``"module:function"`` path (imported only when the CLI lists or runs it).
    """

    name: str
    formats: tuple[RecordFormat, ...]
    tasks: Callable[[], Iterable["TaskSpec"]]
    prompt: PromptFn | None = None
    followup: Callable[["TaskSpec", str, "Example"], str] | None = None
    aliases: Callable[["TaskSpec"], tuple[str, ...]] = lambda spec: ()
    record_task: Callable[["TaskSpec", str], str | None] = lambda spec, name: spec.name
    generator: Generator | None = None
    sweep: Callable[["TaskSpec", list["Example"], Any], list["Example"]] | None = None
    length_bucket: Callable[[int], str] | None = None
    report_tables: Mapping[str, ReportTable] = field(default_factory=dict)
    metrics: tuple[str, ...] = field(default=())
    commands: Mapping[str, "str | Callable[..., Any]"] = field(default_factory=dict)

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(f.family for f in self.formats)


def folder_text(package: str, *parts: str) -> str:
    """A data file of a benchmark's folder (``package``: the folder's module name)."""
    return files(package).joinpath(*parts).read_text(encoding="utf-8")


def folder_prompted_tasks(package: str) -> Iterator[tuple[str, dict[str, Any], str, dict[str, str]]]:
    """Each task of a folder whose ``tasks.yaml`` names its prompts as files: (name, its entry, the default
    prompt, the other variants by name), for the benchmarks that keep prompts as text files."""
    for name, info in load_yaml(folder_text(package, "tasks.yaml"))["tasks"].items():
        prompts = {variant: folder_text(package, file) for variant, file in info["prompts"].items()}
        yield name, info, prompts.pop("default"), prompts


_LOCK = threading.RLock()


def _discover_folders() -> None:
    """Import every folder of ``experiments/tasks/`` that is a package and register its ``BENCHMARK`` (the registry
    calls this once, on its first lookup)."""
    with _LOCK:
        for entry in sorted(files("experiments.tasks").iterdir(), key=lambda e: e.name):
            if entry.is_dir() and entry.joinpath("__init__.py").is_file():
                module = importlib.import_module(f"experiments.tasks.{entry.name}")
                register_benchmark(module.BENCHMARK)


BENCHMARKS: Registry[Benchmark] = Registry("benchmarks", Benchmark, discover=_discover_folders)


def register_benchmark(benchmark: Benchmark) -> Benchmark:
    """Add ``benchmark`` (a folder's, or a plugin module's on import)."""
    if not isinstance(benchmark, Benchmark):
        raise UserError(f"a benchmark must be a Benchmark, got {type(benchmark).__name__}")
    BENCHMARKS.add(benchmark.name, benchmark)
    return benchmark


def benchmarks() -> list[Benchmark]:
    """Every benchmark: the folders, the entry points, and those registered by plugin modules imported so far;
    each one's metric modules are imported, so its metrics are registered whichever registry is asked first."""
    found = [target for _, target in BENCHMARKS.items()]
    for benchmark in found:
        for module in benchmark.metrics:
            importlib.import_module(module)
    return found


def _by_family() -> Mapping[str, tuple[Benchmark, RecordFormat]]:
    return {fmt.family: (b, fmt) for b in benchmarks() for fmt in b.formats}


def families() -> tuple[str, ...]:
    """Every record family a benchmark reads."""
    return tuple(_by_family())


def benchmark_of(family: str) -> Benchmark:
    """The benchmark that reads ``family``; a clear error naming the known ones otherwise."""
    found = _by_family().get(family)
    if found is None:
        raise UserError(f"unknown data family {family!r}; known: {', '.join(families())}")
    return found[0]


def record_format(family: str) -> RecordFormat:
    benchmark_of(family)
    return _by_family()[family][1]


def generator_of(task: str) -> Generator:
    """The generator of the benchmark that task ``task`` (a name or import path) belongs to; one line when that
    benchmark generates nothing."""
    from experiments.tasks.specs import get_task

    spec = get_task(task)
    benchmark = benchmark_of(spec.family)
    if benchmark.generator is None:
        raise UserError(f"task {task!r}: `generate:` makes examples, and the benchmark {benchmark.name} generates "
                        "none; read its examples from a file (`path:` or `data:`)")
    return benchmark.generator


def build_commands() -> dict[str, Callable[..., Any]]:
    """Every registered benchmark's ``ctxcomp build`` commands by name; two benchmarks offering one name are an
    error naming both."""
    out: dict[str, Callable[..., Any]] = {}
    owner: dict[str, str] = {}
    for benchmark in benchmarks():
        for name, command in benchmark.commands.items():
            if name in owner:
                raise UserError(f"`ctxcomp build {name}` is offered by the benchmarks {owner[name]} and "
                                f"{benchmark.name}; rename one")
            owner[name] = benchmark.name
            out[name] = import_target(command, f"ctxcomp build {name}") if isinstance(command, str) else command
    return out


def detect_family(record: dict) -> str | None:
    """Which family a record belongs to, from its fields; an error when two benchmarks both claim it."""
    claims = [fmt.family for _, fmt in _by_family().values() if fmt.detect is not None and fmt.detect(record)]
    if len(claims) > 1:
        raise UserError(f"the fields {sorted(record)} fit the families {', '.join(claims)}; name the task")
    return claims[0] if claims else None


__all__ = ["BENCHMARKS", "Benchmark", "Converter", "Generator", "PromptFn", "RecordFormat", "ReportTable", "benchmark_of",
           "benchmarks", "build_commands", "detect_family", "families", "folder_prompted_tasks", "folder_text",
           "generator_of", "record_format", "register_benchmark"]

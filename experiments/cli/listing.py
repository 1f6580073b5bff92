"""``ctxcomp list``: every registered component with a one-line description and its parameters, plugins included;
``ctxcomp list --config CONFIG``: the plugins one config names, wherever they sit in it."""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Optional

import typer

from core.checks import constructor_parameters
from core.errors import UserError
from core.registry import registries
from experiments.cli.errors import plain_output, print_table, user_errors

KINDS = ("tasks", "metrics", "compressors", "retrievers", "readers", "chunkers")
TASK_SELECTION = ("Which questions a task section takes: `limit: N` keeps the first N questions of the file, in "
                  "file order; `sample: {n: 48, seed: 0, by: document}` a seeded sample, dealt round-robin over "
                  "documents (`by: none`: over questions alone), the sample of n a prefix of any larger one.")
_HIDDEN_PARAMS = {"tokenizer", "reader", "size", "overlap", "cache", "sleep"}


def _load_builtin_registries() -> None:
    import compressors.registry  # noqa: F401  (registries fill themselves on import)
    import experiments.scoring  # noqa: F401
    import experiments.tasks  # noqa: F401
    import indexes.chunking  # noqa: F401
    import readers.registry  # noqa: F401
    import retrievers.registry  # noqa: F401


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().split("\n")[0]


def _params(target: Any) -> str:
    parts = []
    for p in constructor_parameters(target):
        if p.name in _HIDDEN_PARAMS:
            continue
        parts.append(p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}")
    return ", ".join(parts)


def describe(kind: str, name: str, target: Any) -> list[str]:
    """(name, description, parameters or settings) for one registered entry; a compressor also says how it
    takes a token budget (``Compressor.budget_support``: none, guaranteed, best_effort)."""
    if kind == "compressors":
        return [name, _first_line(target.__doc__), str(getattr(target, "budget_support", "none")), _params(target)]
    if kind == "tasks":
        return [name, f"{target.family}, {target.category}", f"metric={target.metric}, max_new_tokens={target.max_new_tokens}"]
    if kind == "metrics":
        return [name, target.doc or _first_line(target.score.__doc__), target.reference]
    return [name, _first_line(target.__doc__), _params(target)]


def rows(kind: str) -> list[list[str]]:
    _load_builtin_registries()
    registry = registries().get(kind)
    if registry is None:
        raise UserError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    return [describe(kind, name, target) for name, target in registry.items()]


def config_plugins(path: Path) -> list[list[str]]:
    """(kind, name, where the config names it, description, parameters, file) for every plugin a run config names:
    components from import paths or entry points (nested sections too), task files, and metrics."""
    from compressors.registry import COMPRESSORS
    from experiments.run.config import load_config
    from experiments.run.examples import task_spec
    from experiments.run.grid import expand_grid
    from experiments.scoring.registry import METRICS
    from experiments.tasks.specs import TASKS
    from indexes.chunking import CHUNKERS
    from readers.registry import READERS
    from retrievers.registry import RETRIEVERS

    config = load_config(path)
    found: dict[tuple[str, str], list[str]] = {}

    def note(kind: str, name: str, where: str, target: Any) -> None:
        if (kind, name) not in found:
            source = inspect.getsourcefile(target) if inspect.isclass(target) or inspect.isfunction(target) else None
            found[(kind, name)] = [kind, name, where, _first_line(getattr(target, "__doc__", None)),
                                   _params(target), str(source or "")]

    def sections(registry: Any, spec: Any, where: str) -> None:
        for reg, section, path in registry.walk(spec, where):
            if reg.is_plugin(section.name):
                note(reg.noun, section.name, path.replace(" > ", " / "), reg.get(section.name))

    for task in config.tasks:
        where = f"task {task.key!r}"
        if task.name.endswith((".yaml", ".yml")) or ":" in task.name or (task.name in TASKS and TASKS.is_plugin(task.name)):
            note("task", task.name, where, task_spec(task))
        metric = getattr(task, "metric", None) or task_spec(task).metric
        if metric in METRICS and METRICS.is_plugin(metric) or ":" in metric:
            note("metric", metric, where, METRICS.get(metric))
        for part, section in (("open_domain", task.open_domain and task.open_domain.retriever),
                              ("distractors", task.sweep and task.sweep.distractors and task.sweep.distractors.retriever)):
            if section:
                sections(RETRIEVERS, section.spec, f"{where} {part}")
        if task.chunks is not None:
            sections(CHUNKERS, task.chunks.chunker.spec, f"{where} chunks")
    for point in expand_grid(config):
        sections(COMPRESSORS, point.compressor.spec, "")
        sections(READERS, point.reader.spec, "")
    return list(found.values())


@user_errors
def list_components(
    kind: Optional[str] = typer.Argument(None, help=f"One of {', '.join(KINDS)}; all when left out."),
    config: Optional[Path] = typer.Option(None, "--config", help="List the plugins this run config names "
                                          "(import paths, entry points, task files), wherever they sit in it."),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
) -> None:
    """List tasks, metrics, compressors, retrievers, readers or chunkers, with their parameters and defaults."""
    if config is not None:
        if kind is not None:
            raise UserError(f"give KIND or --config, not both (got {kind!r} and --config {config})")
        found = config_plugins(config)
        if found:
            print_table(["kind", "name", "named in", "description", "parameters (defaults)", "file"], found,
                        plain=plain_output(plain), title=f"plugins named by {config}")
        else:
            typer.echo(f"{config} names no plugins: every component is one of ctxcomp's own (`ctxcomp list`)")
        return
    for k in [kind] if kind else KINDS:
        third = {"tasks": "settings", "metrics": "reference"}.get(k, "parameters (defaults)")
        header = ["name", "description", "budget", third] if k == "compressors" else ["name", "description", third]
        print_table(header, rows(k), plain=plain_output(plain), title=k)
        if k == "tasks":
            typer.echo(TASK_SELECTION)
        if kind is None:
            typer.echo("")

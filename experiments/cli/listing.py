"""What is there: ``ctxcomp list`` (every registered component with a one-line description and its parameters,
plugins included; ``--config CONFIG``: the plugins one config names, wherever they sit in it) and
``ctxcomp cache info|clear`` (where the caches are, how big, what a run used; removing one run's entries)."""
from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from core.checks import constructor_parameters
from core.errors import UserError
from core.registry import registries
from experiments.cli.errors import plain_output, print_table, user_errors

KINDS = ("benchmarks", "tasks", "metrics", "compressors", "retrievers", "readers", "chunkers")
TASK_SELECTION = ("Which questions a task section takes: `limit: N` keeps the first N questions of the file, in "
                  "file order; `sample: {n: 48, seed: 0, by: document}` a seeded sample, dealt round-robin over "
                  "documents (`by: none`: over questions alone), the sample of n a prefix of any larger one.")
_HIDDEN_PARAMS = {"tokenizer", "reader", "size", "overlap", "cache", "sleep"}


def _load_builtin_registries() -> None:
    import compressors.registry  # noqa: F401  (registries fill themselves on import)
    import experiments.scoring  # noqa: F401
    import experiments.tasks  # noqa: F401
    import experiments.tasks.benchmark  # noqa: F401
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
    if kind == "benchmarks":
        return [name, _first_line(sys.modules[target.tasks.__module__].__doc__),
                f"families: {', '.join(target.families)}; tasks: {len(tuple(target.tasks()))}"]
    return [name, _first_line(target.__doc__), _params(target)]


def rows(kind: str) -> list[list[str]]:
    _load_builtin_registries()
    registry = registries().get(kind)
    if registry is None:
        raise UserError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    return [describe(kind, name, target) for name, target in registry.items()]


def import_path_rows(path: str) -> list[list[str]]:
    """(kind, name, description, parameters, file) for the object behind an import path ``pkg.mod:Name``, under
    every kind it fits (its base class; a chunker: a ``split`` method); one that fits none is one line saying so."""
    from core.registry import import_target

    _load_builtin_registries()
    target = import_target(path, repr(path))
    bases = {k: registries()[k].base for k in KINDS}
    kinds = [k for k, base in bases.items() if (inspect.isclass(target) and callable(getattr(target, "split", None)) if base is None else
                                                 isinstance(target, base) or inspect.isclass(target) and issubclass(target, base))]
    if not kinds:
        names = ", ".join(b.__name__ for b in bases.values() if b is not None)
        raise UserError(f"{path!r} is {target!r}, which is none of the kinds ctxcomp lists (a subclass or instance "
                        f"of {names}, or a chunker with a split method)")
    source = inspect.getsourcefile(target) if inspect.isclass(target) or inspect.isfunction(target) else None
    return [[k, path, _first_line(getattr(target, "__doc__", None)), _params(target), str(source or "")] for k in kinds]


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

    def note(kind: str, name: str, where: str, target: Any, about: str = "", source: Any = None) -> None:
        if (kind, name) not in found:
            if source is None and (inspect.isclass(target) or inspect.isfunction(target)):
                source = inspect.getsourcefile(target)
            found[(kind, name)] = [kind, name, where, about or _first_line(getattr(target, "__doc__", None)),
                                   _params(target), str(source or "")]

    def sections(registry: Any, spec: Any, where: str) -> None:
        for reg, section, path in registry.walk(spec, where):
            if reg.is_plugin(section.name):
                note(reg.noun, section.name, path.replace(" > ", " / "), reg.get(section.name))

    for task in config.tasks:
        where = f"task {task.key!r}"
        if task.name.endswith((".yaml", ".yml")) or ":" in task.name or (task.name in TASKS and TASKS.is_plugin(task.name)):
            spec = task_spec(task)
            note("task", task.name, where, spec, f"{spec.family}, {spec.category}, metric={spec.metric}",
                 Path(task.name).resolve() if task.name.endswith((".yaml", ".yml")) else None)
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
    kind: Optional[str] = typer.Argument(None, help=f"One of {', '.join(KINDS)}; all when left out; or an import "
                                         "path pkg.mod:Class, which is described (its kind, parameters and file)."),
    config: Optional[Path] = typer.Option(None, "--config", help="List the plugins this run config names "
                                          "(import paths, entry points, task files), wherever they sit in it."),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
) -> None:
    """List tasks, metrics, compressors, retrievers, readers or chunkers, with their parameters and defaults (or
    describe one import path, ``ctxcomp list pkg.mod:Class``)."""
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
    if kind is not None and ":" in kind:
        found = import_path_rows(kind)
        print_table(["kind", "name", "description", "parameters (defaults)", "file"], found, plain=plain_output(plain),
                    title=kind)
        return
    for k in [kind] if kind else KINDS:
        third = {"tasks": "settings", "metrics": "reference"}.get(k, "parameters (defaults)")
        header = ["name", "description", "budget", third] if k == "compressors" else ["name", "description", third]
        print_table(header, rows(k), plain=plain_output(plain), title=k)
        if k == "tasks":
            typer.echo(TASK_SELECTION)
        if kind is None:
            typer.echo("")


# -- ctxcomp cache ---------------------------------------------------------------------------------------------

cache_app = typer.Typer(help="The caches under $CTXCOMP_CACHE_DIR (default ~/.cache/ctxcomp): where they are, how "
                             "big, what a run used; remove one run's entries.", no_args_is_help=True)


def _size(n: int) -> str:
    for unit, step in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= step:
            return f"{n / step:.1f} {unit}"
    return f"{n} B"


def cache_folders() -> list[tuple[str, Path]]:
    """Every folder ctxcomp keeps under the cache root (or where its own variable moves it), by name."""
    from compressors.cache import CACHE_NAME as COMPRESSIONS
    from compressors.llmlingua_rankings import CACHE_NAME as RANKINGS
    from core.paths import cache_root, model_cache_root
    from experiments.data.catalog import data_dir
    from experiments.inference.exact import CACHE_NAME as EXACT
    from experiments.run.sharding import default_shard_root
    from indexes.cache import CACHE_NAME as EMBEDDINGS
    from readers.cache import CACHE_NAME as GENERATIONS

    root = cache_root()
    return [(GENERATIONS, root / GENERATIONS), (EMBEDDINGS, root / EMBEDDINGS), (RANKINGS, root / RANKINGS),
            (COMPRESSIONS, root / COMPRESSIONS), ("models", model_cache_root()),
            ("data", data_dir()), ("shards", default_shard_root()), ("file hashes", root / "file_hashes"),
            (EXACT, root / EXACT)]


def _entries(name: str, folder: Path) -> str:
    """Entries of a diskcache store (embeddings without their recorded times), else files in the folder."""
    from core.caches import is_diskcache

    if not folder.is_dir():
        return "-"
    if is_diskcache(folder):
        if name == "embeddings":
            from indexes.cache import EmbeddingCache

            return f"{len(EmbeddingCache(folder)):,}"
        import diskcache

        with diskcache.Cache(str(folder)) as store:
            return f"{len(store):,}"
    return f"{sum(1 for p in folder.rglob('*') if p.is_file()):,} file(s)"


def _still_cached(cache: str, folder: str, keys: set[str]) -> int:
    from core.caches import is_diskcache

    if not is_diskcache(folder):
        return 0
    import diskcache

    with diskcache.Cache(folder) as store:
        return sum(1 for key in keys if key in store)


@cache_app.command("info")
@user_errors
def cache_info(
    run: Optional[Path] = typer.Option(None, "--run", help="Also count the entries this run directory used "
                                       "(recorded in its cache_keys.jsonl) and how many are still cached."),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
) -> None:
    """Where the caches are, their sizes and entry counts; with --run, how many entries a run used."""
    import os

    from core.caches import folder_bytes
    from core.paths import cache_root

    root = os.environ.get("CTXCOMP_CACHE_DIR")
    typer.echo(f"cache root: {cache_root()} " + (f"(CTXCOMP_CACHE_DIR={root})" if root else
               "(the default, shared by every installation on this machine; CTXCOMP_CACHE_DIR moves it)"))
    body = [[name, str(folder), _size(folder_bytes(folder)) if folder.is_dir() else "not made yet",
             _entries(name, folder)] for name, folder in cache_folders()]
    print_table(["cache", "folder", "size", "entries"], body, plain=plain_output(plain))
    if run is None:
        return
    from experiments.data.provenance import CACHE_KEYS, read_cache_keys
    from experiments.data.store import RunDir

    used = read_cache_keys(RunDir(run).require().path)
    if not used:
        typer.echo(f"{run} recorded no cache entries (no {CACHE_KEYS}: a run made before ctxcomp recorded them, "
                   "or one whose work no cache served)")
        return
    rows = [[cache, folder, f"{len(use.keys):,}", f"{_still_cached(cache, folder, use.keys):,}",
             f"{use.unrecorded:,}"] for (cache, folder), use in sorted(used.items())]
    print_table(["cache", "folder", "entries the run used", "still cached", "used, not recorded"], rows,
                plain=plain_output(plain), title=f"entries used by {run}")
    if any(use.unrecorded for use in used.values()):
        typer.echo("entries not recorded come from a corpus indexed in one call (too many keys to record); "
                   "`cache clear --run` leaves them, deleting the cache's folder removes them")


@cache_app.command("clear")
@user_errors
def cache_clear(
    run: Path = typer.Option(..., "--run", help="Remove the entries this run directory used (its cache_keys.jsonl); "
                             "entries no other run needs are made again when a run asks for them."),
) -> None:
    """Remove one run's generation and embedding cache entries (and nothing else); the run's own files stay."""
    from core.caches import forget, is_diskcache
    from experiments.data.provenance import CACHE_KEYS, read_cache_keys
    from experiments.data.store import RunDir
    from indexes.cache import CACHE_NAME as EMBEDDINGS
    from indexes.cache import EmbeddingCache

    used = read_cache_keys(RunDir(run).require().path)
    if not used:
        raise UserError(f"{run} recorded no cache entries (no {CACHE_KEYS}); nothing to remove")
    for (cache, folder), use in sorted(used.items()):
        keys = use.keys
        if cache == EMBEDDINGS:
            removed = EmbeddingCache(folder).forget(keys) if is_diskcache(folder) else 0
        else:
            removed = forget(folder, keys)
        typer.echo(f"{cache}: removed {removed:,} of the {len(keys):,} entries {run} recorded in {folder}"
                   + (f" ({len(keys) - removed:,} were no longer there)" if removed < len(keys) else "")
                   + (f"; {use.unrecorded:,} more it used were not recorded (a corpus indexed at once) and stay: "
                      f"delete {folder} to remove them" if use.unrecorded else ""))

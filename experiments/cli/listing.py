"""``ctxcomp list``: every registered component with a one-line description and its parameters, plugins included."""
from __future__ import annotations

import inspect
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


@user_errors
def list_components(
    kind: Optional[str] = typer.Argument(None, help=f"One of {', '.join(KINDS)}; all when left out."),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
) -> None:
    """List tasks, metrics, compressors, retrievers, readers or chunkers, with their parameters and defaults."""
    for k in [kind] if kind else KINDS:
        third = {"tasks": "settings", "metrics": "reference"}.get(k, "parameters (defaults)")
        header = ["name", "description", "budget", third] if k == "compressors" else ["name", "description", third]
        print_table(header, rows(k), plain=plain_output(plain), title=k)
        if k == "tasks":
            typer.echo(TASK_SELECTION)
        if kind is None:
            typer.echo("")

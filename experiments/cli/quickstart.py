"""``ctxcomp quickstart``: the README's main command, a small real experiment that runs offline."""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import List, Optional

import typer

from core.errors import UserError
from experiments.cli.errors import parse_overrides, plain_output, user_errors


def packaged_config(name: str) -> Path:
    path = Path(str(files("experiments") / "configs" / f"{name}.yaml"))
    if not path.is_file():
        raise UserError(f"no packaged config {name!r} at {path}")
    return path


@user_errors
def quickstart(
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Run directory (default runs/quickstart, or runs/quickstart-<reader>)."),
    reader: Optional[str] = typer.Option(None, "--reader", help="Reader name instead of smollm2 (e.g. extractive, for a 10-second look)."),
    set_: List[str] = typer.Option([], "--set", help="Override a config key (repeatable)."),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
) -> None:
    """Full context vs BM25 vs MiniLM retrieval on synthetic multi-document QA and KV retrieval, offline."""
    from experiments.cli.run import execute
    from experiments.run.api import resolve_config

    overrides = parse_overrides(set_)
    if reader:
        overrides["readers"] = [{"name": reader}]
    out = out or Path("runs/quickstart" + (f"-{reader}" if reader else ""))
    config, _ = resolve_config(packaged_config("quickstart"), overrides)
    execute(config, out, plain=plain_output(plain))

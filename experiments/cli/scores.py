"""The score table and its warnings, as ``run``, ``report`` and a run that grows until decided print them."""
from __future__ import annotations

from pathlib import Path

import typer

from experiments.cli.errors import print_table


def print_scores(data, *, plain: bool = True) -> None:
    """Print the score table of a reported run (``RunData``; Markdown pastes into a paper draft or an issue as is)."""
    from experiments.report.tables import score_table

    run_dir = data.run_dir
    print_table(*score_table(data.cells, data.items()), plain=plain)
    print_warnings(data)
    plots = sorted((Path(run_dir) / "plots").glob("*")) if (Path(run_dir) / "plots").is_dir() else []
    typer.echo(f"report: {Path(run_dir) / 'report.md'}" + (f"; {len(plots)} plot file(s) in {Path(run_dir) / 'plots'}"
                                                           if plots else ""))


def print_warnings(data) -> None:
    """What a reader of the scores must know first, on stderr: one line per (reader, task) whose window cut `full`."""
    from experiments.report.truncation import truncation_warnings

    for line in truncation_warnings(data.predictions):
        typer.echo(f"warning: {line}", err=True)

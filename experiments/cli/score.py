"""``ctxcomp score``: the number LongBench's eval.py prints for a prediction file, without its folder layout."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer

from experiments.cli.errors import user_errors
from experiments.scoring.files import score_file


def _json_number(value: float) -> float | None:
    return None if math.isnan(value) else value


@user_errors
def score(
    file: Path = typer.Argument(..., help="LongBench-format predictions: one {pred, answers, all_classes, length} per line."),
    dataset: str = typer.Option(..., "--dataset", help="Dataset whose metric and first-line rule apply (e.g. hotpotqa)."),
    e: bool = typer.Option(False, "--e", help="LongBench-E: report the 0-4k / 4-8k / 8k+ buckets."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of plain numbers."),
    metric: Optional[str] = typer.Option(None, "--metric", help="Override the dataset's metric (e.g. best_subspan_em)."),
) -> None:
    """Score a prediction file the way LongBench's eval.py does."""
    report = score_file(file, dataset, metric=metric, by_length=e)
    if e:
        buckets = report.buckets or {}
        if json_out:
            typer.echo(json.dumps({"dataset": dataset, "buckets": {k: _json_number(v) for k, v in buckets.items()}}))
        else:
            for name, value in buckets.items():
                typer.echo(f"{name}\t{value}")
        return
    if json_out:
        typer.echo(json.dumps({"dataset": dataset, "score": report.score}))
    else:
        typer.echo(f"{report.score}")

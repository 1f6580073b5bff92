"""Scoring predictions outside a run: ``ctxcomp score`` (the number LongBench's eval.py prints for a prediction
file, without its folder layout) and ``ctxcomp judge`` (an LLM judges a run's predictions: L-Eval's pairwise
protocol or a HELMET-style rubric)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import List, Optional

import typer

from core.errors import UserError
from experiments.cli.errors import (
    exit_for_failures,
    parse_overrides,
    plain_output,
    print_table,
    sigterm_as_interrupt,
    user_errors,
)
from experiments.scoring.files import score_file


def judge_spec(judge: str, params: list[str]) -> dict:
    """``--judge NAME`` or ``--judge FILE.yaml`` (a ``{name, params}`` section), plus ``--judge-param`` overrides."""
    import yaml

    from experiments.run.config import yaml_problem

    if judge.endswith((".yaml", ".yml", ".json")):
        path = Path(judge)
        if not path.is_file():
            raise UserError(f"judge config {path} not found")
        try:
            section = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as err:
            raise UserError(f"judge config: {yaml_problem(path, err)}") from None
        except UnicodeDecodeError as err:
            raise UserError(f"judge config {path} is not UTF-8 text ({err.reason} at byte {err.start})") from None
        if not isinstance(section, dict) or "name" not in section:
            raise UserError(f"judge config {path} must be a mapping with name (and params)")
        if not isinstance(section.get("params") or {}, dict):
            raise UserError(f"judge config {path}: params must be a mapping of parameter names to values")
    else:
        section = {"name": judge, "params": {}}
    return {"name": section["name"], "params": {**(section.get("params") or {}), **parse_overrides(params)}}


@user_errors
def judge(
    run_dir: Path = typer.Argument(..., help="A run directory written by `ctxcomp run`."),
    judge: str = typer.Option(..., "--judge", help="A reader name (e.g. openai) or a YAML file with {name, params}."),
    judge_param: List[str] = typer.Option([], "--judge-param", help="KEY=VALUE for the judge reader (YAML values; repeatable)."),
    protocol: str = typer.Option("pairwise", "--protocol", help="pairwise (L-Eval) or score (HELMET-style rubric)."),
    against: str = typer.Option("reference", "--against", help="pairwise: 'reference', another RUN_DIR, or arm:LABEL of this run."),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 if any judgement failed (default: only if all did)."),
    single_order: bool = typer.Option(False, "--single-order", help="pairwise: count a judgement whose other order "
                                      "gave no usable verdict (default: it fails, and the next run asks again); "
                                      "the report says how many counted on one order."),
    helmet_examples: bool = typer.Option(True, "--helmet-examples/--no-helmet-examples",
                                         help="score: ask HELMET's rubric with its few-shot examples, as HELMET does "
                                         "(default), or without them (recorded as protocol score-no-examples)."),
) -> None:
    """Judge every prediction of RUN_DIR not judged yet; write judgements.jsonl and add the rates to the report."""
    from experiments.judge.judging import judge_run
    from experiments.report.judged import judged_cells, judged_table
    from experiments.report.write import write_report

    try:
        with sigterm_as_interrupt():
            stats = judge_run(run_dir, judge_spec(judge, judge_param), protocol=protocol, against=against,
                              single_order=single_order, helmet_examples=helmet_examples)
    except KeyboardInterrupt as stop:
        typer.echo(f"\ninterrupted ({stop.args[0] if stop.args else 'Ctrl-C'}); every verdict so far is kept; "
                   "run the same command again to continue", err=True)
        raise typer.Exit(130) from None
    typer.echo(f"judged {stats.judged}, {stats.already_done} already judged, {stats.failed} failed, "
               f"{stats.unmatched} without an opponent", err=True)
    write_report(run_dir, plots=False)
    print_table(*judged_table(judged_cells(run_dir)), plain=plain_output(plain))
    exit_for_failures(stats.failed, stats.judged + stats.already_done, strict=strict, what="judgement")


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

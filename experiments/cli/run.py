"""``ctxcomp run``, ``ctxcomp report``, ``ctxcomp compare`` and ``ctxcomp show``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from experiments.cli.errors import parse_overrides, plain_output, print_table, user_errors


@user_errors
def run(
    config: Optional[Path] = typer.Argument(None, help="YAML config (tasks x compressors x readers)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Run directory (default: the config's output_dir or runs/<name>)."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue the run in this directory after a kill or failures."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the grid and the work left; run nothing."),
    set_: List[str] = typer.Option([], "--set", help="Override a config key, e.g. --set batch_size=4 (repeatable)."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.md and plots when done."),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
    executor: str = typer.Option("local", "--executor", help="Where units run: 'local' (this process) or 'ray' (a Ray pool)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Join this Ray cluster ('auto', HOST:PORT or ray://HOST:PORT); default: start a local Ray instance."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Ray actors (default: the cluster's CPUs)."),
) -> None:
    """Run an evaluation grid; predictions are appended and the run can be resumed.

    Running a config into a folder that already holds a run of the same config continues it (the same as
    --resume); a folder holding another config is refused.
    """
    from experiments.run.api import open_run
    from experiments.run.config import load_config
    from experiments.run.runner import Runner

    if resume is not None:
        if config is not None:
            raise typer.BadParameter("give either CONFIG or --resume RUN_DIR, not both")
    elif config is None:
        raise typer.BadParameter("missing CONFIG (or --resume RUN_DIR)")
    cfg = None if resume is not None else load_config(config, parse_overrides(set_))
    pool = None if dry_run else make_executor(executor, ray_address, workers)
    try:
        if resume is not None:
            runner = Runner.resume(resume, executor=pool)
        else:
            run_dir = out or Path(cfg.output_dir or f"runs/{cfg.name}")
            existing = (run_dir / "config.yaml").is_file()
            runner = Runner(cfg, run_dir) if dry_run else open_run(cfg, run_dir, executor=pool)
            if existing and not dry_run:  # said only once open_run found the same config there
                typer.echo(f"{run_dir} holds a run of this config; continuing it", err=True)
    except BaseException:
        if pool is not None:
            pool.close()
        raise
    if pool is not None:
        pool.share_examples(runner.worker)
    try:
        if dry_run:
            print_plan(runner, plain=plain_output(plain))
            return
        stats = execute(runner)
    finally:
        runner.close()
    finish(runner.run_dir, stats, report=report, plain=plain_output(plain))


def make_executor(kind: str, address: Optional[str], workers: Optional[int]):
    """None for the local executor (the runner makes its own); a connected ``RayExecutor`` for 'ray'.

    Options that only Ray takes are refused with the local executor rather than ignored.
    """
    from core.errors import UserError

    if kind not in ("local", "ray"):
        raise UserError(f"--executor must be 'local' or 'ray', got {kind!r}")
    if kind == "local":
        given = [name for name, value in (("--ray-address", address), ("--workers", workers)) if value is not None]
        if given:
            raise UserError(f"{' and '.join(given)} need(s) --executor ray")
        return None
    from experiments.run.ray_executor import RayExecutor

    return RayExecutor(address, workers=workers)


def execute(runner):
    """Run, and on Ctrl-C say what was kept and how to continue (the lock is already released)."""
    try:
        return runner.run()
    except KeyboardInterrupt:
        typer.echo(f"\ninterrupted: {runner.stats.predicted} prediction(s) of this session are saved in "
                   f"{runner.run_dir}; continue with `ctxcomp run --resume {runner.run_dir}`", err=True)
        raise typer.Exit(130) from None


def finish(run_dir: Path, stats, *, report: bool, plain: bool) -> None:
    from core.files import write_atomic

    typer.echo(
        f"done: {stats.predicted} predicted, {stats.already_done} already done, {stats.failed} failed; "
        f"{stats.model_calls} reader calls, {stats.cache_hits} cache hits, {stats.retries} retries, {stats.wall_s:.1f} s"
    )
    write_atomic(run_dir / "stats.json", json.dumps(stats.as_dict(), indent=2))
    if stats.failed:
        typer.echo(f"warning: {stats.failed} example(s) failed and are excluded from scores; see "
                   f"{run_dir / 'failures.jsonl'}; retry with `ctxcomp run --resume {run_dir}`", err=True)
    if report:
        print_report(run_dir, plain=plain)


def print_plan(runner, *, plain: bool) -> None:
    rows = runner.plan()
    header = ["task", "compressor", "reader", "config", "examples", "pending", "reader calls", "cache hits",
              "prompt tokens", "texts encoded"]
    body = [[r.task, r.compressor, r.reader, r.config_hash, str(r.examples), str(r.pending),
             f"{r.reader_calls}{'' if r.exact else ' (est.)'}", str(r.cache_hits),
             f"{r.prompt_tokens:,}{'' if r.exact else ' (<=)'}", f"{r.texts_encoded:,}"] for r in rows]
    print_table(header, body, plain=plain,
                title=f"grid: {len(runner.grid)} config(s) x {len(runner.config.tasks)} task(s)")
    summaries = sum(r.summarizer_calls for r in rows)
    encoded = [r.texts_encoded for r in rows]
    if any(encoded):
        typer.echo(f"embeddings: {sum(encoded):,} texts encoded for the whole grid; the point that needed most "
                   f"encoded {max(encoded):,} ({sum(encoded) / max(encoded):.2f}x); every other text came from the "
                   "embedding cache")
    typer.echo(
        f"reader calls: {sum(r.reader_calls for r in rows)} (after {sum(r.cache_hits for r in rows)} cache hits)"
        + (f" + about {summaries} summarizer calls" if summaries else "")
        + f"; prompt tokens: {sum(r.prompt_tokens for r in rows):,}"
    )


def print_report(run_dir: Path, *, plain: bool = True) -> None:
    """Write the report and print its score table (Markdown pastes into a paper draft or an issue as is)."""
    from experiments.report.cells import load_run
    from experiments.report.tables import score_table
    from experiments.report.write import write_report

    _, plots = write_report(run_dir)
    data = load_run(run_dir)
    print_table(*score_table(data.cells, data.items()), plain=plain)
    typer.echo(f"report: {Path(run_dir) / 'report.md'}" + (f"; {len(plots)} plot file(s) in {Path(run_dir) / 'plots'}" if plots else ""))


@user_errors
def report(
    run_dir: Path = typer.Argument(..., help="A run directory written by `ctxcomp run`."),
    plots: bool = typer.Option(True, "--plots/--no-plots"),
) -> None:
    """(Re)write scores, report.md, tables and plots for a run directory."""
    from experiments.report.write import write_report

    md, paths = write_report(run_dir, plots=plots)
    typer.echo(md)
    for p in paths:
        typer.echo(f"wrote {p}")


@user_errors
def compare(
    run_a: Path = typer.Argument(...),
    run_b: Path = typer.Argument(...),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
) -> None:
    """Compare the scores of two runs cell by cell."""
    from experiments.report.compare import compare_runs

    header, body, notes = compare_runs(run_a, run_b)
    if body:
        print_table(header, body, plain=plain_output(plain))
    for note in notes:
        typer.echo(f"warning: {note}", err=True)


@user_errors
def show(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    example_id: str = typer.Option(..., "--id", help="The example id (as in predictions.jsonl)."),
    config: Optional[str] = typer.Option(None, "--config", help="Only this config hash (a prefix is enough)."),
) -> None:
    """Print one example: question, answers, kept context, the compressor's trace, the prompt and the prediction."""
    from experiments.report.show import show_example

    typer.echo(show_example(run_dir, example_id, config_hash=config))

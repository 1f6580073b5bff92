"""``ctxcomp run``, ``ctxcomp report``, ``ctxcomp compare`` and ``ctxcomp show``."""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer
from typer.core import TyperCommand

from core.errors import UserError
from experiments.cli.errors import (
    USER_ERRORS,
    config_location,
    debugging,
    exit_for_failures,
    parse_overrides,
    plain_output,
    print_scores,
    print_table,
    print_warnings,
    sigterm_as_interrupt,
    user_errors,
)


class RunCommand(TyperCommand):
    """``ctxcomp run``, whose ``--dry-run`` takes an optional ``=exact`` (``--dry-run``, ``--dry-run=exact``),
    which typer's parser cannot declare: the value is read off the command line before it parses."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        given = []
        for arg in args:
            if arg.startswith("--dry-run="):
                mode = arg.partition("=")[2]
                if mode not in ("fast", "exact"):
                    raise typer.BadParameter(f"--dry-run takes no value or =exact, got {arg!r}")
                given += ["--dry-run", "--dry-run-exact"] if mode == "exact" else ["--dry-run"]
            else:
                given.append(arg)
        return super().parse_args(ctx, given)


@user_errors
def run(
    config: Optional[Path] = typer.Argument(None, help="YAML config (tasks x compressors x readers)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Run directory (default: the config's output_dir or runs/<name>)."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue the run in this directory after a kill or failures."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the grid and the work left, run nothing: in seconds, "
                                 "no model loaded (exact counts, or bounds where a model decides); --dry-run=exact "
                                 "loads the models, compresses every example and counts cache hits."),
    dry_run_exact: bool = typer.Option(False, "--dry-run-exact", hidden=True),  # what --dry-run=exact becomes
    set_: List[str] = typer.Option([], "--set", help="Override a config key, e.g. --set batch_size=4 (repeatable; with "
                                   "--resume, only how the run is carried out: batch_size)."),
    report: bool = typer.Option(True, "--report/--no-report", help="Write report.md and plots when done."),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
    executor: str = typer.Option("local", "--executor", help="Where units run: 'local' (this process) or 'ray' (a Ray pool)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Join this Ray cluster ('auto', HOST:PORT or ray://HOST:PORT); default: start a local Ray instance."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Ray actors (default: the cluster's CPUs)."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 if any example failed (default: only if all did)."),
    until_decided: bool = typer.Option(False, "--until-decided", help="Grow each task's sample by --step until every "
                                       "cell is decided against full (anytime-valid betting test, docs/metrics.md)."),
    step: Optional[int] = typer.Option(None, "--step", help="Questions a task's sample grows by per step (default 10)."),
    max_n: Optional[int] = typer.Option(None, "--max-n", help="The most questions per task (default: the task's pool)."),
    max_cost: Optional[str] = typer.Option(None, "--max-cost", help="Stop before a step that would pass this: $5, "
                                           "2h, 90min or 1000calls."),
) -> None:
    """Run an evaluation grid; predictions are appended and the run can be resumed.

    Running a config into a folder that already holds a run of the same config continues it (the same as
    --resume); a folder holding another config's predictions is refused.
    """
    from experiments.run.api import resolve_config

    if resume is not None:
        if config is not None:
            raise typer.BadParameter("give either CONFIG (with --set) or --resume RUN_DIR, not both")
        source: Path = resume
    elif config is None:
        raise typer.BadParameter("missing CONFIG (or --resume RUN_DIR)")
    else:
        source = config
    cfg, held_in = resolve_config(source, parse_overrides(set_))
    run_dir = out or held_in or cfg.default_dir
    with config_location(config):
        if dry_run_exact:
            print_plan(cfg, run_dir, plain=plain_output(plain))
            return
        if dry_run:
            print_estimate(cfg, run_dir, plain=plain_output(plain))
            return
        if until_decided or (resume is not None and sequential_run(run_dir)):
            from experiments.cli.design import run_until_decided

            run_until_decided(cfg, Path(run_dir), step=step, max_n=max_n, max_cost=max_cost,
                              report=report, plain=plain_output(plain))
            return
        if step is not None or max_n is not None or max_cost is not None:
            raise UserError("--step, --max-n and --max-cost go with --until-decided")
        execute(cfg, run_dir, report=report, plain=plain_output(plain), strict=strict,
                executor=make_executor(executor, ray_address, workers))


def sequential_run(run_dir: Path) -> bool:
    """Whether a run directory holds a run started with --until-decided (its manifest keeps the looks)."""
    from experiments.design.grow import load_state

    return Path(run_dir).is_dir() and load_state(Path(run_dir)) is not None


def make_executor(kind: str, address: Optional[str], workers: Optional[int]):
    """None for the local executor; a connected ``RayExecutor`` for 'ray'. Options only Ray takes are refused
    with the local executor rather than ignored."""
    from experiments.run.executors import make_executor as make

    if kind not in ("local", "ray"):
        raise UserError(f"--executor must be 'local' or 'ray', got {kind!r}")
    if kind == "local":
        given = [name for name, value in (("--ray-address", address), ("--workers", workers)) if value is not None]
        if given:
            raise UserError(f"{' and '.join(given)} need(s) --executor ray")
    if workers is not None and workers < 1:
        raise UserError(f"--workers must be >= 1, got {workers}")
    if address is not None and not address.strip():
        raise UserError("--ray-address is empty; give 'auto', HOST:PORT or ray://HOST:PORT")
    return make(kind, address=address, workers=workers)


def execute(config, run_dir: Path, *, report: bool = True, plain: bool = True, executor=None, shards=None,
            summary: bool = True, strict: bool = False):
    """The one run lifecycle (``evaluate``) with what a person at a terminal needs: news, the resume command
    after Ctrl-C or SIGTERM, the failures, the score table, and an exit code CI can trust."""
    from experiments.run.api import RunInterrupted, evaluate

    say = lambda message: typer.echo(message, err=True)  # noqa: E731
    try:
        with sigterm_as_interrupt():
            result = evaluate(config, run_dir, report=report, executor=executor, shards=shards, notify=say)
    except RunInterrupted as stop:
        say(f"\n{stop.args[0]}; continue with `ctxcomp run --resume {run_dir}`")
        raise typer.Exit(130) from None
    finally:
        if executor is not None:
            executor.close()
    stats = result.stats
    typer.echo(
        f"done: {stats.predicted} predicted, {stats.already_done} already done, {stats.failed} failed; "
        f"{stats.model_calls} reader calls, {stats.cache_hits} cache hits, {stats.retries} retries, {stats.wall_s:.1f} s"
    )
    if stats.failed:
        from experiments.report.summary import resume_advice

        advice = resume_advice(stats.failed, stats.failed_for_good(), f"`ctxcomp run --resume {run_dir}`")
        say(f"warning: {stats.failed} example(s) failed and are excluded from scores; see "
            f"{run_dir / 'failures.jsonl'}; {advice}")
    rows = {c.compressor for c in result.cells} if config.contrasts else set()
    for con in config.contrasts:  # a typo in a label: said now, not only in report.md
        missing = [label for label in (con.arm, con.against) if label not in rows]
        if missing and rows:
            say(f"warning: contrast {con.arm!r} - {con.against!r} names no row labelled "
                f"{', '.join(map(repr, missing))} (rows: {', '.join(sorted(rows))}); fix the config's contrasts")
    if report and summary:
        print_scores(result.data, plain=plain)
    exit_for_failures(stats.failed, stats.predicted + stats.already_done, strict=strict, what="example")
    return result


def print_estimate(config, run_dir: Path, *, plain: bool) -> None:
    """The fast dry run (``experiments.run.estimate.estimate``): no model loads; a failure of its own is one line too."""
    from experiments.run.driver import Runner
    from experiments.run.estimate import estimate, estimate_summary

    runner = Runner(config, run_dir, progress=False)
    try:
        plan = estimate(runner.config, runner.grid, runner.done_keys())
    except USER_ERRORS:
        raise
    except Exception as err:  # a plugin's, or this estimate's: said in one line; --debug shows where
        if debugging():
            raise
        raise UserError(f"the dry run could not estimate this grid: {type(err).__name__}: {err} (`ctxcomp --debug "
                        "run ... --dry-run` prints the traceback; --dry-run=exact runs every compressor)") from err
    finally:
        runner.close()
    header = ["task", "compressor", "reader", "config", "examples", "pending", "reader calls", "summarizer calls",
              "prompt tokens", "estimate"]
    body = [[r.task, r.compressor, r.reader, r.config_hash, str(r.examples), str(r.pending), f"{r.reader_calls:,}",
             f"up to {r.summarizer_calls:,}" if r.summarizer_calls else "0",
             r.tokens_text, r.basis] for r in plan.rows]
    print_table(header, body, plain=plain,
                title=f"grid: {len(runner.grid)} config(s) x {len(runner.config.tasks)} task(s)")
    for line in estimate_summary(plan):
        typer.echo(line)
    for line in plan.warnings:
        typer.echo(f"warning: {line}", err=True)


def print_plan(config, run_dir: Path, *, plain: bool) -> None:
    """``--dry-run=exact``: builds readers and compressors (models load), compresses every pending example with a
    progress bar, and counts the generation cache's hits."""
    from experiments.run.driver import Runner

    runner = Runner(config, run_dir)
    try:
        rows = runner.plan()
    finally:
        runner.close()
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


@user_errors
def report(
    run_dir: Path = typer.Argument(..., help="A run directory written by `ctxcomp run`."),
    plots: bool = typer.Option(True, "--plots/--no-plots"),
    view: bool = typer.Option(True, "--view/--no-view", help="Also write view.html (see `ctxcomp view`)."),
    margin: Optional[float] = typer.Option(None, "--margin", help="Non-inferiority margin in score points for this "
                                           "report (default: the run config's); nothing is predicted again."),
    contrast: List[str] = typer.Option([], "--contrast", help="A planned contrast 'ARM - AGAINST' (row labels; "
                                       "repeatable), in place of the config's; nothing is predicted again."),
) -> None:
    """(Re)write scores, report.md, tables, plots and view.html for a run directory.

    Analysis-only settings (--margin, --contrast) change what the report computes from the predictions, never
    the predictions: no model is called, and the run's config stays as it was.
    """
    from experiments.report.cells import load_run
    from experiments.report.write import with_analysis, write_report

    data = with_analysis(load_run(run_dir), margin=margin, contrasts=contrast)
    md, paths = write_report(data, plots=plots)
    typer.echo(md)
    for p in paths:
        typer.echo(f"wrote {p}")
    print_warnings(data)
    if view:
        from experiments.cli.view import load_contexts
        from experiments.view.page import write_view

        typer.echo(f"wrote {write_view(data, plot_paths=paths, contexts=load_contexts)}")


@user_errors
def rescore(
    run_dir: Path = typer.Argument(..., help="A run directory written by `ctxcomp run`."),
    metric: Optional[str] = typer.Option(None, "--metric", help="Score with this metric (`ctxcomp list metrics`); "
                                         "default: each prediction's own, as the run scored it."),
    task: List[str] = typer.Option([], "--task", help="Only this task's predictions (its key in the report; "
                                   "repeatable; default: every task)."),
    plots: bool = typer.Option(True, "--plots/--no-plots"),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
) -> None:
    """Score a run's predictions again (another metric, or a fixed one), with no model call.

    The new scores and their report go to RUN_DIR/rescored/NAME/ (NAME: the metric, or run-metrics, with the
    tasks when --task is given); the run's own files are never written.
    """
    from experiments.report.cells import load_run
    from experiments.report.write import write_report
    from experiments.scoring.rescore import rescore as rescore_run

    done = rescore_run(run_dir, metric, task, class_lists=lambda keys: class_lists(run_dir, keys))
    write_report(load_run(done.out_dir), plots=plots)
    for key, row in done.tasks.items():
        typer.echo(f"{key}: {row['items']} prediction(s) scored with {row['metric']} (the run used {row['from']}); "
                   f"{row['changed']} item score(s) differ from the run's")
    print_scores(load_run(done.out_dir), plain=plain_output(plain))


def class_lists(run_dir: Path, keys: set[str]) -> dict[tuple[str, str], tuple[str, ...]]:
    """Each example's class list for the tasks ``keys`` of a run, from the data its config names (no model)."""
    from experiments.data.store import CONFIG
    from experiments.run.config import load_config
    from experiments.run.examples import load_task_examples

    if not (Path(run_dir) / CONFIG).is_file():
        raise UserError(f"the metric of task {', '.join(sorted(keys))} reads each example's class list, from the "
                        f"task's data, and {run_dir} has no {CONFIG} that names it")
    tasks = [t for t in load_config(Path(run_dir) / CONFIG).tasks if t.key in keys]
    return {(t.key, ex.id): tuple(ex.all_classes or ()) for t in tasks for ex in load_task_examples(t)}


@user_errors
def compare(
    run_a: Path = typer.Argument(...),
    run_b: Path = typer.Argument(...),
    match: List[str] = typer.Option([], "--match", help="Take A's and B's rows with these names as the same rows: "
                                    "FIELD=A_VALUE:B_VALUE, FIELD a row field (task, reader, compressor: "
                                    "--match reader=smollm2:gemma) or a setting of the grid (a compressor or "
                                    "reader parameter, budget: --match chunk_size=100:200 pairs every arm that "
                                    "differs only there) (repeatable)."),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
) -> None:
    """Compare two runs cell by cell, paired on the examples both scored (B - A with its 95% interval and p).

    Where both runs have a full-context row, each row also gives both changes against full and their
    difference (a difference of differences), paired on the examples all four cells scored.
    """
    from experiments.report.compare import compare_runs

    pairs = {}
    for item in match:
        name, sep, value = item.partition("=")
        if not sep or not value:
            raise UserError(f"--match {item!r}: expected FIELD=A_VALUE:B_VALUE, e.g. reader=smollm2:gemma")
        pairs[name.strip()] = value.strip()
    header, body, notes = compare_runs(run_a, run_b, pairs)
    if body:
        print_table(header, body, plain=plain_output(plain))
    for note in notes:
        typer.echo(f"warning: {note}", err=True)


@user_errors
def show(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    example_id: Optional[str] = typer.Option(None, "--id", help="The example id (as in predictions.jsonl)."),
    config: Optional[str] = typer.Option(None, "--config", help="Only this config hash (a prefix is enough)."),
    manifest: bool = typer.Option(False, "--manifest", help="Print what made the run instead: versions, git "
                                  "commit, data files' sha256, the machine, the command line, per session."),
) -> None:
    """Print one example: question, answers, kept context, the compressor's trace, the prompt and the prediction."""
    if manifest:
        from experiments.data.provenance import describe_manifest, read_manifest
        from experiments.data.store import RunDir

        typer.echo(describe_manifest(read_manifest(RunDir(run_dir).require().path)))
        return
    if example_id is None:
        raise typer.BadParameter("missing --id EXAMPLE_ID (or --manifest)")
    from experiments.view.examples import show_example

    typer.echo(show_example(run_dir, example_id, config_hash=config))

"""``ctxcomp plan``: the n and the cost each cell's verdict needs, from a pilot run."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from core.errors import UserError
from experiments.cli.errors import plain_output, print_table, user_errors
from experiments.inference.results import ALPHA


def parse_prices(items: list[str]) -> dict[str, dict[str, float]]:
    """``--price NAME=IN,OUT`` (dollars per million input and output tokens) as the config's ``prices`` holds them."""
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            parts = [float(v) for v in value.split(",")]
        except ValueError:
            parts = []
        if not name or len(parts) not in (1, 2) or any(p < 0 for p in parts):
            raise UserError(f"--price expects NAME=INPUT[,OUTPUT] in dollars per million tokens, got {item!r}")
        out[name] = {"input_per_1m": parts[0], "output_per_1m": parts[1] if len(parts) == 2 else 0.0}
    return out


@user_errors
def plan(
    run_dir: Path = typer.Argument(..., help="A finished (pilot) run directory."),
    margin: Optional[float] = typer.Option(None, "--margin", min=0, help="Non-inferiority margin in points "
                                           "(default: the run's)."),
    power: float = typer.Option(0.8, "--power", min=0.5, max=0.999, help="The chance of showing 'not worse' "
                                "when the assumed difference is true."),
    alpha: float = typer.Option(ALPHA, "--alpha", min=0.0001, max=0.5, help="One-sided level of the test "
                                "(0.025: the report's 95% intervals)."),
    price: List[str] = typer.Option([], "--price", help="NAME=IN,OUT: dollars per million tokens for a reader "
                                    "label or model name (repeatable; beside the config's `prices:`)."),
    delta: float = typer.Option(0.0, "--delta", help="The true difference to plan for, in points (default 0: "
                                "the arm as good as full; never the pilot's own noisy estimate)."),
    plain: bool = typer.Option(False, "--plain", help="Plain Markdown tables (the default when stdout is not a terminal)."),
) -> None:
    """For every cell and task average: the pilot's difference to full and its spread, the n (and documents)
    a non-inferiority verdict needs at an assumed true difference (--delta, default 0) with the report's own
    test, the power it reaches there, and what reading that n costs."""
    from experiments.design.forecast import plan_run, plan_table

    rows, settings = plan_run(run_dir, margin=margin, power=power, alpha=alpha, prices=parse_prices(price),
                              delta=delta)
    if not rows:
        raise UserError(f"{run_dir} has no compressed cell paired with a full-context cell: nothing to plan")
    header, body = plan_table(rows, delta)
    print_table(header, body, plain=plain_output(plain),
                title=f"What a verdict needs: margin {settings['margin']:g} points, power {power:g}, one-sided "
                      f"alpha {alpha:g}, documents as in the pilot")
    typer.echo("n: examples (documents); spread: answers that changed (0/1 scores; the plan takes a 90% upper "
               "bound of that share) or the per-example SD with the documents' correlation; power: the report's "
               "test at the planned n (exact for 0/1 scores, simulated otherwise, a lower bound for an average); "
               "costs count the arm and full for every example added, at the pilot's per-example calls, tokens, "
               "seconds of generations not served by the cache, and prices (docs/metrics.md, 'Planning n').")
    if settings["pools_unknown"]:
        typer.echo(f"Not checked against the pool: {', '.join(settings['pools_unknown'])}. Their data could not be "
                   "read here (fetch it, or set CTXCOMP_DATA_DIR), so these plans may ask for more documents than "
                   "the task holds.")


def run_until_decided(config, run_dir: Path, *, step: Optional[int], max_n: Optional[int], max_cost: Optional[str],
                      report: bool, plain: bool) -> None:
    """``ctxcomp run CONFIG --until-decided``: grow the samples until every cell is decided
    (``experiments.design.grow``), then write the report and print what was decided."""
    from experiments.cli.errors import sigterm_as_interrupt
    from experiments.design.grow import CostLimit, Limits, grow, load_state, summary_line
    from experiments.report.cells import load_run
    from experiments.run.api import RunInterrupted

    say = lambda message: typer.echo(message, err=True)  # noqa: E731
    held = load_state(run_dir)
    limits = Limits.from_dict(held["settings"]) if held is not None and step is None else Limits(
        step=step or 10, max_n=max_n, max_cost=CostLimit.parse(max_cost) if max_cost else None)
    try:
        with sigterm_as_interrupt():
            outcome = grow(config, run_dir, limits, notify=say)
    except (KeyboardInterrupt, RunInterrupted):
        say(f"\ninterrupted: every finished look is saved; continue with `ctxcomp run --resume {run_dir}`")
        raise typer.Exit(130) from None
    typer.echo(summary_line(outcome.state))
    if report:
        from experiments.cli.errors import print_scores
        from experiments.report.write import write_report

        data = load_run(run_dir)
        write_report(data)
        print_scores(data, plain=plain)

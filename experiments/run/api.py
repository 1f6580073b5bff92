"""The library entry point: run a grid from Python without the CLI (as lm-eval-harness's ``simple_evaluate``)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.report.cells import Cell, load_run
from experiments.run.config import RunConfig, load_config, parse_config
from experiments.run.runner import Executor, Runner, RunStats


@dataclass
class Evaluation:
    """What ``evaluate`` returns: where the run lives, what it did, and its scored cells."""

    run_dir: Path
    stats: RunStats
    cells: list[Cell]


def evaluate(
    config: RunConfig | Mapping[str, Any] | str | Path,
    out: str | Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    report: bool = True,
    progress: bool = True,
    executor: Executor | None = None,
) -> Evaluation:
    """Run (or resume) a grid and score it.

    ``config`` is a ``RunConfig``, a mapping in the YAML layout, or a path to a
    YAML file (``overrides`` are dotted keys, as ``--set``).  The run goes to
    ``out`` (default: the config's ``output_dir`` or ``runs/<name>``); a
    directory that already holds this config is resumed, one that holds
    another config is refused.  With ``report`` the report files are written too.
    """
    if isinstance(config, (str, Path)):
        cfg = load_config(config, dict(overrides or {}))
    elif isinstance(config, RunConfig):
        cfg = config if not overrides else parse_config({**config.model_dump(mode="json"), **overrides})
    else:
        cfg = parse_config({**dict(config), **dict(overrides or {})})
    run_dir = Path(out or cfg.output_dir or f"runs/{cfg.name}")
    runner = open_run(cfg, run_dir, progress=progress, executor=executor)
    try:
        stats = runner.run()
    finally:
        runner.close()
    if report:
        from experiments.report.write import write_report

        write_report(run_dir)
    return Evaluation(run_dir, stats, load_run(run_dir).cells)


def open_run(config: RunConfig, run_dir: Path, **kw: Any) -> Runner:
    """A runner for a new run directory, or for one that already holds exactly this config (resumed)."""
    from experiments.data.store import CONFIG

    if (run_dir / CONFIG).is_file():
        runner = Runner.resume(run_dir, **kw)
        if not runner.config.same_run(config):
            runner.close()
            from experiments.run.runner import RunDirError

            raise RunDirError(f"{run_dir} holds a run of another config; pass another output folder or delete {run_dir}")
        if runner.config != config:  # only the planned contrasts changed: the report follows the config given
            runner.update_contrasts(config)
        return runner
    return Runner.create(config, run_dir, **kw)

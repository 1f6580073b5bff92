"""The one run lifecycle: open a run directory, run the grid, close, and report (as lm-eval-harness's ``simple_evaluate``).

``ctxcomp run``, ``curve`` and ``quickstart`` and Python callers all go
through :func:`evaluate`, so a run started anywhere leaves the same files,
``stats.json`` and the report included.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compressors.cache import stored_count
from core.files import write_atomic
from experiments.data.store import CONFIG, STATS
from experiments.report.cells import Cell, RunData, load_run
from experiments.run.config import EXECUTION, ConfigError, RunConfig, apply_overrides, load_config, parse_config
from experiments.run.driver import Runner, RunStats
from experiments.run.executors import Executor


@dataclass
class Evaluation:
    """What ``evaluate`` returns: where the run lives, what it did, and its scored cells (computed once, when
    the report is written or when first asked for)."""

    run_dir: Path
    stats: RunStats
    loaded: RunData | None = field(default=None, repr=False)

    @functools.cached_property
    def data(self) -> RunData:
        """The run directory's records and cells."""
        return self.loaded if self.loaded is not None else load_run(self.run_dir)

    @property
    def cells(self) -> list[Cell]:
        return self.data.cells


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped a run; every finished record is written and the lock released.  ``compressions``:
    those this session kept in the compression cache, which a resume reads back instead of redoing (a batch
    stopped before its reader answered saves no prediction, yet its compressions are kept)."""

    def __init__(self, run_dir: Path, stats: RunStats, compressions: int = 0) -> None:
        kept = [f"{stats.predicted} prediction(s)"] if stats.predicted or not compressions else []
        if compressions:
            kept.append(f"{compressions} compression(s) (cached: a resume redoes none of them)")
        super().__init__(f"interrupted: {' and '.join(kept)} of this session are saved in {run_dir}")
        self.run_dir, self.stats, self.compressions = run_dir, stats, compressions


def resolve_config(config: RunConfig | Mapping[str, Any] | str | Path,
                   overrides: Mapping[str, Any] | None = None) -> tuple[RunConfig, Path | None]:
    """(config, the run directory it came from) for a ``RunConfig``, a mapping in the YAML layout, a YAML
    file or a run directory; ``overrides`` are dotted keys (``tasks.0.limit``), as ``--set``, for all four."""
    overrides = dict(overrides or {})
    if isinstance(config, (str, Path)):
        path = Path(config)
        if path.is_dir():
            if not (path / CONFIG).is_file():
                raise ConfigError(f"{path} is a directory but not a run directory (no {CONFIG})")
            changed = sorted(key for key in overrides if key not in EXECUTION)
            if changed:
                raise ConfigError(f"{path} is a run: its config cannot be changed with overrides ({', '.join(changed)}); "
                                  f"only how it is carried out can ({', '.join(EXECUTION)})")
            held = load_config(path / CONFIG)
            if not overrides:
                return held, path
            return parse_config(apply_overrides(held.model_dump(mode="json"), overrides), str(path / CONFIG)), path
        return load_config(path, overrides), None
    data = config.model_dump(mode="json") if isinstance(config, RunConfig) else dict(config)
    if isinstance(config, RunConfig) and not overrides:
        return config, None
    return parse_config(apply_overrides(data, overrides), "<config>"), None


def evaluate(
    config: RunConfig | Mapping[str, Any] | str | Path,
    out: str | Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    report: bool = True,
    plots: bool = True,
    progress: bool = True,
    executor: Executor | None = None,
    shards: Any = None,
    notify: Callable[[str], None] | None = None,
) -> Evaluation:
    """Run (or continue) a grid, write ``stats.json`` and, with ``report``, the report; return the scored cells.

    ``config`` is a ``RunConfig``, a mapping in the YAML layout, a YAML file, or a run directory (continued).
    The run goes to ``out`` (default: the config's ``output_dir`` or ``runs/<name>``); a directory that
    already holds this config is continued, one that holds another config's predictions is refused.
    ``executor``: where units run (default here); ``shards``: how dense open-domain corpora are indexed.
    Ctrl-C raises ``RunInterrupted`` after every finished record is written.
    """
    cfg, held_in = resolve_config(config, overrides)
    run_dir = Path(out or held_in or cfg.default_dir)
    runner = Runner(cfg, run_dir, progress=progress, executor=executor, shards=shards, notify=notify)
    compressions = stored_count()
    try:
        stats = runner.run()
    except KeyboardInterrupt:
        raise RunInterrupted(run_dir, runner.stats, stored_count() - compressions) from None
    finally:
        runner.close()
    write_atomic(run_dir / STATS, json.dumps(stats.as_dict(), indent=2))
    if not report:
        return Evaluation(run_dir, stats)
    from experiments.report.write import write_report

    data = load_run(run_dir)
    write_report(data, plots=plots)
    return Evaluation(run_dir, stats, data)


__all__ = ["Evaluation", "RunInterrupted", "evaluate", "resolve_config"]

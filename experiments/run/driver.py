"""The driver: the one writer of a run directory, whatever executor carries the units out.

It takes the directory's lock first, then claims the directory for its config
(writing ``config.yaml`` and ``grid.json`` once, or checking that the ones
there ask for the same predictions), repairs a torn last line of any log,
plans the pending units, hands them to an executor and writes each unit's
records as it comes back: prompts and traces first, then the prediction lines
that commit them.  Every prediction line is keyed by (task, example id, config
hash); a resumed run skips keys already recorded, retries those that failed,
and reuses the generation cache, so no completed model call is made twice.
Each session adds what made it to ``manifest.json`` (versions, data files'
sha256, the machine, the command line), and each unit the cache entries it used
to ``cache_keys.jsonl`` (``experiments.data.provenance``).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.caches import LEDGER, check_writable
from core.errors import UserError
from core.files import disk_error, write_atomic
from core.paths import cache_root
from core.progress import progress_bar, reporting_progress
from experiments.data.catalog import catalog, local_file
from experiments.data.provenance import add_session, append_cache_keys, end_session, session_record
from experiments.data.records import NOT_FIXED_BY_RESUME, RecordKey
from experiments.data.store import CONFIG, GRID, LOCK, RunDir
from experiments.run.config import ANALYSIS_ONLY, EXECUTION, RunConfig, dump_config, load_config
from experiments.run.examples import dealt_pools, generator_reads
from experiments.run.executors import Executor, LocalExecutor
from experiments.run.grid import expand_grid, grid_manifest
from experiments.run.plan import (
    PlannedPoint,
    check_components,
    check_data_files,
    check_key_files,
    dry_run,
    pending_units,
)
from experiments.run.worker import UnitResult, Worker, WorkUnit
from readers.base import Reader
from readers.registry import make_reader


class RunDirError(UserError):
    """The run directory is missing, holds another config's run, or another process writes it."""


@dataclass
class RunStats:
    """What a run did; written to ``stats.json`` and printed at the end."""

    examples: int = 0
    already_done: int = 0
    predicted: int = 0
    failed: int = 0
    model_calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    compressor_model_calls: int = 0
    wall_s: float = 0.0
    failures_by_reason: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def failed_for_good(self) -> int:
        """Failures a ``--resume`` would only repeat: a compressor's refusal (a budget below the best chunk, no
        query) and a request the server rejected.  The others (remote faults after their retries) may succeed."""
        return sum(n for kind, n in self.failures_by_reason.items() if kind in NOT_FIXED_BY_RESUME)


class Runner:
    """Plans units, hands them to an executor, and is the only writer of ``run_dir`` (see the module docstring).

    Every component of the grid is checked when the runner is made, before anything is written or loaded.
    ``notify`` hears one-line news meant for the user (a run continued).  ``shards``: how dense open-domain
    corpora are indexed (``experiments.run.sharding.ShardPlan``).
    """

    def __init__(self, config: RunConfig, run_dir: str | Path, *, progress: bool = True,
                 reader_factory: Callable[..., Reader] = make_reader, executor: Executor | None = None,
                 shards: Any = None, notify: Callable[[str], None] | None = None,
                 only: Callable[[str, str], bool] | None = None, look: int | None = None) -> None:
        self.config = config
        self.only = only  # (task key, config hash) -> whether the cell is read (a growing run's undecided cells)
        self.look = look  # a growing run's look: stamped with its document on every prediction this runner writes
        self.grid = expand_grid(config)
        check_components(config, self.grid)
        self.run_dir = Path(run_dir)
        check_key_files(config, self.run_dir)
        check_data_files(config)
        check_writable(cache_root(), "cache root")  # found now, not when the first reader is built
        self.files = RunDir(self.run_dir)
        self.progress = progress
        self.worker = Worker(config, self.grid, reader_factory=reader_factory, progress=progress, shards=shards)
        self.executor: Executor = executor or LocalExecutor(self.worker)
        share = getattr(self.executor, "share_examples", None)
        if share is not None:  # a distributed executor ships the driver's examples instead of loading them again
            share(self.worker)
        self.notify = notify or (lambda _message: None)
        self.stats = RunStats()
        self._continuing = False

    @classmethod
    def resume(cls, run_dir: str | Path, **kw: Any) -> "Runner":
        """A runner for the config a run directory holds."""
        run_dir = Path(run_dir)
        if not (run_dir / CONFIG).is_file():
            raise RunDirError(f"{run_dir} is not a run directory (no {CONFIG})")
        return cls(load_config(run_dir / CONFIG), run_dir, **kw)

    def close(self) -> None:
        self.executor.close()
        self.worker.close()

    # -- planning -------------------------------------------------------------------
    def done_keys(self) -> set[RecordKey]:
        """Keys of the predictions already written (read only; a torn last line is left for the run to repair)."""
        return {r.key for r in self.files.predictions.read()}

    def plan(self) -> list[PlannedPoint]:
        """The work left per (task, grid point), for ``--dry-run``; writes nothing."""
        return dry_run(self.worker, self.done_keys())

    # -- running --------------------------------------------------------------------
    def run(self) -> RunStats:
        with exclusive(self.run_dir):
            self._claim()
            differs = add_session(self.run_dir, session_record(data_files(self.config)))
            if differs:
                self.notify(f"warning: {self.run_dir} is continued with other versions than its last session, so "
                            f"its predictions will mix both: {'; '.join(differs)} (`ctxcomp show {self.run_dir} "
                            "--manifest`)")
            try:
                return self._run()
            finally:
                with contextlib.suppress(UserError, OSError):  # never hides why the run stopped
                    end_session(self.run_dir)

    def _claim(self) -> None:
        """Make the directory this config's run: write its config and grid, or check the ones it holds."""
        path = self.run_dir / CONFIG
        if path.is_file():
            held = load_config(path)
            if held.same_run(self.config) or self._same_predictions(held):
                self._continuing = True  # said once its logs are read whole (a corrupt log is the only line)
                rekeyed = self._rekey(self.files.manifest())
                if held == self.config and self._grid_has_pools() and not rekeyed:
                    return  # only planned contrasts or where servers are may differ; then both are rewritten below
            elif self.files.predictions.read() or self.files.failures.read():
                raise RunDirError(f"{self.run_dir} holds a run of another config; pass another output folder "
                                  f"or delete {self.run_dir}")
            else:
                self.notify(f"{self.run_dir} held another config but no predictions; it now holds this one")
        dump_config(self.config, path)
        write_atomic(self.run_dir / GRID, json.dumps(grid_manifest(self.config, self.grid, dealt_pools(self.config)),
                                                     indent=2, ensure_ascii=False))

    def _grid_has_pools(self) -> bool:
        """Whether grid.json is there and records each task's pool (one written before it did is rewritten)."""
        tasks = self.files.manifest().get("tasks") if (self.run_dir / GRID).is_file() else None
        return bool(tasks) and all("largest_document" in t for t in tasks)

    def _same_predictions(self, held: RunConfig) -> bool:
        """Whether ``held`` differs only where no output changes (a server's address): the same tasks and keys."""
        analysis = {name: getattr(self.config, name) for name in ANALYSIS_ONLY + EXECUTION}
        same_tasks = held.model_copy(update={"readers": self.config.readers, "compressors": self.config.compressors,
                                             **analysis}) == self.config
        return same_tasks and [p.config_hash for p in expand_grid(held)] == [p.config_hash for p in self.grid]

    def _rekey(self, manifest: dict) -> bool:
        """Give records keyed with a single server's ``base_url`` (which changes no output) the keys their points
        have, once, under the lock, so such a run, continued, keeps every prediction."""
        old = [p.get("config_hash") for p in manifest.get("points", [])]
        if len(old) != len(self.grid):
            return False
        mapping = {o: p.config_hash for o, p in zip(old, self.grid) if o and o != p.config_hash}
        if mapping:
            for log in self.files.logs():
                log.rekey(mapping)
            self.notify(f"{self.run_dir}: {len(mapping)} grid point(s) were keyed with a server's address, which "
                        "changes no output; their lines get the address-free keys, and nothing is asked again")
        return bool(mapping)

    def _run(self) -> RunStats:
        start = time.perf_counter()
        self.stats = RunStats()
        done = set(self.files.predictions.repair_keys())
        self.files.traces.repair_tail(keep=lambda key: key in done)  # a kill between traces and predictions
        self.files.traces.check_shape()  # no damaged line in the middle, at a fraction of parsing them
        self.files.failures.repair_keys()
        if self._continuing:
            self.notify(f"{self.run_dir} holds a run of this config; continuing it")
        units, already = pending_units(self.worker, done, self.only)
        self.stats.already_done = already
        self.stats.examples = already + sum(len(u.ids) for u in units)
        with progress_bar(self.stats.examples, "predict", enabled=self.progress) as bar:
            bar.update(already)
            cells = _CellNames(self, units)
            bar.set_description(cells.current(), refresh=False)
            answered = [0]  # requests of the units in flight the reader has answered, not yet saved

            def read(n: int) -> None:
                answered[0] += n
                bar.set_postfix_str(f"{answered[0]} answered, saving with their batch", refresh=False)

            def step(done: int, total: int) -> None:
                bar.set_postfix_str(f"generating token {done}/{total}", refresh=False)

            def write(result: UnitResult) -> None:  # the bar counts what is saved, never ahead of it
                self._write(result)
                saved = len(result.predictions) + len(result.failures)
                answered[0] = max(0, answered[0] - saved)
                bar.set_description(cells.done(result), refresh=False)
                bar.set_postfix_str("", refresh=False)
                bar.update(saved)

            try:
                with reporting_progress(lambda message: bar.set_postfix_str(message, refresh=True)):
                    self.executor.run(self.config, units, write, read, step)
            finally:
                self.stats.wall_s = round(time.perf_counter() - start, 3)
                with contextlib.suppress(UserError, OSError):  # keys the driver's own work used (a corpus indexed)
                    append_cache_keys(self.run_dir, LEDGER.take())
        return self.stats

    def _write(self, result: UnitResult) -> None:
        """Write one unit's records: prompts and traces first, then the prediction lines that commit them; each log
    takes the unit's lines in one write and one fsync."""
        append_cache_keys(self.run_dir, result.cache_keys)
        for phash, prompt in result.prompts.items():
            path = self.files.prompt_path(phash)
            if not path.exists() or not path.stat().st_size:  # empty: a power loss caught it before its sync
                path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(path, prompt, sync=False)  # rebuilt from the config; the logs are what must last
        self.files.traces.extend(result.traces)
        if self.look is not None:
            for prediction in result.predictions:
                prediction.look, prediction.document = self.look, prediction.cluster_key
        self.files.predictions.extend(result.predictions)
        self.files.failures.extend(result.failures)
        for failure in result.failures:
            self.stats.failures_by_reason[failure.kind] = self.stats.failures_by_reason.get(failure.kind, 0) + 1
        self.stats.predicted += len(result.predictions)
        self.stats.failed += len(result.failures)
        self.stats.model_calls += result.model_calls
        self.stats.cache_hits += result.cache_hits
        self.stats.retries += result.retries
        self.stats.compressor_model_calls += result.compressor_model_calls


class _CellNames:
    """The bar's label: the cell (task | compressor | reader) of the oldest unit not yet saved, i.e. the one being
    worked on (the local executor runs units in order).  Labels come from the config until a unit of the point
    comes back with the components' own."""

    def __init__(self, runner: Runner, units: list[WorkUnit]) -> None:
        self.runner = runner
        self.pending = dict.fromkeys(units)
        self.known: dict[int, tuple[str, str]] = {}

    def current(self) -> str:
        unit = next(iter(self.pending), None)
        if unit is None:
            return "predict"
        point = self.runner.grid[unit.point]
        compressor, reader = self.known.get(unit.point) or (point.compressor.label or point.compressor.name,
                                                            point.reader.label or point.reader.name)
        return f"{self.runner.config.tasks[unit.task].key} | {compressor} | {reader}"[:70]

    def done(self, result: UnitResult) -> str:
        self.pending.pop(result.unit, None)
        head = (result.predictions or result.failures or [None])[0]
        if head is not None:
            self.known[result.unit.point] = (head.compressor, head.reader)
        return self.current()


def data_files(config: RunConfig) -> list[str]:
    """The files a run reads its examples from (task files, data names' files, open-domain corpora, the files a
    generator reads, task spec files), for the manifest's sha256s; hub data has none."""
    paths = []
    for task in config.tasks:
        for value in (task.file, task.open_domain and task.open_domain.corpus, *generator_reads(task),
                      task.name if task.name.endswith((".yaml", ".yml")) else None):
            if value:
                with contextlib.suppress(UserError):  # a data name not fetched is said where it is read
                    path = local_file(value) if value in catalog() else Path(value)
                    if path.is_file():
                        paths.append(str(path))
    return paths


@contextmanager
def exclusive(run_dir: Path) -> Iterator[None]:
    """One writer per run directory: a second writer would duplicate lines.

    The lock goes with the file handle, also when the process is killed; the
    ``.lock`` file itself is removed on every exit this process sees (Ctrl-C included).
    """
    path = run_dir / LOCK
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fh = open(path, "w")
    except OSError as err:
        raise disk_error(path, err) from None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(f"{run_dir} is being written by another ctxcomp process; wait for it or stop it") from None
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


__all__ = ["RunDirError", "RunStats", "Runner", "data_files", "exclusive"]

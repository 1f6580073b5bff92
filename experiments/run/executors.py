"""Where units run: here (``LocalExecutor``), or on a Ray pool (``RayExecutor``).

An executor carries units out and hands each result to the driver's
``on_result``, which writes it; it never writes itself.

On Ray, as here, the driver
(``Runner``) plans the units, takes the run directory's lock and writes every
line, exactly as with the local executor, so the append-only, dedup and resume
rules do not change with scale, and a run started with one executor can be
resumed with the other.

- **Where.** No address: a local Ray instance with ``num_cpus=workers`` is
  started (and shut down on ``close``).  ``"auto"``, ``HOST:PORT`` or
  ``ray://HOST:PORT``: an existing cluster is joined; an address that cannot be
  reached is a one-line ``UserError`` before any work.
- **Heavy objects once per worker.** Each actor builds one ``Worker(config)``
  and, before any unit is sent, every grid point's reader and compressor
  (a bad reader parameter is therefore reported before any work).  The
  driver's already-loaded examples are put in Ray's object store once and
  shared by every actor, so workers need neither the data files nor the hub.
- **Faults.** An actor whose process dies (SIGKILL, OOM) is restarted by Ray
  (``max_restarts``) and its pending units are re-run there
  (``max_task_retries``); when Ray gives up, the executor starts a fresh actor
  and resubmits the unit itself (at most ``max_resubmits`` times per unit).
  A unit's result reaches the driver once, so nothing is written twice, and
  completed model calls of a re-run unit come from the generation cache.
- **Failures are data; bugs are not.** A ``UserError`` inside an actor is
  raised again in the driver as itself (one line at the CLI); any other
  exception stops the run with the remote traceback, after the units already
  running are finished and written.
- **Caches.** Each worker uses the generation and embedding caches of its own
  machine (``$CTXCOMP_CACHE_DIR``; diskcache is SQLite and must never be shared
  over a network file system).  Actors on the driver's own node get the
  driver's ``CTXCOMP_*`` and Hugging Face offline settings; other nodes keep
  their own.  API keys are never sent through Ray: each node reads its own
  environment (set it before ``ray start``).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from core.progress import progress_bar
from experiments.data.records import Example
from experiments.run.config import RunConfig, parse_config
from experiments.run.grid import canonical_json
from experiments.run.ray_pool import (
    FORWARDED_ENV,
    WorkQueue,
    connect,
    import_ray,
    kill_actors,
    unwrap,
)
from experiments.run.sections import TaskConfig
from experiments.run.worker import ProgressFn, StepFn, UnitResult, Worker, WorkUnit


class Executor(Protocol):
    """Carries out units and hands each result to ``on_result`` in the driver, which writes it."""

    def run(self, config: RunConfig, units: Sequence[WorkUnit], on_result: Callable[[UnitResult], None],
            progress: ProgressFn, step: StepFn) -> None: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Units one after another in this process, with the driver's own worker (models stay loaded)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def run(self, config: RunConfig, units: Sequence[WorkUnit], on_result: Callable[[UnitResult], None],
            progress: ProgressFn, step: StepFn) -> None:
        for unit in units:
            on_result(self.worker.process(unit, progress, step))

    def close(self) -> None:
        return None


def make_executor(kind: str, *, address: str | None = None, workers: int | None = None) -> Executor | None:
    """None for ``local`` (the driver makes its own, around its worker); a connected ``RayExecutor`` for ``ray``."""
    if kind == "local":
        return None
    if kind != "ray":
        raise ValueError(f"unknown executor {kind!r}")
    return RayExecutor(address, workers=workers)


class _ShippedWorker(Worker):
    """A worker whose examples come from the driver (through Ray's object store), never from files."""

    def __init__(self, config: RunConfig) -> None:
        super().__init__(config)
        self.shipped: dict[str, dict[str, Example]] | None = None

    def examples(self, task: TaskConfig) -> dict[str, Example]:
        if self.shipped is None:
            raise RuntimeError("the driver has not shipped this worker's examples yet")
        return self.shipped[task.key]


class UnitActor:
    """The body of one Ray actor: one worker process, one ``Worker``, units one after another.

    The examples come with each call as a reference into the object store (fetched once per process), not
    as a constructor argument, so an actor that Ray restarts needs nothing but its config.
    """

    def __init__(self, config: dict[str, Any], env: dict[str, str], driver_node: str) -> None:
        import ray

        if ray.get_runtime_context().get_node_id() == driver_node:
            os.environ.update(env)
        self.worker = _ShippedWorker(parse_config(config, "<driver config>"))

    def prepare(self) -> int:
        """Build every grid point's reader and compressor now (so a bad parameter surfaces before any unit)."""
        for point in self.worker.grid:
            self.worker.compressor(point)
        return os.getpid()

    def pid(self) -> int:
        return os.getpid()

    def process(self, unit: WorkUnit, examples: list[Any]) -> UnitResult:
        """``examples``: ``[ref]``, a one-item list so Ray hands over the reference, not the value."""
        if self.worker.shipped is None:
            import ray

            self.worker.shipped = ray.get(examples[0])
        return self.worker.process(unit)


class RayExecutor:
    """Units on a pool of Ray actors (see the module docstring).

    ``workers``: actors (default: the CPUs of the local instance or of the
    cluster, divided by ``cpus_per_worker``).  ``depth``: units queued per
    actor, so an actor never waits for the driver to write.
    """

    def __init__(self, address: str | None = None, *, workers: int | None = None, cpus_per_worker: float = 1.0,
                 gpus_per_worker: float = 0.0, max_restarts: int = 2, max_resubmits: int = 3, depth: int = 2,
                 progress: bool = True) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self._ray = import_ray()
        self.address = address
        self.cpus_per_worker, self.gpus_per_worker = cpus_per_worker, gpus_per_worker
        self.max_restarts, self.max_resubmits, self.depth = max_restarts, max_resubmits, max(1, depth)
        self.progress = progress
        self._owns_ray = connect(address, workers)
        self.workers = workers or self._default_workers()
        self.actors: list[Any] = []
        self.resubmitted = 0
        self._source: Worker | None = None
        self._shipped_for: str | None = None
        self._examples_ref: Any = None
        self._actor_class: Any = None
        self.pids: list[int] = []  # each actor's process id after it was prepared

    def _default_workers(self) -> int:
        cpus = self._ray.cluster_resources().get("CPU", 1.0)
        return max(1, int(cpus // max(self.cpus_per_worker, 1e-9)))

    # -- examples -------------------------------------------------------------------------
    def share_examples(self, worker: Worker) -> None:
        """Use the driver's worker (the runner's) as the source of examples, so they are loaded once."""
        self._source = worker

    def _put_examples(self, config: RunConfig) -> Any:
        key = canonical_json(config.model_dump(mode="json"))
        if self._shipped_for != key:
            source = self._source if self._source is not None and self._source.config == config else Worker(config)
            examples = {task.key: source.examples(task) for task in config.tasks}
            self._examples_ref, self._shipped_for = self._ray.put(examples), key
            self._close_actors()  # actors of another config hold another grid
        return self._examples_ref

    # -- actors -----------------------------------------------------------------------
    def _new_actor(self, config: RunConfig) -> Any:
        ray = self._ray
        if self._actor_class is None:
            self._actor_class = ray.remote(UnitActor)
        remote = self._actor_class.options(
            num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker, max_restarts=self.max_restarts,
            max_task_retries=self.max_restarts if self.max_restarts else 0,
        )
        env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        driver_node = ray.get_runtime_context().get_node_id()
        return remote.remote(config.model_dump(mode="json"), env, driver_node)

    def _start_actors(self, config: RunConfig, n: int) -> None:
        self._put_examples(config)
        while len(self.actors) < n:
            self.actors.append(self._new_actor(config))
        self.pids = self._get_all([actor.prepare.remote() for actor in self.actors])

    def start(self, config: RunConfig, units: int | None = None) -> None:
        """Ship the examples and start and prepare the actors now (``run`` does it when not done yet), e.g. to
        fail early on a bad parameter or to time a grid without its start-up."""
        self._start_actors(config, min(self.workers, units) if units else self.workers)

    def worker_pids(self) -> list[int]:
        """The process id of each actor (for fault tests and diagnostics)."""
        return self._get_all([actor.pid.remote() for actor in self.actors])

    def _get_all(self, refs: list[Any]) -> list[Any]:
        try:
            return self._ray.get(refs)
        except self._ray.exceptions.RayTaskError as err:
            raise unwrap(err) from None

    # -- the protocol -----------------------------------------------------------------
    def run(self, config: RunConfig, units: Sequence[WorkUnit], on_result: Callable[[UnitResult], None],
            progress: ProgressFn, step: StepFn) -> None:
        if not units:
            return
        self._start_actors(config, min(self.workers, len(units)))
        queue = WorkQueue(self._ray, self.actors, lambda actor, unit: actor.process.remote(unit, [self._examples_ref]),
                          depth=self.depth)
        resubmits: dict[WorkUnit, int] = {}
        failed_examples = [0]
        errors: list[BaseException] = []

        def lost(unit: WorkUnit, slot: int, actor: Any, err: BaseException) -> bool:
            """Ray gave up on this actor (restarts spent): a fresh one takes its place and the unit again."""
            resubmits[unit] = resubmits.get(unit, 0) + 1
            if resubmits[unit] > self.max_resubmits:
                said = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                errors.append(RuntimeError(f"a unit of {len(unit.ids)} example(s) lost its Ray worker "
                                           f"{resubmits[unit]} times; last: {said}"))
                return False
            self.resubmitted += 1
            if self.actors[slot] is actor:  # the first of its units to report the death replaces it
                self._replace_actor(config, slot)
            return True

        with progress_bar(len(units), "units", unit="unit", enabled=self.progress, leave=False, position=1) as bar:
            def done(unit: WorkUnit, result: UnitResult) -> None:
                on_result(result)
                failed_examples[0] += len(result.failures)
                progress(len(unit.ids))
                bar.update(1)

            def status(in_flight: int) -> None:
                bar.set_postfix_str(f"{in_flight} in flight, {failed_examples[0]} failed examples"
                                    + (f", {self.resubmitted} resubmitted" if self.resubmitted else ""), refresh=True)

            queue.run(units, done, on_error=lambda _unit, err: errors.append(err), on_lost=lost, before_wait=status)
        if errors:
            raise errors[0]

    def _replace_actor(self, config: RunConfig, slot: int) -> None:
        old = self.actors[slot]
        try:
            self._ray.kill(old, no_restart=True)
        except Exception:  # already gone
            pass
        self.actors[slot] = self._new_actor(config)
        self.pids[slot] = self._get_all([self.actors[slot].prepare.remote()])[0]

    def _close_actors(self) -> None:
        kill_actors(self._ray, self.actors)
        self.actors = []

    def close(self) -> None:
        if self._ray.is_initialized():
            self._close_actors()
            if self._owns_ray:
                self._ray.shutdown()
        self._owns_ray = False


__all__ = ["Executor", "LocalExecutor", "make_executor", "RayExecutor", "UnitActor"]

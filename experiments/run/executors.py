"""Where units run: here (``LocalExecutor``), or on a Ray pool (``experiments.run.ray_executor.RayExecutor``).

An executor carries units out and hands each result to the driver's
``on_result``, which writes it; it never writes itself.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from experiments.run.config import RunConfig
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
    from experiments.run.ray_executor import RayExecutor

    return RayExecutor(address, workers=workers)


__all__ = ["Executor", "LocalExecutor", "make_executor"]

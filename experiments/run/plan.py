"""Before a run: check every component of the grid, cut the work into units, and ``--dry-run=exact``.

The checks run before anything is written or loaded, so a typo in a config
costs seconds, not a model load: every task, metric, compressor, retriever and
reader the grid names is resolved, and every parameter is checked by name and
value (nested sections too; ``core.checks``).  ``--dry-run=exact``
(:func:`dry_run`) builds everything, models included, and counts cache hits;
the fast ``--dry-run``, which loads no model, is ``experiments.run.estimate``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compressors.registry import COMPRESSORS, INJECTED, uses_reader
from core.errors import ExampleFailure, UserError
from core.progress import progress_bar
from experiments.data.records import RecordKey
from experiments.data.sources import DataError
from experiments.run.config import RunConfig
from experiments.run.estimate import PlanRow, kept_sizing
from experiments.run.examples import task_spec
from experiments.run.grid import GridPoint
from experiments.run.worker import Worker, WorkUnit, prompt_options
from experiments.scoring.registry import get_metric
from experiments.tasks.prompts import build_request
from readers.registry import READERS
from retrievers.registry import RETRIEVERS


def check_components(config: RunConfig, grid: list[GridPoint]) -> None:
    """Resolve every task, metric, compressor, retriever and reader the grid names and check every parameter."""
    for task in config.tasks:
        get_metric(task_spec(task).metric)
        if task.open_domain is not None:
            RETRIEVERS.check(task.open_domain.retriever.spec, where=f"task {task.key!r} open_domain")
        if task.sweep is not None and task.sweep.distractors is not None:
            RETRIEVERS.check(task.sweep.distractors.retriever.spec, where=f"task {task.key!r} distractors")
    for spec in {p.compressor.model_dump_json(): p.compressor for p in grid}.values():
        COMPRESSORS.check(spec.spec, injected=INJECTED)
    for point in grid:  # the budget hook: a budget only where one is taken, and a size where none is given
        COMPRESSORS.get(point.compressor.name).check_budget(point.compressor.params, point.budget is not None,
                                                            what=f"compressor {point.compressor.name!r}")
    for spec in {p.reader.model_dump_json(): p.reader for p in grid}.values():
        READERS.check(spec.spec)


def check_data_files(config: RunConfig) -> None:
    """Every task's file is there (a data name resolves here): one line before any model loads."""
    for task in config.tasks:
        source = task.file
        if source is not None and not Path(source).exists():
            raise DataError(source, None, None, "file not found")


def check_key_files(sections: Any, run_dir: Path) -> None:
    """Refuse an ``api_key_file`` inside the run directory: that folder is shared, attached to papers, synced."""
    inside = Path(run_dir).resolve()
    stack = [sections.model_dump() if hasattr(sections, "model_dump") else sections]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            path = node.get("api_key_file")
            if isinstance(path, str) and "\x00" in path:
                raise UserError(f"api_key_file {path!r} holds a NUL character, which no file name can")
            if isinstance(path, (str, Path)) and Path(path).expanduser().resolve().is_relative_to(inside):
                raise UserError(f"api_key_file {path} lies inside the run directory {run_dir}; keep keys outside "
                                "the folders a run writes (they get shared), or use api_key_env")
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)


def pending_units(worker: Worker, done: set[RecordKey],
                  only: Callable[[str, str], bool] | None = None) -> tuple[list[WorkUnit], int]:
    """Units still to do, in grid order, and how many examples are already done; ``only(task key, config
    hash)`` keeps the cells a growing run still reads (``experiments.design.grow``)."""
    units, already = [], 0
    batch = worker.config.batch_size
    for pi, point in enumerate(worker.grid):
        for ti, task in enumerate(worker.config.tasks):
            if not point.compressor.applies_to(task.key):
                continue
            if only is not None and not only(task.key, point.config_hash):
                continue
            examples = worker.examples(task)
            ids = [ex_id for ex_id in examples if (task.key, ex_id, point.config_hash) not in done]
            already += len(examples) - len(ids)
            for lo in range(0, len(ids), batch):
                units.append(WorkUnit(pi, ti, tuple(ids[lo: lo + batch])))
    return units, already


@dataclass
class PlannedPoint(PlanRow):
    """A row of ``--dry-run=exact``: how much work is left after cache hits."""

    cache_hits: int
    prompt_tokens: int
    exact: bool  # False: prompts depend on model calls (summaries), so calls and tokens are upper-bound estimates
    summarizer_calls: int = 0
    texts_encoded: int = 0  # embeddings this point computed during planning (cached ones are free)


def dry_run(worker: Worker, done: set[RecordKey], *, progress: bool = True) -> list[PlannedPoint]:
    """The work left per (task, grid point): reader calls after cache hits, and prompt tokens (``--dry-run=exact``).

    Builds readers and compressors (models load) and compresses pending
    examples, which fills the embedding cache for the real run; a bar counts
    the examples and names the cell.  Where a compressor itself calls a model
    (summaries), prompts cannot be known in advance: calls and tokens are then
    estimates (the distinct model calls the compressor's ``sizing`` names, a summary
    per chunk; full-context tokens as an upper bound).
    """
    with progress_bar(0, "dry run", enabled=progress) as bar:
        return _dry_run(worker, done, bar)


def _dry_run(worker: Worker, done: set[RecordKey], bar: Any) -> list[PlannedPoint]:
    rows = []
    for point in worker.grid:
        reader, compressor = worker.reader(point), worker.compressor(point)
        needs_model = uses_reader(type(compressor))
        labels = worker.labels(point)
        for task in worker.config.tasks:
            if not point.compressor.applies_to(task.key):
                continue
            spec, options = task_spec(task), prompt_options(task)
            exs = list(worker.examples(task).values())
            pending = [ex for ex in exs if (task.key, ex.id, point.config_hash) not in done]
            hits, tokens = 0, 0
            model_calls: set[Any] = set()  # what the compressor's own sizing names, each distinct call once
            encoded_before = compressor.encoded_texts()
            bar.total += len(pending)
            bar.set_description(f"dry run: {task.key} | {labels[0]} | {labels[1]}"[:70], refresh=False)
            for ex in pending:
                bar.update(1)
                if needs_model:
                    context = reader.count_tokens(ex.context)
                    tokens += context + reader.count_tokens(ex.query)
                    model_calls.update(kept_sizing(point, compressor, ex, context).model_calls)
                    continue
                try:
                    request = build_request(spec, worker.compress(point, compressor, ex)[0], ex, options)
                except ExampleFailure:
                    continue  # the run will record it as failed
                hits += reader.is_cached(request)
                tokens += reader.count_tokens(request.prompt)
            rows.append(PlannedPoint(
                task=task.key, compressor=labels[0], reader=labels[1], config_hash=point.config_hash,
                examples=len(exs), pending=len(pending), reader_calls=len(pending) - hits, cache_hits=hits,
                prompt_tokens=tokens, exact=not needs_model, summarizer_calls=len(model_calls),
                texts_encoded=compressor.encoded_texts() - encoded_before,
            ))
    return rows


__all__ = ["PlannedPoint", "check_components", "dry_run", "pending_units"]

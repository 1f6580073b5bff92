"""The runner: tasks x compressors x readers, append-only predictions, resumable after a kill, one writer.

Work is cut into units (one grid point, one task, a batch of examples).  A
``Worker`` turns a unit into records -- it compresses, prompts, reads and
scores, and writes nothing -- and the driver (``Runner``) is the single writer
of the run directory, whatever executor carried the unit out.  Every
prediction line is keyed by (task, example id, config hash); a resumed run
skips keys already recorded, retries those that failed, and reuses the
generation cache, so no completed model call is made twice.

What is an example failure and what is a bug: a ``CompressionError`` (a
compressor that could not produce a context for this example), a
``TransientError`` (a remote service that kept failing) and a generation
with ``error`` set are recorded in ``failures.jsonl`` and retried on
``--resume``.  Anything else stops the run with its traceback, after every
finished record has been written.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from compressors.base import CompressedContext, CompressionError, Compressor
from compressors.registry import COMPRESSORS, INJECTED, make_compressor, uses_reader
from core.errors import TransientError, UserError
from core.files import write_atomic
from experiments.data.records import Example
from experiments.data.store import CONFIG, FAILURES, GRID, LOCK, PREDICTIONS, TRACES, JsonlLog, record_key
from experiments.run.config import GridPoint, RunConfig, TaskConfig, canonical_json, dump_config, expand_grid
from experiments.run.examples import load_task_examples, task_spec
from experiments.scoring.registry import get_metric, score_item
from experiments.tasks.prompts import PromptOptions, build_request
from experiments.tasks.specs import TaskSpec
from indexes.text import has_answer
from readers.base import Generation, GenerationRequest, Reader
from readers.cache import CachedReader
from readers.registry import READERS, make_reader


class RunDirError(UserError):
    """The run directory is missing, or exists where a new run was asked for, or another process writes it."""


# -- checks -------------------------------------------------------------------------


def check_components(config: RunConfig) -> None:
    """Resolve every task, metric, compressor, retriever and reader the grid names and check every parameter
    (nested sections too), before anything is written or loaded, so a typo costs seconds, not a model load."""
    from retrievers.registry import RETRIEVERS

    for task in config.tasks:
        spec = task_spec(task)
        get_metric(spec.metric)
        if task.open_domain is not None:
            RETRIEVERS.check(task.open_domain.retriever.spec, where=f"task {task.key!r} open_domain")
        if task.sweep is not None and task.sweep.distractors is not None:
            RETRIEVERS.check(task.sweep.distractors.retriever.spec, where=f"task {task.key!r} distractors")
    for point in expand_grid(config):
        COMPRESSORS.check(point.compressor.spec, injected=INJECTED)
        READERS.check(point.reader.spec)
        reader_cls = READERS.get(point.reader.name)
        if hasattr(reader_cls, "check_config"):  # value checks that need no model (a fleet's base_urls)
            reader_cls.check_config(**point.reader.params)


# -- records ------------------------------------------------------------------------


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def _finite(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else value


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


@dataclass(frozen=True)
class WorkUnit:
    """One grid point (index into the grid), one task (index into the config), a batch of example ids."""

    point: int
    task: int
    ids: tuple[str, ...]


@dataclass
class UnitResult:
    """Everything a unit produced; the driver writes it (prompts, traces, predictions, failures)."""

    unit: WorkUnit
    predictions: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    traces: list[dict[str, Any]] = field(default_factory=list)
    prompts: dict[str, str] = field(default_factory=dict)
    model_calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    compressor_model_calls: int = 0


ProgressFn = Callable[[int], None]
StepFn = Callable[[int, int], None]


class Worker:
    """Builds readers and compressors once per grid point and turns units into records; writes nothing.

    One worker lives in the driver for the local executor and one per
    process (a Ray actor) for distributed executors, so heavy models load
    once per process, not once per unit.
    """

    def __init__(self, config: RunConfig, *, reader_factory: Callable[..., Reader] = make_reader,
                 progress: bool = False) -> None:
        self.config = config
        self.grid = expand_grid(config)
        self._reader_factory = reader_factory
        self._progress = progress
        self._examples: dict[str, dict[str, Example]] = {}
        self._readers: dict[str, CachedReader] = {}
        self._compressors: dict[str, Compressor] = {}

    # -- components ------------------------------------------------------------
    def examples(self, task: TaskConfig) -> dict[str, Example]:
        """The task's examples by id, in order (loaded once per worker)."""
        key = canonical_json(task.model_dump(mode="json"))
        if key not in self._examples:
            examples = load_task_examples(task, progress=self._progress)
            by_id: dict[str, Example] = {}
            for ex in examples:
                if ex.id in by_id:
                    raise UserError(f"task {task.key!r}: example id {ex.id!r} occurs twice ({ex.source})")
                by_id[ex.id] = ex
            self._examples[key] = by_id
        return self._examples[key]

    def reader(self, point: GridPoint) -> CachedReader:
        """The point's reader, built once per reader section and wrapped in the generation cache."""
        key = point.reader.model_dump_json()
        if key not in self._readers:
            self._readers[key] = CachedReader(self._reader_factory(point.reader.name, **point.reader.params))
        return self._readers[key]

    def compressor(self, point: GridPoint) -> Compressor:
        key = point.config_hash
        if key not in self._compressors:
            reader = self.reader(point)
            self._compressors[key] = make_compressor(point.compressor.spec, tokenizer=reader.tokenizer, reader=reader)
        return self._compressors[key]

    def labels(self, point: GridPoint) -> tuple[str, str]:
        """(compressor, reader) row labels: the config's ``label`` when given, else the component's own ``label``."""
        compressor = point.compressor.label or self.compressor(point).label
        reader = point.reader.label or self.reader(point).label
        return compressor, reader

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
        self._compressors.clear()

    # -- one unit --------------------------------------------------------------
    def process(self, unit: WorkUnit, progress: ProgressFn | None = None, step: StepFn | None = None) -> UnitResult:
        point, task = self.grid[unit.point], self.config.tasks[unit.task]
        spec = task_spec(task)
        options = PromptOptions(task.query_aware, task.length_instruction, task.max_new_tokens)
        by_id = self.examples(task)
        reader, compressor = self.reader(point), self.compressor(point)
        labels = self.labels(point)
        result = UnitResult(unit)
        staged: list[tuple[Example, CompressedContext, GenerationRequest, float]] = []
        for ex in (by_id[i] for i in unit.ids):
            t0 = time.perf_counter()
            try:
                compressed = compressor.compress(ex)
            except (CompressionError, TransientError) as err:  # recorded, retried on --resume; never scored
                result.failures.append(_failure(point, task, ex, labels, "compress", err))
                if progress is not None:
                    progress(1)
                continue
            staged.append((ex, compressed, build_request(spec, compressed, ex, options), time.perf_counter() - t0))
            result.compressor_model_calls += compressed.model_calls
        # summaries count in the cache's hits/misses too; only the reader's own calls below are reported as reads
        hits1, misses1 = reader.hits, reader.misses
        if staged:
            with reader.reporting(progress, step):
                generations = reader.generate([request for _, _, request, _ in staged])
            if len(generations) != len(staged):
                raise RuntimeError(f"reader {reader!r} returned {len(generations)} generations for {len(staged)} requests")
            for (ex, compressed, request, compress_s), gen in zip(staged, generations):
                result.retries += gen.retries
                if not gen.ok:
                    result.failures.append(_failure(point, task, ex, labels, "generate", gen.error or "unknown error",
                                                    retries=gen.retries))
                    continue
                self._record(result, point, task, spec, ex, labels, compressed, request, compress_s, gen)
        result.cache_hits = reader.hits - hits1
        result.model_calls = reader.misses - misses1
        return result

    def _record(self, result: UnitResult, point: GridPoint, task: TaskConfig, spec: TaskSpec, ex: Example,
                labels: tuple[str, str], compressed: CompressedContext, request: GenerationRequest, compress_s: float,
                gen: Generation) -> None:
        phash = prompt_hash(request.prompt)
        if self.config.save_prompts:
            result.prompts[phash] = request.prompt if request.system is None else f"[system]\n{request.system}\n[user]\n{request.prompt}"
        scored = score_item(gen.text, ex.answers, metric=spec.metric, all_classes=ex.all_classes,
                            first_line_only=spec.first_line_only)
        meta = {k: v for k, v in ex.meta.items() if isinstance(v, (str, int, float, bool)) or v is None}
        identity = _identity_fields(point, task, ex, labels)
        record = {
            **identity,
            "query": ex.query,
            "prompt_hash": phash,
            "prediction": gen.text,
            "answers": list(ex.answers),
            "metric": spec.metric,
            "score": scored.value,
            "answer_in_context": has_answer(compressed.text, ex.answers) if ex.answers else None,
            "length": ex.length,
            "tokens_in": compressed.tokens_in,
            "tokens_out": compressed.tokens_out,
            "reader_tokens_in": gen.tokens_in,
            "reader_tokens_out": gen.tokens_out,
            "truncated": gen.truncated,
            # a cached generation reports the latency and cost of the model call that made it,
            # so a config's figures do not depend on what an earlier run left in the cache
            "latency_s": round(gen.meta.get("cached_latency_s", gen.latency_s) if gen.cached else gen.latency_s, 4),
            "compress_s": round(compress_s, 4),
            "cost_usd": round((gen.meta.get("cached_cost_usd", 0.0) if gen.cached else gen.cost_usd) + compressed.cost_usd, 6),
            "cached": gen.cached,
            "retries": gen.retries,
            "kept_chunks": list(compressed.kept_chunks),
            "chunk_scores": [None if _finite(s) is None else round(s, 4) for s in compressed.scores],
            "meta": meta,
            "source": ex.source,
        }
        if scored.parts:
            record["score_parts"] = dict(scored.parts)
        result.predictions.append(record)
        result.traces.append({**identity, "compressor_identity": self.compressor(point).identity,
                              "kept_chunks": list(compressed.kept_chunks), "trace": compressed.trace})


def _identity_fields(point: GridPoint, task: TaskConfig, ex: Example, labels: tuple[str, str]) -> dict[str, str]:
    """The fields that key a prediction, failure or trace line and name it in reports."""
    return {
        "task": task.key,
        "spec": task.name,
        "id": ex.id,
        "config_hash": point.config_hash,
        "compressor": labels[0],
        "compressor_kind": point.compressor.name,
        "reader": labels[1],
    }


def _failure(point: GridPoint, task: TaskConfig, ex: Example, labels: tuple[str, str], stage: str,
             err: BaseException | str, retries: int = 0) -> dict[str, Any]:
    reason = f"{type(err).__name__}: {err}" if isinstance(err, BaseException) else str(err)
    return {**_identity_fields(point, task, ex, labels), "stage": stage, "reason": reason[:2000],
            "retries": retries, "time": time.time()}


# -- executors --------------------------------------------------------------------------


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


# -- the driver -------------------------------------------------------------------------


@dataclass
class PlannedPoint:
    """One (task, grid point) with how much work is left, for ``--dry-run``."""

    task: str
    compressor: str
    reader: str
    config_hash: str
    examples: int
    pending: int
    reader_calls: int
    cache_hits: int
    prompt_tokens: int
    exact: bool  # False: prompts depend on model calls (summaries), so calls and tokens are upper-bound estimates
    summarizer_calls: int = 0
    texts_encoded: int = 0  # embeddings this point computed during planning (cached ones are free)


class Runner:
    """The driver: plans units, hands them to an executor, and is the only writer of the run directory."""

    def __init__(self, config: RunConfig, run_dir: str | Path, *, progress: bool = True,
                 reader_factory: Callable[..., Reader] = make_reader, executor: Executor | None = None) -> None:
        check_components(config)
        self.config = config
        self.run_dir = Path(run_dir)
        self.progress = progress
        self.grid = expand_grid(config)
        self.worker = Worker(config, reader_factory=reader_factory, progress=progress)
        self.executor: Executor = executor or LocalExecutor(self.worker)
        self.predictions = JsonlLog(self.run_dir / PREDICTIONS)
        self.failures = JsonlLog(self.run_dir / FAILURES)
        self.traces = JsonlLog(self.run_dir / TRACES)
        self.stats = RunStats()

    # -- setup ------------------------------------------------------------------
    @classmethod
    def create(cls, config: RunConfig, run_dir: str | Path, **kw: Any) -> "Runner":
        run_dir = Path(run_dir)
        runner = cls(config, run_dir, **kw)  # checks every component before anything is written
        if (run_dir / PREDICTIONS).exists():
            raise RunDirError(f"{run_dir} already holds a run; continue it with `ctxcomp run --resume {run_dir}`")
        run_dir.mkdir(parents=True, exist_ok=True)
        dump_config(config, run_dir / CONFIG)
        write_atomic(run_dir / GRID, json.dumps(grid_manifest(config), indent=2, ensure_ascii=False))
        return runner

    @classmethod
    def resume(cls, run_dir: str | Path, **kw: Any) -> "Runner":
        from experiments.run.config import load_config

        run_dir = Path(run_dir)
        if not (run_dir / CONFIG).is_file():
            raise RunDirError(f"{run_dir} is not a run directory (no {CONFIG})")
        config = load_config(run_dir / CONFIG)
        if not (run_dir / GRID).is_file():  # written by every run since the manifest exists
            write_atomic(run_dir / GRID, json.dumps(grid_manifest(config), indent=2, ensure_ascii=False))
        return cls(config, run_dir, **kw)

    def update_contrasts(self, config: RunConfig) -> None:
        """Take the planned contrasts of ``config`` (same predictions otherwise) into the run directory."""
        if not self.config.same_run(config):
            raise RunDirError(f"{self.run_dir}: only contrasts may change on a run that exists")
        self.config = config
        dump_config(config, self.run_dir / CONFIG)
        write_atomic(self.run_dir / GRID, json.dumps(grid_manifest(config), indent=2, ensure_ascii=False))

    def examples(self, task: TaskConfig) -> list[Example]:
        return list(self.worker.examples(task).values())

    def done_keys(self) -> set[tuple[str, str, str]]:
        return {record_key(r) for r in self.predictions.recover()}

    def close(self) -> None:
        self.executor.close()
        self.worker.close()

    # -- planning -------------------------------------------------------------------
    def pending_units(self, done: set[tuple[str, str, str]]) -> tuple[list[WorkUnit], int]:
        """Units still to do, in grid order, and how many examples are already done."""
        units, already = [], 0
        for pi, point in enumerate(self.grid):
            for ti, task in enumerate(self.config.tasks):
                if not point.compressor.applies_to(task.key):
                    continue
                ids = [ex_id for ex_id in self.worker.examples(task) if (task.key, ex_id, point.config_hash) not in done]
                already += len(self.worker.examples(task)) - len(ids)
                for lo in range(0, len(ids), self.config.batch_size):
                    units.append(WorkUnit(pi, ti, tuple(ids[lo: lo + self.config.batch_size])))
        return units, already

    def plan(self) -> list[PlannedPoint]:
        """The work left per (task, grid point): reader calls after cache hits, and prompt tokens.

        Builds readers and compressors (models load) and compresses pending
        examples, which fills the embedding cache for the real run.  Where a
        compressor itself calls a model (summaries), prompts cannot be known
        in advance: calls and tokens are then estimates (one summary call per
        chunk of ``chunk_size`` words, full-context tokens as an upper bound).
        """
        done = self.done_keys()
        rows = []
        for point in self.grid:
            reader, compressor = self.worker.reader(point), self.worker.compressor(point)
            needs_model = uses_reader(type(compressor))
            labels = self.worker.labels(point)
            for task in self.config.tasks:
                if not point.compressor.applies_to(task.key):
                    continue
                spec = task_spec(task)
                options = PromptOptions(task.query_aware, task.length_instruction, task.max_new_tokens)
                exs = self.examples(task)
                pending = [ex for ex in exs if (task.key, ex.id, point.config_hash) not in done]
                hits, tokens, summaries = 0, 0, 0
                encoded_before = compressor.encoded_texts()
                for ex in pending:
                    if needs_model:
                        tokens += reader.count_tokens(ex.context) + reader.count_tokens(ex.query)
                        summaries += -(-reader.count_tokens(ex.context) // int(point.compressor.params.get("chunk_size", 500)))
                        continue
                    try:
                        request = build_request(spec, compressor.compress(ex), ex, options)
                    except (CompressionError, TransientError):
                        continue  # the run will record it as failed
                    hits += reader.is_cached(request)
                    tokens += reader.count_tokens(request.prompt)
                rows.append(PlannedPoint(
                    task=task.key, compressor=labels[0], reader=labels[1], config_hash=point.config_hash,
                    examples=len(exs), pending=len(pending), reader_calls=len(pending) - hits, cache_hits=hits,
                    prompt_tokens=tokens, exact=not needs_model, summarizer_calls=summaries,
                    texts_encoded=compressor.encoded_texts() - encoded_before,
                ))
        return rows

    # -- running --------------------------------------------------------------------
    def run(self) -> RunStats:
        with exclusive(self.run_dir):
            return self._run()

    def _run(self) -> RunStats:
        start = time.perf_counter()
        self.stats = RunStats()
        units, already = self.pending_units(self.done_keys())
        self.stats.already_done = already
        self.stats.examples = already + sum(len(u.ids) for u in units)
        bar = _progress(self.stats.examples, self.progress, "predict")
        bar.update(already)

        def step(done: int, total: int) -> None:
            bar.set_postfix_str(f"generating token {done}/{total}", refresh=False)

        def write(result: UnitResult) -> None:
            self._write(result)
            bar.set_description(self._bar_text[:70], refresh=False)
            bar.set_postfix_str("", refresh=False)

        self._bar_text = "predict"
        try:
            self.executor.run(self.config, units, write, bar.update, step)
        finally:
            bar.close()
            self.stats.wall_s = round(time.perf_counter() - start, 3)
        return self.stats

    def _write(self, result: UnitResult) -> None:
        """Write one unit's records: prompts and traces first, then the prediction lines that commit them."""
        if result.predictions or result.failures:
            head = (result.predictions or result.failures)[0]
            self._bar_text = f"{head['task']} | {head['compressor']} | {head['reader']}"
        for phash, prompt in result.prompts.items():
            path = self.run_dir / "prompts" / phash[:2] / f"{phash}.txt"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(path, prompt)
        for trace in result.traces:
            self.traces.append(trace)
        for record in result.predictions:
            self.predictions.append(record)
        for failure in result.failures:
            self.failures.append(failure)
            kind = failure["reason"].split(":", 1)[0][:80]
            self.stats.failures_by_reason[kind] = self.stats.failures_by_reason.get(kind, 0) + 1
        self.stats.predicted += len(result.predictions)
        self.stats.failed += len(result.failures)
        self.stats.model_calls += result.model_calls
        self.stats.cache_hits += result.cache_hits
        self.stats.retries += result.retries
        self.stats.compressor_model_calls += result.compressor_model_calls


def grid_manifest(config: RunConfig) -> dict[str, Any]:
    """The run's grid in config order (reports list rows in this order) with each point's sections."""
    return {
        "tasks": [{"key": t.key, "name": t.name} for t in config.tasks],
        "points": [
            {"config_hash": p.config_hash, "compressor": p.compressor.model_dump(mode="json", exclude={"zip"}),
             "reader": p.reader.model_dump(mode="json", exclude={"zip"})}
            for p in expand_grid(config)
        ],
        "contrasts": [c.model_dump(mode="json") for c in config.contrasts],
    }


@contextmanager
def exclusive(run_dir: Path) -> Iterator[None]:
    """One writer per run directory: a second ``ctxcomp run --resume`` on the same folder would duplicate lines.

    The lock goes with the file handle, also when the process is killed; the
    ``.lock`` file itself is removed on every exit this process sees (Ctrl-C included).
    """
    import fcntl

    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK
    with open(path, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(f"{run_dir} is being written by another ctxcomp process; wait for it or stop it") from None
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


def _progress(total: int, enabled: bool, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="ex", disable=not enabled or bool(os.environ.get("CTXCOMP_NO_PROGRESS")))

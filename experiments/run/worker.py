"""The worker: turns one unit of work (a grid point, a task, a batch of examples) into records, and writes nothing.

It compresses each example, builds the task's prompt, reads, and scores.  One
worker lives in the driver for the local executor and one per process (a Ray
actor) for distributed executors, so heavy models load once per process, not
once per unit.

What is an example failure and what is a bug: an ``ExampleFailure`` (a
compressor that could not produce a context for this example, a remote
service that kept failing, a request a server rejected) and a generation with
``error`` set become ``Failure`` records; anything else propagates and stops
the run.

Timing: a latency comes from the run that measured it.  A generation or a
compressor's model work that a cache served reports the time it took when it
was made (``cached_latency_s``, ``ModelWork.cached_model_s``), never the near-zero
time of the cache hit, so a config's cost account does not depend on what an
earlier run left in the cache.
"""
from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from compressors.base import CompressedContext, Compressor
from compressors.cache import CompressionCache, compression_key
from compressors.registry import make_compressor
from core.caches import LEDGER, CacheUse
from core.errors import ExampleFailure, UserError
from experiments.data.records import Example, Failure, Prediction, Trace, budget_row_label
from experiments.run.config import RunConfig
from experiments.run.examples import load_task_examples, task_spec
from experiments.run.grid import GridPoint, canonical_json, expand_grid
from experiments.run.sections import TaskConfig
from experiments.scoring.registry import score_item
from experiments.tasks.prompts import PromptOptions, build_followup_request, build_request
from experiments.tasks.specs import TaskSpec
from indexes.text import has_answer
from readers.base import Generation, GenerationRequest, Reader
from readers.cache import CachedReader
from readers.registry import make_reader
from readers.truncation import prompt_budget

ProgressFn = Callable[[int], None]
StepFn = Callable[[int, int], None]


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
    predictions: list[Prediction] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    traces: list[Trace] = field(default_factory=list)
    prompts: dict[str, str] = field(default_factory=dict)
    model_calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    compressor_model_calls: int = 0
    # the cache entries this unit read or wrote, by cache folder (core.caches), for `ctxcomp cache --run`
    cache_keys: list[CacheUse] = field(default_factory=list)


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def prompt_options(task: TaskConfig) -> PromptOptions:
    return PromptOptions(task.query_aware, task.length_instruction, task.max_new_tokens)


class Worker:
    """Builds readers and compressors once per grid point and turns units into records (see the module docstring).

    ``grid``: the run's grid, expanded once by the driver; a worker in another process expands its own.
    ``shards``: how open-domain tasks index a dense corpus (``experiments.run.sharding``); None: as always.
    """

    def __init__(self, config: RunConfig, grid: list[GridPoint] | None = None, *,
                 reader_factory: Callable[..., Reader] = make_reader, progress: bool = False,
                 shards: object | None = None) -> None:
        self.config = config
        self.grid = grid if grid is not None else expand_grid(config)
        self._reader_factory = reader_factory
        self._progress = progress
        self._shards = shards
        self._examples: dict[str, dict[str, Example]] = {}
        self._readers: dict[str, CachedReader] = {}
        self._compressors: dict[str, Compressor] = {}
        self._compressions: CompressionCache | None = None  # opened on first use, in the process that runs units
        self._kept: dict[str, bool] = {}
        LEDGER.start(self)  # the caches note the keys this worker's units use; each unit takes its own

    # -- components ------------------------------------------------------------
    def examples(self, task: TaskConfig) -> dict[str, Example]:
        """The task's examples by id, in order (loaded once per worker)."""
        key = canonical_json(task.model_dump(mode="json"))
        if key not in self._examples:
            by_id: dict[str, Example] = {}
            for ex in load_task_examples(task, progress=self._progress, shards=self._shards):
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
        """(compressor, reader) row labels: the config's ``label`` when given, else the component's own ``label``;
        on a budget axis, the line's label and the budget (``truncate(middle) @512``)."""
        if point.budget is None:
            compressor = point.row_label(point.compressor.label or self.compressor(point).label)
        else:
            line = point.row_label(point.compressor.label or self.compressor(point).line_label)
            compressor = budget_row_label(line, point.budget.as_key())
        reader = point.reader.label or self.reader(point).label
        return compressor, reader

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()
        self._compressors.clear()
        LEDGER.stop(self)

    # -- one unit --------------------------------------------------------------
    def process(self, unit: WorkUnit, progress: ProgressFn | None = None, step: StepFn | None = None) -> UnitResult:
        point, task = self.grid[unit.point], self.config.tasks[unit.task]
        spec = task_spec(task)
        options = prompt_options(task)
        by_id = self.examples(task)
        reader, compressor = self.reader(point), self.compressor(point)
        keyed = _KeyFields(point, task, *self.labels(point))
        result = UnitResult(unit)
        staged: list[tuple[Example, CompressedContext, GenerationRequest, float]] = []
        for ex in (by_id[i] for i in unit.ids):
            try:
                compressed, compress_s = self.compress_kept(point, compressor, ex)
            except ExampleFailure as err:  # recorded, retried on --resume; never scored
                result.failures.append(keyed.failure(ex, "compress", err))
                if progress is not None:
                    progress(1)
                continue
            staged.append((ex, compressed, build_request(spec, compressed, ex, options), compress_s))
            result.compressor_model_calls += compressed.model_calls
        # summaries count in the cache's hits/misses too; only the reader's own calls below are reported as reads
        hits1, misses1 = reader.hits, reader.misses
        if staged:
            with reader.reporting(progress, step):
                generations = reader.generate([request for _, _, request, _ in staged])
            if len(generations) != len(staged):
                raise RuntimeError(f"reader {reader!r} returned {len(generations)} generations for {len(staged)} requests")
            generations, firsts = self._followups(reader, spec, staged, generations, result)
            for (ex, compressed, request, compress_s), gen, first in zip(staged, generations, firsts):
                result.retries += gen.retries
                if not gen.ok:
                    result.failures.append(keyed.failure(ex, "generate", gen.error or "unknown error", gen.retries))
                    continue
                # the generation that read the context: the first step's when a second step follows (CoT)
                self._record(result, keyed, spec, ex, compressor, compressed, request, compress_s, gen, first,
                             _tokens_seen(reader, compressed, request, first or gen))
        result.cache_hits = reader.hits - hits1
        result.model_calls = reader.misses - misses1
        result.cache_keys = LEDGER.take()
        return result

    def compress_kept(self, point: GridPoint, compressor: Compressor, ex: Example) -> tuple[CompressedContext, float]:
        """``compress``, each result of a compressor that calls a model kept in the compression cache the moment
        it is done (``compressors.cache``): a run killed mid-batch, resumed with any batch size, redoes none.
        A kept compression comes back with the time and model work recorded when it was made."""
        if not self._keeps(point):
            return self.compress(point, compressor, ex)
        if self._compressions is None:
            self._compressions = CompressionCache()
        section = canonical_json({"name": point.compressor.name, "params": dict(point.compressor.params)})
        key = compression_key(compressor.identity, section, self.reader(point).identity,
                              self.budget(point, compressor, ex), ex)
        kept = self._compressions.get(key)
        if kept is not None:  # every model call it made is served now: counted as hits, at the time they took
            compressed, seconds = kept
            work = compressed.work
            served = replace(work, calls=0, cache_hits=work.calls + work.cache_hits, cached_model_s=work.model_s,
                             embed_calls=0, embed_texts=0, embed_hits=work.embed_texts + work.embed_hits)
            # the time recorded when it was made, never less than its model's recorded time (a reader that
            # reports its latency counts it, as a generation the cache serves does)
            return replace(compressed, model_calls=0, work=served), max(seconds, work.model_s)
        compressed, seconds = self.compress(point, compressor, ex)
        self._compressions.put(key, compressed, seconds)
        return compressed, seconds

    def _keeps(self, point: GridPoint) -> bool:
        """Whether the point's compressor, with the sections it nests, may call a model: only such work is worth
        a cache entry (a truncation is cheaper to redo than to read back)."""
        key = point.compressor.model_dump_json()
        if key not in self._kept:
            from compressors.registry import COMPRESSORS
            from experiments.run.estimate import calls_model  # it imports this module

            self._kept[key] = calls_model(COMPRESSORS, point.compressor.spec)
        return self._kept[key]

    @staticmethod
    def budget(point: GridPoint, compressor: Compressor, ex: Example) -> int | None:
        """The point's budget for this example (a ratio's from the example's context), None without one."""
        return point.budget.for_context(compressor.count_tokens(ex.context)) if point.budget is not None else None

    @staticmethod
    def compress(point: GridPoint, compressor: Compressor, ex: Example) -> tuple[CompressedContext, float]:
        """The example compressed at the point's budget (a ratio's budget from this example's context), and the
        compressor's time: its wall time, with cache-served model work counted at the time it took when made."""
        budget = Worker.budget(point, compressor, ex)
        compressor.warm_up()  # a model that loads on first use is not this example's cost
        start = time.perf_counter()
        compressed = compressor.compress(ex) if budget is None else compressor.compress(ex, budget)
        wall = time.perf_counter() - start
        if budget is not None:
            if compressed.budget != budget:
                compressed = replace(compressed, budget=budget)
            if compressed.over_budget and compressor.budget_support == "guaranteed":
                raise RuntimeError(f"{compressor.identity} guarantees its budget but kept {compressed.tokens_out} "
                                   f"tokens of example {ex.id!r} for a budget of {budget}")  # a broken contract is a bug
        work = compressed.work
        return compressed, max(0.0, wall - work.served_s) + work.cached_model_s


    @staticmethod
    def _followups(reader: CachedReader, spec: TaskSpec, staged: list, generations: list[Generation],
                   result: UnitResult) -> tuple[list[Generation], list[Generation | None]]:
        """Two-step tasks (LongBench v2's CoT): each answered first request gets its second request, whose answer
        is the prediction; the first generation comes back beside it (its text goes to the trace)."""
        follow = [build_followup_request(spec, gen.text, ex) if gen.ok else None
                  for (ex, *_), gen in zip(staged, generations)]
        asked = [r for r in follow if r is not None]
        if not asked:
            return generations, [None] * len(generations)
        for r in asked:
            result.prompts[prompt_hash(r.prompt)] = r.prompt
        answers = iter(reader.generate(asked))
        seconds = [next(answers) if r is not None else g for r, g in zip(follow, generations)]
        return seconds, [g if r is not None else None for r, g in zip(follow, generations)]

    def _record(self, result: UnitResult, keyed: "_KeyFields", spec: TaskSpec, ex: Example, compressor: Compressor,
                compressed: CompressedContext, request: GenerationRequest, compress_s: float, gen: Generation,
                first: Generation | None = None, tokens_seen: int | None = None) -> None:
        phash = prompt_hash(request.prompt)
        if self.config.save_prompts:
            result.prompts[phash] = request.prompt if request.system is None else f"[system]\n{request.system}\n[user]\n{request.prompt}"
        scored = score_item(gen.text, ex.answers, metric=spec.metric, all_classes=ex.all_classes,
                            first_line_only=spec.first_line_only)
        work = compressed.work
        result.predictions.append(Prediction(
            **keyed.fields(ex),
            query=ex.query,
            prompt_hash=phash,
            prediction=gen.text,
            answers=list(ex.answers),
            metric=spec.metric,
            score=scored.value,
            answer_in_context=has_answer(compressed.text, ex.answers) if ex.answers else None,
            length=ex.length,
            tokens_in=compressed.tokens_in,
            tokens_out=compressed.tokens_out,
            budget=compressed.budget,
            over_budget=compressed.over_budget,
            tokens_seen=tokens_seen,
            reader_tokens_in=gen.tokens_in,
            reader_tokens_out=gen.tokens_out,
            truncated=gen.truncated,
            # a cached generation reports the latency and cost of the model call that made it,
            # so a config's figures do not depend on what an earlier run left in the cache
            latency_s=round(gen.meta.get("cached_latency_s", gen.latency_s) if gen.cached else gen.latency_s, 4),
            compress_s=round(compress_s, 4),
            compress_calls=work.calls, compress_cache_hits=work.cache_hits, compress_tokens_in=work.tokens_in,
            compress_tokens_out=work.tokens_out, compress_model_s=round(work.model_s, 4),
            embed_calls=work.embed_calls, embed_texts=work.embed_texts, embed_hits=work.embed_hits,
            cost_usd=round((gen.meta.get("cached_cost_usd", 0.0) if gen.cached else gen.cost_usd) + compressed.cost_usd, 6),
            cached=gen.cached,
            retries=gen.retries,
            kept_chunks=list(compressed.kept_chunks),
            chunk_scores=[None if not math.isfinite(s) else round(s, 4) for s in compressed.scores],
            meta={k: v for k, v in ex.meta.items() if isinstance(v, (str, int, float, bool)) or v is None},
            source=ex.source,
            score_parts=dict(scored.parts),
            cluster=ex.cluster if ex.cluster != ex.id else "",
        ))
        trace = compressed.trace if first is None else {**compressed.trace, "first_answer": first.text}
        result.traces.append(Trace(**keyed.fields(ex), compressor_identity=compressor.applied_identity(compressed.budget),
                                   kept_chunks=list(compressed.kept_chunks), trace=trace,
                                   kept_spans=None if compressed.kept_spans is None
                                   else [list(span) for span in compressed.kept_spans]))


def _tokens_seen(reader: Reader, compressed: CompressedContext, request: GenerationRequest, gen: Generation) -> int | None:
    """The kept context's tokens left after the reader's own truncation (None: it cut nothing): the prompt's
    tokens beyond the reader's prompt budget (``max_context - max_new_tokens``, less what the reader adds around
    the prompt, such as a chat template) came out of the context."""
    if not gen.truncated:
        return None
    room = prompt_budget(reader.max_context, request.max_new_tokens) - reader.prompt_overhead(request)
    cut = reader.count_tokens(request.prompt) - room
    return max(0, compressed.tokens_out - max(0, cut))


@dataclass(frozen=True)
class _KeyFields:
    """What keys every record of one unit: its task and grid point, and the rows' labels."""

    point: GridPoint
    task: TaskConfig
    compressor: str
    reader: str

    def fields(self, ex: Example) -> dict[str, str]:
        return {"task": self.task.key, "spec": self.task.name, "id": ex.id, "config_hash": self.point.config_hash,
                "compressor": self.compressor, "compressor_kind": self.point.compressor.name, "reader": self.reader}

    def failure(self, ex: Example, stage: str, err: BaseException | str, retries: int = 0) -> Failure:
        reason = f"{type(err).__name__}: {err}" if isinstance(err, BaseException) else str(err)
        return Failure(**self.fields(ex), stage=stage, reason=reason[:2000], retries=retries, time=time.time())


__all__ = ["ProgressFn", "StepFn", "UnitResult", "WorkUnit", "Worker", "prompt_hash", "prompt_options"]

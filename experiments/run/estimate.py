"""``--dry-run`` in seconds: what a grid will ask of its readers, counted without loading or calling a model.

Per (task, grid point): the reader calls, the summarizer calls and the prompt tokens, each said to be
**exact** (a compressor whose code calls no model, ``calls_model = False``, runs here on every pending
example with the reader's own tokenizer, read from its files: ``readers.sizing``; each prompt is built and
counted as the run builds it) or what the compressor says it keeps without its model (``Compressor.sizing``:
exact where it can count it, else a **bound**: retrieval's longest units, summaries at most ``max_new_tokens``
per chunk with one summarizer call per distinct chunk, by default the whole context; a budget the compressor
guarantees caps each).  Nothing here knows a compressor by its name or reads its attributes.  Tokens are the reader's when its tokenizer is on this machine, else LongBench words
(the basis says which).  The generation cache is not asked (that needs each reader's model):
``--dry-run=exact`` (``experiments.run.plan.dry_run``) does that.  Each (reader, task) whose window cuts
the full context of an example gets one warning line, worded as the report's.
"""
from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from compressors.base import Compressor, Sizing
from compressors.full import FullContext
from compressors.registry import COMPRESSORS, is_reference, make_compressor
from core.checks import constructor_parameters
from core.errors import ExampleFailure
from core.memory import no_cycle_collection
from core.registry import ComponentSpec
from experiments.data.records import Example, RecordKey, budget_row_label
from experiments.run.config import RunConfig
from experiments.run.examples import load_task_examples, task_spec
from experiments.run.grid import GridPoint, budget_support, canonical_json
from experiments.run.sections import TaskConfig
from experiments.run.worker import Worker, prompt_options
from experiments.tasks.prompts import build_followup_request, build_request
from indexes.types import Chunk, Chunker
from readers.base import GenerationRequest
from readers.registry import READERS
from readers.sizing import CountingTokenizer, DryRunReader, ReaderSizing, reader_sizing
from retrievers.base import Hit, Retriever
from retrievers.registry import RETRIEVERS
from retrievers.sizing import LongestFirst, Remembered, RememberedChunker


@dataclass
class PlanRow:
    """One (task, grid point) of a dry run: its row labels, hash, examples, those still to do, and the reader calls."""

    task: str
    compressor: str
    reader: str
    config_hash: str
    examples: int
    pending: int
    reader_calls: int


@dataclass
class Estimate(PlanRow):
    """A row of the fast dry run.  Its prompt tokens are ``exact`` (every prompt built and counted), a ``bound`` (an
    upper bound: a model decides what is kept), or ``sampled`` (counted on an evenly spaced sample of the pending
    examples and scaled; a sampled bound is about an upper bound)."""

    prompt_tokens: int  # the prompts as built, before the reader's own truncation
    read_tokens: int  # what the reader reads of them, its window's cut made
    bound: bool
    basis: str
    summarizer_calls: int = 0
    refused: int = 0  # examples the compressor refuses (budget below any chunk, no query): failures, no call
    sampled: bool = False
    cut: int = 0  # prompts the reader's window cuts
    context_tokens: list[int] = field(default_factory=list, repr=False)  # per example, for the cut warning
    context_seen: list[int] = field(default_factory=list, repr=False)

    @property
    def exact(self) -> bool:
        return not self.bound and not self.sampled

    @property
    def tokens_text(self) -> str:
        """The prompt tokens as the table shows them: ``1,234``, ``up to 1,234``, ``about 1,234``."""
        prefix = "up to " if self.bound else "about " if self.sampled else ""
        return f"{prefix}{self.prompt_tokens:,}"


@dataclass
class DryRun:
    """A whole grid's estimate: its rows, how each reader counts, and one line per (reader, task) cut."""

    rows: list[Estimate]
    readers: dict[str, ReaderSizing]
    warnings: list[str]


def calls_model(registry: Any, section: Any) -> bool:
    """Whether a component section, with the sections it nests, may call a model (or a model's API).

    A class says ``calls_model = False`` when its own code calls none; one that does not say is taken to call
    one.  Chunkers split text (a tokenizer at most) and call none."""
    spec = ComponentSpec.parse(section, registry.noun)
    return _calls_model(registry, canonical_json({"name": spec.name, "params": dict(spec.params)}))


@functools.lru_cache(maxsize=1024)
def _calls_model(registry: Any, section: str) -> bool:
    if registry.kind == "chunkers":
        return False
    spec = ComponentSpec.parse(json.loads(section), registry.noun)
    target = registry.get(spec.name)
    if getattr(target, "calls_model", True):
        return True
    defaults = {p.name: p.default for p in constructor_parameters(target) if p.default is not p.empty}
    for key, nested in (getattr(target, "nested", None) or {}).items():
        value = spec.params.get(key, defaults.get(key))
        for item in (value or []) if nested.many else [value]:
            if item is not None and calls_model(nested.registry, item):
                return True
    return False


class _Shards:
    """``load_task_examples``' hook for dense open-domain retrieval, used here to index with ``LongestFirst``."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count

    def index(self, retriever: Any, chunks: Sequence[Chunk]) -> Retriever:
        return LongestFirst(self.count).index(chunks)


# examples of one (task, grid point) counted; beyond them, an evenly spaced sample is counted and scaled (said so)
EXACT_SAMPLE, BOUND_SAMPLE = 2000, 32


def estimate(config: RunConfig, grid: list[GridPoint], done: set[RecordKey]) -> DryRun:
    """The work left per (task, grid point) and the window warnings; see the module docstring.

    Every example of every task is made, counted and dropped here, with the cycle collector paused
    (``no_cycle_collection``): it would walk them again and again (a key-value sweep is 1.2 million objects,
    a fifth of its dry run), yet they hold no cycles and are freed as they are dropped, before it resumes.
    """
    with no_cycle_collection():
        return _estimate_grid(config, grid, done)


def _estimate_grid(config: RunConfig, grid: list[GridPoint], done: set[RecordKey]) -> DryRun:
    sections = {p.reader.model_dump_json(): p.reader for p in grid}
    sizings = {key: reader_sizing(section.spec) for key, section in sections.items()}
    counters = {key: CountingTokenizer(s) for key, s in sizings.items()}
    rankings: dict[Any, list[Hit]] = {}
    first = next(iter(counters.values()), len)
    examples = {t.key: _examples(t, first) for t in config.tasks}
    rows = []
    for point in grid:
        key = point.reader.model_dump_json()
        for task in config.tasks:
            if point.compressor.applies_to(task.key):
                exs, how = examples[task.key]
                rows.append(_estimate(point, task, sizings[key], counters[key], exs, how, done, rankings))
    labels = {(p.reader.label or sizings[p.reader.model_dump_json()].label): sizings[p.reader.model_dump_json()]
              for p in grid}
    return DryRun(rows, labels, _cut_warnings(rows, grid))


def _examples(task: TaskConfig, count: Callable[[str], int]) -> tuple[list[Example], str]:
    """The task's examples as the run will have them, built without a model: a dense open-domain retriever is
    stood in for by ``LongestFirst`` (a bound), distractors a dense retriever would pick are drawn at random
    (an estimate); how they differ from the run's ('' when they do not)."""
    how = ""
    if task.sweep is not None and task.sweep.distractors is not None and task.sweep.distractors.method == "retriever" \
            and calls_model(RETRIEVERS, task.sweep.distractors.retriever.spec):
        random = task.sweep.distractors.model_copy(update={"method": "random"})
        task = task.model_copy(update={"sweep": task.sweep.model_copy(update={"distractors": random})})
        how = "distractors drawn at random here (the run's dense retriever picks them)"
    if task.open_domain is not None and calls_model(RETRIEVERS, task.open_domain.retriever.spec):
        how = "each question given the corpus's longest passages (the run's dense retriever picks them)"
        return load_task_examples(task, shards=_Shards(count)), how  # type: ignore[arg-type]
    return load_task_examples(task), how


def _estimate(point: GridPoint, task: TaskConfig, sizing: ReaderSizing, count: CountingTokenizer, examples: list[Example],
              how: str, done: set[RecordKey], rankings: dict[Any, list[Hit]]) -> Estimate:
    spec, options = task_spec(task), prompt_options(task)
    pending = [ex for ex in examples if (task.key, ex.id, point.config_hash) not in done]
    runs_here = not calls_model(COMPRESSORS, point.compressor.spec)
    compressor = _build(point, sizing, count)
    if compressor is not None:
        _remember(compressor, rankings, runs_here)
    whole = FullContext(tokenizer=count)
    row = Estimate(task.key, _label(point, compressor), point.reader.label or sizing.label, point.config_hash,
                   len(examples), len(pending), 0, 0, 0, bool(how), "")
    two_steps = bool(pending) and build_followup_request(spec, "", pending[0]) is not None
    model_calls: set[Any] = set()
    why: list[str] = []  # how each bound was had, as the compressor says it
    made: list[tuple[Example, GenerationRequest, int]] = []  # each example's request, and the context tokens its
    step = -(-len(pending) // (EXACT_SAMPLE if runs_here and not how else BOUND_SAMPLE))  # holds beyond the request's
    count.count_all((ex.context for ex in pending[::step]), keep=True)  # one batch: a fast tokenizer uses every core
    for ex in pending[::step]:
        try:
            if runs_here:
                made.append((ex, _request(spec, Worker.compress(point, compressor, ex)[0], ex, options), 0))
            else:  # the whole context's prompt, its context replaced by what the compressor says it keeps
                context = count(ex.context)
                kept = kept_sizing(point, compressor, ex, context)
                model_calls.update(kept.model_calls)
                row.bound = row.bound or not kept.exact
                why.append(kept.why)
                made.append((ex, _request(spec, whole.compress(ex), ex, options), kept.tokens - context))
        except ExampleFailure:
            row.refused += 1
    for ex, request, _ in made:  # a prompt holding the whole context: counted from the context's count
        count.splice(request.prompt, ex.context)
    count.count_all(request.prompt for _, request, _ in made)
    for ex, request, extra in made:
        tokens, window = count(request.prompt) + extra, _prompt_window(sizing, request, count)
        row.reader_calls += 2 if two_steps else 1
        row.prompt_tokens += tokens
        row.read_tokens += min(tokens, window)
        row.cut += tokens > window
        if is_reference(point.compressor.name):
            context = count(ex.context)
            row.context_tokens.append(context)
            row.context_seen.append(max(0, context - max(0, tokens - window)))
    row.summarizer_calls = len(model_calls)
    row.basis = _basis(runs_here, row.bound, list(dict.fromkeys(w for w in why if w)), how, two_steps)
    if step > 1:  # an evenly spaced sample, scaled to every pending example: no longer an exact count
        row.sampled = True
        scale = len(pending) / len(pending[::step])
        row.prompt_tokens, row.read_tokens = round(row.prompt_tokens * scale), round(row.read_tokens * scale)
        row.summarizer_calls, row.refused = round(row.summarizer_calls * scale), round(row.refused * scale)
        row.reader_calls = (len(pending) - row.refused) * (2 if two_steps else 1)
        row.cut = round(row.cut * scale)
        row.basis += f"; scaled from {len(pending[::step]):,} of {len(pending):,} examples"
    return row


def _remember(compressor: Compressor, rankings: dict[Any, list[Hit]], runs_here: bool) -> None:
    """The components a compressor holds, whatever it calls them, wrapped so that grid points sharing an example
    split it once (a chunker) and, where no model is called, rank it once (a retriever)."""
    for name, value in vars(compressor).items():
        if runs_here and isinstance(value, Retriever):
            setattr(compressor, name, Remembered(value, rankings))
        elif isinstance(value, Chunker) and not isinstance(value, (str, RememberedChunker)):  # str has .split too
            setattr(compressor, name, RememberedChunker(value, rankings))


def kept_sizing(point: GridPoint, compressor: Compressor | None, ex: Example, context: int) -> Sizing:
    """What the compressor says it keeps of ``ex`` without its model (``Compressor.sizing``), capped by a budget
    it guarantees; the whole context where it could not be built here."""
    budget = point.budget.for_context(context) if point.budget is not None else None
    kept = compressor.sizing(ex, budget) if compressor is not None else Sizing(context, False, "at most the whole context")
    cap = _guaranteed_cap(point, context)
    return kept if cap is None or kept.tokens <= cap else replace(kept, tokens=cap)


def _request(spec: Any, context: Any, example: Example, options: Any) -> GenerationRequest:
    """The request the run will send, without the context span that only the extractive baseline reads (finding
    it builds the prompt twice more, which a dry run of many examples would feel)."""
    return build_request(spec, context, example, options, with_span=False)


def _build(point: GridPoint, sizing: ReaderSizing, tokenizer: CountingTokenizer) -> Compressor | None:
    """The point's compressor built as the run builds it, with the dry run's reader, which refuses to generate,
    in place of any reader it calls (a summarizer section of its own would load one); None where it cannot be
    built here (a key it reads), so its label falls back to its name."""
    target = COMPRESSORS.get(point.compressor.name)
    readers = [key for key, section in (getattr(target, "nested", None) or {}).items() if section.registry is READERS]
    spec = point.compressor.spec
    if any(spec.params.get(key) is not None for key in readers):
        spec = ComponentSpec(spec.name, {k: v for k, v in spec.params.items() if k not in readers}, spec.label)
    try:
        return make_compressor(spec, tokenizer=tokenizer, reader=DryRunReader(sizing))
    except (ValueError, OSError):  # a UserError (an API key not set) or a file it reads: the run says it
        if not calls_model(COMPRESSORS, point.compressor.spec):
            raise
        return None


def _label(point: GridPoint, compressor: Compressor | None) -> str:
    """The row label the run will give this point (``Worker.labels``), from the compressor built here."""
    if point.budget is None:
        return point.row_label(point.compressor.label or (compressor.label if compressor else point.compressor.name))
    line = point.compressor.label or (compressor.line_label if compressor else point.compressor.name)
    return budget_row_label(point.row_label(line), point.budget.as_key())


def _guaranteed_cap(point: GridPoint, context: int) -> int | None:
    """The context tokens a compressor promises not to exceed (``budget_support == "guaranteed"``): the point's
    budget, else the size its own parameters set (``replaced_by_budget``)."""
    if budget_support(point.compressor.name) != "guaranteed":
        return None
    if point.budget is not None:
        return point.budget.for_context(context)
    target = COMPRESSORS.get(point.compressor.name)
    own = [point.compressor.params.get(p) for p in target.replaced_by_budget]
    return next((v for v in own if isinstance(v, int) and not isinstance(v, bool)), None)


def _prompt_window(sizing: ReaderSizing, request: GenerationRequest, count: Callable[[str], int]) -> int:
    """The prompt tokens the reader reads before it cuts: its window less the answer and the system message."""
    if sizing.max_context is None or sizing.truncation == "none":
        return 10**12
    system = count(request.system) if request.system else 0
    return max(1, sizing.max_context - request.max_new_tokens - system)


def _basis(runs_here: bool, bound: bool, why: list[str], how: str, two_steps: bool) -> str:
    parts = ["run here" if runs_here else ("bound: " + "; ".join(why)) if bound
             else "exact: the compressor's own count (" + "; ".join(why or ["its sizing"]) + ")"]
    if how:
        parts.append(f"examples: {how}")
    if two_steps:
        parts.append("2 calls per example (the second prompt not counted)")
    return "; ".join(parts)


def _cut_warnings(rows: Iterable[Estimate], grid: list[GridPoint]) -> list[str]:
    """One line per (reader, task) where the reader's window cuts the full context of an example, worded as
    the report words it (``experiments.report.truncation``)."""
    from experiments.report.truncation import ReaderCut, cut_warning

    out = []
    for row in rows:
        cut = sum(seen < whole for seen, whole in zip(row.context_seen, row.context_tokens))
        if cut:
            out.append(cut_warning(ReaderCut(row.reader, row.task, cut, len(row.context_tokens),
                                             statistics.fmean(row.context_seen), statistics.fmean(row.context_tokens))))
    return list(dict.fromkeys(out))


def estimate_summary(plan: DryRun) -> list[str]:
    """What the table's rows add up to, and how the numbers were had."""
    rows = plan.rows
    exact = sum(r.prompt_tokens for r in rows if r.exact)
    sampled = sum(r.prompt_tokens for r in rows if r.sampled and not r.bound)
    bound = sum(r.prompt_tokens for r in rows if r.bound)
    calls, summaries = sum(r.reader_calls for r in rows), sum(r.summarizer_calls for r in rows)
    refused = sum(r.refused for r in rows)
    lines = [f"reader calls: {calls:,}" + (f"; summarizer calls: at most {summaries:,}" if summaries else "")
             + (f"; {refused:,} example(s) refused by their compressor (recorded as failures)" if refused else ""),
             f"prompt tokens: {exact:,} exact" + (f" + about {sampled:,} (counted on samples)" if sampled else "")
             + (f" + at most {bound:,} (bounds)" if bound else "")
             + f"; the readers read about {sum(r.read_tokens for r in rows):,} of them after their own truncation"]
    for label, sizing in plan.readers.items():
        window = f"window {sizing.max_context:,} tokens" if sizing.max_context else "no window"
        lines.append(f"reader {label}: tokens counted in {sizing.basis}; {window}")
    lines.append(f"exact: the compressors that call no model ran here on every pending example (on {EXACT_SAMPLE:,} "
                 "of them, evenly spaced, where a row has more: 'about'); the others say what they keep without their "
                 "model (each row's basis: exact where the compressor can count it, else a bound such as summaries "
                 "at max_new_tokens per chunk, the longest units, or the whole context), each within a budget it "
                 f"guarantees, on at most {BOUND_SAMPLE} examples a row. The generation cache was not asked: "
                 "`--dry-run=exact` loads the models and counts its hits")
    return lines


__all__ = ["BOUND_SAMPLE", "EXACT_SAMPLE", "DryRun", "Estimate", "PlanRow", "calls_model", "estimate",
           "estimate_summary", "kept_sizing"]

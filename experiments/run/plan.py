"""Before a run: check every component of the grid, cut the work into units, and say what is left (``--dry-run``).

The checks run before anything is written or loaded, so a typo in a config
costs seconds, not a model load: every task, metric, compressor, retriever and
reader the grid names is resolved, and every parameter is checked by name and
value (nested sections too; ``core.checks``).

``--dry-run``, in seconds: what a grid will ask of its readers, counted
without loading or calling any model (:func:`estimate`); ``--dry-run=exact``
(:func:`dry_run`) builds everything, models included, and counts cache hits.
The fast one gives, per (task, grid point), the reader calls, the summarizer
calls and the prompt tokens, and says how each number was had:

- **exact**: the compressors whose code calls no model (``calls_model = False``:
  full, truncate, top_k, retrieval with BM25, hybrid and rerank of BM25 stages)
  run here for real, on every pending example, with the reader's own tokenizer
  (read from its files, never its weights: ``readers.sizing``), and each
  prompt is built and counted as the run will build it;
- **bound**: where a compressor's output depends on a model, its prompt tokens
  are an upper bound: a dense retriever is stood in for by one that ranks the
  longest units first (the most a compressor could keep); summaries are at most
  ``max_new_tokens`` per chunk, one summarizer call per distinct chunk (per
  question when query-focused); LongLLMLingua keeps at most the whole context;
  a budget the compressor guarantees caps all of these.

Token counts are in the reader's tokens when its tokenizer is on this machine,
else in LongBench words (said in the basis).  The generation cache is not asked
(that needs each reader's identity, so its model); ``--dry-run=exact`` builds
everything and counts cache hits, as the run will.  Each (reader, task) whose
window cuts the full context of an example gets one warning line, worded as
the report's.
"""
from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compressors.base import Compressor
from compressors.registry import COMPRESSORS, INJECTED, make_compressor, uses_reader
from core.checks import constructor_parameters
from core.errors import ExampleFailure, UserError
from core.progress import progress_bar
from core.registry import ComponentSpec
from core.text import count_pieces
from experiments.data.records import Example, RecordKey, budget_row_label
from experiments.data.sources import DataError
from experiments.run.config import RunConfig, TaskConfig
from experiments.run.examples import load_task_examples, task_spec
from experiments.run.grid import GridPoint, budget_support, canonical_json
from experiments.run.worker import Worker, WorkUnit, prompt_options
from experiments.scoring.registry import get_metric
from experiments.tasks.prompts import build_followup_request, build_request
from indexes.types import Chunk
from readers.base import Generation, GenerationRequest, Reader
from readers.registry import READERS
from readers.sizing import ReaderSizing, reader_sizing
from readers.tokenizers import WordTokenizer
from retrievers.base import Hit, Retriever
from retrievers.contract import Checked
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
    estimates (one summary call per chunk of ``chunk_size`` words, full-context
    tokens as an upper bound).
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
            hits, tokens, summaries = 0, 0, 0
            encoded_before = compressor.encoded_texts()
            bar.total += len(pending)
            bar.set_description(f"dry run: {task.key} | {labels[0]} | {labels[1]}"[:70], refresh=False)
            for ex in pending:
                bar.update(1)
                if needs_model:
                    tokens += reader.count_tokens(ex.context) + reader.count_tokens(ex.query)
                    summaries += -(-reader.count_tokens(ex.context) // int(point.compressor.params.get("chunk_size", 500)))
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
                prompt_tokens=tokens, exact=not needs_model, summarizer_calls=summaries,
                texts_encoded=compressor.encoded_texts() - encoded_before,
            ))
    return rows


# -- --dry-run in seconds: no model loads ------------------------------------------------------------------------

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


class LongestFirst(Retriever):
    """Stands in for a retriever that calls a model: ranks units by their length in the reader's tokens,
    longest first, so what a compressor keeps is the most it could keep."""

    calls_model = False

    def __init__(self, count: Callable[[str], int]) -> None:
        self._count = count
        self._ranked: list[Hit] = []

    @property
    def identity(self) -> str:
        return "longest-first"

    def index(self, chunks: Sequence[Chunk]) -> "LongestFirst":
        sized = sorted(((self._count(c.text), i, c) for i, c in enumerate(chunks)), key=lambda t: (-t[0], t[1]))
        self._ranked = [Hit(c, float(n), rank) for rank, (n, _, c) in enumerate(sized)]
        return self

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.check_search(queries, k)
        return [list(self._ranked[:k]) for _ in queries]


class _Remembered(Retriever):
    """A retriever that calls no model, its rankings kept: grid points that differ only in what they keep of a
    ranking, or in which order (``top_n``, a budget, ``order``), rank one example's units once."""

    calls_model = False

    def __init__(self, inner: Retriever, rankings: dict[Any, list[Hit]]) -> None:
        self.inner, self.rankings = inner, rankings
        self._chunks: list[Chunk] = []
        self._key: Any = None
        self._indexed: Any = None

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def label(self) -> str:
        return self.inner.label

    def index(self, chunks: Sequence[Chunk]) -> "_Remembered":
        self._chunks = list(chunks)
        self._key = (self.inner.identity, tuple((c.chunk_id, c.title, c.text) for c in self._chunks))
        return self

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.check_search(queries, k)
        out = []
        for query in queries:
            ranked = self.rankings.get((self._key, query))
            if ranked is None or (len(ranked) < k and len(ranked) < len(self._chunks)):
                if self._indexed != self._key:  # the questions of one document share its index
                    self._checked = Checked.index(self.inner, self._chunks)  # the plugin's own output, checked
                    self._indexed = self._key
                ranked = self.rankings[(self._key, query)] = self._checked.search([query], k)[0]
            out.append(ranked[:k])
        return out


class _RememberedChunker:
    """A chunker whose splits are kept, by its settings (its ``repr``), the text and the document id."""

    def __init__(self, inner: Any, kept: dict[Any, Any]) -> None:
        self.inner, self.kept = inner, kept

    def split(self, text: str, doc_id: str = "doc") -> list[Chunk]:
        key = ("split", repr(self.inner), doc_id, text)
        if key not in self.kept:
            self.kept[key] = self.inner.split(text, doc_id=doc_id)
        return list(self.kept[key])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _NoModel(Reader):
    """The reader a compressor is built with in a dry run: it counts as the reader will and refuses to generate."""

    def __init__(self, sizing: ReaderSizing) -> None:
        self.tokenizer = sizing.tokenizer
        self.max_context = sizing.max_context or 10**9

    @property
    def identity(self) -> str:
        return "dry-run"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        raise RuntimeError("a dry run calls no model")  # a compressor that did is a bug of the dry run


class _Shards:
    """``load_task_examples``' hook for dense open-domain retrieval, used here to index with ``LongestFirst``."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count

    def index(self, retriever: Any, chunks: Sequence[Chunk]) -> Retriever:
        return LongestFirst(self.count).index(chunks)


# examples of one (task, grid point) counted; beyond them, an evenly spaced sample is counted and scaled (said so)
EXACT_SAMPLE, BOUND_SAMPLE = 2000, 32


class _Counter:
    """A reader's tokenizer that counts each distinct text once: contexts and chunks recur across grid points,
    and the compressors built here count with it too.  ``encode`` gives ids whose length is known at once and
    which are made only when read (a compressor that only counts never makes them; LongBench words are counted
    by a regular expression); :meth:`count_all` counts many texts in one batch of a fast tokenizer."""

    def __init__(self, sizing: ReaderSizing) -> None:
        self.tokenizer = sizing.tokenizer
        self.words = isinstance(sizing.tokenizer, WordTokenizer)
        self.batch = getattr(sizing.tokenizer, "encode_all", None)
        self.counts: dict[str, int] = {}
        self.kept: dict[str, list[int]] = {}  # the contexts' ids (a truncation reads them at every budget)
        self.recent: dict[str, list[int]] = {}  # the ids last made, a few texts

    def encode(self, text: str) -> Sequence[int]:
        if text not in self.counts and not self.words:
            return self.ids(text)
        return _Ids(self, text)

    def ids(self, text: str) -> list[int]:
        """The text's ids, made now (or kept from a moment ago)."""
        made = self.kept.get(text) or self.recent.get(text)
        if made is None:
            made = self.tokenizer.encode(text)
            self.counts[text] = len(made)
            if len(self.recent) >= 8:
                self.recent.pop(next(iter(self.recent)))
            self.recent[text] = made
        return made

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def __call__(self, text: str) -> int:
        n = self.counts.get(text)
        if n is None:
            n = self.counts[text] = count_pieces(text) if self.words else len(self.ids(text))
        return n

    def count_all(self, texts: Iterable[str], *, keep: bool = False) -> None:
        """Count every text not counted yet, in one batch where the tokenizer takes one; ``keep`` their ids."""
        new = [t for t in dict.fromkeys(texts) if t not in self.counts]
        if self.batch is None or len(new) < 2:
            for text in new:
                self(text)
            return
        for text, ids in zip(new, self.batch(new)):
            self.counts[text] = len(ids)
            if keep:
                self.kept[text] = ids


class _Ids(Sequence[int]):
    """A text's token ids as ``_Counter.encode`` gives them: the length from the count, the ids made when read."""

    def __init__(self, counter: _Counter, text: str) -> None:
        self.counter, self.text = counter, text

    def __len__(self) -> int:
        return self.counter(self.text)

    def __getitem__(self, index: Any) -> Any:
        return self.counter.ids(self.text)[index]

    def __iter__(self) -> Any:
        return iter(self.counter.ids(self.text))


def estimate(config: RunConfig, grid: list[GridPoint], done: set[RecordKey]) -> DryRun:
    """The work left per (task, grid point) and the window warnings; see the module docstring."""
    sections = {p.reader.model_dump_json(): p.reader for p in grid}
    sizings = {key: reader_sizing(section.spec) for key, section in sections.items()}
    counters = {key: _Counter(s) for key, s in sizings.items()}
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


def _estimate(point: GridPoint, task: TaskConfig, sizing: ReaderSizing, count: _Counter, examples: list[Example],
              how: str, done: set[RecordKey], rankings: dict[Any, list[Hit]]) -> Estimate:
    spec, options = task_spec(task), prompt_options(task)
    pending = [ex for ex in examples if (task.key, ex.id, point.config_hash) not in done]
    runs_here = not calls_model(COMPRESSORS, point.compressor.spec)
    compressor = _build(point, sizing, count)
    if runs_here and isinstance(getattr(compressor, "retriever", None), Retriever):
        compressor.retriever = _Remembered(compressor.retriever, rankings)  # type: ignore[union-attr]
    if getattr(compressor, "_chunker", None) is not None:  # the same split of one context recurs across points
        compressor._chunker = _RememberedChunker(compressor._chunker, rankings)  # type: ignore[union-attr]
    whole = make_compressor("full", tokenizer=count)
    row = Estimate(task.key, _label(point, compressor), point.reader.label or sizing.label, point.config_hash,
                   len(examples), len(pending), 0, 0, 0, not runs_here or bool(how), "")
    two_steps = bool(pending) and build_followup_request(spec, "", pending[0]) is not None
    summaries: set[tuple[str, str]] = set()
    made: list[tuple[Example, GenerationRequest, int]] = []  # each example's request, and the context tokens its
    step = -(-len(pending) // (BOUND_SAMPLE if row.bound else EXACT_SAMPLE))  # holds beyond the request's (bounds)
    count.count_all((ex.context for ex in pending[::step]), keep=True)  # one batch: a fast tokenizer uses every core
    for ex in pending[::step]:
        try:
            if runs_here:
                made.append((ex, _request(spec, Worker.compress(point, compressor, ex)[0], ex, options), 0))
            else:  # the whole context's prompt, its context replaced by the most the compressor could keep
                context = count(ex.context)
                bound = _context_bound(point, compressor, ex, context, count, summaries)
                made.append((ex, _request(spec, whole.compress(ex), ex, options), bound - context))
        except ExampleFailure:
            row.refused += 1
    count.count_all(request.prompt for _, request, _ in made)
    for ex, request, extra in made:
        tokens, window = count(request.prompt) + extra, _prompt_window(sizing, request, count)
        row.reader_calls += 2 if two_steps else 1
        row.prompt_tokens += tokens
        row.read_tokens += min(tokens, window)
        row.cut += tokens > window
        if point.compressor.name == "full":
            context = count(ex.context)
            row.context_tokens.append(context)
            row.context_seen.append(max(0, context - max(0, tokens - window)))
    row.summarizer_calls = len(summaries)
    row.basis = _basis(point, compressor, runs_here, how, two_steps)
    if step > 1:  # an evenly spaced sample, scaled to every pending example: no longer an exact count
        row.sampled = True
        scale = len(pending) / len(pending[::step])
        row.prompt_tokens, row.read_tokens = round(row.prompt_tokens * scale), round(row.read_tokens * scale)
        row.summarizer_calls, row.refused = round(row.summarizer_calls * scale), round(row.refused * scale)
        row.reader_calls = (len(pending) - row.refused) * (2 if two_steps else 1)
        row.cut = round(row.cut * scale)
        row.basis += f"; scaled from {len(pending[::step]):,} of {len(pending):,} examples"
    return row


def _request(spec: Any, context: Any, example: Example, options: Any) -> GenerationRequest:
    """The request the run will send, without the context span that only the extractive baseline reads (finding
    it builds the prompt twice more, which a dry run of many examples would feel)."""
    return build_request(spec, context, example, options, with_span=False)


def _build(point: GridPoint, sizing: ReaderSizing, tokenizer: _Counter) -> Compressor | None:
    """The point's compressor built as the run builds it, with the dry run's reader, which refuses to generate,
    in place of any reader it calls (a summarizer section of its own would load one); None where it cannot be
    built here (a key it reads), so its label falls back to its name."""
    target = COMPRESSORS.get(point.compressor.name)
    readers = [key for key, section in (getattr(target, "nested", None) or {}).items() if section.registry is READERS]
    spec = point.compressor.spec
    if any(spec.params.get(key) is not None for key in readers):
        spec = ComponentSpec(spec.name, {k: v for k, v in spec.params.items() if k not in readers}, spec.label)
    try:
        return make_compressor(spec, tokenizer=tokenizer, reader=_NoModel(sizing))
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


def _context_bound(point: GridPoint, compressor: Compressor | None, ex: Example, context: int,
                   count: Callable[[str], int], summaries: set[tuple[str, str]]) -> int:
    """An upper bound on the context tokens a compressor that calls a model keeps of ``ex`` (module docstring);
    ``summaries`` collects the distinct summarizer calls."""
    cap = _guaranteed_cap(point, context)
    if compressor is not None and uses_reader(type(compressor)):
        chunker = getattr(compressor, "_chunker", None)
        chunks = chunker.split(ex.context, doc_id=ex.id) if chunker is not None else []
        focused = ex.query if getattr(compressor, "query_focused", False) else ""
        summaries.update((c.text, focused) for c in chunks)
        per_chunk = getattr(compressor, "max_new_tokens", None)
        bound = len(chunks) * per_chunk if isinstance(per_chunk, int) and chunks else context
        return min(bound, cap) if cap is not None else bound
    if cap is not None:
        return min(cap, context)
    if compressor is not None and isinstance(getattr(compressor, "retriever", None), Retriever):
        compressor.retriever = LongestFirst(count)
        return compressor.compress(ex).tokens_out
    return context


def _guaranteed_cap(point: GridPoint, context: int) -> int | None:
    """The context tokens a compressor promises not to exceed (``budget_support == "guaranteed"``): the point's
    budget, else the size its own parameters set (``replaced_by_budget``)."""
    if budget_support(point.compressor.name) != "guaranteed":
        return None
    if point.budget is not None:
        return point.budget.for_context(context)
    target = COMPRESSORS.get(point.compressor.name)
    own = [point.compressor.params.get(p) for p in getattr(target, "replaced_by_budget", ())]
    return next((v for v in own if isinstance(v, int) and not isinstance(v, bool)), None)


def _prompt_window(sizing: ReaderSizing, request: GenerationRequest, count: Callable[[str], int]) -> int:
    """The prompt tokens the reader reads before it cuts: its window less the answer and the system message."""
    if sizing.max_context is None or sizing.truncation == "none":
        return 10**12
    system = count(request.system) if request.system else 0
    return max(1, sizing.max_context - request.max_new_tokens - system)


def _basis(point: GridPoint, compressor: Compressor | None, runs_here: bool, how: str, two_steps: bool) -> str:
    parts = ["run here" if runs_here else "bound: " + _why_bound(point, compressor)]
    if how:
        parts.append(f"examples: {how}")
    if two_steps:
        parts.append("2 calls per example (the second prompt not counted)")
    return "; ".join(parts)


def _why_bound(point: GridPoint, compressor: Compressor | None) -> str:
    if compressor is not None and uses_reader(type(compressor)):
        return "summaries at most max_new_tokens per chunk"
    if compressor is not None and isinstance(getattr(compressor, "retriever", None), Retriever) \
            and _guaranteed_cap(point, 1) is None:
        return "the longest units its retriever could rank first"
    return "at most the whole context" + (", within its budget" if budget_support(point.compressor.name) == "guaranteed"
                                         else "")


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
                 "of them, evenly spaced, where a row has more: 'about'); bounds: summaries (max_new_tokens per "
                 "chunk), dense retrieval (the longest units), LongLLMLingua (the whole context), each within a budget "
                 f"it guarantees, on at most {BOUND_SAMPLE} examples a row. The generation cache was not asked: "
                 "`--dry-run=exact` loads the models and counts its hits")
    return lines


__all__ = ["DryRun", "Estimate", "LongestFirst", "PlannedPoint", "calls_model", "check_components", "dry_run",
           "estimate", "estimate_summary", "pending_units"]

"""Retrieval over a corpus in a passage store: an engine gives int64 row numbers, the store gives the passages.

Two engines, both built once into a folder and reused:

* ``bm25``: ``retrievers.bm25_corpus`` (block-built, memory-mapped bm25s);
* a dense retriever: its encoder's embedding shards (``retrievers.shards``,
  resumable, or written by Ray encoder actors), and a FAISS index of any
  factory string over them (``indexes.factory``), planned and refused in one
  line when it would not fit, with exact re-ranking from the memory-mapped
  shards.

``CorpusSearch.search`` answers as a retriever does (``Hit`` per row, best
first), reading from the store only the rows it returns.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from core.errors import UserError
from core.progress import progress_bar
from indexes.factory import (
    RECALL_TARGET,
    RowIndex,
    SearchGiven,
    SearchPlan,
    available_memory,
    check_fits,
    fit,
    human,
    plan,
    planned_search,
    resolve,
    slug,
)
from indexes.passages import PassageStore
from indexes.types import Chunk
from retrievers.base import Hit
from retrievers.dense import DenseRetriever

BLOCK = 20_000


class RowEngine(Protocol):
    """Searches a corpus by row number: per query, scores and int64 rows, best first."""

    label: str

    def search_rows(self, queries: Sequence[str], k: int) -> tuple[list[np.ndarray], list[np.ndarray]]: ...


class CorpusSearch:
    """A row engine and the passage store it searches: ``search`` returns hits like any retriever's."""

    def __init__(self, engine: RowEngine, store: PassageStore) -> None:
        self.engine, self.store = engine, store

    @property
    def label(self) -> str:
        return self.engine.label

    @property
    def identity(self) -> str:
        return f"corpus({self.engine.label},{self.store.path.name})"

    def __len__(self) -> int:
        return len(self.store)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        scores, rows = self.engine.search_rows(list(queries), k)
        out = []
        for row_scores, row_ids in zip(scores, rows):
            keep = row_ids >= 0
            passages = self.store.get(row_ids[keep])
            out.append([Hit(Chunk(str(p.row), p.doc_id, 0, 0, len(p.text), p.text, p.title), float(s), rank)
                        for rank, (p, s) in enumerate(zip(passages, row_scores[keep]))])
        return out


def store_texts(store: PassageStore, use_title: bool) -> Callable[[], Any]:
    """The store's passages as the text an encoder or BM25 sees (``title text`` when titled), block by block."""
    def blocks():
        for block in store.blocks(BLOCK):
            yield [f"{p.title} {p.text}" if use_title and p.title else p.text for p in block]
    return blocks


class _StoreSequence(Sequence[str]):
    """The store's texts as a lazy sequence (what ``ShardStore.fill`` slices, one shard at a time)."""

    def __init__(self, store: PassageStore, use_title: bool) -> None:
        self.store, self.use_title = store, use_title

    def __len__(self) -> int:
        return len(self.store)

    def __getitem__(self, i):  # type: ignore[override]
        if not isinstance(i, slice):
            return self[i: i + 1][0]
        lo, hi, _ = i.indices(len(self))
        rows = np.arange(lo, hi, dtype=np.int64)
        return [f"{p.title} {p.text}" if self.use_title and p.title else p.text for p in self.store.get(rows)]


# -- BM25 ------------------------------------------------------------------------------------------------------
class BM25Engine:
    """``retrievers.bm25_corpus`` over a store, built into ``folder`` the first time."""

    label = "bm25"

    def __init__(self, store: PassageStore, folder: Path, *, use_title: bool = True, k1: float = 1.5,
                 b: float = 0.75, analyzer: str | None = None, progress: Callable[[int], None] | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        from retrievers.bm25_corpus import CORPUS_ANALYZER, BM25Corpus, build_bm25

        build_bm25(folder, store_texts(store, use_title), n=len(store), k1=k1, b=b, source=store.source,
                   analyzer=analyzer or CORPUS_ANALYZER, on_block=progress, say=say)
        self.index = BM25Corpus(folder)

    def search_rows(self, queries: Sequence[str], k: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        return self.index.search(queries, k)


# -- dense -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DenseIndexSettings:
    """How a dense corpus index is built and searched.

    ``index``: a FAISS factory string, a name (``flat``, ``hnsw``, ``ivf``) or ``auto``; ``nprobe`` /
    ``ef_search`` / ``rerank`` (re-score this many candidates exactly from the shards): search parameters,
    None for the index's search plan (chosen at build time to reach ``recall_target`` of exact search's
    top-20, ``indexes.factory.SearchPlan``); ``max_memory``: the budget in bytes (None: the free memory
    only); ``max_encode_time``: seconds the encoding may be projected to take (None: no limit);
    ``train_size``: vectors to train on (None: FAISS's guideline); ``seed``: the training and tuning
    samples'; ``shard_dtype``: of the embedding shards on disk (``float16`` halves them; the index is built
    and re-ranks in float32 all the same).
    """

    index: str = "flat"
    nprobe: int | None = None
    ef_search: int | None = None
    rerank: int | None = None
    max_memory: int | None = None
    max_encode_time: float | None = None
    recall_target: float = RECALL_TARGET
    train_size: int | None = None
    seed: int = 0
    shard_dtype: str = "float32"
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_params(cls, params: dict, **overrides: Any) -> DenseIndexSettings:
        """A dense retriever's ``index_params`` (plus ``index:``) with the command line's overrides on top."""
        from indexes.factory import parse_bytes

        merged = {**params, **{k: v for k, v in overrides.items() if v is not None}}
        known = {k: merged.pop(k) for k in list(merged) if k in ("index", "nprobe", "ef_search", "rerank",
                                                                   "max_memory", "max_encode_time",
                                                                   "recall_target", "train_size", "seed",
                                                                   "shard_dtype")}
        if known.get("max_memory") is not None:
            known["max_memory"] = parse_bytes(known["max_memory"], "max_memory")
        if known.get("max_encode_time") is not None:
            known["max_encode_time"] = parse_duration(known["max_encode_time"], "--max-encode-time")
        target = known.get("recall_target", RECALL_TARGET)
        if not isinstance(target, (int, float)) or not 0 < target <= 1:
            raise UserError(f"recall_target must be a share in (0, 1], got {target!r}")
        return cls(**known, extra=merged)

    @property
    def given(self) -> SearchGiven:
        """The search parameters set here, each overriding the search plan's."""
        return SearchGiven(self.nprobe, self.ef_search, self.rerank)


PROBE = 64  # passages encoded and timed before the rest, for the time plan (after a warm-up of 2)


@dataclass(frozen=True)
class EncodePlan:
    """How long encoding the passages still to encode will take, from the encoder's speed on a first batch."""

    todo: int
    measured: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.measured / max(self.seconds, 1e-9)

    @property
    def projected(self) -> float:
        return self.todo / self.rate

    def describe(self, device: str) -> str:
        return (f"time plan: {self.todo:,} passages to encode at {self.rate:,.1f} passages/s (measured on "
                f"{self.measured} passages here, {device}): about {duration(self.projected)}; --executor ray "
                f"with W encoder actors as fast as this process divides it by at most W (about "
                f"{duration(self.projected / 8)} with 8); a GPU's speed is measured the same way where torch "
                "sees one (run this there)")


class DenseEngine:
    """A dense retriever's encoder over a store: embedding shards in ``folder``, then a ``RowIndex``.

    Everything that can refuse is checked before the corpus is encoded: the memory plan of the index (or the
    size of an index file already built) against ``max_memory`` and the free memory, and the time plan from
    the encoder's measured speed against ``max_encode_time``.
    """

    def __init__(self, retriever: DenseRetriever, store: PassageStore, folder: Path, settings: DenseIndexSettings, *,
                 shard_size: int = 50_000, pool_for: Callable[[], Any] | None = None,
                 say: Callable[[str], None] = print, on_shard: Callable[[int], None] | None = None) -> None:
        from contextlib import nullcontext

        from retrievers.shards import ShardStore

        self.retriever, self.store, self.settings = retriever, store, settings
        self._rows = None  # the shards' RowReader, opened at the first re-ranking
        encoder = retriever.encoder
        texts = _StoreSequence(store, retriever.use_title)
        digest = hashlib.sha256(store.source.encode()).hexdigest()
        self.shards = ShardStore.open(folder, model_id=encoder.model_id, use_title=retriever.use_title, texts=texts,
                                      shard_size=shard_size, digest=digest, dtype=settings.shard_dtype)
        todo = self.shards.missing()
        say(f"embedding shards in {folder}: {self.shards.shards - len(todo)} of {self.shards.shards} already there")
        probe = self._probe(texts, todo) if todo else None
        dim = int(self.shards.manifest.get("dim") or probe[0])
        string, path = self._plan(folder, dim, say)
        if probe is not None:
            left = sum(hi - lo for lo, hi in map(self.shards.bounds, todo))
            self._check_time(EncodePlan(left, *probe[1:]), say)
            with pool_for() if pool_for is not None else nullcontext(None) as pool:
                self.shards.fill(texts, todo, encode=encoder.encode_documents, pool=pool, on_shard=on_shard)
        self.index = self._index(path, string, say)
        self.search_plan = self._search_plan(path, say)

    @property
    def label(self) -> str:
        return f"{self.retriever.label}[{self.index.string}]"

    def _probe(self, texts: Sequence[str], todo: Sequence[int]) -> tuple[int, int, float]:
        """(dimension, passages timed, seconds) of the encoder on the first passages still to encode."""
        import time

        lo, hi = self.shards.bounds(todo[0])
        batch = list(texts[lo: min(hi, lo + PROBE)])
        encode = self.retriever.encoder.encode_documents
        encode(batch[:2])  # loads the model and warms it up: not part of the rate
        start = time.perf_counter()
        vectors = np.asarray(encode(batch))
        return int(vectors.shape[1]), len(batch), time.perf_counter() - start

    def _check_time(self, p: EncodePlan, say: Callable[[str], None]) -> None:
        say(p.describe(_device()))
        budget = self.settings.max_encode_time
        if budget is not None and p.projected > budget:
            raise UserError(f"encoding {p.todo:,} passages would take about {duration(p.projected)} at "
                            f"{p.rate:,.1f} passages/s (measured here on {p.measured}), over --max-encode-time "
                            f"{duration(budget)}; encode on a GPU or with --executor ray, or take a smaller corpus")

    def _plan(self, folder: Path, dim: int, say: Callable[[str], None]) -> tuple[str, Path]:
        """The index string and its file; refuses, before any encoding, an index that would not fit."""
        n = self.shards.count
        store_bytes = self.store.path.stat().st_size
        s = self.settings
        if s.index.strip().lower() == "auto":
            budget = s.max_memory if s.max_memory is not None else _free_share()
            chosen = fit(n, dim, budget, store=store_bytes)
            if chosen is None:
                raise UserError(f"index auto: no index string over {n:,} x {dim} fits in {human(budget)}; "
                                "split the corpus into shards (Ray) or raise --max-index-memory")
            string = chosen.string
        else:
            string = resolve(s.index, n)
        path = folder / f"index-{slug(string)}.faiss"
        if path.is_file():
            size = path.stat().st_size
            for limit, name in ((s.max_memory, "--max-index-memory"), (available_memory(), "the free memory")):
                if limit is not None and size > limit:
                    raise UserError(f"the index {path} is {human(size)}, over {name} ({human(limit)}); raise it, "
                                    "or give an --index that fits (the file is kept)")
            return string, path
        p = plan(string, n, dim, train_size=s.train_size, store=store_bytes)
        say("memory plan: " + p.describe())
        check_fits(p, s.max_memory)
        return string, path

    def _index(self, path: Path, string: str, say: Callable[[str], None]) -> RowIndex:
        n, dim = self.shards.count, int(self.shards.manifest["dim"])
        if path.is_file():
            say(f"loading {path} ({human(path.stat().st_size)})")
            return RowIndex.load(path, string)
        say(f"building {string!r} (no finished index at {path}; a killed build starts over)")
        s = self.settings
        try:
            with progress_bar(n, f"add to {string}", unit="vec", leave=False) as bar:
                index = RowIndex.build(string, dim, n, self._blocks, train_size=s.train_size, seed=s.seed, say=say,
                                       on_block=lambda done: bar.update(done - bar.n))
        except MemoryError:
            p = plan(string, n, dim, train_size=s.train_size)
            raise UserError(f"out of memory building {string!r} over {n:,} x {dim} in this process: the plan "
                            f"needs {human(p.total)}, {human(available_memory())} is free now; give a smaller "
                            f"--index or --max-index-memory") from None
        index.save(path)
        return index

    def _blocks(self) -> Iterator[np.ndarray]:
        return self.shards.blocks()

    def _search_plan(self, path: Path, say: Callable[[str], None]) -> SearchPlan | None:
        """The index's search plan, chosen once beside its file (``.search.json``) and reused."""
        s = self.settings
        return planned_search(self.index, path.with_name(path.stem + ".search.json"), self._blocks, self.vectors,
                              given=s.given, target=s.recall_target, seed=s.seed, say=say)

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """Full vectors of ``rows`` as float32, read from the shards all at once (exact re-ranking)."""
        if self._rows is None:
            self._rows = self.shards.row_reader()
        return self._rows.read(rows)

    def search_params(self) -> dict[str, Any]:
        """What ``RowIndex.search`` is given: the search plan's parameters, each overridden by a setting given."""
        return self.settings.given.over(self.search_plan)

    def search_rows(self, queries: Sequence[str], k: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        qvecs = np.asarray(self.retriever.encoder.encode_queries(list(queries)), dtype=np.float32)
        params = self.search_params()
        scores, rows = self.index.search(qvecs, k, vectors=self.vectors if params.get("rerank") else None, **params)
        return [r for r in scores], [r for r in rows]


def parse_duration(text: str | float, what: str) -> float:
    """``2h``, ``30m``, ``90s``, ``1.5d`` or a number of seconds, as seconds; a one-line error otherwise."""
    if isinstance(text, (int, float)):
        return float(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smhd]?)\s*", str(text).lower())
    if not m:
        raise UserError(f"{what} {text!r}: give a duration like 2h, 30m, 90s or 1.5d")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def duration(seconds: float) -> str:
    """``seconds`` in the largest unit that keeps it readable (``40.1 days``, ``5.8 h``, ``12 min``, ``9 s``)."""
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _device() -> str:
    import os

    from indexes.vector import torch_gpu_device

    gpu = torch_gpu_device(load=False)
    return f"on {gpu}" if gpu else f"CPU, {os.cpu_count()} cores"


def _free_share() -> int:
    return int(available_memory() * 0.8)


def corpus_folder(root: Path, store: PassageStore, what: str) -> Path:
    """``root/<store name>/<what>``: where the indexes of one corpus go, one folder per engine."""
    return Path(root) / store.path.stem / re.sub(r"[^A-Za-z0-9._-]+", "_", what).strip("._-")


__all__ = ["BM25Engine", "CorpusSearch", "DenseEngine", "DenseIndexSettings", "EncodePlan", "duration", "parse_duration", "RowEngine", "corpus_folder",
           "store_texts"]

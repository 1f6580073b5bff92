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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from core.errors import UserError
from core.progress import progress_bar
from indexes.factory import RowIndex, check_fits, fit, human, plan, resolve
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
    ``ef_search``: search parameters; ``rerank``: re-score this many candidates exactly from the shards (0:
    none); ``max_memory``: the budget in bytes (None: the free memory only); ``train_size``: vectors to
    train on (None: FAISS's guideline); ``seed``: the training sample's; ``shard_dtype``: of the embedding
    shards on disk (``float16`` halves them; the index is built and re-ranks in float32 all the same).
    """

    index: str = "flat"
    nprobe: int | None = None
    ef_search: int | None = None
    rerank: int = 0
    max_memory: int | None = None
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
                                                                   "max_memory", "train_size", "seed",
                                                                   "shard_dtype")}
        if known.get("max_memory") is not None:
            known["max_memory"] = parse_bytes(known["max_memory"], "max_memory")
        return cls(**known, extra=merged)


class DenseEngine:
    """A dense retriever's encoder over a store: embedding shards in ``folder``, then a ``RowIndex``."""

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
        if todo:
            with pool_for() if pool_for is not None else nullcontext(None) as pool:
                self.shards.fill(texts, todo, encode=encoder.encode_documents, pool=pool, on_shard=on_shard)
        self.index = self._index(folder, say)

    @property
    def label(self) -> str:
        return f"{self.retriever.label}[{self.index.string}]"

    def _index(self, folder: Path, say: Callable[[str], None]) -> RowIndex:
        n, dim = self.shards.count, int(self.shards.manifest["dim"])
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
        p = plan(string, n, dim, train_size=s.train_size, store=store_bytes)
        path = folder / f"index-{_slug(string)}.faiss"
        if path.is_file():
            say(f"loading {path} ({human(path.stat().st_size)})")
            return RowIndex.load(path, string)
        say("memory plan: " + p.describe())
        check_fits(p, s.max_memory)
        say(f"building {string!r} (no finished index at {path}; a killed build starts over)")
        try:
            with progress_bar(n, f"add to {string}", unit="vec", leave=False) as bar:
                index = RowIndex.build(string, dim, n, lambda: (np.asarray(self.shards.read(i))
                                                                for i in range(self.shards.shards)),
                                       train_size=s.train_size, seed=s.seed, say=say,
                                       on_block=lambda done: bar.update(done - bar.n))
        except MemoryError:
            from indexes.factory import available_memory

            raise UserError(f"out of memory building {string!r} over {n:,} x {dim} in this process: the plan "
                            f"needs {human(p.total)}, {human(available_memory())} is free now; give a smaller "
                            f"--index or --max-index-memory") from None
        index.save(path)
        return index

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """Full vectors of ``rows`` as float32, read from the shards all at once (exact re-ranking)."""
        if self._rows is None:
            from indexes.rows import RowReader

            self._rows = RowReader([self.shards.path(i) for i in range(self.shards.shards)])
        return self._rows.read(rows)

    def search_rows(self, queries: Sequence[str], k: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        qvecs = np.asarray(self.retriever.encoder.encode_queries(list(queries)), dtype=np.float32)
        s = self.settings
        scores, rows = self.index.search(qvecs, k, nprobe=s.nprobe, ef_search=s.ef_search, rerank=s.rerank,
                                         vectors=self.vectors if s.rerank else None)
        return [r for r in scores], [r for r in rows]


def _slug(string: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", string).strip("_")


def _free_share() -> int:
    from indexes.factory import available_memory

    return int(available_memory() * 0.8)


def corpus_folder(root: Path, store: PassageStore, what: str) -> Path:
    """``root/<store name>/<what>``: where the indexes of one corpus go, one folder per engine."""
    return Path(root) / store.path.stem / re.sub(r"[^A-Za-z0-9._-]+", "_", what).strip("._-")


__all__ = ["BM25Engine", "CorpusSearch", "DenseEngine", "DenseIndexSettings", "RowEngine", "corpus_folder",
           "store_texts"]

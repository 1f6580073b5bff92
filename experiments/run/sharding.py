"""Where an open-domain corpus is encoded: in this process, or on a Ray pool of encoder actors, into shards.

A ``ShardPlan`` is not part of any run config: it changes where the vectors
are computed, never which passages a question gets.  The curve command and
``ctxcomp retrieve`` build one from their options and hand it, as an explicit
parameter, to the run (``evaluate(..., shards=plan)``) or to the retriever.
The shards themselves (format, resume, loading) are ``retrievers.shards``.

``RayEncoderPool`` is a pool of Ray actors, each holding the encoder of one
dense retriever section (built once per actor, on a GPU share when the
cluster has GPUs); shards go out through the one ``ray_pool.WorkQueue`` and
are written by this process as they come back.  An actor that dies is
restarted by Ray and its shard encoded again; if Ray gives up, the error stops
the encode, and running it again resumes from the shards already written.

The index side of the same shards (``RayShardedIndex``): a corpus index split across Ray actors: each holds the rows of some embedding shards, queries go to all.

When one machine cannot hold the index (21M passages, a flat or lightly
compressed index), the embedding shards that ``retrievers.shards`` writes --
locally or on the Ray encoder pool -- are divided into ``parts`` contiguous
row ranges.  Each ``IndexActor`` builds a ``RowIndex`` of the same factory
string over its range only, reading the ``.npy`` shards memory-mapped, so no
process ever holds more than its part.  A search is broadcast to every actor;
each answers its local top-k with global row numbers, and the driver merges
them into the global top-k.  For exact (flat) parts the merged hits are those
of one flat index over the whole corpus: the global top-k is contained in the
union of the parts' top-k.  An approximate string (IVF, HNSW) is searched by
the search plan one index of it gets (``indexes.factory.planned_search``), so
no search probes one inverted list of many by default.
"""
from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import UserError
from core.paths import cache_root
from core.progress import progress_bar
from indexes.factory import RECALL_TARGET, RowSearch, SearchGiven, few_lists, planned_search, slug
from indexes.types import Chunk
from retrievers.contract import check_vectors
from retrievers.dense import DenseRetriever
from retrievers.shards import DEFAULT_SHARD_SIZE, dense_retriever, index_from_shards


def default_shard_root() -> Path:
    """``$CTXCOMP_CACHE_DIR/shards``: where shard folders go unless a plan names one."""
    return cache_root() / "shards"


@dataclass(frozen=True)
class ShardPlan:
    """How a dense retriever's corpus embeddings are written as shards and loaded back.

    ``folder``: the shard folder itself; None: a folder named by corpus and encoder under ``root``.
    ``executor``: ``"local"`` encodes in this process, ``"ray"`` on a ``RayEncoderPool`` of ``workers``
    actors at ``address`` (None starts a local Ray instance).  ``progress``: a line naming the folder and a
    bar of shards on stderr.
    """

    folder: Path | None = None
    root: Path | None = None
    executor: str = "local"
    address: str | None = None
    workers: int | None = None
    shard_size: int = DEFAULT_SHARD_SIZE
    progress: bool = False

    def index(self, retriever: Any, chunks: Sequence[Chunk]) -> DenseRetriever:
        """``retriever`` (built, or a dense section) over ``chunks``, its vectors from this plan's shards."""
        built = dense_retriever(retriever)
        section = retriever if not isinstance(retriever, DenseRetriever) else None
        with progress_bar(None, "encode", unit="shard", enabled=self.progress, leave=False) as bar:
            def say(message: str, todo: int) -> None:
                where = "this process" if self.executor == "local" else "Ray"
                if self.progress:
                    print(message + (f", encoding {todo} on {where}" if todo else ""), file=sys.stderr, flush=True)
                bar.reset(total=todo)

            def pool() -> RayEncoderPool:
                if section is None:
                    raise ValueError("encoding on Ray needs the retriever's section, not a built retriever")
                return RayEncoderPool(section, address=self.address, workers=self.workers, gpus_per_worker=None)

            return index_from_shards(built, chunks, folder=self.folder, root=self.root or default_shard_root(),
                                     shard_size=self.shard_size, pool_for=pool if self.executor == "ray" else None,
                                     on_shard=lambda _i: bar.update(1), say=say)


    def encoder_pool(self, retriever: Any) -> Callable[[], RayEncoderPool] | None:
        """A factory of the Ray encoder pool for ``retriever``'s section (None when encoding here)."""
        if self.executor != "ray":
            return None
        return lambda: RayEncoderPool(retriever, address=self.address, workers=self.workers, gpus_per_worker=None)


class EncoderActor:
    """The body of one Ray actor: one encoder, built once from a retriever section."""

    def __init__(self, retriever: Any, env: dict[str, str], driver_node: str) -> None:
        import ray

        if ray.get_runtime_context().get_node_id() == driver_node:
            os.environ.update(env)
        built = dense_retriever(retriever)
        self.encoder, self.use_title = built.encoder, built.use_title

    def describe(self) -> tuple[str, bool, int]:
        return self.encoder.model_id, self.use_title, os.getpid()

    def encode(self, texts: list[str]) -> np.ndarray:
        return check_vectors(self.encoder, self.encoder.encode_documents(texts), len(texts))


class _RayActors:
    """Actors this process started on Ray, and Ray itself when this process started it: closed together, once."""

    _ray: Any
    actors: list[Any]
    _owns_ray: bool

    def close(self) -> None:
        from experiments.run.ray_pool import kill_actors

        kill_actors(self._ray, self.actors)
        self.actors = []
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_ray = False

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RayEncoderPool(_RayActors):
    """``workers`` Ray actors, each holding the encoder of ``retriever``; a ``retrievers.shards.ShardEncoder``.

    ``address``: as ``ctxcomp run --ray-address`` (None: a local Ray instance).  The encoder's model id
    and title setting are asked of the first actor, so this process never loads the model itself.
    ``gpus_per_worker=None`` picks from the cluster (:func:`auto_gpus`).  Use it as a context manager.
    """

    def __init__(self, retriever: Any, *, address: str | None = None, workers: int | None = None,
                 cpus_per_worker: float = 1.0, gpus_per_worker: float | None = 0.0, max_restarts: int = 2,
                 depth: int = 2) -> None:
        from experiments.run.ray_pool import FORWARDED_ENV, connect, import_ray, unwrap

        self._ray = ray = import_ray()
        self._owns_ray = connect(address, workers)
        if gpus_per_worker is None:
            workers, gpus_per_worker = auto_gpus(ray.cluster_resources().get("GPU", 0.0), workers)
        n = workers or max(1, int(ray.cluster_resources().get("CPU", 1.0) // max(cpus_per_worker, 1e-9)))
        env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        node = ray.get_runtime_context().get_node_id()
        remote = ray.remote(EncoderActor).options(num_cpus=cpus_per_worker, num_gpus=gpus_per_worker,
                                                  max_restarts=max_restarts, max_task_retries=max_restarts)
        self.actors = [remote.remote(retriever, env, node) for _ in range(n)]
        self.depth = depth
        try:
            described = ray.get([a.describe.remote() for a in self.actors])
        except ray.exceptions.RayTaskError as err:
            self.close()
            raise unwrap(err) from None
        self.model_id, self.use_title, _ = described[0]
        self.pids = [pid for _, _, pid in described]

    def encode(self, shards: dict[int, list[str]], save: Callable[[int, np.ndarray], None]) -> None:
        """Encode every shard on the pool; ``save(i, vectors)`` runs in this process as each one comes back."""
        from experiments.run.ray_pool import WorkQueue

        queue = WorkQueue(self._ray, self.actors, lambda actor, i: actor.encode.remote(shards[i]), depth=self.depth)
        queue.run(sorted(shards), save)



def auto_gpus(gpus: float, workers: int | None) -> tuple[int | None, float]:
    """(workers, GPUs per worker) on a cluster with ``gpus`` GPUs: no GPU, no share; else one actor per GPU
    (``workers`` None), or ``workers`` actors packed evenly, ``ceil(workers / gpus)`` to a GPU."""
    whole = int(gpus)
    if whole < 1:
        return workers, 0.0
    if workers is None:
        return whole, 1.0
    return workers, 1.0 / math.ceil(workers / whole)


# -- a corpus index split across Ray actors --------------------------------------------------------------------

class IndexActor:
    """The body of one Ray actor: a ``RowIndex`` over shards ``[first, last)`` of a shard folder."""

    def __init__(self, folder: str, first: int, last: int, string: str, seed: int = 0) -> None:
        from indexes.factory import RowIndex
        from retrievers.shards import ShardStore

        store = ShardStore.load(folder)
        self.offset = store.bounds(first)[0]
        n = store.bounds(last - 1)[1] - self.offset
        dim = int(store.manifest["dim"])
        self.index = RowIndex.build(string, dim, n, lambda: store.blocks(first, last), seed=seed)

    def size(self) -> tuple[int, int]:
        return self.offset, len(self.index)

    def kind(self) -> tuple[int, int, bool]:
        """(dimension, inverted lists, HNSW graph): what a search plan tunes (every part has the same)."""
        return self.index.dim, self.index.nlist, self.index.graph

    def search(self, queries: np.ndarray, k: int, params: dict) -> tuple[np.ndarray, np.ndarray]:
        """This part's own top ``k`` by its index's scores (``params``: ``nprobe`` / ``ef_search``), global rows."""
        scores, rows = self.index.search(queries, k, **params)
        return scores, np.where(rows >= 0, rows + self.offset, -1)


def split_shards(count: int, parts: int) -> list[tuple[int, int]]:
    """``count`` shards as ``parts`` contiguous, nearly equal ranges ``[first, last)``."""
    if parts < 1 or parts > count:
        raise UserError(f"cannot split {count} embedding shard(s) into {parts} parts; give 1..{count} parts")
    edges = np.linspace(0, count, parts + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def merge_top_k(parts: Sequence[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` (score, row) per query over every part's answer, best first (higher is better);
    ties go to the lower row, as one FAISS flat index orders them."""
    scores = np.concatenate([s for s, _ in parts], axis=1)
    rows = np.concatenate([r for _, r in parts], axis=1)
    scores = np.where(rows >= 0, scores, -np.inf)
    order = np.lexsort((rows, -scores), axis=1)[:, :k]
    return np.take_along_axis(scores, order, 1), np.take_along_axis(rows, order, 1)


Answers = Callable[[np.ndarray, int, dict], list[tuple[np.ndarray, np.ndarray]]]


class PartedIndex(RowSearch):
    """One index over a corpus cut into contiguous parts, each a ``RowIndex`` of the same ``string``.

    ``answers(queries, depth, params)`` asks every part for its own top ``depth`` (global rows; on Ray, all
    parts at once) and the best ``depth`` of their union are the candidates; an exact re-ranking then runs
    here, as for one index.  So it is searched, and planned (``indexes.factory.choose_search``), exactly as
    one index is: the same ``nprobe`` / ``efSearch`` in every part.  The parts' compressed scores are each an
    estimate of the same inner product, so merging them by score is what one index's search does with its
    own lists.
    """

    def __init__(self, string: str, count: int, kind: tuple[int, int, bool], answers: Answers) -> None:
        self.string, self.count, self.answers = string, count, answers
        self._dim, self._nlist, self._graph = kind

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def nlist(self) -> int:
        return self._nlist

    @property
    def graph(self) -> bool:
        return self._graph

    def __len__(self) -> int:
        return self.count

    def candidates(self, queries: np.ndarray, depth: int, nprobe: int | None,
                   ef_search: int | None) -> tuple[np.ndarray, np.ndarray]:
        params = {k: v for k, v in (("nprobe", nprobe), ("ef_search", ef_search)) if v is not None}
        return merge_top_k(self.answers(queries, depth, params), depth)


class RayShardedIndex(_RayActors):
    """``parts`` Ray actors, each an ``IndexActor`` over a share of the shard folder; use as a context manager.

    ``address``: a Ray cluster (None: a local instance).  ``search`` broadcasts and merges (``PartedIndex``).
    An approximate ``string`` (IVF, HNSW) gets the search plan one index of it gets
    (``indexes.factory.planned_search``): chosen when it is built to find ``recall_target`` of exact
    search's top-20 on the corpus's own vectors, kept in the shard folder
    (``index-<string>-<parts>parts[-seed<seed>].search.json``, reused while string, parts and seed stay) and
    printed through ``say``; ``nprobe`` / ``ef_search`` / ``rerank`` here override it (as ``--nprobe`` /
    ``--ef-search`` / ``--rerank`` do for one index), and so do those given to one ``search``.
    """

    def __init__(self, folder: str | os.PathLike, string: str = "Flat", *, parts: int = 2,
                 address: str | None = None, cpus_per_part: float = 1.0, seed: int = 0, nprobe: int | None = None,
                 ef_search: int | None = None, rerank: int | None = None, recall_target: float = RECALL_TARGET,
                 say: Callable[[str], None] = print) -> None:
        from experiments.run.ray_pool import connect, import_ray, unwrap
        from retrievers.shards import ShardStore

        self._ray = ray = import_ray()
        self.store = store = ShardStore.load(folder)
        ranges = split_shards(store.shards, parts)
        self._owns_ray = connect(address, parts)
        remote = ray.remote(IndexActor).options(num_cpus=cpus_per_part)
        self.actors = [remote.remote(str(folder), a, b, string, seed) for a, b in ranges]
        try:
            self.sizes = ray.get([a.size.remote() for a in self.actors])
            kind = ray.get(self.actors[0].kind.remote())
        except ray.exceptions.RayTaskError as err:
            self.close()
            raise unwrap(err) from None
        self.count = store.count
        self.index = PartedIndex(string, store.count, kind, self._answers)
        self._rows = store.row_reader()
        self.given = SearchGiven(nprobe, ef_search, rerank)
        self._say, self._warned = say, {nprobe}  # a given nprobe is warned about once, here or at a search
        say(f"index {string!r} over {store.count:,} rows in {parts} parts on Ray")
        sidecar = Path(folder) / (f"index-{slug(string)}-{parts}parts" + (f"-seed{seed}" if seed else "")
                                  + ".search.json")
        self.search_plan = planned_search(self.index, sidecar, store.blocks, self._rows.read, given=self.given,
                                          target=recall_target, seed=seed, say=say)

    def _answers(self, queries: np.ndarray, depth: int, params: dict) -> list[tuple[np.ndarray, np.ndarray]]:
        from experiments.run.ray_pool import unwrap

        try:
            return self._ray.get([a.search.remote(queries, depth, params) for a in self.actors])
        except self._ray.exceptions.RayTaskError as err:
            raise unwrap(err) from None

    def search_params(self) -> dict[str, int]:
        """What a search is given: the search plan's parameters, each overridden by a setting given here."""
        return self.given.over(self.search_plan)

    def search(self, queries: np.ndarray, k: int, *, nprobe: int | None = None, ef_search: int | None = None,
               rerank: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows), best first, over the whole corpus; ``nprobe`` / ``ef_search`` / ``rerank`` override
        the plan's (and the constructor's) for this search."""
        warning = few_lists(self.index, nprobe)
        if warning and nprobe not in self._warned:
            self._warned.add(nprobe)
            self._say(warning)
        settings = {**self.search_params(), **SearchGiven(nprobe, ef_search, rerank).over(None)}
        return self.index.search(queries, k, vectors=self._rows.read if settings.get("rerank") else None, **settings)



__all__ = ["EncoderActor", "IndexActor", "PartedIndex", "RayEncoderPool", "RayShardedIndex", "ShardPlan", "auto_gpus",
           "default_shard_root", "merge_top_k", "split_shards"]

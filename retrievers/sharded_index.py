"""A corpus index split across Ray actors: each holds the rows of some embedding shards, queries go to all.

When one machine cannot hold the index (21M passages, a flat or lightly
compressed index), the embedding shards that ``retrievers.shards`` writes --
locally or on the Ray encoder pool -- are divided into ``parts`` contiguous
row ranges.  Each ``IndexActor`` builds a ``RowIndex`` of the same factory
string over its range only, reading the ``.npy`` shards memory-mapped, so no
process ever holds more than its part.  A search is broadcast to every actor;
each answers its local top-k with global row numbers, and the driver merges
them into the global top-k.  For exact (flat) parts the merged hits are those
of one flat index over the whole corpus: the global top-k is contained in the
union of the parts' top-k.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from core.errors import UserError


class IndexActor:
    """The body of one Ray actor: a ``RowIndex`` over shards ``[first, last)`` of a shard folder."""

    def __init__(self, folder: str, first: int, last: int, string: str, seed: int = 0) -> None:
        from indexes.factory import RowIndex
        from retrievers.shards import ShardStore

        store = ShardStore.load(folder)
        self.offset = store.bounds(first)[0]
        n = store.bounds(last - 1)[1] - self.offset
        dim = int(store.manifest["dim"])
        self.index = RowIndex.build(string, dim, n, lambda: (np.asarray(store.read(i)) for i in range(first, last)),
                                    seed=seed)

    def size(self) -> tuple[int, int]:
        return self.offset, len(self.index)

    def search(self, queries: np.ndarray, k: int, params: dict) -> tuple[np.ndarray, np.ndarray]:
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


class RayShardedIndex:
    """``parts`` Ray actors, each an ``IndexActor`` over a share of the shard folder; use as a context manager.

    ``address``: a Ray cluster (None: a local instance).  ``search`` broadcasts and merges (``merge_top_k``).
    """

    def __init__(self, folder: str | os.PathLike, string: str = "Flat", *, parts: int = 2,
                 address: str | None = None, cpus_per_part: float = 1.0, seed: int = 0) -> None:
        from experiments.run.ray_pool import connect, import_ray
        from retrievers.shards import ShardStore

        self._ray = ray = import_ray()
        store = ShardStore.load(folder)
        ranges = split_shards(store.shards, parts)
        self._owns_ray = connect(address, parts)
        remote = ray.remote(IndexActor).options(num_cpus=cpus_per_part)
        self.actors = [remote.remote(str(folder), a, b, string, seed) for a, b in ranges]
        self.sizes = ray.get([a.size.remote() for a in self.actors])
        self.count = store.count

    def search(self, queries: np.ndarray, k: int, **params: Any) -> tuple[np.ndarray, np.ndarray]:
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        answers = self._ray.get([a.search.remote(queries, k, params) for a in self.actors])
        return merge_top_k(answers, k)

    def close(self) -> None:
        from experiments.run.ray_pool import kill_actors

        kill_actors(self._ray, self.actors)
        self.actors = []
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_ray = False

    def __enter__(self) -> RayShardedIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["IndexActor", "RayShardedIndex", "merge_top_k", "split_shards"]

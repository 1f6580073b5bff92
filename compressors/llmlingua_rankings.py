"""LongLLMLingua's document rankings, scored once: the cache every llmlingua compressor of a process shares.

The ranking (one LM pass per document, conditioned on the question) does not depend on the budget or on the
reader, so it is kept per (scoring LM, versions, documents, question) and re-used by every budget and reader
of a grid (``compressors.longllmlingua``, "Scored once", which holds the one cache per directory the process shares).
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.caches import LEDGER, open_store
from core.paths import cache_root

CACHE_NAME = "llmlingua"
# the libraries whose arithmetic decides the ranking's scores, named in every ranking key
SCORER_PACKAGES = ("llmlingua", "torch", "transformers")
MEMO_SIZE = 4096  # rankings kept in memory (a few hundred bytes each); the disk keeps every one


def ranking_key(scorer: str, documents: Sequence[str], question: str, rank_method: str, condition: str) -> str:
    """The cache key of one document ranking: the scoring LM (:meth:`LongLLMLinguaCompressor.scorer`, which names
    its versions), llmlingua's ranking settings, the question and the documents, hashed."""
    payload = [scorer, rank_method, condition, question, list(documents)]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class RankingLookup:
    """One ranking as ``get_rank_results`` returns it, ``(document index, score)`` best first, and where it came
    from: ``cached`` (memo or disk), ``seconds`` the LM time it took when it was made, ``lookup_s`` the time this
    lookup took (the fetch on a hit, the scoring on a miss)."""

    order: tuple[tuple[int, float], ...]
    cached: bool
    seconds: float
    lookup_s: float


class RankingCache:
    """LongLLMLingua's question-conditioned document rankings, computed once per key (:func:`ranking_key`).

    An in-process memo in front of a ``diskcache`` store (SQLite, atomic writes: a killed run leaves no torn
    entry, and several processes may share it) under ``$CTXCOMP_CACHE_DIR/llmlingua``.  An entry is JSON, the
    ranking and its LM seconds; one that does not rank exactly the documents asked about is scored again and
    overwritten.  ``hits`` / ``misses`` count lookups.
    """

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else cache_root() / CACHE_NAME
        self._store = open_store(self.directory, "LongLLMLingua ranking")
        self._memo: OrderedDict[str, tuple[tuple[tuple[int, float], ...], float]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def lookup(self, key: str, n_documents: int, score: Callable[[], Sequence[tuple[int, Any]]]) -> RankingLookup:
        """The ranking under ``key``, from the memo, else the disk, else ``score()`` (stored in both)."""
        LEDGER.note(CACHE_NAME, self.directory, [key])
        start = time.perf_counter()
        found = self._memo_get(key) or self._disk_get(key, n_documents)
        if found is not None:
            self.hits += 1
            return RankingLookup(found[0], True, found[1], time.perf_counter() - start)
        self.misses += 1
        start = time.perf_counter()
        order = tuple((int(i), float(s)) for i, s in score())
        seconds = time.perf_counter() - start
        self._store.set(key, json.dumps({"order": order, "seconds": seconds}))
        self._memo_put(key, (order, seconds))
        return RankingLookup(order, False, seconds, seconds)

    def _memo_get(self, key: str) -> tuple[tuple[tuple[int, float], ...], float] | None:
        with self._lock:
            found = self._memo.get(key)
            if found is not None:
                self._memo.move_to_end(key)
            return found

    def _memo_put(self, key: str, value: tuple[tuple[tuple[int, float], ...], float]) -> None:
        with self._lock:
            self._memo[key] = value
            while len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)

    def _disk_get(self, key: str, n_documents: int) -> tuple[tuple[tuple[int, float], ...], float] | None:
        raw = self._store.get(key)
        if raw is None:
            return None
        try:
            entry = json.loads(raw)
            order = tuple((int(i), float(s)) for i, s in entry["order"])
            seconds = float(entry["seconds"])
        except (ValueError, TypeError, KeyError):
            return None
        if sorted(i for i, _ in order) != list(range(n_documents)):
            return None
        self._memo_put(key, (order, seconds))
        return order, seconds

    def __len__(self) -> int:
        return len(self._store)

    def close(self) -> None:
        self._store.close()


__all__ = ["CACHE_NAME", "SCORER_PACKAGES", "RankingCache", "RankingLookup", "ranking_key"]

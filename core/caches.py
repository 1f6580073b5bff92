"""The content-addressed caches (generations, embeddings) seen from outside: which keys this process used, how
many entries a cache holds and how many bytes, and forgetting given keys.

A run records the keys it used (``ctxcomp cache info --run`` counts them, ``ctxcomp cache clear --run`` removes
them): the caches note every key they read or write into :data:`LEDGER` while a run's worker has it recording,
and the worker hands what was noted to the driver with each unit of work.  Outside a run nothing is noted, so a
long-lived process that uses a cache directly does not grow.
"""
from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from core.errors import UserError

# the file diskcache keeps its index in: a folder without one holds no cache
DISKCACHE_DB = "cache.db"


class CacheError(UserError):
    """A cache folder cannot be made or written (a file in the way, no permission, a read-only disk)."""


def check_writable(directory: str | os.PathLike, what: str) -> None:
    """Refuse, before any work, a cache folder that cannot be made or written: the nearest folder that exists on
    its path must be a folder this user may write (nothing is created here)."""
    path = Path(directory).absolute()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.is_dir() and os.access(probe, os.W_OK | os.X_OK):
        return
    reason = "is a file, not a folder" if probe.exists() and not probe.is_dir() else "may not be written by this user"
    raise CacheError(f"the {what} in {path} cannot be used: {probe} {reason}; set CTXCOMP_CACHE_DIR to a folder "
                     "this user may write (docs/reliability.md, \"Caches\")")


def open_store(directory: str | os.PathLike, what: str) -> Any:
    """The diskcache store in ``directory`` (made when missing); a folder that cannot be made or written is one
    line naming it and ``CTXCOMP_CACHE_DIR``."""
    import diskcache

    try:
        return diskcache.Cache(str(directory))
    except (OSError, sqlite3.Error) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise CacheError(f"the {what} cache in {directory} cannot be used: {reason}; set CTXCOMP_CACHE_DIR to a "
                         "folder this user may write (docs/reliability.md, \"Caches\")") from None


# One call that touches more keys than this (a whole open-domain corpus indexed at once) is counted, not recorded:
# 21M passage keys would take gigabytes in memory and in the run directory. Clear such a cache by its folder.
MAX_KEYS_PER_CALL = 100_000


class CacheUse(NamedTuple):
    """The entries of one cache folder some work used: their keys, and how many more it used unrecorded."""

    cache: str
    folder: str
    keys: list[str]
    unrecorded: int = 0


class KeyLedger:
    """Cache keys used in this process, by (cache name, cache folder), while at least one holder records."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders: set[int] = set()
        self._keys: dict[tuple[str, str], set[str]] = {}
        self._unrecorded: dict[tuple[str, str], int] = {}

    def start(self, holder: object) -> None:
        """Record while ``holder`` (a run's worker) lives; several holders may record at once."""
        with self._lock:
            self._holders.add(id(holder))

    def stop(self, holder: object) -> None:
        """``holder`` no longer records (twice is harmless); when no holder is left, what was not taken is dropped."""
        with self._lock:
            self._holders.discard(id(holder))
            if not self._holders:
                self._keys.clear()
                self._unrecorded.clear()

    def note(self, cache: str, directory: str | os.PathLike, keys: Sequence[str]) -> None:
        """Remember ``keys`` of the cache ``cache`` in ``directory`` (nothing while no one records); more than
        ``MAX_KEYS_PER_CALL`` at once are only counted."""
        if not self._holders:
            return
        where = (cache, str(Path(directory).resolve()))
        with self._lock:
            if not self._holders:
                return
            if len(keys) > MAX_KEYS_PER_CALL:
                self._unrecorded[where] = self._unrecorded.get(where, 0) + len(keys)
            else:
                self._keys.setdefault(where, set()).update(keys)

    def take(self) -> list[CacheUse]:
        """What was noted since the last take, by cache folder (keys sorted), and forget it."""
        with self._lock:
            keys, self._keys = self._keys, {}
            unrecorded, self._unrecorded = self._unrecorded, {}
        return [CacheUse(cache, folder, sorted(keys.get((cache, folder), ())), unrecorded.get((cache, folder), 0))
                for cache, folder in sorted({*keys, *unrecorded})]


LEDGER = KeyLedger()


def is_diskcache(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds a diskcache store (never creates one)."""
    return (Path(directory) / DISKCACHE_DB).is_file()


def folder_bytes(directory: str | os.PathLike) -> int:
    """Bytes of every file under ``directory`` (0 when it is missing); links are not followed."""
    total = 0
    for folder, _dirs, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total


def forget(directory: str | os.PathLike, keys: Iterable[str]) -> int:
    """Delete ``keys`` from the diskcache store in ``directory``; how many were there. A missing store is 0."""
    if not is_diskcache(directory):
        return 0
    import diskcache

    removed = 0
    with diskcache.Cache(str(directory)) as store:
        for key in keys:
            removed += bool(store.delete(key))
    return removed


__all__ = ["DISKCACHE_DB", "LEDGER", "MAX_KEYS_PER_CALL", "CacheError", "CacheUse", "KeyLedger", "check_writable",
           "folder_bytes", "forget", "is_diskcache", "open_store"]

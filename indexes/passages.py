"""An on-disk passage store: one SQLite file, read by row number, so a 21M-passage corpus never sits in memory.

Search results are int64 row numbers (0-based, in corpus order); the store
turns the few a question keeps into ``(doc_id, title, text)``.  SQLite is the
one file that is at once streamable to write, random-access to read, and in
the standard library.

Building survives a kill: rows go into ``NAME.partial`` in committed blocks,
beside a ``meta`` table naming the source; only a finished build is renamed
to ``NAME``, so a file under the real name is always whole.  Running the
build again over the same source continues after the last committed block
(the stream skips what is already stored); over another source it starts
over.  ``StoreBuild.resumed_at`` says which.
"""
from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.errors import UserError
from core.files import disk_error

BLOCK = 20_000
SCHEMA = 1


@dataclass(frozen=True)
class StoredPassage:
    """One passage as stored: ``row`` its 0-based place in the corpus, ``doc_id`` the corpus's own id."""

    row: int
    doc_id: str
    title: str
    text: str


class PassageStore:
    """A finished store, opened read-only; ``get(rows)`` reads passages by row number."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise UserError(f"{self.path}: no passage store there (build it with build_store)")
        self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
        meta = dict(self._db.execute("SELECT key, value FROM meta"))
        if meta.get("complete") != "1":
            raise UserError(f"{self.path}: an unfinished passage store; build it again")
        self.source = meta.get("source", "")
        self._count = int(meta["count"])

    def __len__(self) -> int:
        return self._count

    def get(self, rows: Sequence[int] | np.ndarray) -> list[StoredPassage]:
        """The passages at ``rows`` (int64 row numbers), in the order given; an unknown row is a ValueError."""
        wanted = [int(r) for r in rows]
        if not wanted:
            return []
        found: dict[int, StoredPassage] = {}
        for lo in range(0, len(wanted), 900):  # SQLite's bound-parameter limit
            part = sorted(set(wanted[lo: lo + 900]))
            marks = ",".join("?" * len(part))
            for row, doc_id, title, text in self._db.execute(
                    f"SELECT row, doc_id, title, text FROM passages WHERE row IN ({marks})", part):
                found[row] = StoredPassage(row, doc_id, title, text)
        missing = [r for r in wanted if r not in found]
        if missing:
            raise ValueError(f"{self.path}: no row {missing[0]} (the store holds rows 0..{self._count - 1})")
        return [found[r] for r in wanted]

    def blocks(self, size: int = BLOCK, start: int = 0) -> Iterator[list[StoredPassage]]:
        """Every passage from row ``start`` on, ``size`` rows at a time (encoding, BM25 tokenization)."""
        for lo in range(start, self._count, size):
            cur = self._db.execute("SELECT row, doc_id, title, text FROM passages WHERE row >= ? AND row < ? "
                                   "ORDER BY row", (lo, lo + size))
            yield [StoredPassage(*r) for r in cur]

    def close(self) -> None:
        self._db.close()


@dataclass(frozen=True)
class StoreBuild:
    """What ``build_store`` did: ``resumed_at`` is the row it continued from (0: built from the start);
    ``started_over``: why an earlier partial file was discarded ('' when none was)."""

    store: PassageStore
    resumed_at: int
    started_over: str
    built: bool  # False: the finished store was already there

    def describe(self) -> str:
        if not self.built:
            return f"passage store {self.store.path}: already built ({len(self.store):,} passages)"
        how = (f"continued an interrupted build at row {self.resumed_at:,}" if self.resumed_at
               else "started over (" + self.started_over + ")" if self.started_over else "built")
        return f"passage store {self.store.path}: {how}, {len(self.store):,} passages"


def partial_path(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


def build_store(path: str | os.PathLike, rows: Callable[[], Iterable[tuple[str, str, str]]], *, source: str,
                block: int = BLOCK, on_block: Callable[[int], None] | None = None) -> StoreBuild:
    """Stream ``rows()`` ((doc_id, text, title) in corpus order) into the store at ``path``, ``block`` at a time.

    ``source`` names what the rows come from (a file and its size and mtime): a finished store or a partial
    build of another source is never reused.  ``on_block(rows_stored)`` is called after each committed block.
    """
    path = Path(path)
    if path.is_file():
        try:
            store = PassageStore(path)
        except (UserError, sqlite3.DatabaseError):
            store = None
        if store is not None and store.source == source:
            return StoreBuild(store, 0, "", built=False)
        if store is not None:
            store.close()
        path.unlink()
    part = partial_path(path)
    resumed_at, started_over = 0, ""
    if part.is_file():
        resumed_at, started_over = _resume_point(part, source)
        if not resumed_at:
            part.unlink()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(part)
        with db:
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            db.execute("CREATE TABLE IF NOT EXISTS passages (row INTEGER PRIMARY KEY, doc_id TEXT, title TEXT, "
                       "text TEXT)")
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                           [("schema", str(SCHEMA)), ("source", source), ("complete", "0")])
        count = _stream_into(db, rows(), resumed_at, block, on_block)
        with db:
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", [("count", str(count)), ("complete", "1")])
        db.close()
        os.replace(part, path)
    except sqlite3.OperationalError as err:
        if "disk is full" in str(err) or "disk I/O" in str(err):
            raise disk_error(part, OSError(errno.ENOSPC, str(err))) from None
        raise
    except OSError as err:
        raise disk_error(part, err) from None
    return StoreBuild(PassageStore(path), resumed_at, started_over, built=True)


def _resume_point(part: Path, source: str) -> tuple[int, str]:
    """(rows already committed in the partial file, '') when it is of ``source``; else (0, why not)."""
    try:
        db = sqlite3.connect(part)
        try:
            meta = dict(db.execute("SELECT key, value FROM meta"))
            stored = db.execute("SELECT COALESCE(MAX(row) + 1, 0) FROM passages").fetchone()[0]
        finally:
            db.close()
    except sqlite3.DatabaseError as err:
        return 0, f"the partial file {part.name} is unreadable: {err}"
    if meta.get("source") != source:
        return 0, f"the partial file {part.name} is of another source"
    return int(stored), ""


def _stream_into(db: sqlite3.Connection, rows: Iterable[tuple[str, str, str]], start: int, block: int,
                 on_block: Callable[[int], None] | None) -> int:
    """Insert rows from number ``start`` on (skipping those before it), committing each ``block``; the count."""
    batch: list[tuple[int, str, str, str]] = []
    row = -1
    for row, (doc_id, text, title) in enumerate(rows):
        if row < start:
            continue
        batch.append((row, doc_id, title, text))
        if len(batch) >= block:
            with db:
                db.executemany("INSERT INTO passages VALUES (?, ?, ?, ?)", batch)
            batch.clear()
            if on_block is not None:
                on_block(row + 1)
    if batch:
        with db:
            db.executemany("INSERT INTO passages VALUES (?, ?, ?, ?)", batch)
        if on_block is not None:
            on_block(row + 1)
    if row + 1 == 0:
        raise UserError("the corpus is empty: no passages to store")
    return row + 1


__all__ = ["BLOCK", "PassageStore", "StoreBuild", "StoredPassage", "build_store", "partial_path"]

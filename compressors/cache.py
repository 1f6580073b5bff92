"""A content-addressed cache of finished compressions, so a killed run redoes none of them.

A compressor that calls a model can take minutes an example (LongLLMLingua on a busy CPU: ~190 s); the runner
keeps each example's compression here the moment it is done, before the reader is asked, so a run killed
mid-batch, resumed with any batch size, compresses only what it had not.  Key: sha256 of (the compressor's
identity and its section, the units it counts in (the reader's identity: budgets and token counts are in the
reader's tokens), the budget, the example's content (id, query, context, passages, language), ctxcomp's output
versions and :data:`COMPRESSION_VERSION`, bumped by hand when a built-in's output changes).  Entries live in a
``diskcache`` store (SQLite, atomic writes) under ``$CTXCOMP_CACHE_DIR/compressions``, safe to share between
processes; a cached compression counts the time and model work recorded when it was made, so a config's
figures do not depend on what an earlier run left here.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from compressors.base import CompressedContext, Compressible, ModelWork
from core.caches import LEDGER, open_store
from core.paths import cache_root
from core.versions import versions_tag
from indexes.types import Passage

CACHE_NAME = "compressions"
COMPRESSION_VERSION = 1  # 1: CompressedContext with kept_spans

_stored = 0  # compressions this process wrote: what an interrupted run says it kept
_stored_lock = threading.Lock()


def stored_count() -> int:
    """Compressions this process has written to any compression cache (the interrupted run's message)."""
    return _stored


def compression_key(compressor: str, section: str, units: str, budget: int | None, item: Compressible) -> str:
    """The cache key of ``item`` compressed by the compressor ``compressor`` (its identity) built from ``section``
    (its config section as canonical JSON), counting in ``units``, at ``budget``."""
    passages = [[p.title, p.text, p.doc_id, p.is_gold, p.has_answer, p.score] for p in item.passages]
    payload = [compressor, section, units, budget, item.id, item.query, item.context, passages, item.lang,
               versions_tag(), COMPRESSION_VERSION]
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8")).hexdigest()


class CompressionCache:
    """Finished compressions by :func:`compression_key`, each with the seconds it took."""

    def __init__(self, directory: str | os.PathLike | None = None) -> None:
        self.directory = Path(directory) if directory is not None else cache_root() / CACHE_NAME
        self.store = open_store(self.directory, "compression")

    def get(self, key: str) -> tuple[CompressedContext, float] | None:
        """(the compression, the seconds it took when made), or None when it was never kept."""
        LEDGER.note(CACHE_NAME, self.directory, [key])
        raw = self.store.get(key)
        if raw is None:
            return None
        fields: dict[str, Any] = json.loads(raw)
        seconds = float(fields.pop("seconds", 0.0))
        spans = fields.get("kept_spans")
        return CompressedContext(
            **{**fields, "kept_chunks": tuple(fields["kept_chunks"]), "scores": tuple(fields["scores"]),
               "passages": tuple(Passage(**p) for p in fields["passages"]), "work": ModelWork(**fields["work"]),
               "kept_spans": None if spans is None else tuple((int(s), int(e)) for s, e in spans)}), seconds

    def put(self, key: str, compressed: CompressedContext, seconds: float) -> None:
        """Keep ``compressed`` (made in ``seconds``) under ``key``; written before this returns."""
        global _stored
        LEDGER.note(CACHE_NAME, self.directory, [key])
        fields = dataclasses.asdict(compressed)
        self.store.set(key, json.dumps({**fields, "seconds": seconds}, ensure_ascii=False, default=str))
        with _stored_lock:
            _stored += 1

    def close(self) -> None:
        self.store.close()


__all__ = ["CACHE_NAME", "COMPRESSION_VERSION", "CompressionCache", "compression_key", "stored_count"]

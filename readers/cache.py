"""A content-addressed generation cache around any reader, so a re-run makes no model call.

Key: sha256 of (reader identity, prompt, max_new_tokens, temperature, stop,
chat, the system message, and the versions that decide the output: ctxcomp's
prompt and scoring versions and the reader's backend library, see
:func:`key_versions`).  So a fix in ctxcomp's prompt building or scoring (its
version bumped, ``core.versions``) or another transformers / torch never
answers from a generation made before it.  Only successful generations are
stored, so a request that failed is asked again next time.  Entries live in a
``diskcache`` store (SQLite, atomic writes) under
``$CTXCOMP_CACHE_DIR/generations`` (default ``~/.cache/ctxcomp/generations``),
safe to share between processes and installations.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Sequence

from core.caches import LEDGER, open_store
from core.paths import cache_root
from core.versions import versions_tag
from readers.base import Generation, GenerationRequest, Reader, Tokenizer, TruncationPolicy

CACHE_NAME = "generations"

def key_versions(reader: Reader) -> str:
    """What besides the request decides ``reader``'s output: ``prompt=1,scoring=1,torch=2.13.0,transformers=...``,
    the libraries its class declares in ``backend_packages``.  A reader's ``identity`` already names a served model
    (OpenAI-compatible: the model id) and llama.cpp's version; a ``backend_version`` string attribute replaces the
    packages' versions."""
    own = getattr(reader, "backend_version", None)
    if isinstance(own, str):
        return f"{versions_tag()},backend={own}"
    return versions_tag(tuple(getattr(type(reader), "backend_packages", ())))


def generation_key(identity: str, req: GenerationRequest, versions: str = "") -> str:
    """The cache key of one request to the reader named by ``identity`` under ``versions`` (:func:`key_versions`)."""
    payload = [identity, req.prompt, req.max_new_tokens, req.temperature, list(req.stop), req.chat]
    if req.system is not None:
        payload.append({"system": req.system})
    if versions:
        payload.append({"versions": versions})
    if req.prompt_version != 1:
        payload.append({"prompt_version": req.prompt_version})
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()


class CachedReader(Reader):
    """Wraps ``inner``; hits come back with ``cached=True`` and ``cost_usd=0`` (the original cost is in ``meta``).

    Misses are sent to ``inner`` in one ``generate`` call, so the inner reader
    still batches them; each generation is stored as soon as the inner reader
    reports it (``Reader._finished``), else when the batch ends.  ``hits`` / ``misses`` count requests over the
    wrapper's life.
    """

    def __init__(self, inner: Reader, directory: str | os.PathLike | None = None) -> None:
        if isinstance(inner, CachedReader):
            raise TypeError("a CachedReader must not wrap another CachedReader")
        self.inner = inner
        self.directory = Path(directory) if directory is not None else cache_root() / CACHE_NAME
        self.store = open_store(self.directory, "generation")
        self.versions = key_versions(inner)
        self.hits = 0
        self.misses = 0

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def label(self) -> str:
        return self.inner.label

    @property
    def max_context(self) -> int:  # type: ignore[override]
        return self.inner.max_context

    @property
    def truncation(self) -> TruncationPolicy:  # type: ignore[override]
        return self.inner.truncation

    @property
    def tokenizer(self) -> Tokenizer | None:  # type: ignore[override]
        return self.inner.tokenizer

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def prompt_overhead(self, request: GenerationRequest) -> int:
        return self.inner.prompt_overhead(request)

    def key(self, request: GenerationRequest) -> str:
        """This request's cache key."""
        return generation_key(self.inner.identity, request, self.versions)

    def is_cached(self, request: GenerationRequest) -> bool:
        """Whether ``generate`` would answer this request from the cache (for dry runs; counts nothing)."""
        return self.key(request) in self.store

    def forget(self, request: GenerationRequest) -> None:
        """Drop this request's cached generation (an answer found unusable), so the next call asks again."""
        self.store.delete(self.key(request))

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        identity = self.inner.identity
        keys = [generation_key(identity, r, self.versions) for r in requests]
        LEDGER.note(CACHE_NAME, self.directory, keys)
        results: list[Generation | None] = []
        for key in keys:
            start = time.perf_counter()
            stored = self.store.get(key)
            if stored is None:
                results.append(None)
                continue
            fields = json.loads(stored)
            meta = dict(fields.pop("meta", {}), cached_cost_usd=fields.pop("cost_usd", 0.0),
                        cached_latency_s=fields.pop("latency_s", 0.0))
            results.append(Generation(**fields, cached=True, meta=meta, latency_s=time.perf_counter() - start))
        missing = [i for i, g in enumerate(results) if g is None]
        self.hits += len(requests) - len(missing)
        self.misses += len(missing)
        self._advance(len(requests) - len(missing))
        if missing:
            stored: set[int] = set()
            guard = threading.Lock()

            def keep(j: int, gen: Generation) -> None:  # each answer as it returns: a kill loses only those in flight
                if gen.ok:
                    self._store(keys[missing[j]], gen)
                    with guard:
                        stored.add(j)

            with self.inner.reporting(self._progress, self._step, keep):
                fresh = self.inner.generate([requests[i] for i in missing])
            if len(fresh) != len(missing):
                raise RuntimeError(f"{type(self.inner).__name__} returned {len(fresh)} generations for {len(missing)} requests")
            for j, (i, gen) in enumerate(zip(missing, fresh)):
                results[i] = gen
                if gen.ok and j not in stored:  # a reader without the hook: stored when its batch ends
                    self._store(keys[i], gen)
        return results  # type: ignore[return-value]

    def _store(self, key: str, gen: Generation) -> None:
        fields = dataclasses.asdict(gen)
        fields.pop("cached")
        self.store.set(key, json.dumps(fields, ensure_ascii=False, default=str))

    def close(self) -> None:
        self.inner.close()
        self.store.close()

    def __repr__(self) -> str:
        return f"CachedReader({self.inner!r}, directory={str(self.directory)!r})"

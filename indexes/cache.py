"""Content-addressed embedding cache: an embedding is computed once per (model, backend versions, text).

Backed by ``diskcache`` (SQLite, atomic writes), so a killed run never leaves a
torn entry and several processes may share one cache.  Vectors are stored as
raw float32 bytes (no pickle).  The key names the encoder (its model id) and the
versions of the libraries that compute a local encoder's vectors
(sentence-transformers, transformers, torch), so another release of them never
answers from vectors made before; a remote encoder (``openai:...``) is named by
its model id alone.
"""
from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from core.caches import LEDGER, open_store
from core.paths import cache_root
from core.versions import versions_tag

CACHE_NAME = "embeddings"
LOCAL_ENCODER_PACKAGES = ("sentence-transformers", "transformers", "torch")
REMOTE_PREFIXES = ("openai:",)  # model ids of encoders served elsewhere (retrievers.openai_embeddings)


@functools.lru_cache(maxsize=None)
def encoder_versions(model_id: str) -> str:
    """The library versions that decide a ``model_id``'s vectors: none for a remote encoder, else the local stack."""
    return "" if model_id.startswith(REMOTE_PREFIXES) else versions_tag(LOCAL_ENCODER_PACKAGES, own=False)


def text_key(model_id: str, text: str) -> str:
    """The cache key: the model id, the versions that decide its vectors, and the SHA-256 of the text."""
    return f"{model_id}\x1f{encoder_versions(model_id)}\x1f{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


_SECONDS = "\x1fs"  # suffix of the key under which a text's encoding time is kept


class EmbeddingCache:
    """Embeddings keyed by (model_id, sha256(text)); counts ``hits`` and ``misses``."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else cache_root() / CACHE_NAME
        self._store = open_store(self.directory, "embedding")
        self.hits = 0
        self.misses = 0

    def get_many(self, model_id: str, texts: Sequence[str]) -> list[np.ndarray | None]:
        """One float32 vector per text, or ``None`` where the cache has none."""
        out: list[np.ndarray | None] = []
        keys = [text_key(model_id, text) for text in texts]
        LEDGER.note(CACHE_NAME, self.directory, keys)
        for key in keys:
            raw = self._store.get(key)
            if raw is None:
                self.misses += 1
                out.append(None)
            else:
                self.hits += 1
                out.append(np.frombuffer(raw, dtype=np.float32).copy())
        return out

    def put_many(self, model_id: str, texts: Sequence[str], vectors: np.ndarray | Sequence[np.ndarray],
                 seconds: float | None = None) -> None:
        """Store ``vectors[i]`` for ``texts[i]`` in one transaction; ``seconds``: the encoding time of each text
        (its batch's time over its size), kept so a later hit can report what the embedding cost to make."""
        if len(texts) != len(vectors):
            raise ValueError(f"got {len(texts)} texts for {len(vectors)} vectors")
        keys = [text_key(model_id, text) for text in texts]
        LEDGER.note(CACHE_NAME, self.directory, keys)
        with self._store.transact():
            for key, vec in zip(keys, vectors):
                arr = np.asarray(vec, dtype=np.float32)
                if arr.ndim != 1:
                    raise ValueError(f"each cached embedding must be 1-D, got shape {arr.shape}")
                self._store.set(key, arr.tobytes())
                if seconds is not None:
                    self._store.set(key + _SECONDS, repr(float(seconds)))

    def seconds_many(self, model_id: str, texts: Sequence[str]) -> list[float]:
        """The recorded encoding time of each text (0.0 for an entry stored before times were kept)."""
        return [float(self._store.get(text_key(model_id, text) + _SECONDS) or 0.0) for text in texts]

    def __len__(self) -> int:
        """Embeddings stored (their recorded encoding times are not counted)."""
        return sum(1 for key in self._store.iterkeys() if not str(key).endswith(_SECONDS))

    def forget(self, keys: Iterable[str]) -> int:
        """Delete the embeddings under ``keys`` (:func:`text_key`) with their recorded times; how many were there."""
        removed = 0
        with self._store.transact():
            for key in keys:
                removed += bool(self._store.delete(key))
                self._store.delete(key + _SECONDS)
        return removed

    def clear(self) -> None:
        self._store.clear()

    def close(self) -> None:
        self._store.close()


_shared: dict[Path, EmbeddingCache] = {}


def shared_embedding_cache() -> EmbeddingCache:
    """One cache object per cache directory, shared by every dense retriever of the process."""
    directory = cache_root() / CACHE_NAME
    if directory not in _shared:
        _shared[directory] = EmbeddingCache(directory)
    return _shared[directory]

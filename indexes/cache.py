"""Content-addressed embedding cache: an embedding is computed once per (model, text).

Backed by ``diskcache`` (SQLite, atomic writes), so a killed run never leaves a
torn entry and several processes may share one cache.  Vectors are stored as
raw float32 bytes (no pickle).
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from core.paths import cache_root


def text_key(model_id: str, text: str) -> str:
    """The cache key: the model id plus the SHA-256 of the text."""
    return f"{model_id}\x1f{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


_SECONDS = "\x1fs"  # suffix of the key under which a text's encoding time is kept


class EmbeddingCache:
    """Embeddings keyed by (model_id, sha256(text)); counts ``hits`` and ``misses``."""

    def __init__(self, directory: str | Path | None = None) -> None:
        import diskcache

        self.directory = Path(directory) if directory is not None else cache_root() / "embeddings"
        self.directory.mkdir(parents=True, exist_ok=True)
        self._store = diskcache.Cache(str(self.directory))
        self.hits = 0
        self.misses = 0

    def get_many(self, model_id: str, texts: Sequence[str]) -> list[np.ndarray | None]:
        """One float32 vector per text, or ``None`` where the cache has none."""
        out: list[np.ndarray | None] = []
        for text in texts:
            raw = self._store.get(text_key(model_id, text))
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
        with self._store.transact():
            for text, vec in zip(texts, vectors):
                arr = np.asarray(vec, dtype=np.float32)
                if arr.ndim != 1:
                    raise ValueError(f"each cached embedding must be 1-D, got shape {arr.shape}")
                key = text_key(model_id, text)
                self._store.set(key, arr.tobytes())
                if seconds is not None:
                    self._store.set(key + _SECONDS, repr(float(seconds)))

    def seconds_many(self, model_id: str, texts: Sequence[str]) -> list[float]:
        """The recorded encoding time of each text (0.0 for an entry stored before times were kept)."""
        return [float(self._store.get(text_key(model_id, text) + _SECONDS) or 0.0) for text in texts]

    def __len__(self) -> int:
        """Embeddings stored (their recorded encoding times are not counted)."""
        return sum(1 for key in self._store.iterkeys() if not str(key).endswith(_SECONDS))

    def clear(self) -> None:
        self._store.clear()

    def close(self) -> None:
        self._store.close()


_shared: dict[Path, EmbeddingCache] = {}


def shared_embedding_cache() -> EmbeddingCache:
    """One cache object per cache directory, shared by every dense retriever of the process."""
    directory = cache_root() / "embeddings"
    if directory not in _shared:
        _shared[directory] = EmbeddingCache(directory)
    return _shared[directory]

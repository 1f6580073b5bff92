"""A dense retriever's corpus embeddings as shards on disk: written once, resumable, loaded into its index.

An open-domain corpus (Wikipedia's 21M passages) is too large for the
per-text embedding cache and too slow for one process.  A ``ShardStore`` cuts
the corpus, in order, into shards of ``shard_size`` passages and keeps each
shard's vectors as one ``.npy`` file (float32, or float16 to halve the disk
Wikipedia's shards take -- 32 GB instead of 64.5 GB at 768-d; ``(rows, dim)``,
rows as the encoder returns them) next to a ``manifest.json`` naming the
encoder, the title setting, the corpus fingerprint, the shard size and dtype.
Each shard is written whole or not at all (``core.files.write_atomic``), so a
kill leaves whole shards only and the next call encodes just the missing
ones.  A folder that holds another corpus's or another encoder's shards is
refused, never mixed.

:func:`index_from_shards` fills the missing shards -- here, or through a
``ShardEncoder`` pool (Ray actors; ``experiments.run.sharding``) -- and loads
them into the retriever's own index kind, so it searches as if it had indexed
the chunks itself.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ContextManager, Protocol

import numpy as np

from core.errors import UserError
from core.files import write_atomic
from indexes.types import Chunk
from retrievers.base import titled_text
from retrievers.contract import check_vectors
from retrievers.dense import DenseRetriever

MANIFEST = "manifest.json"
FORMAT = 1
DEFAULT_SHARD_SIZE = 50_000
SHARD_DTYPES = ("float32", "float16")

SaveShard = Callable[[int, np.ndarray], None]


class ShardEncoder(Protocol):
    """Encodes many shards elsewhere (a pool of workers) and hands each back to ``save`` in this process."""

    model_id: str
    use_title: bool

    def encode(self, shards: dict[int, list[str]], save: SaveShard) -> None: ...


def fingerprint(texts: Sequence[str]) -> str:
    """SHA-256 over the texts in order (each length-prefixed, so no two corpora collide by concatenation)."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def shard_folder_name(model_id: str, use_title: bool, digest: str, shard_size: int) -> str:
    """``<corpus hash>-<encoder id>[-notitle][-s<shard size>]``, safe as one path component."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("._-")[-80:] or "encoder"
    return (f"{digest[:16]}-{slug}" + ("" if use_title else "-notitle")
            + ("" if shard_size == DEFAULT_SHARD_SIZE else f"-s{shard_size}"))


@dataclass
class ShardStore:
    """A folder of embedding shards: ``manifest.json`` and ``shard-00000.npy``, ``shard-00001.npy``, ..."""

    directory: Path
    manifest: dict[str, Any]

    @classmethod
    def open(cls, directory: str | os.PathLike, *, model_id: str, use_title: bool, texts: Sequence[str],
             shard_size: int, digest: str | None = None, dtype: str = "float32") -> ShardStore:
        """Create the folder's manifest, or check that the one there describes this corpus and encoder.

        ``digest``: ``fingerprint(texts)`` when the caller has already computed it (a large corpus takes a while).
        ``dtype``: of the vectors on disk; float16 keeps about 3 significant digits, which moves an exact
        re-ranking's scores by about 1e-3 (docs/scale.md measures what that does to the top-20).
        """
        if shard_size < 1:
            raise UserError(f"shard_size must be >= 1, got {shard_size}")
        if dtype not in SHARD_DTYPES:
            raise UserError(f"shard_dtype must be one of {', '.join(SHARD_DTYPES)}, got {dtype!r}")
        if not texts:
            raise UserError("cannot encode an empty corpus")
        directory = Path(directory)
        _remove_stale_temporaries(directory)
        want = {"format": FORMAT, "model_id": model_id, "use_title": use_title, "count": len(texts),
                "shard_size": shard_size, "fingerprint": digest or fingerprint(texts), "dtype": dtype}
        path = directory / MANIFEST
        if path.is_file():
            have = {"dtype": "float32", **json.loads(path.read_text(encoding="utf-8"))}  # older folders: float32
            differs = [k for k in want if have.get(k) != want[k]]
            if differs:
                raise UserError(f"{directory} holds embedding shards of another corpus or encoder "
                                f"({', '.join(differs)} differ); use another folder or delete it")
            return cls(directory, have)
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(want, indent=2))
        return cls(directory, want)

    @classmethod
    def load(cls, directory: str | os.PathLike) -> ShardStore:
        """An existing folder (every shard must be there; see :meth:`missing`)."""
        directory = Path(directory)
        path = directory / MANIFEST
        if not path.is_file():
            raise UserError(f"{directory} holds no embedding shards (no {MANIFEST})")
        store = cls(directory, json.loads(path.read_text(encoding="utf-8")))
        if store.missing():
            raise UserError(f"{directory}: {len(store.missing())} of {store.shards} shard(s) are missing; "
                            f"run the encode again to finish it")
        return store

    # -- layout -------------------------------------------------------------------------
    @property
    def count(self) -> int:
        return int(self.manifest["count"])

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.manifest.get("dtype", "float32"))

    @property
    def shards(self) -> int:
        return -(-self.count // int(self.manifest["shard_size"]))

    def bounds(self, i: int) -> tuple[int, int]:
        """Rows ``[lo, hi)`` of the corpus that shard ``i`` holds."""
        size = int(self.manifest["shard_size"])
        return i * size, min((i + 1) * size, self.count)

    def path(self, i: int) -> Path:
        return self.directory / f"shard-{i:05d}.npy"

    def done(self, i: int) -> bool:
        """Whether shard ``i`` is on disk whole (the right number of rows)."""
        path = self.path(i)
        if not path.is_file():
            return False
        try:
            array = np.load(path, mmap_mode="r")
        except (ValueError, OSError):
            return False
        lo, hi = self.bounds(i)
        return array.ndim == 2 and array.shape[0] == hi - lo and array.dtype == self.dtype

    def missing(self) -> list[int]:
        return [i for i in range(self.shards) if not self.done(i)]

    # -- reading and writing -------------------------------------------------------------
    def write(self, i: int, vectors: np.ndarray) -> None:
        """Write shard ``i`` whole or not at all (and the vectors' dimension into the manifest, once)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if self.dtype != np.float32:
            with np.errstate(over="ignore"):
                vectors = vectors.astype(self.dtype)
            if not np.isfinite(vectors).all():
                raise UserError(f"shard {i}: a vector does not fit {self.dtype} (beyond +-65504); "
                                f"use shard_dtype float32 for this encoder")
        lo, hi = self.bounds(i)
        if vectors.ndim != 2 or vectors.shape[0] != hi - lo:
            raise ValueError(f"shard {i} must have shape ({hi - lo}, dim), got {vectors.shape}")
        dim = self.manifest.get("dim")
        if dim is not None and vectors.shape[1] != dim:
            raise ValueError(f"shard {i} has dimension {vectors.shape[1]}, the others {dim}")
        buffer = io.BytesIO()
        np.save(buffer, vectors, allow_pickle=False)
        write_atomic(self.path(i), buffer.getvalue())
        if dim is None:
            self.manifest["dim"] = int(vectors.shape[1])
            write_atomic(self.directory / MANIFEST, json.dumps(self.manifest, indent=2))

    def read(self, i: int) -> np.ndarray:
        return np.load(self.path(i), mmap_mode="r")

    def blocks(self, first: int = 0, last: int | None = None) -> Iterator[np.ndarray]:
        """Shards ``[first, last)`` (default: all), one array a shard, in row order, as stored (float16 stays)."""
        return (np.asarray(self.read(i)) for i in range(first, self.shards if last is None else last))

    def row_reader(self):
        """An ``indexes.rows.RowReader`` of every shard: given rows as float32, read all at once (re-ranking)."""
        from indexes.rows import RowReader

        return RowReader([self.path(i) for i in range(self.shards)])

    def vectors(self) -> np.ndarray:
        """Every row as float32, in corpus order (loads all shards into memory)."""
        return np.concatenate([np.asarray(self.read(i), dtype=np.float32) for i in range(self.shards)], axis=0)

    def to_index(self, kind: str = "flat", **params: Any):
        """A ``FaissIndex`` over every shard, ids ``"0" .. str(count - 1)`` (corpus rows), added shard by shard."""
        from indexes.vector import FaissIndex

        index = None
        for i in range(self.shards):
            block = np.asarray(self.read(i), dtype=np.float32)
            if index is None:
                index = FaissIndex(int(block.shape[1]), kind, metric="ip", **params)
            lo, hi = self.bounds(i)
            index.add([str(row) for row in range(lo, hi)], block)
        return index

    def fill(self, texts: Sequence[str], todo: Sequence[int], *, encode: Callable[[list[str]], np.ndarray] | None = None,
             pool: ShardEncoder | None = None, on_shard: Callable[[int], None] | None = None) -> None:
        """Encode shards ``todo`` of ``texts`` with ``encode`` (here) or on ``pool``; this process writes each one."""

        def save(i: int, vectors: np.ndarray) -> None:
            self.write(i, vectors)
            if on_shard is not None:
                on_shard(i)

        if pool is not None:
            pool.encode({i: list(texts[slice(*self.bounds(i))]) for i in todo}, save)
            return
        if encode is None:
            raise ValueError("fill needs an encode function or a pool")
        for i in todo:
            lo, hi = self.bounds(i)
            save(i, check_vectors(getattr(encode, "__self__", encode), encode(list(texts[lo:hi])), hi - lo))


def _remove_stale_temporaries(directory: Path) -> None:
    """Delete half-written shards left by a killed encode (their writer's process is gone)."""
    for tmp in directory.glob(".shard-*.npy.*.tmp"):
        pid = tmp.name.rsplit(".", 2)[-2]
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def passage_texts(chunks: Sequence[Chunk], use_title: bool) -> list[str]:
    """What a dense encoder sees per chunk (``title + " " + text`` when titled), as ``DenseRetriever`` embeds it."""
    return [titled_text(c, use_title) for c in chunks]


def dense_retriever(retriever: Any) -> DenseRetriever:
    """``retriever`` (a section, a name or a built retriever) as a ``DenseRetriever``; a one-line error otherwise."""
    from retrievers.registry import make_retriever

    built = retriever if isinstance(retriever, DenseRetriever) else make_retriever(retriever)
    if not isinstance(built, DenseRetriever):
        raise UserError(f"retriever {getattr(built, 'label', retriever)!r} is not dense: embedding shards need a "
                        f"dense retriever (contriever, minilm, sentence-transformers, openai, ...)")
    return built


def encode_corpus(chunks: Sequence[Chunk], retriever: Any, directory: str | os.PathLike, *,
                  shard_size: int = DEFAULT_SHARD_SIZE, pool: ShardEncoder | None = None,
                  on_shard: Callable[[int], None] | None = None) -> ShardStore:
    """Encode ``chunks`` (in order) into shards under ``directory``; shards already there are kept.

    ``retriever``: a dense retriever section (``{name: contriever}``) or a built one; with ``pool``, the pool's
    encoder is used and the retriever is not built here.  ``on_shard(i)`` is called after shard ``i`` is written.
    """
    if pool is not None:
        model_id, use_title, encode = pool.model_id, pool.use_title, None
    else:
        built = dense_retriever(retriever)
        model_id, use_title, encode = built.encoder.model_id, built.use_title, built.encoder.encode_documents
    texts = passage_texts(chunks, use_title)
    store = ShardStore.open(directory, model_id=model_id, use_title=use_title, texts=texts, shard_size=shard_size)
    store.fill(texts, store.missing(), encode=encode, pool=pool, on_shard=on_shard)
    return store


def index_from_shards(retriever: DenseRetriever, chunks: Sequence[Chunk], *, folder: Path | None = None,
                      root: Path | None = None, shard_size: int = DEFAULT_SHARD_SIZE,
                      pool_for: Callable[[], ContextManager[ShardEncoder]] | None = None,
                      on_shard: Callable[[int], None] | None = None,
                      say: Callable[[str, int], None] | None = None) -> DenseRetriever:
    """``retriever`` over ``chunks``, its index loaded from embedding shards in ``folder`` (or a folder named by
    corpus and encoder under ``root``); missing shards are encoded here, or on the pool ``with pool_for()`` gives.

    The shards load into the retriever's own index kind, so its hits are those of ``retriever.index(chunks)``
    up to the last bits of the floats (the vectors are encoded shard by shard, not all at once).
    ``say(message, shards_to_encode)`` hears where the shards are and how many are missing.
    """
    chunks = list(chunks)
    if not chunks:
        raise UserError("cannot index an empty corpus")
    encoder, use_title = retriever.encoder, retriever.use_title
    texts = passage_texts(chunks, use_title)
    digest = fingerprint(texts)
    if folder is None:
        if root is None:
            raise ValueError("index_from_shards needs a folder or a root to put one in")
        folder = Path(root) / shard_folder_name(encoder.model_id, use_title, digest, shard_size)
    store = ShardStore.open(folder, model_id=encoder.model_id, use_title=use_title, texts=texts,
                            shard_size=shard_size, digest=digest)
    todo = store.missing()
    if say is not None:
        say(f"embedding shards in {folder}: {store.shards - len(todo)} of {store.shards} already there", len(todo))
    if todo:
        with pool_for() if pool_for is not None else nullcontext(None) as pool:
            if pool is not None and (pool.model_id, pool.use_title) != (encoder.model_id, use_title):
                raise RuntimeError(f"the pool built encoder {pool.model_id!r} (title={pool.use_title}), "
                                   f"this process {encoder.model_id!r} (title={use_title})")
            store.fill(texts, todo, encode=encoder.encode_documents, pool=pool, on_shard=on_shard)
    return retriever.index_vectors(chunks, store.to_index(retriever.index_kind, **retriever.index_params))


__all__ = ["DEFAULT_SHARD_SIZE", "ShardEncoder", "ShardStore", "dense_retriever", "encode_corpus", "fingerprint",
           "index_from_shards", "passage_texts", "shard_folder_name"]

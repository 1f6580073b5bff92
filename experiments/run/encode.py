"""Encode a passage corpus into embedding shards, here or on a Ray pool of encoder actors; resumable.

An open-domain corpus (Wikipedia's 21M passages) is too large for the
per-text embedding cache and too slow for one process.  ``encode_corpus``
cuts the corpus, in order, into shards of ``shard_size`` passages and writes
each shard's vectors as one ``.npy`` file (float32, ``(rows, dim)``, rows
L2-normalised as the encoder returns them) next to a ``manifest.json`` that
names the encoder, the title setting, the corpus fingerprint and the shard
size.  The driver is the only writer; each shard is written to a temporary
file and renamed into place, so a kill leaves whole shards only, and the
next call encodes just the shards that are missing.  A folder that holds
another corpus's or another encoder's shards is refused, never mixed.

``ShardStore.to_index`` loads the shards into a ``FaissIndex`` (row number as
id), shard by shard, so the vectors never need to sit in memory twice.

With ``pool=RayEncoderPool(...)`` each shard goes to one of a pool of Ray
actors, each holding one encoder (built once per actor from the retriever
section, on a GPU with ``gpus_per_worker``).  An actor that dies is restarted
by Ray and its shard encoded again; if Ray gives up, the error stops the
encode, and running it again resumes from the shards already written.

``sharded_retriever(spec, chunks, plan)`` is what ``ctxcomp retrieve`` and
``ctxcomp curve`` use (``--shards DIR``, ``--executor ray``): it encodes the
missing shards as a ``ShardPlan`` says, loads them into the retriever's own
index kind and hands that to ``DenseRetriever.index_vectors``, so the
retriever searches exactly as if it had indexed the chunks itself.  A run
config never names a plan: the curve command sets one around the run
(``using_shards``), and the open-domain loader asks for it
(``active_shard_plan``), so where the vectors were computed never changes
what the config means.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from core.errors import UserError
from core.files import write_atomic
from indexes.types import Chunk

if TYPE_CHECKING:
    from retrievers.dense import DenseRetriever

MANIFEST = "manifest.json"
FORMAT = 1
DEFAULT_SHARD_SIZE = 50_000


def fingerprint(texts: Sequence[str]) -> str:
    """SHA-256 over the texts in order (each length-prefixed, so no two corpora collide by concatenation)."""
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


@dataclass
class ShardStore:
    """A folder of embedding shards: ``manifest.json`` and ``shard-00000.npy``, ``shard-00001.npy``, ..."""

    directory: Path
    manifest: dict[str, Any]

    @classmethod
    def open(cls, directory: str | os.PathLike, *, model_id: str, use_title: bool, texts: Sequence[str],
             shard_size: int, digest: str | None = None) -> ShardStore:
        """Create the folder's manifest, or check that the one there describes this corpus and encoder.

        ``digest``: ``fingerprint(texts)`` when the caller has already computed it (a large corpus takes a while).
        """
        if shard_size < 1:
            raise UserError(f"shard_size must be >= 1, got {shard_size}")
        if not texts:
            raise UserError("cannot encode an empty corpus")
        directory = Path(directory)
        _remove_stale_temporaries(directory)
        want = {"format": FORMAT, "model_id": model_id, "use_title": use_title, "count": len(texts),
                "shard_size": shard_size, "fingerprint": digest or fingerprint(texts)}
        path = directory / MANIFEST
        if path.is_file():
            have = json.loads(path.read_text(encoding="utf-8"))
            differs = [k for k in want if have.get(k) != want[k]]
            if differs:
                raise UserError(f"{directory} holds embedding shards of another corpus or encoder "
                                f"({', '.join(differs)} differ); use another folder or delete it")
            return cls(directory, have)
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(want, indent=2).encode("utf-8"))
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
        return array.ndim == 2 and array.shape[0] == hi - lo

    def missing(self) -> list[int]:
        return [i for i in range(self.shards) if not self.done(i)]

    # -- reading and writing -------------------------------------------------------------
    def write(self, i: int, vectors: np.ndarray) -> None:
        """Write shard ``i`` whole or not at all."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        lo, hi = self.bounds(i)
        if vectors.ndim != 2 or vectors.shape[0] != hi - lo:
            raise ValueError(f"shard {i} must have shape ({hi - lo}, dim), got {vectors.shape}")
        dim = self.manifest.get("dim")
        if dim is not None and vectors.shape[1] != dim:
            raise ValueError(f"shard {i} has dimension {vectors.shape[1]}, the others {dim}")
        write_atomic(self.path(i), _npy_bytes(vectors))

    def read(self, i: int) -> np.ndarray:
        return np.load(self.path(i), mmap_mode="r")

    def vectors(self) -> np.ndarray:
        """Every row, in corpus order (loads all shards into memory)."""
        return np.concatenate([np.asarray(self.read(i)) for i in range(self.shards)], axis=0)

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


def _npy_bytes(array: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


# -- the encoder --------------------------------------------------------------------------


def dense_parts(retriever: Any) -> tuple[Any, bool]:
    """(encoder, use_title) of a dense retriever given as a section, a name or a built retriever."""
    from retrievers.registry import make_retriever

    built = retriever if hasattr(retriever, "encoder") else make_retriever(retriever)
    encoder = getattr(built, "encoder", None)
    if encoder is None or not hasattr(encoder, "encode_documents"):
        raise UserError(f"retriever {getattr(built, 'label', retriever)!r} is not dense: it has no encoder to "
                        f"write embedding shards with")
    return encoder, bool(getattr(built, "use_title", True))


def passage_texts(chunks: Sequence[Chunk], use_title: bool) -> list[str]:
    """What a dense encoder sees per chunk (``title + " " + text`` when titled), as ``DenseRetriever`` embeds it."""
    from retrievers.dense import titled_text

    return [titled_text(c, use_title) for c in chunks]


def encode_corpus(chunks: Sequence[Chunk], retriever: Any, directory: str | os.PathLike, *,
                  shard_size: int = DEFAULT_SHARD_SIZE, pool: RayEncoderPool | None = None,
                  on_shard: Callable[[int], None] | None = None) -> ShardStore:
    """Encode ``chunks`` (in order) into shards under ``directory``; shards already there are kept.

    ``retriever``: a dense retriever section (``{name: contriever}``) or a built one.  ``on_shard(i)`` is
    called after shard ``i`` is written.  Returns the complete store.
    """
    if pool is not None:
        encoder_id, use_title = pool.model_id, pool.use_title
        encode = None
    else:
        encoder, use_title = dense_parts(retriever)
        encoder_id, encode = encoder.model_id, encoder.encode_documents
    texts = passage_texts(chunks, use_title)
    store = ShardStore.open(directory, model_id=encoder_id, use_title=use_title, texts=texts, shard_size=shard_size)
    _fill(store, texts, store.missing(), encode=encode, pool=pool, on_shard=on_shard)
    return store


def _fill(store: ShardStore, texts: Sequence[str], todo: Sequence[int], *,
          encode: Callable[[list[str]], np.ndarray] | None, pool: RayEncoderPool | None,
          on_shard: Callable[[int], None] | None) -> None:
    """Encode shards ``todo`` of ``texts`` with ``encode`` (here) or on ``pool``; the driver writes each one."""

    def save(i: int, vectors: np.ndarray) -> None:
        store.write(i, vectors)
        if "dim" not in store.manifest:
            store.manifest["dim"] = int(vectors.shape[1])
            write_atomic(store.directory / MANIFEST, json.dumps(store.manifest, indent=2).encode("utf-8"))
        if on_shard is not None:
            on_shard(i)

    if pool is None:
        assert encode is not None  # one of the two, by the callers
        for i in todo:
            lo, hi = store.bounds(i)
            save(i, np.asarray(encode(list(texts[lo:hi])), dtype=np.float32))
    else:
        pool.encode({i: list(texts[slice(*store.bounds(i))]) for i in todo}, save)


# -- shards for the CLI: a plan, and a retriever that searches them --------------------------


@dataclass(frozen=True)
class ShardPlan:
    """How a dense retriever's corpus embeddings are written as shards and loaded back (``--shards``, ``--executor``).

    ``folder``: the shard folder itself; None: a folder named by corpus and
    encoder (:func:`shard_folder_name`) under ``root``.  ``executor``:
    ``"local"`` encodes in this process, ``"ray"`` on a ``RayEncoderPool`` of
    ``workers`` actors at ``address`` (as ``ctxcomp run --ray-address``; None
    starts a local Ray instance), each on a share of a GPU when the cluster has
    GPUs.  ``progress``: one line naming the folder and a bar of shards on stderr.
    """

    folder: Path | None = None
    root: Path | None = None
    executor: str = "local"
    address: str | None = None
    workers: int | None = None
    shard_size: int = DEFAULT_SHARD_SIZE
    progress: bool = False

    def __post_init__(self) -> None:
        if self.executor not in ("local", "ray"):
            raise UserError(f"--executor must be 'local' or 'ray', got {self.executor!r}")
        if self.executor == "local":
            given = [name for name, value in (("--ray-address", self.address), ("--workers", self.workers))
                     if value is not None]
            if given:
                raise UserError(f"{' and '.join(given)} need(s) --executor ray")
        if self.workers is not None and self.workers < 1:
            raise UserError(f"--workers must be >= 1, got {self.workers}")
        if self.address is not None and not self.address.strip():
            raise UserError("--ray-address is empty; give 'auto', HOST:PORT or ray://HOST:PORT")
        if self.shard_size < 1:
            raise UserError(f"--shard-size must be >= 1, got {self.shard_size}")
        if self.folder is None and self.root is None:
            raise ValueError("a ShardPlan needs a folder or a root to put folders in")

    def check(self) -> None:
        """Fail now, in one line, on what would otherwise fail after the corpus is loaded: Ray missing, or a
        ``--ray-address`` that is malformed or does not answer."""
        if self.executor != "ray":
            return
        from experiments.run.ray_cluster import check_address, import_ray

        import_ray()
        if self.address is not None:
            check_address(self.address)

    def folder_for(self, model_id: str, use_title: bool, digest: str) -> Path:
        """Where the shards of this corpus (``digest``) and encoder go."""
        if self.folder is not None:
            return Path(self.folder)
        assert self.root is not None  # checked in __post_init__
        return Path(self.root) / shard_folder_name(model_id, use_title, digest, self.shard_size)


def shard_folder_name(model_id: str, use_title: bool, digest: str, shard_size: int) -> str:
    """``<corpus hash>-<encoder id>[-notitle][-s<shard size>]``, safe as one path component."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("._-")[-80:] or "encoder"
    return (f"{digest[:16]}-{slug}" + ("" if use_title else "-notitle")
            + ("" if shard_size == DEFAULT_SHARD_SIZE else f"-s{shard_size}"))


def default_shard_root() -> Path:
    """``$CTXCOMP_CACHE_DIR/shards``: where ``ctxcomp retrieve`` keeps shard folders unless ``--shards`` names one."""
    from core.paths import cache_root

    return cache_root() / "shards"


def is_dense(retriever: Any) -> bool:
    """Whether a retriever section (or name) builds a ``DenseRetriever``, which alone can search shards.

    Building is cheap: dense encoders load their model on first use.
    """
    from retrievers.dense import DenseRetriever
    from retrievers.registry import make_retriever

    return isinstance(retriever if isinstance(retriever, DenseRetriever) else make_retriever(retriever),
                      DenseRetriever)


def sharded_retriever(retriever: Any, chunks: Sequence[Chunk], plan: ShardPlan) -> DenseRetriever:
    """A ``DenseRetriever`` over ``chunks`` whose index is loaded from embedding shards, as ``plan`` says.

    ``retriever``: a dense retriever section or name (sent as is to Ray actors).  Shards already in the
    folder are kept; only missing ones are encoded (a killed encode resumes), here or on Ray.  The
    shards load into the retriever's own index kind, so its hits are those of ``retriever.index(chunks)``
    up to the last bits of the floats (the vectors are encoded shard by shard, not all at once).
    """
    from retrievers.dense import DenseRetriever
    from retrievers.registry import make_retriever

    built = make_retriever(retriever)
    if not isinstance(built, DenseRetriever):
        raise UserError(f"retriever {built.label!r} is not dense: embedding shards (--shards, --executor ray) "
                        f"need a dense retriever (contriever, minilm, sentence-transformers, openai, ...)")
    chunks = list(chunks)
    if not chunks:
        raise UserError("cannot index an empty corpus")
    encoder, use_title = built.encoder, built.use_title
    texts = passage_texts(chunks, use_title)
    digest = fingerprint(texts)
    folder = plan.folder_for(encoder.model_id, use_title, digest)
    store = ShardStore.open(folder, model_id=encoder.model_id, use_title=use_title, texts=texts,
                            shard_size=plan.shard_size, digest=digest)
    todo = store.missing()
    where = "this process" if plan.executor == "local" else "Ray"
    _say(plan.progress, f"embedding shards in {folder}: {store.shards - len(todo)} of {store.shards} already there"
                        + (f", encoding {len(todo)} on {where}" if todo else ""))
    if todo:
        _encode_missing(store, texts, todo, retriever, encoder, plan)
    return built.index_vectors(chunks, store.to_index(built.index_kind, **built.index_params))


def _encode_missing(store: ShardStore, texts: Sequence[str], todo: Sequence[int], retriever: Any, encoder: Any,
                    plan: ShardPlan) -> None:
    with _shard_bar(len(todo), plan.progress) as bar:
        def on_shard(_i: int) -> None:
            bar.update(1)

        if plan.executor == "local":
            _fill(store, texts, todo, encode=encoder.encode_documents, pool=None, on_shard=on_shard)
            return
        pool = RayEncoderPool(retriever, address=plan.address, workers=plan.workers, gpus_per_worker=None)
        try:
            if (pool.model_id, pool.use_title) != (encoder.model_id, store.manifest["use_title"]):
                raise RuntimeError(f"the Ray actors built encoder {pool.model_id!r} (title={pool.use_title}), "
                                   f"the driver {encoder.model_id!r} (title={store.manifest['use_title']})")
            _fill(store, texts, todo, encode=None, pool=pool, on_shard=on_shard)
        finally:
            pool.close()


def _say(enabled: bool, line: str) -> None:
    if enabled:
        print(line, file=sys.stderr, flush=True)


def _shard_bar(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="encode", unit="shard", file=sys.stderr, leave=False,
                disable=not enabled or bool(os.environ.get("CTXCOMP_NO_PROGRESS")))


_ACTIVE_PLAN: ContextVar[ShardPlan | None] = ContextVar("ctxcomp_shard_plan", default=None)


@contextmanager
def using_shards(plan: ShardPlan | None) -> Iterator[None]:
    """Within the block, open-domain tasks with a dense retriever index through ``plan`` (None: as always).

    The plan is not part of any run config: it changes where the vectors are computed, not what they are.
    """
    token = _ACTIVE_PLAN.set(plan)
    try:
        yield
    finally:
        _ACTIVE_PLAN.reset(token)


def active_shard_plan() -> ShardPlan | None:
    """The plan set by the innermost ``using_shards`` block, or None."""
    return _ACTIVE_PLAN.get()


class EncoderActor:
    """The body of one Ray actor: one encoder, built once from a retriever section."""

    def __init__(self, retriever: Any, env: dict[str, str], driver_node: str) -> None:
        import ray

        if ray.get_runtime_context().get_node_id() == driver_node:
            os.environ.update(env)
        self.encoder, self.use_title = dense_parts(retriever)

    def describe(self) -> tuple[str, bool, int]:
        return self.encoder.model_id, self.use_title, os.getpid()

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.encoder.encode_documents(texts), dtype=np.float32)


class RayEncoderPool:
    """``workers`` Ray actors, each holding the encoder of ``retriever``; shards go to them two at a time each.

    ``address``: as ``ctxcomp run --ray-address`` (None: a local Ray instance).  The encoder's model id
    and title setting are asked of the first actor, so the driver never loads the model itself.
    ``gpus_per_worker=None`` picks from the cluster (:func:`auto_gpus`): one actor per GPU by default,
    or ``workers`` actors sharing the GPUs evenly; none when the cluster has no GPU.
    """

    def __init__(self, retriever: Any, *, address: str | None = None, workers: int | None = None,
                 cpus_per_worker: float = 1.0, gpus_per_worker: float | None = 0.0, max_restarts: int = 2,
                 depth: int = 2) -> None:
        from experiments.run.ray_cluster import FORWARDED_ENV, connect, import_ray

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
        self.depth = max(1, depth)
        try:
            described = ray.get([a.describe.remote() for a in self.actors])
        except ray.exceptions.RayTaskError as err:
            self.close()
            cause = getattr(err, "cause", None)
            raise (cause if isinstance(cause, UserError) else err) from None
        self.model_id, self.use_title, _ = described[0]
        self.pids = [pid for _, _, pid in described]

    def encode(self, shards: dict[int, list[str]], save: Callable[[int, np.ndarray], None]) -> None:
        """Encode every shard on the pool; ``save(i, vectors)`` runs in the driver as each one comes back."""
        ray = self._ray
        queue = deque(sorted(shards))
        running: dict[Any, tuple[int, int]] = {}
        load = [0] * len(self.actors)

        def submit() -> None:
            for slot, actor in enumerate(self.actors):
                while queue and load[slot] < self.depth:
                    i = queue.popleft()
                    running[actor.encode.remote(shards[i])] = (i, slot)
                    load[slot] += 1

        submit()
        while running:
            [ref], _ = ray.wait(list(running), num_returns=1)
            i, slot = running.pop(ref)
            load[slot] -= 1
            try:
                vectors = ray.get(ref)
            except ray.exceptions.RayTaskError as err:  # a user's mistake comes back as itself (one line)
                cause = getattr(err, "cause", None)
                raise (cause if isinstance(cause, UserError) else err) from None
            save(i, vectors)
            submit()

    def close(self) -> None:
        from experiments.run.ray_cluster import kill_actors

        kill_actors(self._ray, self.actors)
        self.actors = []
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_ray = False


def auto_gpus(gpus: float, workers: int | None) -> tuple[int | None, float]:
    """(workers, GPUs per worker) on a cluster with ``gpus`` GPUs: no GPU, no share; else one actor per GPU
    (``workers`` None), or ``workers`` actors packed evenly, ``ceil(workers / gpus)`` to a GPU."""
    whole = int(gpus)
    if whole < 1:
        return workers, 0.0
    if workers is None:
        return whole, 1.0
    return workers, 1.0 / math.ceil(workers / whole)


__all__ = ["DEFAULT_SHARD_SIZE", "EncoderActor", "RayEncoderPool", "ShardPlan", "ShardStore", "active_shard_plan",
           "auto_gpus", "default_shard_root", "dense_parts", "encode_corpus", "fingerprint", "is_dense",
           "passage_texts", "shard_folder_name", "sharded_retriever", "using_shards"]

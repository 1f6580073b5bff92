"""A FAISS vector index keyed by string ids, searched on a GPU when one is visible.

The contract is FAISS's own (``add`` then batched ``search``), with two changes:
ids are strings, and a query with fewer than ``k`` neighbours gets a shorter
list instead of ``-1`` padding.  Shapes and dtypes are checked here, once.
The FAISS index itself is ``indexes.factory.RowIndex`` of the factory string the
kind names (``Flat``, ``HNSW{m},Flat``, ``IVF{nlist},Flat``): the one layer that
builds, sets ``nprobe`` / ``efSearch`` on, searches and saves every FAISS index here.

Where the search runs (:func:`search_engine`): FAISS's own GPU index when FAISS
was built with GPU support; else, for an exact (flat) index with a GPU visible
to torch, a chunked matmul and top-k in torch (:class:`TorchFlatSearch`), since
faiss-gpu wheels trail the CUDA that torch wheels are built for; else FAISS on
the CPU.  The vectors always live in FAISS's CPU index too, which is what is saved.
"""
from __future__ import annotations

import json
import sys
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from indexes.factory import RowIndex, default_nlist

KINDS = ("flat", "hnsw", "ivf")
METRICS = ("ip", "l2")
ENGINES = ("faiss-cpu", "faiss-gpu", "torch")


def faiss_sees_gpu() -> bool:
    """FAISS was built with GPU support and sees a GPU."""
    import faiss

    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def torch_gpu_device(*, load: bool = True) -> str | None:
    """The GPU torch would search on (``'cuda'``), or None when torch sees none (or, with ``load=False``, when
    this process has not imported torch: an index of OpenAI embeddings should not pay seconds to import it)."""
    if not load and "torch" not in sys.modules:
        return None
    import torch

    return "cuda" if torch.cuda.is_available() else None


def search_engine(kind: str, device: str, *, faiss_gpu: bool, torch_gpu: bool) -> str:
    """Where an index of ``kind`` searches for ``device`` ('auto', 'cpu' or 'gpu'), one of :data:`ENGINES`.

    A GPU is used whenever one is visible and the kind allows it: FAISS's GPU index where FAISS has one (flat,
    ivf), else torch for an exact flat index.  HNSW has no GPU form.  ``device='gpu'`` refuses where neither fits.
    """
    if device == "cpu":
        return "faiss-cpu"
    if kind != "hnsw" and faiss_gpu:
        return "faiss-gpu"
    if kind == "flat" and torch_gpu:
        return "torch"
    if device == "gpu":
        raise ValueError(f"device='gpu' cannot search a {kind!r} index here: flat needs a GPU visible to torch, "
                         "ivf needs faiss with GPU support (faiss-gpu), and hnsw has no GPU form")
    return "faiss-cpu"


class TorchFlatSearch:
    """Exact search over a float32 matrix by chunked matmul and top-k with torch, on ``device``.

    The matrix stays in host memory (FAISS's own storage, no copy) and is copied to the device once when
    it fits in ``resident_share`` of the device's free memory, else streamed there chunk by chunk at every
    search.  Scores are inner products (``ip``) or squared L2 distances (``l2``), as FAISS's flat indexes give.
    ``score_bytes`` bounds the (queries x chunk) score matrix of one step.
    """

    def __init__(self, metric: str, device: str, *, score_bytes: int = 1 << 28, max_chunk_rows: int = 1 << 18,
                 resident: bool | None = None, resident_share: float = 0.25) -> None:
        self.metric, self.device = metric, device
        self.score_bytes, self.max_chunk_rows = score_bytes, max_chunk_rows
        self.resident, self.resident_share = resident, resident_share
        self._on_device: Any = None  # the rows copied so far, when resident

    def _fits_on_device(self, nbytes: int) -> bool:
        import torch

        if not self.device.startswith("cuda"):
            return False  # on the host the chunks are views of FAISS's storage: a copy would only double it
        free, _total = torch.cuda.mem_get_info(torch.device(self.device))
        return nbytes <= free * self.resident_share

    def _rows(self, base: np.ndarray) -> Any:
        """All rows on the device (copying only those added since the last search), or None to stream them."""
        import torch

        keep = self.resident if self.resident is not None else self._fits_on_device(base.nbytes)
        if not keep:
            self._on_device = None
            return None
        have = 0 if self._on_device is None else len(self._on_device)
        if have < len(base):
            fresh = torch.from_numpy(base[have:]).to(self.device, copy=True)  # FAISS may move its storage on add
            self._on_device = fresh if self._on_device is None else torch.cat([self._on_device, fresh])
        return self._on_device

    def search(self, base: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, row numbers), each of shape (len(queries), min(k, len(base))), best first, as FAISS returns."""
        import torch

        k = min(k, len(base))
        resident = self._rows(base)
        chunk = int(min(self.max_chunk_rows, max(1024, self.score_bytes // (4 * max(1, len(queries))))))
        largest = self.metric == "ip"
        with torch.inference_mode():
            q = torch.from_numpy(queries).to(self.device)
            q_norms = (q * q).sum(dim=1, keepdim=True) if not largest else None
            best_scores = best_rows = None
            for lo in range(0, len(base), chunk):
                hi = min(lo + chunk, len(base))
                x = resident[lo:hi] if resident is not None else torch.from_numpy(base[lo:hi]).to(self.device)
                scores = q @ x.T
                if not largest:  # squared L2: |q|^2 - 2 q.x + |x|^2, FAISS's own expansion
                    scores = (q_norms - 2 * scores + (x * x).sum(dim=1)[None, :]).clamp_(min=0)
                top_scores, top_rows = torch.topk(scores, min(k, hi - lo), dim=1, largest=largest)
                top_rows += lo
                if best_scores is not None:
                    top_scores = torch.cat([best_scores, top_scores], dim=1)
                    top_rows = torch.cat([best_rows, top_rows], dim=1)
                    top_scores, pick = torch.topk(top_scores, min(k, top_scores.shape[1]), dim=1, largest=largest)
                    top_rows = torch.gather(top_rows, 1, pick)
                best_scores, best_rows = top_scores, top_rows
        return best_scores.cpu().numpy(), best_rows.cpu().numpy()


class FaissIndex:
    """String-keyed FAISS index of kind ``flat`` (exact), ``hnsw`` or ``ivf``.

    ``metric='ip'`` scores by inner product (cosine for L2-normalised vectors,
    higher is better); ``metric='l2'`` returns squared L2 distances (lower is
    better).  ``ivf`` trains its coarse quantiser on the first ``add``, which
    must bring at least ``nlist`` vectors (``nlist=None``: ``indexes.factory.default_nlist``, the one rule
    the corpus indexes use too) and searches ``nprobe`` of them (None: a sixteenth, at least 16; a setting
    that searches one list of many is warned about).
    ``device='auto'`` searches on GPU 0 when one is visible: flat and ivf
    indexes move there when FAISS was built with GPU support, and without it a
    flat index searches with torch (:class:`TorchFlatSearch`) when this process
    has torch loaded (a local encoder loads it); HNSW always runs on CPU (FAISS
    has no GPU HNSW).  ``device='gpu'`` takes the same paths and
    refuses where none fits; ``engine`` says which one was taken.
    """

    def __init__(
        self,
        dim: int,
        kind: str = "flat",
        *,
        metric: str = "ip",
        nlist: int | None = None,
        nprobe: int | None = None,
        hnsw_m: int = 32,
        ef_search: int = 64,
        ef_construction: int = 80,
        device: str = "auto",
    ) -> None:
        if not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if kind not in KINDS:
            raise ValueError(f"unknown index kind {kind!r}; choose one of {', '.join(KINDS)}")
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
        if device not in ("auto", "cpu", "gpu"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'gpu', got {device!r}")
        self.dim, self.kind, self.metric = dim, kind, metric
        self.nlist, self.nprobe = nlist, nprobe
        self.hnsw_m, self.ef_search, self.ef_construction = hnsw_m, ef_search, ef_construction
        self.device = device
        self._ids: list[str] = []
        self._id_set: set[str] = set()
        self._rows: RowIndex | None = None  # built lazily: ivf needs its training data first
        self.on_gpu = False  # FAISS's GPU index
        self.engine = "faiss-cpu"
        self._torch: TorchFlatSearch | None = None

    # -- building --------------------------------------------------------------
    def factory_string(self) -> str:
        """The FAISS factory string of this kind (``indexes.factory.RowIndex`` builds and searches it)."""
        return {"flat": "Flat", "hnsw": f"HNSW{self.hnsw_m},Flat", "ivf": f"IVF{self.nlist},Flat"}[self.kind]

    def _search_params(self) -> dict[str, int | None]:
        """The kind's own search parameter, as ``RowIndex.search`` takes it (flat has none)."""
        return {"ivf": {"nprobe": self.nprobe}, "hnsw": {"ef_search": self.ef_search}}.get(self.kind, {})

    def _build(self, first_batch: np.ndarray) -> RowIndex:
        if self.kind == "ivf":
            n = len(first_batch)
            nlist = self.nlist or default_nlist(n)
            if n < nlist:
                raise ValueError(
                    f"an ivf index with nlist={nlist} needs at least {nlist} vectors in its first add "
                    f"(got {n}); add more vectors at once, lower nlist, or use kind='flat'"
                )
            self.nlist = nlist
            self.nprobe = min(self.nprobe or max(16, nlist // 16), nlist)
            if self.nprobe == 1 and nlist > 1:
                warnings.warn(f"an ivf index searching nprobe=1 of its {nlist} lists misses most neighbours of a "
                              "query near a list's edge; raise nprobe", UserWarning, stacklevel=3)
        rows = RowIndex.empty(self.factory_string(), self.dim, metric=self.metric,
                              ef_construction=self.ef_construction if self.kind == "hnsw" else None)
        if not rows.index.is_trained:
            rows.index.train(first_batch)  # on the whole first add, not a sample of it
        return self._placed(rows)

    def _placed(self, rows: RowIndex) -> RowIndex:
        """``rows`` with its search parameter set, moved to the GPU where :func:`search_engine` says so."""
        import faiss

        rows.set_search(**self._search_params())
        if self.device == "cpu":
            return rows
        gpu = torch_gpu_device(load=self.device == "gpu") if self.kind == "flat" else None
        self.engine = search_engine(self.kind, self.device, faiss_gpu=faiss_sees_gpu(), torch_gpu=gpu is not None)
        if self.engine == "faiss-gpu":
            self._gpu_res = faiss.StandardGpuResources()
            self.on_gpu = True
            rows.index = faiss.index_cpu_to_gpu(self._gpu_res, 0, rows.index)  # carries nprobe with it
        if self.engine == "torch":
            self._torch = TorchFlatSearch(self.metric, gpu or "cuda")
        return rows

    def _stored_vectors(self) -> np.ndarray:
        """The flat index's vectors as a (n, dim) array over FAISS's own storage (no copy)."""
        import faiss

        n = len(self._rows)
        return faiss.rev_swig_ptr(self._rows.index.get_xb(), n * self.dim).reshape(n, self.dim)

    def _check_vectors(self, vectors: Any, what: str) -> np.ndarray:
        if not isinstance(vectors, np.ndarray):
            raise ValueError(f"{what} must be a numpy array, got {type(vectors).__name__}")
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError(f"{what} must have shape (n, {self.dim}), got {vectors.shape}")
        if vectors.dtype != np.float32:
            raise ValueError(f"{what} must be float32, got {vectors.dtype}")
        if not np.isfinite(vectors).all():
            raise ValueError(f"{what} contain NaN or infinite values")
        return np.ascontiguousarray(vectors)

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Add ``vectors[i]`` under ``ids[i]``; ids must be new and unique strings."""
        vectors = self._check_vectors(vectors, "vectors")
        ids = list(ids)
        if len(ids) != len(vectors):
            raise ValueError(f"got {len(ids)} ids for {len(vectors)} vectors")
        if not all(isinstance(i, str) for i in ids):
            raise ValueError("ids must be strings")
        fresh = set(ids)
        if len(fresh) != len(ids) or fresh & self._id_set:
            dup = next(iter(fresh & self._id_set), None) or Counter(ids).most_common(1)[0][0]
            raise ValueError(f"duplicate id {dup!r}")
        if not ids:
            return
        if self._rows is None:
            self._rows = self._build(vectors)
        self._rows.add(vectors)
        self._ids.extend(ids)
        self._id_set |= fresh

    # -- searching -------------------------------------------------------------
    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """Best ``k`` (id, score) pairs per query row, best first; shorter when fewer exist."""
        queries = self._check_vectors(queries, "queries")
        if not isinstance(k, int) or k <= 0:
            raise ValueError(f"k must be a positive int, got {k!r}")
        if self._rows is None or not self._ids:
            return [[] for _ in range(len(queries))]
        k_eff = min(k, len(self._ids))
        if self.on_gpu:
            k_eff = min(k_eff, 2048)  # FAISS GPU limit on k
        if self._torch is not None:
            scores, labels = self._torch.search(self._stored_vectors(), queries, k_eff)
        else:  # with the search parameter set where the index was placed (_placed)
            scores, labels = self._rows.search(queries, k_eff)
        return [
            [(self._ids[j], float(s)) for j, s in zip(row_labels, row_scores) if j >= 0]
            for row_labels, row_scores in zip(labels, scores)
        ]

    def __len__(self) -> int:
        return len(self._ids)

    # -- persistence -----------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """Write ``index.faiss`` (FAISS's own format), ``ids.json`` and ``meta.json``; no pickle."""
        import faiss

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        meta = {
            "dim": self.dim, "kind": self.kind, "metric": self.metric, "nlist": self.nlist,
            "nprobe": self.nprobe, "hnsw_m": self.hnsw_m, "ef_search": self.ef_search,
            "ef_construction": self.ef_construction, "empty": self._rows is None,
        }
        if self._rows is not None:
            cpu_rows = RowIndex(faiss.index_gpu_to_cpu(self._rows.index), self._rows.string) if self.on_gpu else self._rows
            cpu_rows.save(directory / "index.faiss")
        (directory / "ids.json").write_text(json.dumps(self._ids), encoding="utf-8")
        (directory / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path, *, device: str = "auto") -> FaissIndex:
        directory = Path(directory)
        try:
            meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
            ids = json.loads((directory / "ids.json").read_text(encoding="utf-8"))
        except FileNotFoundError as err:
            raise ValueError(f"{directory} is not a saved FaissIndex: {err}") from err
        empty = meta.pop("empty")
        index = cls(meta.pop("dim"), meta.pop("kind"), device=device, **meta)
        if not empty:
            index._rows = index._placed(RowIndex.load(directory / "index.faiss", index.factory_string(), mmap=False))
            if len(index._rows) != len(ids):
                raise ValueError(f"{directory}: index holds {len(index._rows)} vectors but ids.json {len(ids)}")
        index._ids, index._id_set = list(ids), set(ids)
        return index

"""Corpus-scale vector indexes given by FAISS's own ``index_factory`` strings, planned to fit before they are built.

Wikipedia's 21M passages at 768 dimensions are 64.5 GB as float32: only
compressed codes (PQ, OPQ, SQ8) behind an inverted file fit a 24 GB machine.
FAISS's guidelines ("Guidelines to choose an index", the FAISS wiki) give the
rules used here: an inverted file of about ``4*sqrt(n)`` lists (a power of two),
trained on 30-256 points per list; PQ codes of ``m`` bytes; an exact re-ranking
of the top candidates against the full vectors (memory-mapped, on disk) to win
back what the codes lose.

* :func:`resolve` turns today's names (``flat``, ``hnsw``, ``ivf``) and
  ``auto`` into strings; any other string goes to ``faiss.index_factory`` as is.
* :func:`plan` says what an index will take in memory -- codes, ids, fixed
  tables (centroids, codebooks, rotations), the training sample -- before any
  of it is built; :func:`fit` names the best string within a budget.
* :class:`RowIndex` holds the built index.  Its labels are corpus row numbers
  (int64, FAISS's own), never Python strings.
"""
from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import UserError

NAMES = {"flat": "Flat", "hnsw": "HNSW32,Flat", "ivf": "IVF{nlist},Flat"}
RERANK_DEFAULT = 0
HNSW_LINK_BYTES = 4  # FAISS stores neighbours as int32: 2*M on level 0, M above (1/M of nodes per level)

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
          "t": 1 << 40, "tb": 1 << 40}


def parse_bytes(text: str | int, what: str = "memory") -> int:
    """``8GB``, ``512MB``, ``1.5G`` or a number of bytes; one-line error otherwise (units are powers of 1024)."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise UserError(f"{what} {text!r}: give a size like 8GB, 512MB or 1.5G")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def human(nbytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(nbytes) < 1024 or unit == "TB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} TB"


def default_nlist(n: int) -> int:
    """FAISS's guideline: about 4*sqrt(n) inverted lists, as a power of two, at least 1 and at most n/39.

    The one rule for every inverted file here: the corpus indexes (``ivf``, ``auto``) and the in-memory
    ``indexes.vector.FaissIndex``, so an index of the same size gets the same lists in both."""
    want = 4 * math.sqrt(max(n, 1))
    nlist = 1 << max(0, round(math.log2(want)))
    while nlist > 1 and nlist * 39 > n:
        nlist //= 2
    return nlist


def resolve(index: str, n: int) -> str:
    """A factory string for ``index`` over ``n`` vectors: names become strings, ``{nlist}`` is filled in."""
    text = NAMES.get(index.strip().lower(), index.strip())
    return text.replace("{nlist}", str(default_nlist(n)))


def default_train_size(string: str, n: int) -> int:
    """Vectors to train on: 64 per inverted list (FAISS warns under 39), at least 256*39 for PQ/SQ codebooks;
    never more than ``n`` (0 for an index that needs no training)."""
    nlist = _nlist(string)
    needs = nlist > 0 or re.search(r"(^|,)(O?PQ|SQ|PCA|OPQ|RQ|LSH)", string) is not None
    if not needs:
        return 0
    return int(min(n, max(64 * nlist, 256 * 39)))


def _nlist(string: str) -> int:
    m = re.search(r"IVF(\d+)", string)
    return int(m.group(1)) if m else 0


@dataclass(frozen=True)
class MemoryPlan:
    """What an index of ``string`` over ``n`` vectors takes in memory, in bytes, before it is built.

    ``codes``: the compressed vectors; ``ids``: the inverted lists' int64 labels (none for a flat or
    HNSW index, whose labels are implicit row numbers); ``fixed``: centroids, codebooks, rotations and
    graph links; ``training``: the float32 sample held while training; ``store``: the passage store,
    on disk (SQLite; the page cache it uses is the kernel's, not counted).  ``total`` is what the build
    peaks at: codes, ids, fixed and training together.
    """

    string: str
    n: int
    dim: int
    codes: int
    ids: int
    fixed: int
    training: int
    train_size: int
    store: int = 0

    @property
    def resident(self) -> int:
        """Memory held while searching (the training sample is freed after training)."""
        return self.codes + self.ids + self.fixed

    @property
    def total(self) -> int:
        return self.resident + self.training

    def per_vector(self) -> float:
        return self.resident / max(self.n, 1)

    def describe(self) -> str:
        return (f"index {self.string!r} over {self.n:,} x {self.dim}: codes {human(self.codes)}, ids "
                f"{human(self.ids)}, centroids/codebooks/links {human(self.fixed)}, training "
                f"{human(self.training)} ({self.train_size:,} vectors), total {human(self.total)}"
                + (f"; passage store {human(self.store)} on disk" if self.store else ""))


def plan(string: str, n: int, dim: int, *, train_size: int | None = None, store: int = 0) -> MemoryPlan:
    """The memory an index of factory ``string`` over ``n`` ``dim``-d vectors will take (see ``MemoryPlan``).

    Code sizes come from FAISS itself (an untrained index of the string reports its ``code_size``); ids,
    centroids, codebooks and links follow FAISS's layouts.
    """
    import faiss

    try:
        index = faiss.index_factory(dim, string, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as err:
        raise UserError(f"index {string!r} is not a FAISS index_factory string for {dim}-d vectors: "
                        f"{str(err).strip().splitlines()[-1]}") from None
    fixed = 0
    inner = index
    while isinstance(inner, faiss.IndexPreTransform):
        for i in range(inner.chain.size()):
            t = faiss.downcast_VectorTransform(inner.chain.at(i))
            fixed += 4 * t.d_in * t.d_out + 4 * t.d_out  # the matrix and bias it applies
            if isinstance(t, faiss.PCAMatrix):  # and the full eigen-decomposition it keeps
                fixed += 4 * (t.d_in * t.d_in + 2 * t.d_in)
        inner = faiss.downcast_index(inner.index)
    inner = faiss.downcast_index(inner)
    ids = 0
    try:
        ivf = faiss.downcast_index(faiss.extract_index_ivf(inner))
    except RuntimeError:
        ivf = None
    if ivf is not None:
        code = ivf.code_size
        ids = 8 * n
        quantizer = faiss.downcast_index(ivf.quantizer)
        fixed += ivf.nlist * ivf.d * 4
        if isinstance(quantizer, faiss.IndexHNSW):
            fixed += ivf.nlist * _hnsw_links(quantizer.hnsw)
        fixed += _codebook_bytes(ivf)
    elif isinstance(inner, faiss.IndexHNSW):
        storage = faiss.downcast_index(inner.storage)
        code = storage.sa_code_size() + _hnsw_links(inner.hnsw)
        fixed += _codebook_bytes(storage)
    else:
        code = inner.sa_code_size()
        fixed += _codebook_bytes(inner)
    size = 0 if index.is_trained else default_train_size(string, n) if train_size is None else min(train_size, n)
    return MemoryPlan(string, n, dim, codes=code * n, ids=ids, fixed=fixed, training=size * dim * 4,
                      train_size=size, store=store)


def _hnsw_links(hnsw: Any) -> int:
    m = hnsw.nb_neighbors(1) if hasattr(hnsw, "nb_neighbors") else 32
    return int(HNSW_LINK_BYTES * (2 * m + m / max(m - 1, 1)) + 8 + 4)  # neighbours, offsets, levels


def _codebook_bytes(index: Any) -> int:
    """PQ / SQ tables of ``index``: 2^nbits centroids of d/m floats per sub-quantizer, or 2 floats per dim."""
    pq = getattr(index, "pq", None)
    if pq is not None:
        return int(pq.M * pq.ksub * pq.dsub * 4)
    sq = getattr(index, "sq", None)
    if sq is not None:
        return int(2 * index.d * 4)
    return 0


def candidates(n: int, dim: int) -> list[str]:
    """Strings to try, best recall first (FAISS's guidelines), for ``auto`` and for a refusal's suggestion."""
    nlist = default_nlist(n)
    out = ["Flat"] if n <= 200_000 else []
    if nlist >= 2:
        out += [f"IVF{nlist},Flat", f"IVF{nlist},SQ8"]
        out += [f"OPQ{m},IVF{nlist},PQ{m}" for m in (256, 192, 128, 96, 64, 48, 32, 16, 8) if dim % m == 0 and m <= dim]
    else:
        out += ["Flat"] if "Flat" not in out else []
    return list(dict.fromkeys(out))


def fit(n: int, dim: int, budget: int, *, store: int = 0) -> MemoryPlan | None:
    """The plan of the best string whose build fits in ``budget`` bytes; None when none does."""
    for string in candidates(n, dim):
        p = plan(string, n, dim, store=store)
        if p.total <= budget:
            return p
    return None


def available_memory() -> int:
    """MemAvailable from /proc/meminfo (bytes); the physical memory elsewhere."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits(p: MemoryPlan, budget: int | None) -> None:
    """Refuse in one line when ``p`` exceeds ``budget`` (``--max-index-memory``) or the free memory, naming
    a string that would fit."""
    free = available_memory()
    limits = [(budget, "--max-index-memory")] if budget is not None else []
    limits.append((free, "the free memory"))
    for limit, name in limits:
        if p.total > limit:
            better = fit(p.n, p.dim, limit, store=p.store)
            hint = (f"; {better.string!r} would fit ({human(better.total)})" if better is not None
                    else "; no index string fits: split the corpus into shards (ctxcomp's Ray shards) or raise it")
            raise UserError(f"index {p.string!r} over {p.n:,} x {p.dim} needs {human(p.total)} (codes "
                            f"{human(p.codes)}, ids {human(p.ids)}, training {human(p.training)}) but {name} is "
                            f"{human(limit)}{hint}")


class RowSearch(ABC):
    """An index over corpus rows ``0 .. len-1`` of one factory ``string``: one FAISS index (:class:`RowIndex`), or
    several over parts of the corpus whose answers are merged (``experiments.run.sharding.PartedIndex``); what a
    search plan (:func:`choose_search`) tunes.

    ``search`` takes the search parameters (``nprobe`` for inverted files, ``ef_search`` for HNSW) and an
    optional exact re-ranking: the best ``rerank`` candidates are scored again against their full vectors
    (``vectors(rows)``, e.g. the memory-mapped embedding shards) and the best ``k`` of them kept.
    """

    string: str

    @property
    @abstractmethod
    def dim(self) -> int: ...

    @property
    @abstractmethod
    def nlist(self) -> int:
        """Inverted lists (of each part; 0: not an inverted file)."""

    @property
    @abstractmethod
    def graph(self) -> bool:
        """Whether it is an HNSW graph (searched with ``efSearch``)."""

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def candidates(self, queries: np.ndarray, depth: int, nprobe: int | None,
                   ef_search: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows), each (len(queries), <= depth), best first by the index's own scores."""

    def search(self, queries: np.ndarray, k: int, *, nprobe: int | None = None, ef_search: int | None = None,
               rerank: int = 0, vectors: Callable[[np.ndarray], np.ndarray] | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows), each (len(queries), k') best first; rows are int64, k' <= k; -1 rows are dropped
        by the caller (FAISS pads with -1 when fewer than k are found)."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise ValueError(f"queries must have shape (n, {self.dim}), got {queries.shape}")
        scores, rows = self.candidates(queries, min(max(k, rerank), len(self)), nprobe, ef_search)
        if rerank and vectors is not None:
            scores, rows = exact_rerank(queries, rows, vectors)
        return scores[:, :k], rows[:, :k]


class RowIndex(RowSearch):
    """A FAISS index of any factory string whose labels are corpus row numbers (int64), searched in batches."""

    def __init__(self, index: Any, string: str) -> None:
        self.index, self.string = index, string
        self.nprobe_set = False  # whether set_search chose nprobe: then a search without one is meant

    @property
    def dim(self) -> int:
        return int(self.index.d)

    @property
    def nlist(self) -> int:
        """Inverted lists (0: not an inverted file)."""
        import faiss

        ivf = faiss.try_extract_index_ivf(self.index)
        return int(ivf.nlist) if ivf is not None else 0

    @property
    def graph(self) -> bool:
        import faiss

        return isinstance(faiss.downcast_index(self.index), faiss.IndexHNSW) or "HNSW" in self.string.split(",")[0]

    def _nprobe(self) -> int:
        import faiss

        ivf = faiss.try_extract_index_ivf(self.index)
        return int(ivf.nprobe) if ivf is not None else 0

    def __len__(self) -> int:
        return int(self.index.ntotal)

    @classmethod
    def build(cls, string: str, dim: int, n: int, blocks: Callable[[], Iterable[np.ndarray]], *,
              train_size: int | None = None, seed: int = 0, on_block: Callable[[int], None] | None = None,
              say: Callable[[str], None] | None = None) -> RowIndex:
        """Train on a seeded sample of ``train_size`` rows drawn from ``blocks()`` (float32, in corpus order,
        ``n`` rows in all), then add every block; row ``i`` of the corpus gets label ``i``."""
        built = cls.empty(string, dim)
        if not built.index.is_trained:
            size = default_train_size(string, n) if train_size is None else min(train_size, n)
            rng = np.random.default_rng(seed)
            rows = np.sort(rng.choice(n, size=size, replace=False))
            if say is not None:
                say(f"training {string!r} on {size:,} of {n:,} vectors (seed {seed})")
            built.index.train(_gather(blocks(), rows, dim))
        added = 0
        for block in blocks():
            built.add(block)
            added += len(block)
            if on_block is not None:
                on_block(added)
        if added != n:
            raise ValueError(f"the blocks held {added} vectors, not {n}")
        return built

    @classmethod
    def empty(cls, string: str, dim: int, *, metric: str = "ip", ef_construction: int | None = None) -> RowIndex:
        """An empty index of factory ``string`` (untrained where the string needs training) scoring by ``metric``:
        ``ip`` (inner product, higher is better) or ``l2`` (squared L2 distance, lower is better).
        ``ef_construction``: an HNSW graph's search depth while it is built (None: FAISS's)."""
        import faiss

        index = faiss.index_factory(dim, string, faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT)
        _skip_polysemous_training(index)
        built = cls(index, string)
        built._set("efConstruction", ef_construction, "HNSW")
        return built

    def add(self, block: np.ndarray) -> None:
        """Append ``block``'s rows; their labels continue the row numbers."""
        self.index.add(np.ascontiguousarray(block, dtype=np.float32))

    def set_search(self, nprobe: int | None = None, ef_search: int | None = None) -> None:
        """Set the search parameters (None or 0 leaves one as it is); one the string's index has not is refused.
        Set once, they hold for every later search that gives none (FaissIndex's, searched once per question)."""
        self._set("nprobe", nprobe, "IVF")
        self.nprobe_set = self.nprobe_set or bool(nprobe)
        self._set("efSearch", ef_search, "HNSW")

    def _set(self, name: str, value: int | None, kind: str) -> None:
        import faiss

        if not value:
            return
        if kind not in self.string:
            raise UserError(f"{name} applies to {kind} indexes; {self.string!r} has none")
        faiss.ParameterSpace().set_index_parameter(self.index, name, value)

    def candidates(self, queries: np.ndarray, depth: int, nprobe: int | None,
                   ef_search: int | None) -> tuple[np.ndarray, np.ndarray]:
        self.set_search(nprobe, ef_search)
        if nprobe is None and not self.nprobe_set and self.nlist > 1 and self._nprobe() == 1:
            raise UserError(f"{self.string!r} searched with no nprobe would search 1 of its {self.nlist:,} lists "
                            "(FAISS's default); give nprobe, or a SearchPlan's (choose_search)")
        return self.index.search(queries, depth)

    def save(self, path: str | os.PathLike) -> None:
        """FAISS's own format, written beside ``path`` and renamed: a killed save leaves no index."""
        import faiss

        from core.files import DiskError, disk_error

        path = Path(path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            faiss.write_index(self.index, str(tmp))
            os.replace(tmp, path)
        except (OSError, RuntimeError) as err:  # FAISS reports a failed write as a RuntimeError
            free = shutil.disk_usage(path.parent).free
            why = err if isinstance(err, OSError) else OSError(errno.ENOSPC if "No space" in str(err) else 0, str(err))
            raise DiskError(f"{disk_error(tmp, why)} (the index needs about "
                            f"{human(self.index.ntotal * self.index.sa_code_size())}, {human(free)} is free there)"
                            ) from None
        finally:
            tmp.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: str | os.PathLike, string: str, *, mmap: bool = True) -> RowIndex:
        import faiss

        flags = faiss.IO_FLAG_MMAP if mmap and "IVF" in string else 0
        return cls(faiss.read_index(str(path), flags), string)


RECALL_TARGET = 0.95  # the share of exact search's top-k an approximate index's default search must reach
TUNE_K = 20  # the depth that share is measured at (the open-domain curve's top-20)
TUNE_QUERIES = 500  # corpus passages used as queries to measure it
RERANK_STEPS = (0, 100, 200, 500, 1000)  # exact re-ranking depths tried when compressed codes fall short
PLATEAU = 0.002  # a doubling of nprobe / efSearch that gains less than this ends a sweep


@dataclass(frozen=True)
class SearchPlan:
    """The search parameters an approximate index uses when none are given, chosen when it is built.

    The cheapest ``param`` value (``nprobe`` for an inverted file, ``efSearch`` for HNSW), at the smallest
    exact re-ranking depth ``rerank``, whose top-``k`` holds ``target`` of exact search's top-``k`` for
    ``queries`` of the corpus's own vectors used as queries (each query's own row left out of both lists, so
    a passage finding itself counts for nothing), as autofaiss tunes its indexes.  ``share`` is what that
    setting measured; ``curve`` every (value, rerank, share) measured, so a setting given instead can be
    told its share.  ``reached`` is False when no setting tried reached the target (the best is kept).
    """

    string: str
    param: str
    value: int
    rerank: int
    share: float
    target: float
    k: int
    queries: int
    curve: tuple[tuple[int, int, float], ...]

    @property
    def reached(self) -> bool:
        return self.share >= self.target

    def params(self) -> dict[str, int]:
        """Keyword arguments of ``RowIndex.search`` (``nprobe``, ``ef_search``, ``rerank``)."""
        name = {"nprobe": "nprobe", "efSearch": "ef_search"}[self.param]
        return {name: self.value, "rerank": self.rerank}

    def share_at(self, value: int | None, rerank: int) -> float | None:
        """The share measured for (value, rerank), or None when that setting was not tried."""
        for v, r, share in self.curve:
            if v == value and r == rerank:
                return share
        return None

    def describe(self) -> str:
        rerank = f", re-rank {self.rerank}" if self.rerank else ""
        head = (f"search plan for {self.string!r}: {self.param} {self.value}{rerank} finds {self.share:.3f} of "
                f"exact search's top-{self.k} on {self.queries:,} of the corpus's own passages as queries")
        if self.reached:
            return head + f" (target {self.target:.2f}); --nprobe / --ef-search / --rerank override it"
        return head + (f", short of the target {self.target:.2f} at every setting tried: the codes lose too "
                       "much; a finer code (SQ8, Flat, more PQ bytes) would reach it")

    def to_json(self) -> dict[str, Any]:
        return {"string": self.string, "param": self.param, "value": self.value, "rerank": self.rerank,
                "share": self.share, "target": self.target, "k": self.k, "queries": self.queries,
                "curve": [list(c) for c in self.curve]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchPlan:
        return cls(**{**data, "curve": tuple((int(v), int(r), float(s)) for v, r, s in data["curve"])})


def tunable(index: RowSearch) -> tuple[str, list[int]] | None:
    """The parameter that trades speed for recall in ``index`` and the values to try, or None (exact)."""
    if index.nlist > 1:
        return "nprobe", sorted({min(1 << i, index.nlist) for i in range(int(math.log2(index.nlist)) + 2)})
    if index.graph:
        return "efSearch", [16, 32, 64, 128, 256, 512, 1024]
    return None


def choose_search(index: RowSearch, blocks: Callable[[], Iterable[np.ndarray]],
                  vectors: Callable[[np.ndarray], np.ndarray], *, target: float = RECALL_TARGET, k: int = TUNE_K,
                  queries: int = TUNE_QUERIES, seed: int = 0) -> SearchPlan | None:
    """The :class:`SearchPlan` of ``index`` (None for an exact index): ``blocks()`` streams the corpus's
    vectors in row order (exact search's answers), ``vectors(rows)`` reads given rows (the queries, and the
    candidates of an exact re-ranking)."""
    what = tunable(index)
    if what is None:
        return None
    param, values = what
    n = len(index)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, size=min(queries, n), replace=False))
    qvecs = np.ascontiguousarray(vectors(rows), dtype=np.float32)
    truth = _without_self(exact_top(qvecs, blocks(), k + 1), rows, k)
    lossy = re.search(r"(PQ|SQ|LSH|RQ|LSQ)", index.string) is not None
    curve: list[tuple[int, int, float]] = []
    for rerank in RERANK_STEPS if lossy else (0,):
        last = -1.0
        for value in values:
            settings = {"nprobe": value} if param == "nprobe" else {"ef_search": value}
            _, found = index.search(qvecs, k + 1, rerank=rerank, vectors=vectors if rerank else None, **settings)
            share = overlap(_without_self(found, rows, k), truth)
            curve.append((value, rerank, share))
            if share >= target or share - last < PLATEAU:
                break
            last = share
        if curve[-1][2] >= target:
            break
    reached = [c for c in curve if c[2] >= target]
    value, rerank, share = reached[0] if reached else max(curve, key=lambda c: (c[2], -c[1], -c[0]))
    return SearchPlan(index.string, param, value, rerank, share, target, k, len(rows), tuple(curve))


@dataclass(frozen=True)
class SearchGiven:
    """Search parameters given instead of the plan's (``--nprobe``, ``--ef-search``, ``--rerank``); None: the plan's."""

    nprobe: int | None = None
    ef_search: int | None = None
    rerank: int | None = None

    def over(self, found: SearchPlan | None) -> dict[str, int]:
        """What ``RowSearch.search`` is given: the plan's parameters, each overridden by a setting given."""
        params = found.params() if found is not None else {}
        params.update({k: v for k, v in (("nprobe", self.nprobe), ("ef_search", self.ef_search),
                                         ("rerank", self.rerank)) if v is not None})
        return params


def planned_search(index: RowSearch, sidecar: Path, blocks: Callable[[], Iterable[np.ndarray]],
                   vectors: Callable[[np.ndarray], np.ndarray], *, given: SearchGiven = SearchGiven(),
                   target: float = RECALL_TARGET, seed: int = 0,
                   say: Callable[[str], None] = print) -> SearchPlan | None:
    """The search plan of ``index`` (None: exact), chosen once (:func:`choose_search`) and kept in ``sidecar``
    (JSON, beside the index), then printed through ``say``.  A setting ``given`` instead is told the share the
    plan measured for it, and an ``nprobe`` that searches a sixteenth of the lists or fewer is warned about:
    no setting that searches one list of many passes silently."""
    from core.files import write_atomic

    found = None
    if sidecar.is_file():
        found = SearchPlan.from_json(json.loads(sidecar.read_text(encoding="utf-8")))
        if (found.target, found.k) != (target, TUNE_K):
            found = None
    if found is None and tunable(index) is not None:
        say(f"choosing search parameters for {index.string!r}: the cheapest that find {target:.2f} of exact "
            f"search's top-{TUNE_K} (exact search over the shards: once per index)")
        found = choose_search(index, blocks, vectors, target=target, seed=seed)
        if found is not None:
            write_atomic(sidecar, json.dumps(found.to_json(), indent=1))
    if found is not None:
        say(found.describe())
    chosen = {k: v for k, v in (("nprobe", given.nprobe), ("efSearch", given.ef_search)) if v is not None}
    if found is not None and (chosen or given.rerank is not None):
        value = chosen.get(found.param, found.value)
        rerank = found.rerank if given.rerank is None else given.rerank
        share = found.share_at(value, rerank)
        measured = f"measured {share:.3f}" if share is not None else "not measured at build time"
        say(f"search: {found.param} {value}, re-rank {rerank} as given ({measured} of exact search's "
            f"top-{TUNE_K}; the plan's {found.param} {found.value}, re-rank {found.rerank} found {found.share:.3f})")
    warning = few_lists(index, given.nprobe)
    if warning:
        say(warning)
    return found


def few_lists(index: RowSearch, nprobe: int | None) -> str | None:
    """A warning when ``nprobe`` searches a sixteenth of ``index``'s inverted lists or fewer, else None."""
    lists = index.nlist
    if nprobe is None or lists <= 1 or nprobe * 16 > lists:
        return None
    return (f"warning: --nprobe {nprobe} searches {nprobe} of {lists:,} inverted lists; FAISS's guidelines and "
            "the search plan above say how much of the top-20 that loses")


def slug(string: str) -> str:
    """A factory string as part of a file name (``IVF32,PQ8`` -> ``IVF32_PQ8``)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", string).strip("_")


def exact_top(queries: np.ndarray, blocks: Iterable[np.ndarray], k: int) -> np.ndarray:
    """Rows of the ``k`` highest inner products per query over a stream of blocks in row order (exact search,
    never holding more than one block's scores); shape (len(queries), k), best first."""
    best_scores = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_rows = np.zeros((len(queries), 0), dtype=np.int64)
    lo = 0
    for block in blocks:
        scores = queries @ np.asarray(block, dtype=np.float32).T
        if scores.shape[1] > k:  # the block's own top k first: a partition, not a sort of 50,000 columns
            part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
            scores, rows = np.take_along_axis(scores, part, 1), part + lo
        else:
            rows = np.broadcast_to(np.arange(lo, lo + scores.shape[1]), scores.shape)
        scores, rows = np.concatenate([best_scores, scores], axis=1), np.concatenate([best_rows, rows], axis=1)
        keep = np.lexsort((rows, -scores), axis=1)[:, :k]
        best_scores, best_rows = np.take_along_axis(scores, keep, 1), np.take_along_axis(rows, keep, 1)
        lo += len(block)
    return best_rows


def _without_self(found: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """Each query's found rows without its own row (and FAISS's -1 padding), cut to ``k``, padded with -1."""
    out = np.full((len(found), k), -1, dtype=np.int64)
    for i, (got, own) in enumerate(zip(found, rows)):
        kept = got[(got != own) & (got >= 0)][:k]
        out[i, :len(kept)] = kept
    return out


def overlap(found: np.ndarray, truth: np.ndarray) -> float:
    """The mean share of each query's true rows (``truth``, -1 padding ignored) that ``found`` holds."""
    shares = [len(set(f[f >= 0]) & set(t[t >= 0])) / max(int((t >= 0).sum()), 1) for f, t in zip(found, truth)]
    return float(np.mean(shares)) if shares else 0.0


def _skip_polysemous_training(index: Any) -> None:
    """FAISS's factory turns on polysemous training for IVF-PQ; it only serves Hamming-filtered search
    (``polysemous_ht``), which is never used here; with it, IVF256,PQ64 trained 271 s on 4,096 vectors of
    768-d, against 39 s on 10,000 without it, one shared core each (docs/scale.md)."""
    import faiss

    ivf = faiss.try_extract_index_ivf(index)
    inner = faiss.downcast_index(ivf) if ivf is not None else index
    if hasattr(inner, "do_polysemous_training"):
        inner.do_polysemous_training = False


def exact_rerank(queries: np.ndarray, rows: np.ndarray, vectors: Callable[[np.ndarray], np.ndarray], *,
                 batch: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Score each query's candidate ``rows`` by exact inner product with their full vectors; best first.

    ``vectors`` is called once per ``batch`` queries with every distinct candidate of the batch, so a reader
    of vectors on disk can fetch them all at once (``indexes.rows.RowReader``) rather than row by row.
    """
    out_scores = np.full(rows.shape, -np.inf, dtype=np.float32)
    out_rows = np.full(rows.shape, -1, dtype=np.int64)
    for lo in range(0, len(queries), batch):
        part = rows[lo: lo + batch]
        distinct = np.unique(part[part >= 0])
        table = vectors(distinct) if len(distinct) else np.zeros((0, queries.shape[1]), np.float32)
        for i, (q, cand) in enumerate(zip(queries[lo: lo + batch], part), start=lo):
            cand = cand[cand >= 0]
            if not len(cand):
                continue
            exact = table[np.searchsorted(distinct, cand)] @ q
            order = np.argsort(-exact, kind="stable")
            out_scores[i, :len(cand)] = exact[order]
            out_rows[i, :len(cand)] = cand[order]
    return out_scores, out_rows


def _gather(blocks: Iterable[np.ndarray], rows: np.ndarray, dim: int) -> np.ndarray:
    """The rows ``rows`` (sorted) of the stream of blocks, as one float32 array."""
    out = np.empty((len(rows), dim), dtype=np.float32)
    lo, got = 0, 0
    for block in blocks:
        hi = lo + len(block)
        want = rows[(rows >= lo) & (rows < hi)]
        out[got: got + len(want)] = np.asarray(block[want - lo], dtype=np.float32)
        got += len(want)
        lo = hi
        if got == len(rows):
            break
    return out


__all__ = ["RECALL_TARGET", "MemoryPlan", "NAMES", "RowIndex", "RowSearch", "SearchGiven", "SearchPlan", "choose_search", "exact_top", "overlap", "available_memory", "candidates", "check_fits", "default_nlist",
           "default_train_size", "exact_rerank", "few_lists", "fit", "human", "parse_bytes", "plan", "planned_search", "resolve", "slug"]

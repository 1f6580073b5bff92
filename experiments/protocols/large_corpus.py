"""An open-domain corpus given by name or path (``--corpus``, ``corpus:``), searched from disk at any size.

The corpus file (``wikipedia-dpr-100w``, or any TSV, JSONL or Parquet
passage file) is streamed once into a passage store; the retriever's index
is built once into ``<cache root>/corpora/<store>/<engine>``; both are
reused by every later run.  Search results are row numbers; only the
passages a question keeps are read back.  The in-memory path (the question
file's own passages, ``experiments.protocols.corpus``) is unchanged.
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.paths import cache_root
from core.progress import progress_bar
from core.registry import ComponentSpec
from indexes.types import Passage

# the keys of a dense retriever's params that describe its corpus index, not the retriever itself
INDEX_KEYS = ("index", "nprobe", "ef_search", "rerank", "max_index_memory", "max_encode_time", "recall_target",
              "train_size", "seed", "shard_dtype")


def is_corpus_file(value: str | Path) -> bool:
    """Whether ``value`` names a passage corpus (a catalogued corpus, a .tsv/.parquet file, or a .jsonl file
    whose first record has a ``text`` and no ``question``) rather than a Lost in the Middle question file."""
    from experiments.data.catalog import catalog

    name = str(value)
    if name in catalog():
        return catalog()[name].file.split(".", 1)[-1].startswith(("tsv", "parquet"))
    suffix = Path(name).name.lower().removesuffix(".gz")
    if suffix.endswith(".jsonl") and Path(name).is_file():  # passages have a text; a question file has none
        from experiments.data.sources import iter_records

        first = next(iter(iter_records(name)), (None, {}))[1]
        return "text" in first and "question" not in first
    return suffix.endswith((".tsv", ".parquet"))


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def open_corpus_search(corpus: str | Path, retriever: Any, *, index: dict | None = None, root: Path | None = None,
                       progress: bool = True, pool_for: Callable[[ComponentSpec], Any] | None = None,
                       say: Callable[[str], None] = _say, quoting: str | None = None):
    """A ``retrievers.corpus.CorpusSearch`` of ``retriever`` (a section or name) over ``corpus``.

    ``index``: settings for a dense index (``index``, ``nprobe``, ``ef_search``, ``rerank``,
    ``max_index_memory``, ``train_size``, ``seed``, ``shard_dtype``) over those in the retriever's params.  ``pool_for(section)``:
    a factory of the encoder pool (Ray) for the retriever's own section, or None to encode here.  ``quoting``:
    a TSV corpus's (``corpus_stream.iter_corpus``), over the ``corpus_quoting`` of the retriever's params (where
    a config or ``ctxcomp curve`` puts it).
    """
    from experiments.protocols.corpus_stream import open_corpus
    from retrievers.corpus import BM25Engine, CorpusSearch, DenseEngine, DenseIndexSettings, corpus_folder
    from retrievers.shards import dense_retriever

    spec = ComponentSpec.parse(retriever, "retriever")
    params = dict(spec.params)
    quoting = quoting or params.pop("corpus_quoting", None) or "csv"
    params.pop("corpus_quoting", None)
    store = open_corpus(corpus, progress=progress, say=say, quoting=quoting)
    root = Path(root) if root is not None else cache_root() / "corpora"
    given = {k: params.pop(k) for k in INDEX_KEYS if k in params}
    if "index_kind" in params and "index" not in given:
        given["index"] = params.pop("index_kind")
    if spec.name == "bm25":
        extra = {k: v for k, v in {**given, **(index or {})}.items() if v is not None}
        if extra:
            raise UserError(f"{', '.join(sorted(extra))}: index settings are for dense retrievers, not bm25")
        unknown = set(params) - {"use_title", "k1", "b", "analyzer"}
        if unknown:
            raise UserError(f"bm25 over a corpus takes use_title, k1, b and analyzer; not {', '.join(sorted(unknown))}")
        with progress_bar(len(store), "bm25 index", unit="passage", enabled=progress, leave=False) as bar:
            done = [0]

            def step(rows: int) -> None:
                bar.update(rows - done[0])
                done[0] = rows

            engine = BM25Engine(store, corpus_folder(root, store, "bm25" + "".join(
                f"-{k}{params[k]}" for k in sorted(params))), progress=step, say=say, **params)
        return CorpusSearch(engine, store)
    section = ComponentSpec(spec.name, params, spec.label)
    built = dense_retriever(section)
    overrides = {("max_memory" if k == "max_index_memory" else k): v for k, v in (index or {}).items()}
    given = {("max_memory" if k == "max_index_memory" else k): v for k, v in given.items()}
    settings = DenseIndexSettings.from_params(given, **overrides)
    folder = corpus_folder(root, store, f"{built.encoder.model_id}-{'title' if built.use_title else 'notitle'}"
                           + ("" if settings.shard_dtype == "float32" else f"-{settings.shard_dtype}"))
    with progress_bar(None, "encode", unit="shard", enabled=progress, leave=False) as bar:
        engine = DenseEngine(built, store, folder, settings, pool_for=pool_for(section) if pool_for else None, say=say,
                             on_shard=lambda _i: bar.update(1))
    return CorpusSearch(engine, store)


def corpus_on_disk(option: str | None, corpus: Path | None, queries: Path | None, litm: Path | None,
                   index: dict) -> tuple[str, Path | None] | None:
    """``ctxcomp retrieve``'s arguments as (corpus on disk, queries file), or None for the in-memory path.

    ``--corpus C`` names it, and the one positional argument is then the queries; a positional CORPUS that is a
    data name, a TSV or a Parquet file is one too (a JSONL CORPUS keeps the in-memory path).  Index options
    without a corpus on disk are refused.
    """
    if option is not None:
        if corpus is not None and queries is not None:
            raise UserError("--corpus names the corpus: give QUERIES (or --litm FILE), not CORPUS QUERIES too")
        qfile = corpus if queries is None else queries
        if (qfile is None) == (litm is None):
            raise UserError("with --corpus give the questions as --litm FILE or as one QUERIES file")
        return option, qfile
    jsonl = Path(str(corpus)).name.lower().removesuffix(".gz").endswith(".jsonl")
    if corpus is not None and not jsonl and is_corpus_file(corpus):
        if litm is not None or queries is None:
            raise UserError("give CORPUS QUERIES, or --corpus CORPUS --litm FILE")
        return str(corpus), queries
    given = [f"--{k.replace('_', '-')}" for k, v in index.items() if v is not None]
    if given:
        raise UserError(f"{', '.join(given)} need(s) --corpus (an index over a passage corpus on disk)")
    return None


def with_index_options(section: dict, corpus: str | None, **options: Any) -> dict:
    """A retriever section with the command line's index options in its params (``ctxcomp curve``); the
    options need a corpus on disk, and a corpus needs a passage file, not a question file."""
    given = {k: v for k, v in options.items() if v is not None}
    if given and corpus is None:
        raise UserError(f"{', '.join('--' + k.replace('_', '-') for k in given)} need(s) --corpus")
    if corpus is not None and not is_corpus_file(corpus):
        raise UserError(f"--corpus {corpus}: name a data corpus (wikipedia-dpr-100w) or a .tsv[.gz], .parquet or "
                        ".jsonl[.gz] passage file (id, text[, title])")
    return {**section, "params": {**section.get("params", {}), **given}}


def search_passages(search: Any, queries: Sequence[str], k: int) -> list[list[Passage]]:
    """The top ``k`` passages per query from a ``CorpusSearch``, each with its score (``PassageIndex.search``'s
    shape, so the open-domain protocol takes either)."""
    return [[replace(Passage(text=h.chunk.text, title=h.chunk.title, doc_id=h.chunk.doc_id),
                     score=round(float(h.score), 6)) for h in hits]
            for hits in search.search(list(queries), k)]


class CorpusPassageIndex:
    """``PassageIndex``'s interface (``retriever``, ``search``, ``len``) over a corpus on disk."""

    def __init__(self, search: Any) -> None:
        self._search = search
        self.retriever = search

    def __len__(self) -> int:
        return len(self._search)

    def search(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        return search_passages(self._search, queries, k)


__all__ = ["INDEX_KEYS", "CorpusPassageIndex", "corpus_on_disk", "is_corpus_file", "open_corpus_search", "search_passages",
           "with_index_options"]

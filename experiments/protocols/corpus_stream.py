"""Reading a passage corpus as a stream: DPR's TSV (``psgs_w100.tsv[.gz]``), JSON lines, or Parquet.

Wikipedia's 21M passages are 13 GB of text: a corpus is never read whole, only
row by row (Parquet: one record batch at a time), straight into the on-disk
passage store (``indexes.passages``).  Every row has an ``id``, a ``text`` and
an optional ``title``, whatever the format; a row without text is a one-line
``DataError`` naming ``file:line`` (Parquet: ``file:row``) and the field.
"""
from __future__ import annotations

import csv
import gzip
import io
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

from core.paths import cache_root
from core.progress import progress_bar
from experiments.data.sources import DataError, iter_records
from indexes.passages import PassageStore, StoreBuild, build_store

FORMATS = ("tsv", "jsonl", "parquet")
PARQUET_BATCH = 8192

Row = tuple[str, str, str]  # (doc_id, text, title), the passage store's columns


def corpus_format(path: str | Path) -> str:
    """``tsv``, ``jsonl`` or ``parquet`` from the file name (``.gz`` allowed for the first two)."""
    name = Path(path).name.lower().removesuffix(".gz")
    for suffix, fmt in ((".tsv", "tsv"), (".jsonl", "jsonl"), (".parquet", "parquet")):
        if name.endswith(suffix):
            return fmt
    raise DataError(str(path), None, None, "unknown corpus format; name a .tsv[.gz], .jsonl[.gz] or .parquet file "
                                           "with columns id, text[, title]")


def iter_corpus(path: str | Path) -> Iterator[Row]:
    """Yield ``(id, text, title)`` per passage, in file order, reading only as far as the caller takes."""
    path = Path(path)
    if not path.is_file():
        raise DataError(str(path), None, None, "file not found" if not path.is_dir() else "is a directory")
    fmt = corpus_format(path)
    if fmt == "tsv":
        yield from _iter_tsv(path)
    elif fmt == "jsonl":
        for where, obj in iter_records(path):
            text = where.text(obj, "text")
            yield str(where.get(obj, "id", (str, int))), text, where.get(obj, "title", str, required=False) or ""
    else:
        yield from _iter_parquet(path)


def _iter_tsv(path: Path) -> Iterator[Row]:
    """DPR's layout: a header ``id<TAB>text<TAB>title``, fields quoted as the csv module writes them."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    raw = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")
    try:
        with io.TextIOWrapper(raw, encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle, delimiter="\t")
            header = next(reader, None)
            if header is None:
                raise DataError(str(path), 1, None, "the corpus is empty (no header line)")
            cols = {name.strip().lower(): i for i, name in enumerate(header)}
            for need in ("id", "text"):
                if need not in cols:
                    raise DataError(str(path), 1, need, f"missing column in the header {header!r}")
            i_id, i_text, i_title = cols["id"], cols["text"], cols.get("title")
            width = max(cols.values()) + 1
            for fields in reader:
                line = reader.line_num
                if not fields:
                    continue
                if len(fields) < width:
                    missing = [n for n, i in cols.items() if i >= len(fields)][0]
                    raise DataError(str(path), line, missing, f"missing: the line has {len(fields)} of {width} fields")
                if not fields[i_text].strip():
                    raise DataError(str(path), line, "text", "is empty (or only whitespace)")
                yield fields[i_id], fields[i_text], fields[i_title] if i_title is not None else ""
    except UnicodeDecodeError as exc:
        raise DataError(str(path), None, None, f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataError(str(path), None, None, f"not a readable gzip file ({exc}); fetch it again") from None


def _iter_parquet(path: Path) -> Iterator[Row]:
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(path)
    names = set(handle.schema_arrow.names)
    for need in ("id", "text"):
        if need not in names:
            raise DataError(str(path), None, need, f"missing column (the file has {sorted(names)})")
    columns = ["id", "text"] + (["title"] if "title" in names else [])
    row = 0
    for batch in handle.iter_batches(batch_size=PARQUET_BATCH, columns=columns):
        data = batch.to_pydict()
        titles = data.get("title") or [""] * batch.num_rows
        for doc_id, text, title in zip(data["id"], data["text"], titles):
            row += 1
            if not isinstance(text, str) or not text.strip():
                raise DataError(str(path), row, "text", "is empty or not a string")
            yield str(doc_id), text, title or ""


def corpus_file(name_or_path: str | Path) -> Path:
    """A corpus given by data name (``wikipedia-dpr-100w``) or path, as the file it lies in."""
    from experiments.data.catalog import catalog, local_file

    return local_file(str(name_or_path)) if str(name_or_path) in catalog() else Path(name_or_path)


def store_path(path: Path) -> Path:
    """Where the passage store of corpus file ``path`` goes: ``<cache root>/corpora/<stem>-<source hash>.sqlite``."""
    import hashlib

    key = hashlib.sha256(source_key(path).encode()).hexdigest()[:12]
    stem = path.name.split(".")[0][:60] or "corpus"
    return cache_root() / "corpora" / f"{stem}-{key}.sqlite"


def source_key(path: Path) -> str:
    """The corpus file as a build's source: its absolute path, size and modification time."""
    stat = path.stat()
    return f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"


def open_corpus(name_or_path: str | Path, *, store: Path | None = None, progress: bool = True,
                say=None) -> PassageStore:
    """The passage store of a corpus, built by streaming the file the first time (resumably).

    ``store``: where the store goes (default :func:`store_path`); ``say(line)`` hears whether it was
    built, continued or already there.
    """
    path = corpus_file(name_or_path)
    if not path.is_file():
        raise DataError(str(path), None, None, "file not found" if not path.is_dir() else "is a directory")
    corpus_format(path)
    target = store or store_path(path)
    with progress_bar(None, f"store {path.name}", unit="passage", enabled=progress, leave=False) as bar:
        done = [0]

        def on_block(rows: int) -> None:
            bar.update(rows - done[0])
            done[0] = rows

        build: StoreBuild = build_store(target, lambda: iter_corpus(path), source=source_key(path),
                                        on_block=on_block)
    if say is not None:
        say(build.describe())
    return build.store


__all__ = ["FORMATS", "Row", "corpus_file", "corpus_format", "iter_corpus", "open_corpus", "source_key",
           "store_path"]

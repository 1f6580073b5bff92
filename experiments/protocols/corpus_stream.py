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
import zlib
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.errors import UserError
from core.paths import cache_root
from core.progress import progress_bar
from experiments.data.sources import DataError, around_byte, excerpt, iter_records, text_lines
from indexes.passages import PassageStore, StoreBuild, build_store

FORMATS = ("tsv", "jsonl", "parquet")
PARQUET_BATCH = 8192
QUOTINGS = ("csv", "none")
READER = 2  # the reader's version, part of a store's source: 1 read TSVs with the csv module, merging rows
MAX_SPAN = 20  # lines one csv-quoted field may span (a passage is a paragraph, not a file)

Row = tuple[str, str, str]  # (doc_id, text, title), the passage store's columns


def corpus_format(path: str | Path) -> str:
    """``tsv``, ``jsonl`` or ``parquet`` from the file name (``.gz`` allowed for the first two)."""
    name = Path(path).name.lower().removesuffix(".gz")
    for suffix, fmt in ((".tsv", "tsv"), (".jsonl", "jsonl"), (".parquet", "parquet")):
        if name.endswith(suffix):
            return fmt
    raise DataError(str(path), None, None, "unknown corpus format; name a .tsv[.gz], .jsonl[.gz] or .parquet file "
                                           "with columns id, text[, title]")


@dataclass
class ReadCounts:
    """What a read has covered: ``rows`` passages from ``lines`` data lines (more lines than rows: csv-quoted
    newlines)."""

    rows: int = 0
    lines: int = 0


def iter_corpus(path: str | Path, *, quoting: str = "csv", counts: ReadCounts | None = None) -> Iterator[Row]:
    """Yield ``(id, text, title)`` per passage, in file order, reading only as far as the caller takes.

    One passage per data line (TSV, JSONL) or row (Parquet), never merged or dropped: a line that cannot be
    one passage is a ``DataError`` naming ``file:line``.  ``quoting``: how a TSV's fields are written, ``csv``
    (DPR's: a field holding a quote, tab or newline is csv-quoted) or ``none`` (every line split at its tabs,
    every character kept).  Ids follow :data:`ID_RULES`; a duplicate is an error naming both lines, raised when
    the stream ends (the last row is yielded first: a store built from the stream is then never finished).
    ``counts`` hears how far the read has got.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(str(path), None, None, "file not found" if not path.is_dir() else "is a directory")
    if quoting not in QUOTINGS:
        raise UserError(f"corpus quoting must be one of {', '.join(QUOTINGS)}, got {quoting!r}")
    ids = _Ids(path)
    counts = counts if counts is not None else ReadCounts()
    counts.rows = counts.lines = 0
    for line, row in _located_rows(path, quoting, counts):
        ids.add(row[0], line)
        counts.rows += 1
        counts.lines = max(counts.lines, counts.rows)
        yield row
    ids.finish(lambda: _located_rows(path, quoting))


ID_RULES = ("an id is a non-empty string (a JSON id may be an integer) with no surrounding whitespace, unique "
            "in the corpus; it need not be an integer, and the store keeps it as given")


def _located_rows(path: Path, quoting: str, counts: ReadCounts | None = None) -> Iterator[tuple[int, Row]]:
    """``(line, row)`` per passage (Parquet: the 1-based row for the line)."""
    fmt = corpus_format(path)
    if fmt == "tsv":
        yield from _iter_tsv(path, quoting, counts or ReadCounts())
    elif fmt == "jsonl":
        for where, obj in iter_records(path):
            text = where.text(obj, "text")
            row = str(where.get(obj, "id", (str, int))), text, where.get(obj, "title", str, required=False) or ""
            yield where.line or 0, row
    else:
        yield from _iter_parquet(path)


class _Ids:
    """Checks :data:`ID_RULES` as rows stream by, in 8 bytes a row (a hash), so 21M ids never sit in memory.

    Equal hashes are confirmed by reading the file again for just those rows (rare: a real duplicate, or a
    64-bit collision), which also finds the first line of the pair."""

    def __init__(self, path: Path) -> None:
        self.path, self.hashes = path, array("q")

    def add(self, doc_id: str, line: int) -> None:
        if not doc_id.strip():
            raise DataError(str(self.path), line, "id", "is empty; " + ID_RULES)
        if doc_id != doc_id.strip():
            raise DataError(str(self.path), line, "id", f"{excerpt(doc_id)} has surrounding whitespace; " + ID_RULES)
        self.hashes.append(hash(doc_id))

    def finish(self, again: Callable[[], Iterator[tuple[int, Row]]]) -> None:
        hashes = np.frombuffer(self.hashes, dtype=np.int64) if self.hashes else np.zeros(0, np.int64)
        ordered = np.sort(hashes)
        suspects = set(ordered[1:][ordered[1:] == ordered[:-1]].tolist())
        if not suspects:
            return
        first: dict[str, int] = {}
        for line, (doc_id, _text, _title) in again():
            if hash(doc_id) not in suspects:
                continue
            if doc_id in first:
                raise DataError(str(self.path), line, "id", f"{excerpt(doc_id)} is a duplicate of line "
                                f"{first[doc_id]:,}; ids must be unique (a passage is found by its id)")
            first[doc_id] = line


def _iter_tsv(path: Path, quoting: str, counts: ReadCounts) -> Iterator[tuple[int, Row]]:
    """DPR's layout: a header ``id<TAB>text<TAB>title``, then one passage per line.

    Read line by line, so a bad byte is placed at its line and offset in the file and a stray quote never
    swallows the lines after it (the csv module, reading the stream, merged rows that way).  The one record
    that spans lines is csv's own: a quoted field holding a newline, which must close within ``MAX_SPAN``
    lines and parse strictly into the header's fields.
    """
    lines = _decoded_lines(path)
    first = next(lines, None)
    if first is None:
        raise DataError(str(path), 1, None, "the corpus is empty (no header line)")
    cols, width = _header(path, _unterminated(first[1]))
    for number, line in lines:
        fields, number, last = _record(path, number, line, lines, quoting)
        counts.lines = last - 1
        if len(fields) != width:
            missing = [name for name, i in cols.items() if i >= len(fields)]
            raise DataError(str(path), number, missing[0] if missing else None,
                            _width_problem(fields, width, quoting, line))
        doc_id, body = fields[cols["id"]], fields[cols["text"]]
        if not body.strip():
            raise DataError(str(path), number, "text", "is empty (or only whitespace)")
        yield number, (doc_id, body, fields[cols["title"]] if "title" in cols else "")


def _decoded_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text with its line end)`` per line; bad UTF-8 is placed at its line and file offset."""
    try:
        with gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb") as raw:
            yield from text_lines(path, raw)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataError(str(path), None, None, f"not a readable gzip file ({exc}); fetch it again") from None


def _unterminated(line: str) -> str:
    return line.removesuffix("\n").removesuffix("\r")


def _header(path: Path, line: str) -> tuple[dict[str, int], int]:
    header = line.split("\t")
    cols = {name.strip().lower(): i for i, name in enumerate(header)}
    for need in ("id", "text"):
        if need not in cols:
            raise DataError(str(path), 1, need, f"missing column in the header {excerpt(line)}; the first line "
                            "names the columns: id<TAB>text<TAB>title")
    return cols, len(header)


def _record(path: Path, number: int, line: str, more: Iterator[tuple[int, str]],
            quoting: str) -> tuple[list[str], int, int]:
    """The fields of the record starting at line ``number`` (taking continuation lines from ``more`` only
    for a csv-quoted field that holds a newline), that line's number and the record's last line's."""
    text = _unterminated(line)
    if not text:
        raise DataError(str(path), number, None, "an empty line; every line after the header is one passage")
    if quoting == "none" or '"' not in text:
        return text.split("\t"), number, number
    last = number
    for span in range(1, MAX_SPAN + 1):
        try:
            return next(csv.reader([text], delimiter="\t", strict=True)), number, last
        except csv.Error as exc:
            reason = str(exc)
        following = next(more, None) if reason == "unexpected end of data" and span < MAX_SPAN else None
        if following is None:
            break
        last = following[0]
        text = _unterminated(line + following[1])
        line += following[1]
    raise DataError(str(path), number, None, f"not csv-quoted as DPR's format is ({reason}"
                    + (f", read across {span} lines for a quoted newline" if span > 1 else "") + f") in {excerpt(text)}; "
                    "if the file is plain tab-separated lines (a quote is just a character), read it with "
                    "--corpus-quoting none (in a config: the retriever param corpus_quoting: none)")


def _width_problem(fields: list[str], width: int, quoting: str, line: str) -> str:
    problem = f"{'missing: ' if len(fields) < width else ''}the line has {len(fields)} fields, the header {width}: " \
              f"{excerpt(line)}"
    if len(fields) > width and quoting == "none":
        problem += "; a tab inside a field needs csv quoting (--corpus-quoting csv)"
    return problem


def _iter_parquet(path: Path) -> Iterator[tuple[int, Row]]:
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(path)
    names = set(handle.schema_arrow.names)
    for need in ("id", "text"):
        if need not in names:
            raise DataError(str(path), None, need, f"missing column (the file has {sorted(names)})")
    columns = ["id", "text"] + (["title"] if "title" in names else [])
    row = 0
    for batch in handle.iter_batches(batch_size=PARQUET_BATCH, columns=columns):
        data = _batch_values(path, batch, row)
        titles = data.get("title") or [""] * batch.num_rows
        for doc_id, text, title in zip(data["id"], data["text"], titles):
            row += 1
            if not isinstance(text, str) or not text.strip():
                raise DataError(str(path), row, "text", "is empty or not a string")
            yield row, (str(doc_id), text, title or "")


def _batch_values(path: Path, batch, before: int) -> dict[str, list]:
    """A record batch's columns as Python values (``before`` rows precede it); a string that is not UTF-8 is an
    error naming its row, its field and the byte within the value (a Parquet file keeps no lines, and its pages
    are encoded, so no offset in the file points at it)."""
    import pyarrow as pa

    try:
        return batch.to_pydict()
    except UnicodeDecodeError:
        pass
    for name, column in zip(batch.schema.names, batch.columns):
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            continue
        for i, value in enumerate(column.cast(pa.large_binary()).to_pylist()):
            try:
                if value is not None:
                    value.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(str(path), before + i + 1, name, f"not valid UTF-8 ({exc.reason}) at byte "
                                f"{exc.start:,} of the value, near {excerpt(around_byte(value, exc.start))}") from None
    return batch.to_pydict()


def corpus_file(name_or_path: str | Path) -> Path:
    """A corpus given by data name (``wikipedia-dpr-100w``) or path, as the file it lies in."""
    from experiments.data.catalog import catalog, local_file

    return local_file(str(name_or_path)) if str(name_or_path) in catalog() else Path(name_or_path)


def store_path(path: Path, quoting: str = "csv") -> Path:
    """Where the passage store of corpus file ``path`` goes: ``<cache root>/corpora/<stem>-<source hash>.sqlite``."""
    import hashlib

    key = hashlib.sha256(source_key(path, quoting).encode()).hexdigest()[:12]
    stem = path.name.split(".")[0][:60] or "corpus"
    return cache_root() / "corpora" / f"{stem}-{key}.sqlite"


def source_key(path: Path, quoting: str = "csv") -> str:
    """The corpus file as a build's source: its absolute path, size and modification time, and how it is read
    (the reader's version: a store an older reader built, which could merge rows, is built again)."""
    stat = path.stat()
    how = f"|reader{READER}" + ("" if quoting == "csv" else f"|quoting={quoting}")
    return f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}{how}"


def open_corpus(name_or_path: str | Path, *, store: Path | None = None, progress: bool = True,
                say=None, quoting: str = "csv") -> PassageStore:
    """The passage store of a corpus, built by streaming the file the first time (resumably).

    ``store``: where the store goes (default :func:`store_path`); ``say(line)`` hears whether it was
    built, continued or already there; ``quoting``: a TSV's (:func:`iter_corpus`).  A store built here holds
    exactly one passage per data line read, or this raises.
    """
    path = corpus_file(name_or_path)
    if not path.is_file():
        raise DataError(str(path), None, None, "file not found" if not path.is_dir() else "is a directory")
    corpus_format(path)
    if quoting not in QUOTINGS:
        raise UserError(f"--corpus-quoting must be one of {', '.join(QUOTINGS)}, got {quoting!r}")
    target = store or store_path(path, quoting)
    read = ReadCounts()

    with progress_bar(None, f"store {path.name}", unit="passage", enabled=progress, leave=False) as bar:
        done = [0]

        def on_block(stored: int) -> None:
            bar.update(stored - done[0])
            done[0] = stored

        build: StoreBuild = build_store(target, lambda: iter_corpus(path, quoting=quoting, counts=read),
                                        source=source_key(path, quoting), on_block=on_block)
    if build.built and len(build.store) != read.rows:
        raise UserError(f"{path}: {read.rows:,} passages read but {len(build.store):,} stored; delete {target} "
                        "and build it again")
    if say is not None:
        spanning = f" ({read.lines - read.rows:,} more lines: csv-quoted newlines)" if read.lines > read.rows else ""
        say(build.describe() + (f" from {read.lines:,} data lines{spanning}" if build.built else ""))
    return build.store


__all__ = ["FORMATS", "ID_RULES", "QUOTINGS", "ReadCounts", "Row", "corpus_file", "corpus_format", "iter_corpus", "open_corpus", "source_key",
           "store_path"]

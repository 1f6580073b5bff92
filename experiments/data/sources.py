"""Reading a data file: JSON lines (plain or gzip) or a JSON array, each record with where it came from.

Every problem is a ``DataError`` naming ``file:line`` and the field, whatever the published format; the
loaders of each family (``experiments.tasks.loading``) turn records into examples.
"""
from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

from core.errors import UserError

EXCERPT = 60  # characters of a bad record an error quotes: a 700-character row is not echoed


class DataError(UserError):
    """A record that cannot be read; the message names ``file:line`` and the field."""

    def __init__(self, path: str, line: int | None, field: str | None, problem: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        what = f" field {field!r}:" if field else ""
        super().__init__(f"{where}:{what} {problem}")
        self.path, self.line, self.field, self.problem = str(path), line, field, problem


@dataclass(frozen=True)
class Where:
    """Where a record came from; turns field problems into ``DataError``."""

    path: str
    line: int | None  # None for records that come from no file (generated data)

    @property
    def source(self) -> str:
        return f"{self.path}:{self.line}" if self.line is not None else self.path

    def error(self, field: str | None, problem: str) -> DataError:
        return DataError(self.path, self.line, field, problem)

    def get(self, record: dict, field: str, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
        if field not in record or record[field] is None:
            if required:
                raise self.error(field, "missing required field")
            return None
        value = record[field]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kind):  # JSON's true is no int
            expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.error(field, f"expected {expected}, got {type(value).__name__}")
        return value

    def text(self, record: dict, field: str) -> str:
        """A required string field that must hold text (a context that is empty or only whitespace would
        be read as if the document said nothing, and scored)."""
        value = self.get(record, field, str)
        if not value.strip():
            raise self.error(field, "is empty (or only whitespace)")
        return value

    def strings(self, record: dict, field: str, *, required: bool = True) -> tuple[str, ...]:
        values = self.get(record, field, list, required=required)
        if values is None:
            return ()
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise self.error(f"{field}[{i}]", f"expected str, got {type(value).__name__}")
        return tuple(values)


def iter_records(path: str | Path) -> Iterator[tuple[Where, dict]]:
    """Yield (where, record) for each JSON object in a ``.jsonl``, ``.jsonl.gz`` or ``.json`` array file."""
    path = Path(path)
    if path.is_dir():
        raise DataError(str(path), None, None, "is a directory, not a data file; name a .jsonl, .jsonl.gz or .json file")
    if not path.is_file():
        raise DataError(str(path), None, None, "file not found")
    if path.name.endswith(".gz"):
        try:
            yield from _iter_handle(path, gzip.open(path, "rb"), path.name[:-3])
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:  # not gzip, or cut short by an interrupted copy
            raise DataError(str(path), None, None, f"not a readable gzip file ({exc}); fetch or build it again") from None
    else:
        yield from _iter_handle(path, open(path, "rb"), path.name)


def _iter_handle(path: Path, handle: IO[bytes], name: str) -> Iterator[tuple[Where, dict]]:
    with handle:
        if name.endswith(".json"):
            yield from _iter_json_array(path, handle.read())
            return
        for number, text in text_lines(path, handle):
            where = Where(str(path), number)
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                raise where.error(None, f"malformed JSON ({exc.msg}, column {exc.colno})") from None
            if not isinstance(record, dict):
                raise where.error(None, f"expected a JSON object, got {type(record).__name__}")
            yield where, record


def _iter_json_array(path: Path, data: bytes) -> Iterator[tuple[Where, dict]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        end = data.find(b"\n", exc.start)
        line = data[start: end if end >= 0 else len(data)]
        raise utf8_error(path, data.count(b"\n", 0, start) + 1, start, line, exc.start - start, exc.reason) from None
    try:
        records = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(str(path), exc.lineno, None, f"malformed JSON ({exc.msg}, column {exc.colno})") from None
    if not isinstance(records, list):
        raise DataError(str(path), 1, None, "a .json file must hold an array of records")
    for index, record in enumerate(records, start=1):
        where = Where(str(path), index)  # the record's 1-based index in the array
        if not isinstance(record, dict):
            raise where.error(None, f"expected a JSON object, got {type(record).__name__}")
        yield where, record


def text_lines(path: Path, handle: IO[bytes]) -> Iterator[tuple[int, str]]:
    """``(line number, text with its line end)`` per line of ``handle``, an open binary stream of ``path``.

    A line that is not UTF-8 is a ``DataError`` naming its line, its byte offset in the file (of the
    uncompressed stream for a ``.gz``: the offset a user can seek to after ``zcat``) and the characters around
    the bad byte, so a 21M-line corpus's one bad byte is found without a binary search of the file.
    """
    offset = 0
    for number, data in enumerate(handle, start=1):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise utf8_error(path, number, offset, data, exc.start, exc.reason) from None
        yield number, text
        offset += len(data)


def utf8_error(path: Path, number: int, offset: int, line: bytes, start: int, reason: str) -> DataError:
    """The error for byte ``start`` of ``line`` (line ``number``, which begins at byte ``offset`` of the file)."""
    of = "of the uncompressed file" if path.name.endswith(".gz") else "of the file"
    return DataError(str(path), number, None, f"not valid UTF-8 ({reason}) at byte {offset + start:,} {of} (byte "
                     f"{start:,} of the line), near {excerpt(around_byte(line, start))}")


def excerpt(text: str, width: int = EXCERPT) -> str:
    """``text`` quoted for an error message, cut to ``width`` characters."""
    return repr(text if len(text) <= width else text[:width] + "...")


def around_byte(data: bytes, start: int, width: int = EXCERPT) -> str:
    """At most ``width`` characters of ``data`` around byte ``start``, each undecodable byte shown as U+FFFD (4
    bytes a character at most, so the byte windows always hold half the width)."""
    half = width // 2
    before = data[max(0, start - 4 * half - 4): start].decode("utf-8", "replace")[-half:]
    after = data[start: start + 4 * half].decode("utf-8", "replace")[:half]
    return (before + after).rstrip("\r\n")


__all__ = ["EXCERPT", "DataError", "Where", "around_byte", "excerpt", "iter_records", "text_lines", "utf8_error"]

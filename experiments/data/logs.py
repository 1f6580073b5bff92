"""The append-only logs of a run directory: typed records, one JSON line each, read fast and repaired only on demand.

Reading never writes: a torn last line (a kill or a full disk in the middle of
a write) is skipped with a warning, and only a run that holds the lock repairs
it (:meth:`RunLog.repair`).  A bad line anywhere else is a ``RunFileError``
naming the file, the line and the field.  A log of a million lines is read a
chunk of the file at a time, each line decoded straight into its record (msgspec),
and a run that continues decodes only what it needs (keys, the shape of each line).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import logging
import operator
import os
import sys
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec
import orjson

from core.files import append_lines, disk_error, write_atomic
from core.memory import no_cycle_collection
from experiments.data.records import (
    TEXT_FIELDS,
    Failure,
    Judgement,
    Prediction,
    RunFileError,
    Trace,
    parse_record,
    record_key,
    record_shape,
)

log = logging.getLogger(__name__)

R = TypeVar("R", Prediction, Failure, Trace, Judgement)


class RunLog(Generic[R]):
    """One append-only JSONL log of ``kind`` records.

    Records are appended as complete lines with a single ``write`` and one
    ``fsync`` per call (``core.files.append_lines``, which undoes a short
    write), so after a kill or a power loss the file holds whole records plus
    at most one torn last line; a run appends a unit's records in one call.
    """

    def __init__(self, path: str | Path, kind: type[R]) -> None:
        self.path = Path(path)
        self.kind = kind
        self.discarded_bytes = 0

    def read(self) -> list[R]:
        """Every complete record; a torn last line is skipped with a warning and left as it is."""
        records, good_end, size = self._scan(self._record)
        if good_end < size:
            log.warning("%s: skipped a torn last line (%d bytes, from a write that was cut off); the next "
                        "`ctxcomp run --resume` repairs it", self.path, size - good_end)
        return records

    def repair(self, keep: Callable[[R], bool] | None = None) -> list[R]:
        """Every complete record, after cutting a torn last line off the file; only a run holding the lock calls this.

        ``keep``: records it rejects, and all but the last record of each key, are dropped from the file
        too (the traces of predictions a kill cut off, which the run writes again).
        """
        records, good_end, size = self._scan(self._record)
        wanted = None if keep is None else [keep(r) for r in records]
        return self._repair(records, [r.key for r in records], wanted, good_end, size)

    def repair_keys(self, keep: Callable[[tuple[str, ...]], bool] | None = None) -> list[tuple[str, ...]]:
        """``repair`` that parses only the records' keys (checked as ``read`` checks them): what a run continuing
        a large directory needs, at a fraction of the cost of whole records."""
        keys, good_end, size = self._scan(self._key)
        return self._repair(keys, keys, None if keep is None else [keep(k) for k in keys], good_end, size)

    def check_shape(self) -> None:
        """Check every whole line without parsing it: a JSON object holding the key fields; a line that is not
        (garbage, a blank line, a record without its keys) is parsed to raise what ``read`` would raise.

        A run continuing a log it only appends to needs that no line in its middle is damaged, not the records
        themselves: at a million traces of a kilobyte each, parsing them would cost more than the rest of the resume.
        """
        if not self.path.is_file():
            return
        needles = [f'"{name}": '.encode() for name in record_shape(self.kind)[2]]
        with open(self.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            pos, line_no, carry = 0, 0, b""
            while chunk := fh.read(READ_SIZE):
                data = carry + chunk if carry else chunk
                whole = data.rfind(b"\n") + 1
                carry = data[whole:]
                for line in data[:whole].split(b"\n")[:-1]:
                    line_no += 1
                    pos += len(line) + 1
                    if not (line[:2] == b'{"' and line[-1:] == b"}" and all(n in line for n in needles)):
                        if pos == size:
                            return  # the last line may be torn; the repair deals with it
                        where = f"{self.path}:{line_no}"
                        try:
                            obj = _loads(line)
                        except (json.JSONDecodeError, UnicodeDecodeError):
                            raise RunFileError(f"{where}: not a JSON record (a corrupt line in the middle of the "
                                               "log); delete the line or restore the file") from None
                        record_key(self.kind, obj, where)

    def repair_tail(self, keep: Callable[[tuple[str, ...]], bool]) -> int:
        """Cut off the lines after the last line whose key ``keep`` wants, and a torn last line; return how many
        whole lines went.  Reads the file from its end, as far back as that line.

        For a log written ahead of the log that commits it (traces before their predictions, a unit at a time,
        by one writer that repairs before it writes): the lines a kill left uncommitted are then always its last.
        """
        if not self.path.is_file():
            return 0
        size = self.path.stat().st_size
        with open(self.path, "rb") as fh:
            span = 1 << 16
            while True:
                start = max(0, size - span)
                fh.seek(start)
                tail = fh.read()
                lines = tail.split(b"\n")
                end = size - len(lines[-1])  # the end of the last whole line
                whole = lines[:-1] if start == 0 else lines[1:-1]  # the first piece may begin mid-line
                for i, line in enumerate(reversed(whole)):
                    where = functools.partial(self._line_at, end - len(line) - 1)
                    try:
                        obj = _loads(line)
                    except (json.JSONDecodeError, UnicodeDecodeError):
                        if i or end < size:  # only the last line can be torn, and only if nothing follows it
                            raise RunFileError(f"{where()}: not a JSON record (a corrupt line in the middle of the "
                                               "log); delete the line or restore the file") from None
                        obj = None
                    try:
                        key = None if obj is None else record_key(self.kind, obj, "")
                    except RunFileError as err:
                        raise RunFileError(f"{where()}{err}") from None
                    if key is not None and keep(key):
                        return self._cut(end, size, i)
                    end -= len(line) + 1
                if start == 0:
                    return self._cut(0, size, len(whole))
                span *= 8

    def _line_at(self, offset: int) -> str:
        """``FILE:LINE`` of the line starting at byte ``offset`` (counted only when an error needs it)."""
        with open(self.path, "rb") as fh:
            line = fh.read(offset).count(b"\n") + 1
        return f"{self.path}:{line}"

    def _cut(self, end: int, size: int, lines: int) -> int:
        """Truncate the file at ``end`` (after ``lines`` unwanted whole lines and any torn tail)."""
        if end < size:
            self.discarded_bytes = size - end
            try:
                with open(self.path, "r+b") as fh:
                    fh.truncate(end)
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as err:
                raise disk_error(self.path, err) from None
        return lines

    def _repair(self, items: list, keys: list, wanted: list[bool] | None, good_end: int, size: int) -> list:
        """``items`` (one per whole line) after cutting a torn last line off; with ``wanted``, also without the
        unwanted lines and all but the last line of each key, in the file and in what is returned."""
        if wanted is not None:
            last = {k: i for i, (k, w) in enumerate(zip(keys, wanted)) if w}
            if len(last) < len(items):
                lines = [line + b"\n" for line in self.path.read_bytes()[:good_end].split(b"\n")[:-1]]
                kept = [i for i, k in enumerate(keys) if last.get(k) == i]
                self.discarded_bytes = size - sum(len(lines[i]) for i in kept)
                write_atomic(self.path, b"".join(lines[i] for i in kept))
                return [items[i] for i in kept]
        self._cut(good_end, size, 0)
        return items

    def rekey(self, mapping: dict[str, str]) -> None:
        """Rewrite the ``config_hash`` of every record found in ``mapping`` (a run continued across versions)."""
        records, good_end, _ = self._scan(self._record)
        if not any(r.config_hash in mapping for r in records):
            return
        lines = []
        for line in self.path.read_bytes()[:good_end].split(b"\n")[:-1]:
            obj = json.loads(line)
            obj["config_hash"] = mapping.get(obj["config_hash"], obj["config_hash"])
            lines.append(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
        write_atomic(self.path, "".join(lines))

    def append(self, record: R) -> None:
        self.extend([record])

    def extend(self, records: Iterable[R]) -> None:
        """Append ``records`` in one write and one fsync (nothing when there are none)."""
        append_lines(self.path, [(json.dumps(r.as_dict(), ensure_ascii=False, default=str) + "\n").encode("utf-8")
                                 for r in records])

    def _record(self, obj: Any, where: str) -> R:
        return parse_record(self.kind, obj, where)

    def _key(self, obj: Any, where: str) -> tuple[str, ...]:
        return record_key(self.kind, obj, where)

    def _scan(self, parse: Callable[[Any, str], Any]) -> tuple[list, int, int]:
        """(``parse`` of every whole line, end of the last whole line, file size); raises on a bad line that is
        not the last.

        Lines are parsed ``BLOCK`` at a time by one orjson call over the block read as a JSON array (a newline
        inside a record is always escaped, so the raw newlines are exactly the separators); a block that does not
        parse that way, or holds a record that does not check, is read again line by line, which names the line.
        """
        if not self.path.exists():
            return [], 0, 0
        if self.path.is_dir():
            raise RunFileError(f"{self.path} is a directory, not a log file")
        with no_cycle_collection():
            return self._scan_lines(parse)

    def _scan_lines(self, parse: Callable[[Any, str], Any]) -> tuple[list, int, int]:
        records: list = []
        pos, line_no = 0, 0  # the file offset and number of the next line
        with open(self.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            carry = b""
            while chunk := fh.read(READ_SIZE):  # a file of a gigabyte is never held whole
                data = carry + chunk if carry else chunk
                whole = data.rfind(b"\n") + 1
                carry, at = data[whole:], 0
                while at < whole:
                    stop, count = at, 0
                    while count < BLOCK and stop < whole:
                        stop, count = data.index(b"\n", stop) + 1, count + 1
                    block = _block(data, at, stop, self.kind, parse == self._key)
                    if block is None:  # line by line, to name the bad line (or find the torn last one)
                        for line in data[at:stop].split(b"\n")[:-1]:
                            line_no += 1
                            try:
                                obj = _loads(line)
                            except (json.JSONDecodeError, UnicodeDecodeError):
                                if pos + len(line) + 1 < size:
                                    raise RunFileError(f"{self.path}:{line_no}: not a JSON record (a corrupt line in "
                                                       "the middle of the log); delete the line or restore the file"
                                                       ) from None
                                return records, pos, size  # the last line: torn, though its newline made it to disk
                            records.append(parse(obj, f"{self.path}:{line_no}"))
                            pos += len(line) + 1
                    else:
                        records += block
                        line_no += count
                        pos += stop - at
                    at = stop
        return records, pos, size  # after pos: a last line torn before its newline


READ_SIZE = 1 << 24
BLOCK = 4096


def _block(data: bytes, pos: int, stop: int, kind: type, keys_only: bool) -> list | None:
    """The records (or keys) of the whole lines ``data[pos:stop]``; None when any line needs a closer look
    (``RunLog._scan`` then reads the block line by line and names the bad line).

    msgspec decodes each line straight into the record type (or, for keys, into a struct of the fields a key
    check reads), checking every field's type as it goes and skipping unknown fields without building them:
    about twice as fast as a parse to dicts and five times for keys.  It is stricter than the record types'
    own checks (a float in an int field, NaN), so a block it refuses goes the dict way, which reads what the
    project ever wrote.
    """
    decode = _decoder(kind, keys_only)
    try:
        lines = data[pos:stop - 1].split(b"\n")
        if keys_only:
            return list(map(operator.attrgetter(*record_shape(kind)[2]), map(decode, lines)))
        records = list(map(decode, lines))
    except (msgspec.DecodeError, UnicodeDecodeError):  # a type it will not take, a line that is not JSON or not
        # UTF-8: the dict way decides, and names the line
        return _dict_block(data, pos, stop, kind, keys_only)
    for name in _shared_fields(kind):  # the same few texts on a million lines: one string each, not a million
        texts = list(map(sys.intern, map(operator.attrgetter(name), records)))
        for record, text in zip(records, texts):
            setattr(record, name, text)
    return records


@functools.lru_cache(maxsize=None)
def _shared_fields(kind: type) -> tuple[str, ...]:
    """The text fields of ``kind`` whose values repeat across lines (labels, and an example's question and source
    on every grid point), interned as they are read."""
    names = record_shape(kind)[1]
    return tuple(name for name in (*_SHARED, "query", "source", "cluster") if name in names)


@functools.lru_cache(maxsize=None)
def _decoder(kind: type, keys_only: bool) -> Callable[[bytes], Any]:
    """msgspec's decoder of one line into ``kind``, or (keys only) into a struct of its required fields and its
    text fields, typed as ``kind`` types them (so it takes and refuses what a whole record would)."""
    if not keys_only:
        return msgspec.json.Decoder(kind).decode
    hints = typing.get_type_hints(kind)
    required = record_shape(kind)[0]
    defaults = {f.name: f.default for f in dataclasses.fields(kind)}
    struct = msgspec.defstruct(
        f"{kind.__name__}Key",
        [(name, hints[name]) for name in sorted(required)]
        + [(name, hints[name], defaults[name]) for name in TEXT_FIELDS if name in hints and name not in required])
    return msgspec.json.Decoder(struct).decode


def _dict_block(data: bytes, pos: int, stop: int, kind: type, keys_only: bool) -> list | None:
    """``_block`` through one orjson call over the lines read as a JSON array, and the record types' own checks."""
    try:
        objs = orjson.loads(b"[" + data[pos:stop - 1].replace(b"\n", b",") + b"]")
    except orjson.JSONDecodeError:
        return None
    required, names, key_fields = record_shape(kind)
    task, id_, config_hash, compressor, reader = (operator.itemgetter(f) for f in TEXT_FIELDS)
    try:
        for obj in objs:
            if not required <= obj.keys() or type(obj.get("score", 0.0)) not in _NUMBER:
                return None
            # a missing optional text field raises KeyError: the slow path checks it as the reader does
            if not (type(task(obj)) is type(id_(obj)) is type(config_hash(obj)) is type(compressor(obj))
                    is type(reader(obj)) is str):
                return None
    except (AttributeError, KeyError):  # not an object, or a text field it may lack
        return None
    if keys_only:
        return list(map(operator.itemgetter(*key_fields), objs))
    for obj in objs:  # the same few labels on a million lines: one string each, not a million copies
        for f in _SHARED:
            value = obj.get(f)
            if type(value) is str:
                obj[f] = sys.intern(value)
    return [kind(**obj) if obj.keys() <= names else kind(**{k: v for k, v in obj.items() if k in names})
            for obj in objs]


_SHARED = ("task", "spec", "config_hash", "compressor", "compressor_kind", "reader", "metric")


_NUMBER = (float, int)


def _loads(line: bytes) -> Any:
    """One JSON line: orjson (several times faster on a log of a million lines), or the standard library for what
    it writes and orjson refuses (NaN, integers past 64 bits), so both read the same records."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


__all__ = ["RunLog"]

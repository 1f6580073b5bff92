"""A run directory on disk: its file names, and its append-only logs of typed records.

A run directory is written by the run (under its lock) and read by reports,
``show``, ``compare`` and the view, so its names and its log format live
here, below all of them.  Reading never writes: a torn last line (a kill or a
full disk in the middle of a write) is skipped with a warning, and only a run
that holds the lock repairs it (:meth:`RunLog.repair`).  A bad line anywhere
else is a ``RunFileError`` naming the file, the line and the field.
"""
from __future__ import annotations

import gzip
import json
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from core.files import append_lines, disk_error, write_atomic
from experiments.data.records import Failure, Judgement, Prediction, RunFileError, Trace, parse_record

log = logging.getLogger(__name__)

PREDICTIONS = "predictions.jsonl"
FAILURES = "failures.jsonl"
TRACES = "traces.jsonl"
JUDGEMENTS = "judgements.jsonl"
CONFIG = "config.yaml"
GRID = "grid.json"
STATS = "stats.json"
LOCK = ".lock"

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
        records, good_end, size = self._scan()
        if good_end < size:
            log.warning("%s: skipped a torn last line (%d bytes, from a write that was cut off); the next "
                        "`ctxcomp run --resume` repairs it", self.path, size - good_end)
        return records

    def repair(self, keep: Callable[[R], bool] | None = None) -> list[R]:
        """Every complete record, after cutting a torn last line off the file; only a run holding the lock calls this.

        ``keep``: records it rejects, and all but the last record of each key, are dropped from the file
        too (the traces of predictions a kill cut off, which the run writes again).
        """
        records, good_end, size = self._scan()
        if keep is not None:
            last = {r.key: i for i, r in enumerate(records) if keep(r)}
            if len(last) < len(records):
                lines = [line + b"\n" for line in self.path.read_bytes()[:good_end].split(b"\n")[:-1]]
                kept = [i for i, r in enumerate(records) if last.get(r.key) == i]
                self.discarded_bytes = size - sum(len(lines[i]) for i in kept)
                write_atomic(self.path, b"".join(lines[i] for i in kept))
                return [records[i] for i in kept]
        if good_end < size:
            self.discarded_bytes = size - good_end
            try:
                with open(self.path, "r+b") as fh:
                    fh.truncate(good_end)
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as err:
                raise disk_error(self.path, err) from None
        return records

    def rekey(self, mapping: dict[str, str]) -> None:
        """Rewrite the ``config_hash`` of every record found in ``mapping`` (a run continued across versions)."""
        records, good_end, _ = self._scan()
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

    def _scan(self) -> tuple[list[R], int, int]:
        """(records, end of the last whole line, file size); raises on a bad line that is not the last."""
        if not self.path.exists():
            return [], 0, 0
        if self.path.is_dir():
            raise RunFileError(f"{self.path} is a directory, not a log file")
        data = self.path.read_bytes()
        records: list[R] = []
        pos = good_end = 0
        line_no = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl == -1:
                break  # no newline: the last write was torn
            line_no += 1
            where = f"{self.path}:{line_no}"
            try:
                obj = json.loads(data[pos:nl])
            except (json.JSONDecodeError, UnicodeDecodeError):
                if nl + 1 < len(data):
                    raise RunFileError(f"{where}: not a JSON record (a corrupt line in the middle of the log); "
                                       "delete the line or restore the file") from None
                break  # the last line: torn, though its newline made it to disk
            records.append(parse_record(self.kind, obj, where))
            pos = good_end = nl + 1
        return records, good_end, len(data)


@dataclass(frozen=True)
class RunDir:
    """The files of one run directory, by name."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def predictions(self) -> RunLog[Prediction]:
        return RunLog(self.path / PREDICTIONS, Prediction)

    @property
    def failures(self) -> RunLog[Failure]:
        return RunLog(self.path / FAILURES, Failure)

    @property
    def traces(self) -> RunLog[Trace]:
        return RunLog(self.path / TRACES, Trace)

    @property
    def judgements(self) -> RunLog[Judgement]:
        return RunLog(self.path / JUDGEMENTS, Judgement)

    def logs(self) -> list[RunLog[Any]]:
        """Every log a run continues, in the order a run writes a unit's lines."""
        return [self.traces, self.predictions, self.failures, self.judgements]

    def prompt_path(self, prompt_hash: str) -> Path:
        return self.path / "prompts" / prompt_hash[:2] / f"{prompt_hash}.txt"

    def require(self) -> "RunDir":
        """This directory, or a ``UserError`` saying it holds no run."""
        if self.path.is_file():
            raise RunFileError(f"{self.path} is a file, not a run directory")
        if not (self.path / PREDICTIONS).exists() and not (self.path / FAILURES).exists():
            raise RunFileError(f"{self.path} holds no {PREDICTIONS}; is it a run directory?")
        return self

    def manifest(self) -> dict[str, Any]:
        """``grid.json``: the grid in config order (empty for runs older than the manifest)."""
        path = self.path / GRID
        if not path.is_file():
            return {}
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise RunFileError(f"{path}: not valid JSON ({err}); delete it and `ctxcomp run --resume` rewrites it") from None


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """One JSON object per line (UTF-8, non-ASCII kept); gzip when the name ends in ``.gz``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path

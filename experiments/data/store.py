"""Files on disk: append-only JSONL logs that survive SIGKILL, atomic writes, plain JSONL output, run-dir names.

A run directory is read by the runner (to resume) and by the report (to
score), so its file names and the key of a record live here, below both.
"""
from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Iterator

PREDICTIONS = "predictions.jsonl"
FAILURES = "failures.jsonl"
TRACES = "traces.jsonl"
CONFIG = "config.yaml"
GRID = "grid.json"
LOCK = ".lock"


def record_key(record: dict[str, Any]) -> tuple[str, str, str]:
    """What identifies a prediction, failure or trace line: (task, example id, config hash)."""
    return (record["task"], record["id"], record["config_hash"])


class JsonlLog:
    """An append-only JSONL file.

    Each record is written with a single ``os.write`` of the complete line and
    then fsync'ed, so after a kill the file holds whole records plus at most
    one torn last line, which ``recover`` detects and cuts off.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.discarded_bytes = 0

    def recover(self) -> list[dict[str, Any]]:
        """Read all complete records; truncate a torn or unparsable last line in place."""
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        records: list[dict[str, Any]] = []
        good_end = 0
        pos = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl == -1:
                break  # no newline: the last write was torn
            line = data[pos:nl]
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                if data.find(b"\n", nl + 1) != -1:
                    raise ValueError(f"{self.path}:{len(records) + 1}: corrupt record in the middle of the log") from None
                break
            records.append(record)
            pos = good_end = nl + 1
        if good_end < len(data):
            self.discarded_bytes = len(data) - good_end
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
                fh.flush()
                os.fsync(fh.fileno())
        return records

    def append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.recover())


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """One JSON object per line (UTF-8, non-ASCII kept); gzip when the name ends in ``.gz``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path

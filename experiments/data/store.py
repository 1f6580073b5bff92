"""A run directory on disk: its file names and its logs (``experiments.data.logs``).

A run directory is written by the run (under its lock) and read by reports,
``show``, ``compare`` and the view, so its names and its log format live
here, below all of them.
"""
from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.files import disk_error, open_atomic
from experiments.data.logs import RunLog
from experiments.data.records import Failure, Judgement, Prediction, RunFileError, Trace

PREDICTIONS = "predictions.jsonl"
FAILURES = "failures.jsonl"
TRACES = "traces.jsonl"
JUDGEMENTS = "judgements.jsonl"
CONFIG = "config.yaml"
GRID = "grid.json"
STATS = "stats.json"
LOCK = ".lock"

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
        redo = "delete it and `ctxcomp run --resume` rewrites it"
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise RunFileError(f"{path}: not valid JSON ({err}); {redo}") from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("points", []), list):
            raise RunFileError(f"{path}: not a grid manifest (a JSON object with points); {redo}")
        return manifest


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """One JSON object per line (UTF-8, non-ASCII kept); gzip when the name ends in ``.gz``.

    The file appears whole or not at all (``core.files.open_atomic``): a full disk or a bad record halfway
    leaves no truncated data file that a later run would read as complete."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open_atomic(path) as raw:
            gz = path.suffix == ".gz"
            with gzip.GzipFile(filename=path.name, mode="wb", fileobj=raw) if gz else contextlib.nullcontext(raw) as sink:
                for record in records:
                    sink.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
    except (FileExistsError, NotADirectoryError):
        raise UserError(f"cannot write {path}: a part of its folder {path.parent} is a file, not a folder") from None
    except IsADirectoryError:
        raise UserError(f"cannot write {path}: it is a directory; name a file") from None
    except OSError as err:
        raise disk_error(path, err) from None
    return path

"""Score a run's predictions again, with another metric or a fixed one, and never ask a model.

``ctxcomp rescore RUN_DIR [--metric NAME] [--task T]`` reads ``predictions.jsonl``
and scores every prediction again against the answers it holds, as the run
scored it (the task's first-line rule; a classification metric's class list
comes from the task's data, which ``class_lists`` reads: the caller knows the
run's config, this room does not).  The run's own files are never written: the
new scores go beside them, to ``RUN_DIR/rescored/<name>/``, a folder that reads
as a run of its own (its ``predictions.jsonl`` is the run's with the new metric
and scores; ``failures.jsonl``, ``judgements.jsonl`` and ``grid.json`` are
copied), whose report the caller rebuilds from the new scores (``ctxcomp
report`` does at any time).  ``rescore.json`` there says what was scored how,
and ``ctxcomp compare RUN_DIR RUN_DIR/rescored/<name>`` pairs the two metrics
item by item.

Re-scoring with the run's own metrics (no ``metric``) gives the run's own
numbers byte for byte, unless a metric's code changed since: which is how a
fixed metric is applied to an old run.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from core.errors import UnknownComponentError, UserError
from core.files import disk_error, write_atomic
from core.paths import safe_name
from experiments.data.records import Prediction
from experiments.data.store import GRID, RunDir
from experiments.scoring.registry import get_metric, score_item
from experiments.tasks.specs import get_task

# task keys -> {(task key, example id): the example's class list}, read from the tasks' data
ClassLists = Callable[[set[str]], dict[tuple[str, str], tuple[str, ...]]]
RESCORED = "rescored"
OWN = "run-metrics"  # the folder of a re-scoring with each prediction's own metric


@dataclass(frozen=True)
class Rescored:
    """What ``rescore`` wrote: the folder, and per task the metric used, the items scored and those changed."""

    out_dir: Path
    tasks: dict[str, dict[str, object]]


def rescore(run_dir: str | Path, metric: str | None = None, tasks: Sequence[str] = (), *,
            class_lists: ClassLists | None = None) -> Rescored:
    """Score the predictions of ``run_dir`` (of ``tasks``, default all) with ``metric`` (default each
    prediction's own) into ``run_dir/rescored/<name>/``; see the module docstring."""
    files = RunDir(Path(run_dir)).require()
    if metric is not None:
        get_metric(metric)  # a typo is one line before anything is read
    predictions = files.predictions.read()
    known = list(dict.fromkeys(p.task for p in predictions))
    unknown = [t for t in tasks if t not in known]
    if unknown:
        raise UserError(f"{files.path} has no predictions of task {', '.join(map(repr, unknown))} "
                        f"(its tasks: {', '.join(known) or 'none'})")
    chosen = set(tasks or known)
    kept = [p for p in predictions if p.task in chosen]
    needed = {p.task for p in kept if get_metric(metric or p.metric).uses_classes}
    if needed and class_lists is None:
        raise UserError(f"the metric of task {', '.join(sorted(needed))} reads each example's class list, which "
                        "lives in the task's data; give class_lists")
    classes = class_lists(needed) if needed and class_lists is not None else {}
    rescored, summary = [], {}
    for pred in kept:
        name = metric or pred.metric
        scored = score_item(pred.prediction, pred.answers, metric=name, all_classes=classes.get(pred.key[:2], ()),
                            first_line_only=_first_line_only(pred.spec_name))
        new = replace(pred, metric=name, score=scored.value, score_parts=dict(scored.parts))
        rescored.append(new)
        row = summary.setdefault(pred.task, {"metric": name, "from": pred.metric, "items": 0, "changed": 0})
        row["items"] += 1  # type: ignore[operator]
        row["changed"] += new.score != pred.score or new.score_parts != pred.score_parts  # type: ignore[operator]
    label = metric or OWN
    out = files.path / RESCORED / safe_name(label if not tasks else f"{label}-{'+'.join(sorted(chosen))}")
    _write_folder(files, out, rescored, chosen, {"source": str(files.path), "metric": metric, "tasks": summary})
    return Rescored(out, summary)


def _first_line_only(spec_name: str) -> bool:
    """The task's rule that only the first line of an answer is scored (LongBench trec, triviaqa, ...)."""
    try:
        return get_task(spec_name).first_line_only
    except (UnknownComponentError, UserError):  # a plugin task no longer installed
        return False


def _write_folder(files: RunDir, out: Path, predictions: list[Prediction], tasks: set[str], about: dict) -> None:
    """Fill a fresh folder beside ``out`` and put it in place of ``out``: a re-scoring cut off halfway
    leaves the previous one whole."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
        tmp.chmod(0o755)  # mkdtemp makes it private; a re-scoring is an ordinary folder of the run
    except OSError as err:
        raise disk_error(out.parent, err) from None
    try:
        made = RunDir(tmp)
        made.predictions.extend(predictions)
        made.failures.extend([f for f in files.failures.read() if f.task in tasks])
        made.judgements.extend([j for j in files.judgements.read() if j.task in tasks])
        if (files.path / GRID).is_file():
            shutil.copyfile(files.path / GRID, tmp / GRID)
        write_atomic(tmp / "rescore.json", json.dumps(about, indent=2, ensure_ascii=False))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except OSError as err:
        raise disk_error(out, err) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["OWN", "RESCORED", "Rescored", "rescore"]

"""The open-domain curve from a run's records: retriever recall@k and reader accuracy@k, with 95% intervals.

A prediction of an open-domain task (``meta.protocol == "open_domain"``) cut
by ``top_k`` records whether its kept passages contain an answer
(``answer_in_context``, DPR's ``has_answer``) and its score (Lost in the
Middle's best-subspan EM of the first line).  For every (task, reader, k):
recall@k is the mean of the first, accuracy@k the mean of the second, each
with a percentile bootstrap interval.  A point with no scored example is
``null`` with its reason, never NaN.
"""
from __future__ import annotations

import csv
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from core.files import write_atomic
from core.paths import safe_name
from experiments.data.records import Prediction
from experiments.report.cells import RunData
from experiments.report.stats import format_delta, format_p, mean_interval, paired_delta

CSV_COLUMNS = ("task", "reader", "k", "recall", "recall_ci_lo", "recall_ci_hi", "accuracy", "ci_lo", "ci_hi", "n",
               "failed", "note")


@dataclass(frozen=True)
class CurveRow:
    """One point: ``reader`` given the top ``k`` passages of ``task``; values are percentages, ``None`` when empty."""

    task: str
    reader: str
    k: int
    recall: float | None
    recall_ci: tuple[float, float] | None
    accuracy: float | None
    accuracy_ci: tuple[float, float] | None
    n: int
    failed: int
    note: str = ""


def saturation_k(acc_by_k: Mapping[int, float], tol: float = 1.0) -> int:
    """The smallest k whose accuracy (in points) is within ``tol`` of the best."""
    if not acc_by_k:
        raise ValueError("saturation_k needs at least one (k, accuracy) point")
    best = max(acc_by_k.values())
    return min(k for k, acc in acc_by_k.items() if acc >= best - tol - 1e-9)


def _k_of(point: Mapping[str, Any]) -> int | None:
    comp = point.get("compressor") or {}
    if comp.get("name") != "top_k":
        return None
    k = (comp.get("params") or {}).get("k")
    return k if isinstance(k, int) else None


def _curve_groups(data: RunData) -> tuple[dict[tuple[str, str, int], list[Prediction]], dict[tuple[str, str, int], int]]:
    """The open-domain predictions of each (task, reader, k), and how many examples of each failed for good."""
    k_of = {p["config_hash"]: _k_of(p) for p in data.manifest.get("points", [])}
    recorded = {r.key for r in data.predictions}
    groups: dict[tuple[str, str, int], list[Prediction]] = defaultdict(list)
    failed: dict[tuple[str, str, int], int] = defaultdict(int)
    for r in data.predictions:
        k = k_of.get(r.config_hash)
        if k is not None and (r.meta or {}).get("protocol") == "open_domain":
            groups[(r.task, r.reader, k)].append(r)
    for f in data.failures:
        k = k_of.get(f.config_hash)
        if k is not None and f.key not in recorded:
            failed[(f.task, f.reader, k)] += 1
    return groups, failed


def curve_rows(data: RunData) -> list[CurveRow]:
    """One row per (task, reader, k) of the run's open-domain predictions, in task, reader, k order."""
    groups, failed = _curve_groups(data)
    rows = []
    for key in sorted(set(groups) | set(failed)):
        recs = groups.get(key, [])
        if not recs:
            rows.append(CurveRow(*key, None, None, None, None, 0, failed[key], f"all {failed[key]} examples failed"))
            continue
        rec = mean_interval([1.0 if r.answer_in_context else 0.0 for r in recs])
        acc = mean_interval([float(r.score) for r in recs])
        rows.append(CurveRow(*key, rec.mean, (rec.lo, rec.hi), acc.mean, (acc.lo, acc.hi), len(recs), failed.get(key, 0)))
    return rows


def saturation(rows: Sequence[CurveRow]) -> dict[tuple[str, str], int]:
    """The saturation k of each (task, reader) curve."""
    curves: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for r in rows:
        if r.accuracy is not None:
            curves[(r.task, r.reader)][r.k] = r.accuracy
    return {key: saturation_k(acc) for key, acc in curves.items() if acc}


def curve_contrasts(data: RunData) -> tuple[list[str], list[list[str]]]:
    """Largest k against smallest k on each curve, paired on the question, for recall and for accuracy.

    Both ends are fixed by the config, not picked after looking, so the
    interval means what it says: whether giving the reader more passages
    changed what the retriever found and what the reader got right.
    """
    groups, _ = _curve_groups(data)
    header = ["task", "reader", "k", "recall change", "p (recall)", "accuracy change", "p (accuracy)", "n"]
    body = []
    for task, reader in dict.fromkeys((t, rd) for t, rd, _ in sorted(groups)):
        ks = sorted(k for t, rd, k in groups if (t, rd) == (task, reader))
        if len(ks) < 2:
            continue
        lo = {r.id: r for r in groups[(task, reader, ks[0])]}
        hi = {r.id: r for r in groups[(task, reader, ks[-1])]}
        ids = [i for i in lo if i in hi]
        if not ids:
            continue
        found = lambda r: 1.0 if r.answer_in_context else 0.0  # noqa: E731
        recall = paired_delta([found(lo[i]) for i in ids], [found(hi[i]) for i in ids])
        accuracy = paired_delta([float(lo[i].score) for i in ids], [float(hi[i].score) for i in ids])
        body.append([task, reader, f"{ks[-1]} vs {ks[0]}", format_delta(recall), format_p(recall), format_delta(accuracy),
                     format_p(accuracy), str(len(ids))])
    return header, body


def curve_table(rows: Sequence[CurveRow]) -> tuple[list[str], list[list[str]]]:
    sat = saturation(rows)
    header = ["task", "reader", "k", "recall@k", "accuracy@k [95% CI]", "n", "failed", "saturation k"]
    ci = lambda v, c: "—" if v is None else f"{v:.1f} [{c[0]:.1f}, {c[1]:.1f}]"  # noqa: E731
    body = [[r.task, r.reader, str(r.k), ci(r.recall, r.recall_ci), ci(r.accuracy, r.accuracy_ci), str(r.n),
             str(r.failed), "◀" if sat.get((r.task, r.reader)) == r.k else ""] for r in rows]
    return header, body


def write_curve(rows: Sequence[CurveRow], out_dir: Path, *, plots: bool = True) -> list[Path]:
    """curve.csv (empty cells, never NaN), curve.json (with the saturation k per curve) and curve.png/.svg."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "curve.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for r in rows:
            opt = lambda v: "" if v is None else f"{v:.2f}"  # noqa: E731
            writer.writerow([r.task, r.reader, r.k, opt(r.recall), opt(r.recall_ci and r.recall_ci[0]),
                             opt(r.recall_ci and r.recall_ci[1]), opt(r.accuracy), opt(r.accuracy_ci and r.accuracy_ci[0]),
                             opt(r.accuracy_ci and r.accuracy_ci[1]), r.n, r.failed, r.note])
    payload = {"rows": [asdict(r) for r in rows],
               "saturation_k": [{"task": t, "reader": rd, "k": k} for (t, rd), k in saturation(rows).items()]}
    json_path = out_dir / "curve.json"
    write_atomic(json_path, json.dumps(payload, indent=2, allow_nan=False))
    paths = [csv_path, json_path]
    if plots:
        from experiments.report.plots import plot_curve

        for task in dict.fromkeys(r.task for r in rows):
            task_rows = [r for r in rows if r.task == task]
            name = "curve.png" if len({r.task for r in rows}) == 1 else f"curve_{safe_name(task)}.png"
            paths += plot_curve(task_rows, out_dir / "plots" / name,
                                saturation={rd: k for (t, rd), k in saturation(rows).items() if t == task},
                                title=f"{task}: retriever recall@k and reader accuracy@k")
    return paths

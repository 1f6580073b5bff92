"""The open-domain curve from a run's records: retriever recall@k and reader accuracy@k, with 95% intervals.

A prediction of an open-domain task (``meta.protocol == "open_domain"``) cut
by ``top_k`` records whether its kept passages contain an answer
(``answer_in_context``, DPR's ``has_answer``) and its score (Lost in the
Middle's best-subspan EM of the first line).  For every (task, reader, k):
recall@k is the mean of the first, accuracy@k the mean of the second, each
with its valid 95% interval (``mean_interval``: Clopper-Pearson for 0/1 scores).  A point with no scored example is
``null`` with its reason, never NaN.

Where the reader saturates (``saturation``) is a test, not a reading of the
means: the smallest k whose accuracy is not below that of any larger k by more
than the run's margin (an intersection-union test of the budget sweep's paired
non-inferiority tests, ``cells.noninferiority_vs``), walked down from the
largest k, which the config fixes before any score is seen (docs/protocols.md).
"""
from __future__ import annotations

import csv
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from core.files import write_atomic
from core.paths import safe_name
from experiments.data.records import Prediction
from experiments.inference.paired import mean_interval, paired_delta
from experiments.inference.results import format_delta, format_p
from experiments.inference.verdicts import CANNOT_TELL, NOT_WORSE, WORSE, NonInferiority
from experiments.report.cells import (
    RunData,
    Scores,
    Table,
    item_scores,
    noninferiority_vs,
)

# the trade-off picture lived here before it joined the trade-off (``experiments.report.tradeoff``); its names are
# still found here
from experiments.report.tradeoff.noninferiority import run_margin

CSV_COLUMNS = ("task", "retriever", "reader", "k", "recall", "recall_ci_lo", "recall_ci_hi", "accuracy", "ci_lo", "ci_hi", "n",
               "failed", "note", "vs_largest", "vs_largest_ci_lo", "vs_largest_ci_hi", "vs_largest_verdict", "saturation_k")


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
    retriever: str = ""  # the label of the retriever that ranked the task's passages


@dataclass(frozen=True)
class Saturation:
    """Where one (task, reader) curve saturates, decided without looking first (``saturation_k``).

    ``k``: the smallest k shown not worse than every larger k by more than ``margin`` points, walking down from
    the largest k (None when the k just below the largest is not shown so).  ``reference_k``: the largest k, the
    reference fixed by the config before any score is seen.  ``best_k``: the k with the highest accuracy
    (descriptive: picked after looking, never tested against).  ``tests``: each smaller k against the largest
    k (delta, interval, verdict), for the tables.  ``ladder``: why the walk down stopped.
    """

    task: str
    reader: str
    best_k: int
    k: int | None
    margin: float
    tests: dict[int, NonInferiority]
    ladder: str
    reference_k: int = 0
    rising: bool = False  # the k below the largest was shown worse than it: no saturation up to the largest k

    @property
    def text(self) -> str:
        if self.k is not None:
            return str(self.k)
        return f"not reached by k = {self.reference_k}" if self.rising else CANNOT_TELL

    @property
    def test(self) -> NonInferiority | None:
        """The saturation k against the largest k (None when they are the same k, or when it cannot tell)."""
        return None if self.k is None else self.tests.get(self.k)


def saturation_k(scores_by_k: Mapping[int, Mapping[str, float]], margin: float, *, task: str = "",
                 reader: str = "") -> Saturation:
    """The saturation k of one curve from its item scores by k (``Scores`` by example id, in [0, 1]).

    Picking the best k from the data and testing the smaller k against it is biased: the winner of a noisy
    race is, on average, luckier than it is good, and a rising curve read that way says "saturated" at a k
    that is not (docs/protocols.md gives the simulation).  So nothing is picked.  A k is called saturated when
    it is not worse than *every* larger k by more than the margin: the intersection-union test (Berger 1982),
    each paired comparison at the test's alpha with no adjustment, since all of them must reject.  The ks are
    taken from the largest down and the walk goes on only while each k passes (the fixed-sequence procedure of
    ``tradeoff.fixed_sequence``), so the chance of calling any k saturated that is in fact worse than a larger
    k by the margin stays at alpha.  Each comparison is ``noninferiority_vs``, valid for bounded scores.
    """
    if not scores_by_k:
        raise ValueError("saturation_k needs at least one k with scores")
    accuracy = {k: statistics.fmean(s.values()) for k, s in scores_by_k.items() if s}
    if not accuracy:
        raise ValueError("saturation_k needs at least one scored example")
    best = min(accuracy, key=lambda k: (-accuracy[k], k))
    ks = sorted(accuracy)
    largest = ks[-1]
    cache: dict[tuple[int, int], NonInferiority] = {}

    def against(larger: int, k: int) -> NonInferiority:
        if (larger, k) not in cache:
            cache[(larger, k)] = noninferiority_vs(scores_by_k[larger], scores_by_k[k], margin)
        return cache[(larger, k)]

    tests = {k: against(largest, k) for k in ks[:-1]}
    chosen, ladder, rising = largest, "the largest k is the only k", False
    for i in range(len(ks) - 2, -1, -1):
        k = ks[i]
        failed = next(((bigger, against(bigger, k)) for bigger in ks[i + 1:]
                       if against(bigger, k).verdict != NOT_WORSE), None)
        if failed is not None:
            bigger, test = failed
            ladder = f"stopped at k={k}: against k={bigger}, {test.verdict}"
            if chosen == largest:
                rising = test.verdict == WORSE and bigger == largest
                chosen = None
            break
        chosen, ladder = k, "every smaller k passed"
    return Saturation(task, reader, best, chosen, margin, tests, ladder, largest, rising)


def _k_of(point: Mapping[str, Any]) -> int | None:
    """The point's cut-off ``k`` (the one name for it, whichever compressor takes it); None where it has none."""
    comp = point.get("compressor") or {}
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
    retriever = {task: (r.meta or {}).get("retriever_label") or (r.meta or {}).get("retriever", "")
                 for (task, _, _), recs in groups.items() for r in recs[:1]}
    rows = []
    for key in sorted(set(groups) | set(failed)):
        recs = groups.get(key, [])
        if not recs:
            rows.append(CurveRow(*key, None, None, None, None, 0, failed[key], f"all {failed[key]} examples failed",
                                 retriever.get(key[0], "")))
            continue
        rec = mean_interval([1.0 if r.answer_in_context else 0.0 for r in recs])
        acc = mean_interval([float(r.score) for r in recs])
        rows.append(CurveRow(*key, rec.mean, (rec.lo, rec.hi), acc.mean, (acc.lo, acc.hi), len(recs), failed.get(key, 0),
                             retriever=retriever.get(key[0], "")))
    return rows


def saturation(data: RunData, margin: float | None = None) -> dict[tuple[str, str], Saturation]:
    """The saturation of each (task, reader) curve of the run, at ``margin`` points (default: the run's)."""
    groups, _ = _curve_groups(data)
    margin = run_margin(data) if margin is None else margin
    curves: dict[tuple[str, str], dict[int, Scores]] = defaultdict(dict)
    for (task, reader, k), recs in sorted(groups.items()):
        curves[(task, reader)][k] = item_scores(recs)[(task, recs[0].config_hash)]
    return {key: saturation_k(by_k, margin, task=key[0], reader=key[1]) for key, by_k in curves.items()}


def _vs_best(test: NonInferiority | None) -> str:
    """This k against the largest k, with its interval; "no interval" where the test has none at this n (an
    infinite bound is never printed as a number)."""
    if test is None or not test.n:
        return ""
    if not (math.isfinite(test.lo) and math.isfinite(test.hi)):
        return f"{test.delta:+.2f} (no interval at this n)"
    return f"{test.delta:+.2f} [{test.lo:+.2f}, {test.hi:+.2f}]"


def _verdict(verdict: str, margin: float) -> str:
    """A verdict in a curve's words, naming the margin it tests: each k is compared with the larger ks, not
    with a full context, and the verdict is about a loss of ``margin`` points while the interval beside it is
    about 0 (``-10.00 [-23.77, -0.11] cannot tell at this n`` read as a contradiction)."""
    if verdict == NOT_WORSE:
        return f"not worse than the largest k by more than the margin of {margin:g}"
    if verdict == WORSE:
        return f"worse than the largest k by more than the margin of {margin:g}"
    return f"{verdict} (margin {margin:g})"


def curve_contrasts(data: RunData, sat: Mapping[tuple[str, str], Saturation] | None = None) -> Table:
    """Largest k against smallest k on each curve, paired on the question, for recall and for accuracy; and
    the saturation k with its test against the largest k.

    Both ends are fixed by the config, not picked after looking, so the
    interval means what it says: whether giving the reader more passages
    changed what the retriever found and what the reader got right.
    """
    groups, _ = _curve_groups(data)
    sat = saturation(data) if sat is None else sat
    margin = next(iter(sat.values())).margin if sat else run_margin(data)
    header = ["task", "reader", "k", "recall change", "p (recall)", "accuracy change", "p (accuracy)", "n",
              "best k (descriptive)", f"saturation k (margin {margin:g})", "saturation k - largest k [95% CI]",
              "ladder"]
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
        s = sat.get((task, reader))
        body.append([task, reader, f"{ks[-1]} vs {ks[0]}", format_delta(recall), format_p(recall), format_delta(accuracy),
                     format_p(accuracy), str(len(ids)), "" if s is None else str(s.best_k), "" if s is None else s.text,
                     _vs_best(s and s.test), "" if s is None else s.ladder])
    return header, body


def curve_table(rows: Sequence[CurveRow], sat: Mapping[tuple[str, str], Saturation]) -> Table:
    """The curve's points, each k against the largest k of its curve, and the saturation k marked."""
    header = ["task", "reader", "k", "recall@k", "accuracy@k [95% CI]", "n", "failed", "k - largest k [95% CI]",
              "saturation k"]
    ci = lambda v, c: "—" if v is None else f"{v:.1f} [{c[0]:.1f}, {c[1]:.1f}]"  # noqa: E731
    body = []
    for r in rows:
        s = sat.get((r.task, r.reader))
        test = s.tests.get(r.k) if s else None
        mark = "" if s is None else "◀" if s.k == r.k else s.text if (s.k is None and r.k == s.reference_k) else ""
        body.append([r.task, r.reader, str(r.k), ci(r.recall, r.recall_ci), ci(r.accuracy, r.accuracy_ci), str(r.n),
                     str(r.failed), f"{_vs_best(test)} {_verdict(test.verdict, s.margin)}" if s and test and test.n
                     else "", mark])
    return header, body


def curve_plot_name(task: str, retriever: str, readers: Sequence[str]) -> str:
    """``curve_<task>_<retriever>_<reader>[+<reader>...].png``: a plot found on its own says what it shows."""
    return f"curve_{safe_name(task)}_{safe_name(retriever or 'retriever')}_{safe_name('+'.join(readers))}.png"


def write_curve(rows: Sequence[CurveRow], sat: Mapping[tuple[str, str], Saturation], out_dir: Path, *,
                plots: bool = True) -> list[Path]:
    """curve.csv (empty cells, never NaN; the retriever and reader of each point, each k against its curve's
    largest k, and the saturation k), curve.json (with the saturation of each curve) and a plot per task
    (``curve_plot_name``, .png and .svg)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "curve.csv"
    opt = lambda v: "" if v is None or v != v or abs(v) == float("inf") else f"{v:.2f}"  # noqa: E731
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for r in rows:
            s = sat.get((r.task, r.reader))
            test = s.tests.get(r.k) if s else None
            writer.writerow([r.task, r.retriever, r.reader, r.k, opt(r.recall), opt(r.recall_ci and r.recall_ci[0]),
                             opt(r.recall_ci and r.recall_ci[1]), opt(r.accuracy), opt(r.accuracy_ci and r.accuracy_ci[0]),
                             opt(r.accuracy_ci and r.accuracy_ci[1]), r.n, r.failed, r.note,
                             opt(test and test.delta), opt(test and test.lo), opt(test and test.hi),
                             _verdict(test.verdict, s.margin) if s and test else
                             ("largest k" if s and r.k == s.reference_k else ""),
                             "" if s is None else s.text])
    finite = lambda v: v if v == v and abs(v) != float("inf") else None  # noqa: E731
    payload = {"rows": [asdict(r) for r in rows],
               "saturation": [{"task": s.task, "reader": s.reader, "k": s.k, "best_k": s.best_k,
                               "reference_k": s.reference_k, "margin": s.margin,
                               "verdict": s.text, "ladder": s.ladder,
                               "vs_largest": None if s.test is None else {"delta": finite(s.test.delta), "lo": finite(s.test.lo),
                                                                        "hi": finite(s.test.hi), "p": finite(s.test.p),
                                                                        "n": s.test.n}}
                              for s in sat.values()]}
    json_path = out_dir / "curve.json"
    write_atomic(json_path, json.dumps(payload, indent=2, allow_nan=False))
    paths = [csv_path, json_path]
    if plots:
        from experiments.report.plots import plot_curve

        for task in dict.fromkeys(r.task for r in rows):
            task_rows = [r for r in rows if r.task == task]
            retriever, readers = task_rows[0].retriever, list(dict.fromkeys(r.reader for r in task_rows))
            paths += plot_curve(task_rows, out_dir / "plots" / curve_plot_name(task, retriever, readers),
                                saturation={s.reader: s.k for s in sat.values() if s.task == task and s.k is not None},
                                title=f"{task}: {retriever} recall@k, {', '.join(readers)} accuracy@k")
    return paths


__all__ = ["CSV_COLUMNS", "CurveRow", "Saturation", "curve_contrasts", "curve_plot_name", "curve_rows",
           "curve_table", "saturation", "saturation_k", "write_curve"]

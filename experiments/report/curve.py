"""Curves of score against the amount of context: the open-domain k curve, and the budget trade-off picture.

The trade-off picture (``panels``, ``frontier_table``, ``write_tradeoff_plots``):
per reader, a panel per task and one for the task average, each compressor
line's points at the context tokens the reader saw, with paired 95% bands
against full, full as a band at its own token count, and the Pareto frontier
marked (the points of ``experiments.report.tradeoff``).  ``tradeoff_tables`` gathers
the report's trade-off tables, the frontier among them.

The open-domain curve from a run's records: retriever recall@k and reader accuracy@k, with 95% intervals.

A prediction of an open-domain task (``meta.protocol == "open_domain"``) cut
by ``top_k`` records whether its kept passages contain an answer
(``answer_in_context``, DPR's ``has_answer``) and its score (Lost in the
Middle's best-subspan EM of the first line).  For every (task, reader, k):
recall@k is the mean of the first, accuracy@k the mean of the second, each
with a percentile bootstrap interval.  A point with no scored example is
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
from experiments.data.records import Prediction, budget_text
from experiments.report.cells import (
    RunData,
    Scores,
    item_scores,
    merged_scores,
    noninferiority_vs,
    paired_vs,
    scores_interval,
)
from experiments.report.stats import (
    CANNOT_TELL,
    MIN_PAIRS,
    NOT_WORSE,
    WORSE,
    NonInferiority,
    PairedDelta,
    format_delta,
    format_p,
    mean_interval,
    paired_delta,
)
from experiments.report.tables import Table, paired_over_tasks
from experiments.report.tradeoff import (
    Arm,
    Items,
    arms,
    break_even_table,
    budget_table,
    chunks_table,
    cost_table,
    floor_or_ceiling,
    full_arms,
    noninferiority_rows,
    noninferiority_table,
    order_table,
    paired_arms,
    sequential_table,
    smallest_noninferior_table,
)

CSV_COLUMNS = ("task", "retriever", "reader", "k", "recall", "recall_ci_lo", "recall_ci_hi", "accuracy", "ci_lo", "ci_hi", "n",
               "failed", "note", "vs_largest", "vs_largest_ci_lo", "vs_largest_ci_hi", "vs_largest_verdict", "saturation_k")
MARGIN = 5.0  # points, when a run's manifest names none (experiments.run.sections.DEFAULT_MARGIN; report/ cannot import run/)


def run_margin(data: RunData) -> float:
    """The run's non-inferiority margin in points: its config's ``margin`` (``ctxcomp report --margin`` may replace it)."""
    return float(data.manifest.get("margin", MARGIN))


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


def _verdict(verdict: str) -> str:
    """A verdict in a curve's words: each k is compared with the larger ks, not with a full context."""
    return "not worse than the largest k by more than the margin" if verdict == NOT_WORSE else verdict


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
                     str(r.failed), f"{_vs_best(test)} {_verdict(test.verdict)}" if test and test.n else "", mark])
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
                             _verdict(test.verdict) if test else ("largest k" if s and r.k == s.reference_k else ""),
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


# -- the trade-off picture: score against context tokens, one line per compressor, the Pareto frontier -----------


def pareto(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Whether each (tokens, score) point is on the Pareto frontier: no other point has at most its tokens and at
    least its score with one of the two strictly better."""
    return [not any(x2 <= x and y2 >= y and (x2 < x or y2 > y) for x2, y2 in points) for x, y in points]


@dataclass
class Panel:
    """One panel of the picture (a task, or the task average) for one reader: points per line, full's band."""

    task: str
    reader: str
    lines: dict[str, list[dict[str, Any]]]
    full: dict[str, Any] | None


def panels(all_arms: Sequence[Arm], items: Items, margin: float = 5.0) -> list[Panel]:
    """Per reader: a panel per task and one for the average over the tasks every line ran on (a line that
    misses a task is left out of the average), each point with its paired band and whether it is on the
    frontier."""
    out = []
    for reader in dict.fromkeys(a.cell.reader for a in all_arms):
        mine = [a for a in all_arms if a.cell.reader == reader]
        tasks = list(dict.fromkeys(a.cell.task for a in mine))
        full = full_arms(mine)
        for task in tasks:
            lines: dict[str, list[dict[str, Any]]] = defaultdict(list)
            base = full.get((task, reader))
            for a in (a for a in mine if a.cell.task == task and not a.cell.is_full):
                pd = paired_arms(base, a, "score", items) if base is not None else None
                point = _point(a.tokens, a.cell.score, pd, a)
                if base is not None:
                    point["informative"] = not floor_or_ceiling(items.get((task, base.cell.config_hash), {}),
                                                                items.get((task, a.cell.config_hash), {}), margin)
                lines[a.line].append(point)
            out.append(_panel(task, reader, lines, base and _full_point(base, items)))
        if len(tasks) > 1:
            out.append(_average_panel(mine, tasks, reader, full, items))
    return out


def _point(x: float, y: float, pd: PairedDelta | None, arm: Arm) -> dict[str, Any]:
    band = (y - (pd.delta - pd.lo), y + (pd.hi - pd.delta)) if pd is not None and pd.n >= MIN_PAIRS else None
    return {"x": x, "y": y, "band": band, "budget": budget_text(arm.budget), "kind": arm.kind,
            "retriever": arm.retriever, "order": arm.order, "line": arm.line}


def _full_point(base: Arm, items: Items) -> dict[str, Any]:
    mi = scores_interval(items.get((base.cell.task, base.cell.config_hash), {}))
    return {"x": base.tokens, "y": base.cell.score, "band": (mi.lo, mi.hi)}


def _average_panel(mine: Sequence[Arm], tasks: Sequence[str], reader: str, full: dict[tuple[str, str], Arm],
                   items: Items) -> Panel:
    by_point: dict[tuple[str, str], dict[str, Arm]] = defaultdict(dict)
    for a in mine:
        if not a.cell.is_full:
            by_point[(a.line, budget_text(a.budget))][a.cell.task] = a
    lines: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (line, _), per_task in by_point.items():
        if set(per_task) != set(tasks) or any((t, reader) not in full for t in tasks):
            continue
        group = [per_task[t] for t in tasks]
        pd = paired_over_tasks([(full[(t, reader)].cell, per_task[t].cell) for t in tasks], items)
        x = statistics.fmean(a.tokens for a in group)
        lines[line].append(_point(x, statistics.fmean(a.cell.score for a in group), pd, group[0]))
    bases = [full[(t, reader)] for t in tasks if (t, reader) in full]
    base = None
    if len(bases) == len(tasks):
        merged, strata = merged_scores([(b.cell.task, items.get((b.cell.task, b.cell.config_hash), {})) for b in bases])
        spread = paired_vs(dict.fromkeys(merged, 0.0), merged, strata)
        y = statistics.fmean(b.cell.score for b in bases)
        base = {"x": statistics.fmean(b.tokens for b in bases), "y": y,
                "band": (spread.lo - spread.delta + y, spread.hi - spread.delta + y)}
    return _panel(f"average of {len(tasks)} tasks", reader, lines, base)


def _panel(task: str, reader: str, lines: dict[str, list[dict[str, Any]]], full: dict[str, Any] | None) -> Panel:
    """Sort each line by tokens and mark the frontier over every point of the panel, full included.  A point
    that scores 0, or whose arm and full both sit at the metric's floor or ceiling (``floor_or_ceiling``),
    says nothing of the trade-off and is never on the frontier (the fewest tokens would otherwise put a
    reader that fails everywhere on it)."""
    flat = [p for points in lines.values() for p in points] + ([full] if full else [])
    eligible = [p for p in flat if p["y"] > 0 and p.get("informative", True)]
    on = {id(p) for p, yes in zip(eligible, pareto([(p["x"], p["y"]) for p in eligible])) if yes}
    for p in flat:
        p["frontier"] = id(p) in on
    return Panel(task, reader, {k: sorted(v, key=lambda p: p["x"]) for k, v in lines.items()}, full)


def frontier_table(all_panels: Sequence[Panel]) -> Table:
    """The Pareto frontier of each panel, fewest tokens first."""
    header = ["task", "reader", "compressor", "budget", "tokens seen (mean)", "score"]
    body = []
    for panel in all_panels:
        points = [(line, p) for line, ps in panel.lines.items() for p in ps]
        points += [("full", panel.full)] if panel.full else []
        for line, p in sorted(points, key=lambda lp: lp[1]["x"]):
            if p.get("frontier"):
                body.append([panel.task, panel.reader, line, p.get("budget") or "—", f"{p['x']:.0f}", f"{p['y']:.2f}"])
    return header, body


def tradeoff_tables(data: RunData) -> dict[str, Table]:
    """The trade-off tables of report.md, by name (empty bodies are left out of the report); here beside the
    frontier, which is read off the picture's panels."""
    return tradeoff_analysis(data)[0]


def tradeoff_analysis(data: RunData) -> tuple[dict[str, Table], list[dict[str, Any]]]:
    """The trade-off tables and the non-inferiority tests they show (``noninferiority_rows``), which the
    report's summary counts: one computation for both."""
    all_arms = arms(data)
    items = data.items()
    margin = run_margin(data)
    rows = noninferiority_rows(all_arms, items, margin)
    return {
        "budget": budget_table(all_arms),
        "cost": cost_table(all_arms),
        "break_even": break_even_table(all_arms),
        "frontier": frontier_table(panels(all_arms, items, margin)),
        "noninferiority": noninferiority_table(rows, margin),
        "smallest_noninferior": smallest_noninferior_table(rows),
        "sequential": sequential_table(data),
        "order": order_table(all_arms, items),
        "chunks": chunks_table(all_arms, items),
    }, rows


def write_tradeoff_plots(data: RunData, out_dir: Path) -> list[Path]:
    """``tradeoff_<reader>.png/.svg``: one figure per reader, a panel per task and the task average."""
    from experiments.report.plots import plot_tradeoff

    all_panels = panels(arms(data), data.items(), run_margin(data))
    paths: list[Path] = []
    for reader in dict.fromkeys(p.reader for p in all_panels):
        mine = [p for p in all_panels if p.reader == reader and (p.lines or p.full)]
        if any(len(points) for p in mine for points in p.lines.values()):
            paths += plot_tradeoff(mine, out_dir / f"tradeoff_{safe_name(reader)}.png", margin=run_margin(data),
                                   title=f"{reader}: score against context tokens")
    return paths

"""The trade-off picture: per reader, a panel per task and one for the task average, each compressor line's points
at the context tokens the reader saw, with paired 95% bands against full, full as a band at its own token count,
and the Pareto frontier of (tokens, score) marked; its table and its figures."""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.paths import safe_name
from experiments.data.records import budget_text
from experiments.inference.results import MIN_PAIRS, PairedDelta
from experiments.report.cells import RunData, Table, merged_scores, paired_vs, scores_interval
from experiments.report.tables import paired_over_tasks
from experiments.report.tradeoff.noninferiority import run_margin
from experiments.report.tradeoff.points import Arm, Items, arms, floor_or_ceiling, full_arms, paired_arms


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
    return {"x": base.tokens, "y": base.cell.score, "band": (mi.lo, mi.hi), "line": base.line, "kind": base.kind}


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
                "band": (spread.lo - spread.delta + y, spread.hi - spread.delta + y), "line": bases[0].line,
                "kind": bases[0].kind}
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
        points += [(panel.full["line"], panel.full)] if panel.full else []
        for line, p in sorted(points, key=lambda lp: lp[1]["x"]):
            if p.get("frontier"):
                body.append([panel.task, panel.reader, line, p.get("budget") or "—", f"{p['x']:.0f}", f"{p['y']:.2f}"])
    return header, body


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

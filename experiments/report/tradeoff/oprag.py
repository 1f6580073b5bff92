"""The OP-RAG questions of a retrieval line: document order against score order at equal budgets, and the chunks
kept against the score (an inverted U, or not)."""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence

from experiments.data.records import budget_text
from experiments.inference.results import MIN_PAIRS, format_delta, format_p
from experiments.report.cells import Table, format_n, scores_interval
from experiments.report.tables import paired_over_tasks
from experiments.report.tradeoff.points import Arm, Items, budget_lines, paired_arms


def order_table(all_arms: Sequence[Arm], items: Items) -> Table:
    """Document order minus score order for arms that differ only in ``order`` (any compressor with that
    setting), at each budget, per task and averaged over the tasks both ran (paired on (task, example))."""
    pairs: dict[tuple[str, str, str], dict[str, dict[str, Arm]]] = defaultdict(lambda: defaultdict(dict))
    for a in all_arms:
        if a.order:
            rest = {k: v for k, v in a.params.items() if k != "order"}
            key = (a.cell.reader, a.kind, repr(sorted(rest.items())), budget_text(a.budget))
            pairs[key][a.cell.task][a.order] = a
    header = ["reader", "retrieval (score order)", "budget", "task", "document - score [95% CI]", "p", "n"]
    body = []
    for (reader, _, _, budget), per_task in pairs.items():
        both = {t: o for t, o in per_task.items() if {"score", "document"} <= set(o)}
        for task, o in both.items():
            pd = paired_arms(o["score"], o["document"], "score", items)
            body.append([reader, o["score"].line, budget or "—", task, format_delta(pd) or f"{pd.delta:+.2f}",
                         format_p(pd), format_n(pd.n, pd.clusters)])
        if len(both) > 1:
            pd = paired_over_tasks([(o["score"].cell, o["document"].cell) for o in both.values()], items)
            if pd is not None:
                line = next(iter(both.values()))["score"].line
                body.append([reader, line, budget or "—", f"average of {len(both)} tasks",
                             format_delta(pd) or f"{pd.delta:+.2f}", format_p(pd), format_n(pd.n, pd.clusters)])
    return header, body


def chunks_table(all_arms: Sequence[Arm], items: Items) -> Table:
    """Lines that keep units (retrieval's chunks): chunks kept and score at each budget, and the peak against both ends of the line,
    paired on the example (an inverted U needs both differences above 0; the peak is picked after looking)."""
    header = ["task", "reader", "compressor", "budget", "chunks kept (mean)", "score [95% CI]", "peak - smallest",
              "peak - largest", "shape"]
    body = []
    for (task, reader, line), points in budget_lines(all_arms).items():
        points = [a for a in points if a.budget and any(r.kept_chunks for r in a.recs)]
        if len(points) < 2:
            continue
        peak = max(range(len(points)), key=lambda i: points[i].cell.score)
        ends = [paired_arms(points[0], points[peak], "score", items), paired_arms(points[-1], points[peak], "score", items)]
        interior = 0 < peak < len(points) - 1
        shape = ("inverted U" if interior and all(e.n >= MIN_PAIRS and e.lo > 0 for e in ends) else
                 "peak inside, not shown at this n" if interior else "peak at an end")
        for i, a in enumerate(points):
            mi = scores_interval(items.get((a.cell.task, a.cell.config_hash), {}))
            row = [task, reader, line, budget_text(a.budget), f"{statistics.fmean(len(r.kept_chunks) for r in a.recs):.1f}",
                   f"{mi.mean:.2f} [{mi.lo:.2f}, {mi.hi:.2f}]", "", "", ""]
            if i == peak:
                row[6:] = [format_delta(ends[0]) or "", format_delta(ends[1]) or "", shape]
            body.append(row)
    return header, body

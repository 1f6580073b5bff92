"""How much can go: each compressed cell's non-inferiority test against full at the run's margin, Holm's
adjustment over the run's tests, the smallest non-inferior budget of each line (the fixed-sequence procedure),
and the looks of a run that grew until each cell was decided."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from experiments.data.records import budget_text
from experiments.inference.results import ALPHA
from experiments.inference.verdicts import NOT_WORSE, NonInferiority, holm
from experiments.report.cells import RunData, Table, format_n, noninferiority_vs
from experiments.report.tradeoff.points import Arm, Items, compared

MARGIN = 5.0  # points, when a run's manifest names none (experiments.run.sections.DEFAULT_MARGIN; report/ cannot import run/)


def run_margin(data: RunData) -> float:
    """The run's non-inferiority margin in points: its config's ``margin`` (``ctxcomp report --margin`` may replace it)."""
    return float(data.manifest.get("margin", MARGIN))


def noninferiority_rows(all_arms: Sequence[Arm], items: Items, margin: float,
                        alpha: float = ALPHA) -> list[dict[str, Any]]:
    """One test per compressed cell against full (``noninferiority_test``: verdict, the interval it inverts,
    one-sided p-values, clusters) and the Holm adjustment of the p-values over all of them (the family: every
    task x reader x compressed row of the run)."""
    rows = []
    for base, a in compared(all_arms):
        test = noninferiority_vs(items.get((base.cell.task, base.cell.config_hash), {}),
                                 items.get((a.cell.task, a.cell.config_hash), {}), margin, alpha=alpha)
        rows.append({"arm": a, "test": test, "verdict": test.verdict, "p": test.p if test.n else float("nan")})
    for row, adjusted in zip(rows, holm([r["p"] for r in rows])):
        row["p_holm"] = adjusted
    return rows


def _bound(value: float) -> str:
    return "−∞" if value == -np.inf else "+∞" if value == np.inf else f"{value:+.2f}"


def format_test(test: NonInferiority) -> str:
    """``+1.63 [-4.44, +9.57]``: the delta and the interval its test inverts, the same the scores table prints
    (infinite below ``MIN_PAIRS`` pairs, where that table prints none)."""
    if not test.n:
        return ""
    return f"{test.delta:+.2f} [{_bound(test.lo)}, {_bound(test.hi)}]"


def noninferiority_table(rows: Sequence[dict[str, Any]], margin: float) -> Table:
    tested = sum(1 for r in rows if r["p"] == r["p"])
    alpha = rows[0]["test"].alpha if rows else ALPHA
    header = ["task", "reader", "compressor", "budget", f"Δ vs full [{100 * (1 - 2 * alpha):g}% CI, inverted test]",
              "n", "clusters", f"verdict (margin {margin:g}, one-sided α {alpha:g})", "p (one-sided)",
              f"p Holm (family of {tested} tests)"]
    p = lambda v: "—" if v != v else f"{v:.4f}"  # noqa: E731
    body = [[r["arm"].cell.task, r["arm"].cell.reader, r["arm"].line, budget_text(r["arm"].budget) or "—",
             format_test(r["test"]), str(r["test"].n), str(r["test"].n_clusters), r["verdict"], p(r["p"]),
             p(r["p_holm"])] for r in rows]
    return header, body


def fixed_sequence(tests: Sequence[dict[str, Any]]) -> tuple[int, str]:
    """The fixed-sequence procedure down one compressor's budget ladder (Maurer, Hothorn & Lehmacher 1995;
    Westfall & Krishen 2001): test the largest budget first, each at the full ``alpha``, and go down only
    while the verdict is "not worse"; the first budget that is not shown not worse ends the ladder.  The
    family-wise error over that compressor's budgets stays at ``alpha`` because a hypothesis is tested only
    once every hypothesis before it was rejected.  ``tests`` are ordered from the largest budget down;
    returns how many were passed and why the ladder stopped."""
    passed = 0
    for row in tests:
        if row["verdict"] != NOT_WORSE:
            return passed, f"stopped at {budget_text(row['arm'].budget)}: {row['verdict']}"
        passed += 1
    return passed, "every budget passed"


def smallest_noninferior_table(rows: Sequence[dict[str, Any]]) -> Table:
    """Per (task, reader, line): the smallest budget shown not worse than full by the fixed-sequence
    procedure (``fixed_sequence``), which controls the family-wise error over the line's budgets."""
    by_line: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        a = r["arm"]
        if a.budget:
            by_line[(a.cell.task, a.cell.reader, a.line)].append(r)
    header = ["task", "reader", "compressor", "budgets tested (largest first)",
              "smallest non-inferior budget (fixed-sequence, FWER ≤ α over the line)", "ladder"]
    body = []
    for (task, reader, line), tests in by_line.items():
        tests.sort(key=lambda r: -(r["arm"].budget_tokens or 0))
        passed, why = fixed_sequence(tests)
        smallest = budget_text(tests[passed - 1]["arm"].budget) if passed else "none at this n"
        body.append([task, reader, line, ", ".join(budget_text(r["arm"].budget) for r in tests), smallest, why])
    return header, body


def _open(row: dict[str, Any]) -> str:
    """An undecided cell; one whose full score sat at the floor (or both at the ceiling) at its last look says
    so, as the non-inferiority table does: it is kept open, since full's mean may leave the edge as n grows."""
    from experiments.inference.verdicts import UNINFORMATIVE

    return f"open ({UNINFORMATIVE.format(row['edge'])} at this look)" if row.get("edge") else "open"


def sequential_table(data: RunData) -> Table:
    """The looks of a run that grew until each cell was decided (``ctxcomp run --until-decided``; its manifest's
    ``sequential`` entry): per cell, the last look it was read at, its n and documents there, the log-wealth of
    each betting test against log(1/alpha), the confidence sequence and the decision (empty for a fixed-n run)."""
    from experiments.data.provenance import read_manifest

    state = read_manifest(data.run_dir).get("sequential") if (data.run_dir / "manifest.json").is_file() else None
    if not state:
        return [], []
    label = {(c.task, c.config_hash): c for c in data.cells}
    points = {p["config_hash"]: p for p in data.manifest.get("points", [])}
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for seen in state["looks"]:
        for row in seen["cells"]:
            latest[(row["task"], row["config_hash"])] = {**row, "look": seen["look"]}
    header = ["task", "reader", "compressor", "budget", "looks", "n (docs) at the last look",
              "log-wealth (not worse)", "log-wealth (worse)", "threshold log(1/α)", "Δ vs full [95% confidence sequence]",
              "decision"]
    body = []
    for key, row in latest.items():
        cell = label.get(key)
        budget = budget_text((points.get(key[1]) or {}).get("budget"))
        interval = f"{row.get('delta', float('nan')):+.2f} [{_bound(row.get('lo', -np.inf))}, {_bound(row.get('hi', np.inf))}]"
        body.append([key[0], cell.reader if cell else "", cell.compressor if cell else key[1], budget or "—",
                     str(row["look"]), format_n(row.get("n", 0), row.get("n_clusters", 0)),
                     f"{row.get('log_wealth_not_worse', float('nan')):.2f}",
                     f"{row.get('log_wealth_worse', float('nan')):.2f}", f"{row.get('threshold', float('nan')):.2f}",
                     interval, state["cells"].get(f"{key[0]}\x1f{key[1]}", {}).get("decision") or row["decision"] or
                     _open(row)])
    return header, body

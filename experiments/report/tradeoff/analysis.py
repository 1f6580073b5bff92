"""The trade-off tables of report.md, by name, and the non-inferiority tests its summary counts: one computation."""
from __future__ import annotations

from typing import Any

from experiments.report.cells import RunData, Table
from experiments.report.tradeoff.cost import break_even_table, budget_table, cost_table
from experiments.report.tradeoff.frontier import frontier_table, panels
from experiments.report.tradeoff.noninferiority import (
    noninferiority_rows,
    noninferiority_table,
    run_margin,
    sequential_table,
    smallest_noninferior_table,
)
from experiments.report.tradeoff.oprag import chunks_table, order_table
from experiments.report.tradeoff.points import arms


def tradeoff_tables(data: RunData) -> dict[str, Table]:
    """The trade-off tables of report.md, by name (empty bodies are left out of the report)."""
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

"""The trade-off, not one delta: every cell as a point of score against context kept, and what it cost.

A run with a budget axis (``budget:`` / ``ratio:``) gives each compressor a
line of points, one per budget; ``full`` is the reference, at the tokens the
reader saw of it (after its own truncation).  From the prediction lines alone:

- requested vs achieved: per cell the budget, the achieved tokens and ratio
  (median and range over examples) and how many examples went over budget;
- the cost account: the compressor's time and model work and the reader's
  tokens and time, totals per cell, and end-to-end time against full, paired;
- the break-even: the budgets at which compressing and then reading costs
  less than reading the full context, in time and in model tokens
  (``cost``: these three);
- the Pareto frontier of (tokens, score) per task and for the task average
  (``frontier``, with the picture);
- "how much can go": non-inferiority against full with the config's margin,
  Holm-adjusted over the run's tests, and the smallest non-inferior budget
  (``noninferiority``);
- the OP-RAG questions: document against score order at equal budgets, and
  the number of chunks kept against the score (an inverted U or not)
  (``oprag``).

``points`` holds the arms they all read, ``analysis`` gathers the tables.
Every difference is paired on the example with its 95% interval and n
(``experiments.inference.paired``); docs/metrics.md explains each test.
"""
from __future__ import annotations

from experiments.report.tradeoff.analysis import tradeoff_analysis, tradeoff_tables
from experiments.report.tradeoff.cost import TIME_RESOLUTION_MS, break_even_table, budget_table, cost_table
from experiments.report.tradeoff.frontier import Panel, frontier_table, panels, pareto, write_tradeoff_plots
from experiments.report.tradeoff.noninferiority import (
    MARGIN,
    fixed_sequence,
    format_test,
    noninferiority_rows,
    noninferiority_table,
    run_margin,
    sequential_table,
    smallest_noninferior_table,
)
from experiments.report.tradeoff.oprag import chunks_table, order_table
from experiments.report.tradeoff.points import (
    Arm,
    Items,
    arms,
    budget_lines,
    compared,
    floor_or_ceiling,
    full_arms,
    paired_arms,
)

__all__ = ["MARGIN", "TIME_RESOLUTION_MS", "Arm", "Items", "Panel", "arms", "break_even_table", "budget_lines",
           "budget_table", "chunks_table", "compared", "cost_table", "fixed_sequence", "floor_or_ceiling",
           "format_test", "frontier_table", "full_arms", "noninferiority_rows", "noninferiority_table", "order_table",
           "paired_arms", "panels", "pareto", "run_margin", "sequential_table", "smallest_noninferior_table",
           "tradeoff_analysis", "tradeoff_tables", "write_tradeoff_plots"]

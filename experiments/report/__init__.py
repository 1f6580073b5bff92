"""Reports: cells and paired statistics from a run directory, tables, plots, curves, comparisons, traces."""

"""Paper-ready figures: each function writes ``<path>.png`` and ``<path>.svg`` and returns both paths.

Figures are sized for a paper column (3.4 in) or page (6.8 in) with fonts of
at least 8 pt.  matplotlib is imported, and the Agg backend chosen, inside the
functions, so importing this package neither costs time nor changes a user's
backend.
"""
from __future__ import annotations

from experiments.report.plots.curves import (
    ORDER_STYLES,
    line_style,
    plot_curve,
    plot_tradeoff,
)
from experiments.report.plots.figure import COLUMN_IN, PAGE_IN, arm_styles, cjk_family, compressor_style
from experiments.report.plots.scores import plot_delta_forest, plot_length_buckets, plot_position, plot_score_by_length

__all__ = ["COLUMN_IN", "ORDER_STYLES", "PAGE_IN", "arm_styles", "cjk_family", "compressor_style",
           "line_style",
           "plot_curve", "plot_delta_forest", "plot_length_buckets", "plot_position", "plot_score_by_length",
           "plot_tradeoff"]

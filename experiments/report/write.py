"""Write a run's report: scores.json/.csv, report.md, tables/*.csv (and each as LaTeX, tables/*.tex), plots/*, and
curve files for open-domain tasks.

What the report says is computed in ``experiments.report.summary`` (the tables by name, the summary's lines); here
it becomes files."""
from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from core.errors import UserError
from core.files import write_atomic
from core.paths import safe_name
from experiments.inference.paired import mean_interval
from experiments.report.cells import Cell, RunData, load_run
from experiments.report.curve import curve_table, write_curve
from experiments.report.judged import judged_cells, judged_table
from experiments.report.lengths import length_items, length_label
from experiments.report.plots import (
    arm_styles,
    plot_delta_forest,
    plot_length_buckets,
    plot_position,
    plot_score_by_length,
)
from experiments.report.summary import (
    Analysis,
    report_tables,
    summary_lines,
)
from experiments.report.tables import csv_text, latex_table, markdown_cell, markdown_table
from experiments.report.tradeoff.frontier import write_tradeoff_plots


def _json_safe(value):
    """NaN is not JSON: a cell whose examples all failed has no score, written as ``null``."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def write_scores(run_dir: Path, cells: Sequence[Cell]) -> None:
    judged: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for j in judged_cells(run_dir):
        judged[(j.task, j.config_hash)].append({"protocol": j.protocol, "against": j.against, "judge": j.judge,
                                                "value": j.value, "ci95": list(j.ci95), "n": j.n,
                                                "n_failed": j.n_failed, "n_one_order": j.n_one_order,
                                                "n_helmet_scores": j.n_helmet_scores})
    rows = [_json_safe({**asdict(c), "judged": judged.get((c.task, c.config_hash), [])}) for c in cells]
    write_atomic(run_dir / "scores.json", json.dumps({"cells": rows}, indent=2, ensure_ascii=False))
    header = ["task", "category", "reader", "compressor", "config_hash", "metric", "score", "delta_vs_full",
              "delta_paired", "delta_ci95_lo", "delta_ci95_hi", "n_paired", "p_value", "n", "n_failed", "ratio",
              "reader_cut_pct", "tokens_seen"]
    opt = lambda v, fmt="{:.2f}": "" if v is None or v != v else fmt.format(v)  # noqa: E731
    body = [
        [c.task, c.category, c.reader, c.compressor, c.config_hash, c.metric, opt(c.score), opt(c.delta_vs_full),
         opt(c.delta_paired), opt(c.delta_ci95[0] if c.delta_ci95 else None),
         opt(c.delta_ci95[1] if c.delta_ci95 else None), str(c.n_paired), opt(c.p_value, "{:.4f}"), str(c.n),
         str(c.n_failed), opt(c.ratio, "{}"), opt(c.reader_cut_pct), opt(c.tokens_seen, "{:.1f}")]
        for c in cells
    ]
    write_atomic(run_dir / "scores.csv", csv_text(header, body))


def with_analysis(data: RunData, *, margin: float | None = None, contrasts: Sequence[str] = ()) -> RunData:
    """The run with the report's analysis-only settings replaced, as ``ctxcomp report --margin --contrast`` gives
    them: the non-inferiority margin (points) and the planned contrasts (``"ARM - AGAINST"``, row labels).

    Nothing is predicted again and no model is called: these settings change only what the report computes
    from the predictions.  The run's config stays as the run made it; report.md says which settings came
    from the command line."""
    manifest = dict(data.manifest)
    given: dict[str, Any] = {}
    if margin is not None:
        if not margin >= 0:
            raise UserError(f"--margin must be >= 0 score points, got {margin}")
        given["margin"] = (margin, manifest.get("margin"))
        manifest["margin"] = float(margin)
    if contrasts:
        labels = sorted({c.compressor for c in data.cells})
        manifest["contrasts"] = [_contrast(text, labels) for text in contrasts]
        given["contrasts"] = (len(contrasts), len(data.manifest.get("contrasts") or []))
    manifest["given"] = {**manifest.get("given", {}), **given}
    return dataclasses.replace(data, manifest=manifest)


def _contrast(text: str, labels: Sequence[str]) -> dict[str, str]:
    """``"ARM - AGAINST"`` as ``{arm, against}``: the split at a `` - `` that names a row on both sides (labels may
    hold `` - `` themselves); a one-line error naming the rows otherwise."""
    splits = [(text[:i].strip(), text[i + 3:].strip()) for i in range(len(text)) if text.startswith(" - ", i)]
    for arm, against in splits:
        if arm in labels and against in labels:
            return {"arm": arm, "against": against}
    raise UserError(f"--contrast {text!r}: expected 'ARM - AGAINST' with two row labels of the run "
                    f"({', '.join(labels)})")


def write_report(run: str | Path | RunData, *, plots: bool = True) -> tuple[str, list[Path]]:
    """Write scores.json/.csv, report.md, tables/*.csv and *.tex and plots/*; return the markdown and the plot paths.

    ``run``: a run directory, or its records already loaded (``load_run``, perhaps ``with_analysis``), so a
    command computes cells once."""
    data = run if isinstance(run, RunData) else load_run(run)
    run_dir, cells = data.run_dir, data.cells
    write_scores(run_dir, cells)
    analysis = report_tables(data)
    (run_dir / "tables").mkdir(exist_ok=True)
    for name, (header, body) in analysis.tables.items():
        if body:  # the CSV for analysis, the same rows as LaTeX for a paper
            write_atomic(run_dir / "tables" / f"{name}.csv", csv_text(header, body))
            write_atomic(run_dir / "tables" / f"{name}.tex", latex_table(header, body, caption=table_title(name),
                                                                         label=name))
    curve_paths = write_curve(analysis.curve, analysis.saturation, run_dir, plots=plots) if analysis.curve else []
    plot_paths = _write_plots(run_dir, cells, data) if plots else []
    if plots:
        plot_paths += write_tradeoff_plots(data, run_dir / "plots")
    plot_paths += [p for p in curve_paths if p.suffix in (".png", ".svg")]
    md = render_markdown(data, analysis, plot_paths)
    write_atomic(run_dir / "report.md", md)
    return md, plot_paths


TITLES = {
    "score_by_length": "Score by context length, per arm (mean [95% interval] (n)): the effective length",
    "length_deltas": "Compressed minus full context at each length, paired on the example ([95% interval], n)",
    "scores": "Scores",
    "efficiency": "Compression, tokens, cost and latency (means per example, one row per task)",
    "length_buckets": "Scores by length bucket",
    "positions": "Accuracy by gold/key position (95% intervals)",
    "position_contrasts": "First and last position against the middle, paired on the question",
    "curve_contrasts": "Largest k against smallest k, paired on the question",
    "contrasts": "Planned contrasts (the config's `contrasts`: arm minus against, paired on the example)",
    "budget": "Requested vs achieved: budget, tokens kept and ratio (median [range] over examples), over budget, "
              "score vs full",
    "cost": "The cost account (totals per cell; end-to-end = compressor + reader seconds)",
    "break_even": "Break-even: the budget below which compressing and then reading costs less than reading the full "
                  "context",
    "frontier": "The Pareto frontier of tokens seen and score (per task and for the task average)",
    "noninferiority": "How much can go: non-inferiority against full",
    "smallest_noninferior": "The smallest non-inferior budget per compressor and task",
    "sequential": "Decided as the run grew: the looks of a sequential run (`--until-decided`)",
    "order": "Document order minus score order at equal budgets, paired on the example (OP-RAG)",
    "chunks": "Chunks kept and score along each retrieval line (OP-RAG's inverted U)",
}


def table_title(name: str) -> str:
    """A report table's title: the shared ones above, else the title a benchmark gives its own table."""
    if name in TITLES:
        return TITLES[name]
    from experiments.tasks.benchmark import benchmarks

    own = {key: table.title for bench in benchmarks() for key, table in bench.report_tables.items()}
    return own.get(name, name)
# what a table's numbers mean, said under its title (docs/metrics.md has the references)
NOTES = {
    "cost": "Compressor seconds are its wall time, with model work a cache served (summaries, embeddings) counted "
            "at the time it took when it was made; reader seconds likewise (`latency_s`). The last column is the "
            "paired difference per example against full, with its 95% interval.",
    "break_even": "Time: each budget is cheaper than full when its paired 95% interval of end-to-end seconds per "
                  "example lies below 0; the break-even is the largest budget up to which every budget is. An "
                  "interval wholly within 10 ms per example is below what a run's timing resolves: that budget is "
                  "neither, and a line where every budget is has no break-even to find. Model "
                  "tokens: every token the compressor's models and the reader read or wrote, mean per example.",
    "noninferiority": "One test per row (docs/metrics.md): a one-sided test of Δ <= -margin at α = 0.025 that "
                      "holds its level for any bounded scores at any n (exact for independent 0/1 scores, betting "
                      "over documents otherwise); the interval is the one its two one-sided tests invert, so verdict, "
                      "interval and p agree: not worse when the lower bound is above -margin, worse when the upper "
                      "bound is below it, too few documents under 6, uninformative when full scores within the "
                      "margin of 0 or 100 (the margin cannot fail there), else cannot tell at this n. Holm's "
                      "adjustment runs over the family of every informative test in this table (each task × reader "
                      "× compressed row against the full row of its task and reader).",
    "smallest_noninferior": "The fixed-sequence procedure: the largest budget is tested first, each at α, and the "
                            "ladder goes down only while a budget is shown not worse; the family-wise error over a "
                            "line's budgets stays at α.",
    "sequential": "The run grew each task's sample until each cell was decided: after every step the undecided "
                  "cells were tested against full by betting over documents, an anytime-valid test (a cell is "
                  "decided once its log-wealth reaches log(1/α), which under the null happens with probability at "
                  "most α however often it is looked at); the interval is the confidence sequence at the last look. "
                  "A decided cell got no more examples.",
    "chunks": "The peak is the budget with the best score, picked after looking; an inverted U needs both "
              "differences to exclude 0.",
}
CURVE_NOTE = ("Each k against the largest k of its curve: the paired non-inferiority test of the budget sweep (its "
              "interval and verdict at the run's margin). The saturation k (◀) is the smallest k shown not worse "
              "than every larger k, walking down from the largest k (fixed by the config before any score is "
              "seen) while each k passes; the best k is shown for reading only, never tested against, since a k "
              "picked after looking is luckier than it is good (docs/protocols.md).")


SCORES_NOTE = (
    "Scores are 100 x the task's metric (named in each column; LongBench rounding). In parentheses: the "
    "difference to the full-context row of the same reader, paired over the examples both scored, with its "
    "95% interval (the exact test for independent 0/1 scores, the betting test over documents otherwise: valid "
    "at any n, docs/metrics.md); `*` marks an interval that excludes 0 (never under 6 documents); below 5 pairs "
    "the paired difference and its n, without an interval. `[reader cut N%]`: the reader's own window cut N% of "
    "the cell's prompts. Averages over tasks are paired on (task, example); an average that has no score on a "
    "task of its columns (every example failed, or the arm did not run it) averages the tasks it has and names "
    "the ones it leaves out, and its delta is paired on those tasks. The last column is n: the examples of each "
    "task, in column order where the tasks differ, with the documents they come from where examples share one "
    "(`12 (4 docs)`). P-values (of the same test) and the intervals are in `scores.csv`. Each cell averages the "
    "lines of `predictions.jsonl` with its `task` and `config_hash` (see the efficiency table for the hash of each "
    "row).")
# a run without a full-context arm (a curve: every row is a k of top_k) has no row to be paired against
SCORES_NOTE_NO_FULL = (
    "Scores are 100 x the task's metric (named in each column; LongBench rounding). The run has no full-context "
    "arm, so no row is compared with one here (a curve compares each k with the larger ks, below). `[reader cut "
    "N%]`: the reader's own window cut N% of the cell's prompts. The last column is n: the examples of each task, "
    "with the documents they come from where examples share one (`12 (4 docs)`). The intervals are in "
    "`scores.csv`. Each cell averages the lines of `predictions.jsonl` with its `task` and `config_hash` (see the "
    "efficiency table for the hash of each row).")


def render_markdown(data: RunData, analysis: Analysis, plot_paths: Sequence[Path]) -> str:
    """report.md: a short summary of what was decided, then the detailed tables, then the plots."""
    run_dir = data.run_dir
    summary = [f"- **{topic}**: {markdown_cell(text)}" for topic, text in summary_lines(data, analysis)]
    parts = [f"# Report: {run_dir.name}", "", "## Summary", "", *summary, "",
             "Detailed tables follow; `tables/*.csv` holds each of them, and `tables/*.tex` the same rows as LaTeX "
             "(booktabs)."]
    tables, contrast_notes, curve = analysis.tables, analysis.contrast_notes, analysis.curve
    for name, (header, body) in tables.items():
        notes = list(contrast_notes) if name == "contrasts" else []
        if name != "curve_contrasts" and (body or notes):
            scores_note = SCORES_NOTE if any(c.is_full for c in data.cells) else SCORES_NOTE_NO_FULL
            note = scores_note if name == "scores" else NOTES.get(name)
            parts += ["", f"## {table_title(name)}"] + ([""] + [note] if note and body else [])
            parts += ["", markdown_table(header, body)] if body else []
            parts += [""] + [f"- not computed: {markdown_cell(n)}" for n in notes] if notes else []
    judged = judged_cells(run_dir)
    if judged:
        parts += ["", "## Judged evaluation", "",
                  "Win-rates (pairwise; ties count half) and rubric scores (score) x 100, with 95% intervals "
                  "over examples (valid bounds for values in [0, 1], docs/metrics.md); failed judgements (unparseable verdicts, judge errors) are counted and "
                  "left out. See `judgements.jsonl`.", "", markdown_table(*judged_table(judged))]
    if curve:
        parts += ["", "## Open-domain curve: retriever recall@k and reader accuracy@k", "", CURVE_NOTE, "",
                  markdown_table(*curve_table(curve, analysis.saturation))]
        if tables.get("curve_contrasts", ([], []))[1]:
            parts += ["", f"## {TITLES['curve_contrasts']}", "",
                      "Percentage points; `*` marks an interval that excludes 0. Recall rising while accuracy does "
                      "not is the saturation Lost in the Middle reports (Fig. 11).", "",
                      markdown_table(*tables["curve_contrasts"])]
    if plot_paths:
        parts += ["", "## Plots", ""]
        parts += [f"![{p.stem}]({p.relative_to(run_dir).as_posix()})" for p in plot_paths if p.suffix == ".png"]
    return "\n".join(parts) + "\n"


def _plot_lengths(out: Path, data: RunData, items: Mapping[tuple[str, str], Mapping[str, Mapping[str, float]]]) -> list[Path]:
    """plots/score_by_length.png: the score-by-length table's numbers as lines with interval bars."""
    series: dict[str, dict[str, dict[str, tuple]]] = defaultdict(lambda: defaultdict(dict))
    for c in data.cells:
        buckets = items.get((c.task, c.config_hash), {})
        keys = sorted(buckets, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))
        if len(keys) < 2:
            continue
        stats = [mean_interval(list(buckets[k].values())) for k in keys]
        series[c.reader][c.task][c.compressor] = ([length_label(k) for k in keys], [s.mean for s in stats],
                                                  [s.lo for s in stats], [s.hi for s in stats])
    styles = arm_styles((c.compressor, c.compressor_kind or c.compressor) for c in data.cells)
    return plot_score_by_length(series, out / "score_by_length.png", styles=styles) if series else []


def _write_plots(run_dir: Path, cells: Sequence[Cell], data: RunData | None = None) -> list[Path]:
    out = run_dir / "plots"
    out.mkdir(exist_ok=True)
    paths: list[Path] = []
    deltas: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    intervals: dict[str, dict[str, dict[str, tuple[float, float]]]] = defaultdict(lambda: defaultdict(dict))
    for c in cells:
        if not c.is_full and any(f.is_full and f.task == c.task and f.reader == c.reader for f in cells):
            deltas[c.reader][c.compressor][c.task] = c.delta_paired if c.delta_paired is not None else float("nan")
            if c.delta_ci95 is not None:
                intervals[c.reader][c.compressor][c.task] = (c.delta_ci95[0], c.delta_ci95[1])
    if deltas:
        paths += plot_delta_forest(deltas, out / "delta_vs_full.png", intervals,
                                   styles=arm_styles((c.compressor, c.compressor_kind or c.compressor) for c in cells))
    items = length_items(data.cells, data.predictions) if data is not None else {}
    paths += _plot_lengths(out, data, items) if data is not None else []
    # tasks with lengths of their own (RULER, LongBench v2) are drawn above with intervals; the rest by bucket
    own_lengths = {task for task, _ in items}
    buckets = {f"{c.reader} | {c.compressor} | {c.task}": c.buckets for c in cells
               if len(c.buckets) > 1 and c.task not in own_lengths}
    if buckets:
        styles = arm_styles((f"{c.reader} | {c.compressor} | {c.task}", c.compressor_kind or c.compressor) for c in cells)
        paths += plot_length_buckets(buckets, out / "length_buckets.png", styles=styles)
    for task in dict.fromkeys(c.task for c in cells):
        series = {f"{c.reader} | {c.compressor}": c for c in cells if c.task == task and c.by_position}
        numeric = {
            label: {int(k): v / 100 for k, v in c.by_position.items() if k.lstrip("-").isdigit()} for label, c in series.items()
        }
        numeric = {k: v for k, v in numeric.items() if len(v) > 1}
        if numeric:
            closed = {label: c.by_position["closed_book"] / 100 for label, c in series.items() if "closed_book" in c.by_position}
            oracle = {label: c.by_position["oracle"] / 100 for label, c in series.items() if "oracle" in c.by_position}
            cis = {label: {int(k): (lo / 100, hi / 100) for k, (lo, hi) in c.by_position_ci.items() if k.lstrip("-").isdigit()}
                   for label, c in series.items()}
            styles = arm_styles((f"{c.reader} | {c.compressor}", c.compressor_kind or c.compressor) for c in cells if c.task == task)
            paths += plot_position(numeric, out / f"position_{safe_name(task)}.png", closed_book=closed or None,
                                   oracle=oracle or None, intervals=cis, styles=styles,
                                   title=f"{task}: accuracy by gold (or key) position")
    return [Path(p) for p in paths]


__all__ = ["CURVE_NOTE", "NOTES", "SCORES_NOTE", "SCORES_NOTE_NO_FULL", "TITLES", "render_markdown", "table_title", "with_analysis",
           "write_report", "write_scores"]

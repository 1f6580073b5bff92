"""``ctxcomp view``: one self-contained HTML file to explore a run (``RUN_DIR/view.html``).

The page needs no server, no network and no library: its data is embedded as
JSON in ``<script type="application/json">`` blocks (one for the overview,
one per task, one per example, parsed only when shown), with ``<``, ``>``
and ``&`` written as ``\\u003c``, ``\\u003e`` and ``\\u0026`` so no text in
a run can close the block.  The page's script renders every string of the
run with ``textContent``, and a Content-Security-Policy allows only the
page's own script (by its hash) and no network at all.

The overview's numbers are the report's: the same cells, tables, paired
intervals and plots (``experiments.report.write``), not a second computation.
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.files import write_atomic
from core.paths import safe_name
from experiments.report.cells import Cell, RunData, load_run
from experiments.view.examples import (
    ContextLoader,
    RunSide,
    failures_by_reason,
    flip_counts,
    run_files,
    task_blocks,
)

ASSETS = Path(__file__).with_name("assets")
VIEW_FILE = "view.html"
SCRIPTS = ("view.js", "view_example.js")  # one inline script, in this order


def embed_json(value: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` is left as is,
    so neither ``</script>`` nor ``<!--`` can occur; NaN becomes ``null``."""
    text = json.dumps(_finite(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _cell_json(c: Cell, run: str, flips: dict[str, int]) -> dict[str, Any]:
    return {"task": c.task, "reader": c.reader, "arm": c.compressor, "hash": c.config_hash, "metric": c.metric,
            "score": c.score, "n": c.n, "n_failed": c.n_failed, "is_full": c.is_full, "run": run,
            "delta": c.delta_paired, "ci": c.delta_ci95, "p": c.p_value, "n_paired": c.n_paired,
            "ratio": c.ratio, "tokens_in": c.tokens_in, "tokens_out": c.tokens_out, "latency_s": c.latency_s,
            "cut": c.reader_cut_pct, "tokens_seen": c.tokens_seen,
            "lost": flips.get("lost", 0), "gained": flips.get("gained", 0)}


def _score_cells(data: RunData, header: Sequence[str], body: Sequence[Sequence[str]]) -> list[list[int | None]]:
    """For each cell of the score table, the index of the report cell it shows (None for labels and averages)."""
    from experiments.report.tables import rows_in_order, task_columns

    index = {(c.reader, c.compressor, c.task): i for i, c in enumerate(data.cells)}
    tasks = task_columns(data.cells)
    rows = rows_in_order(data.cells)
    out = []
    for (reader, comp), row in zip(rows, body):
        out.append([index.get((reader, comp, tasks[i - 2])) if 2 <= i < 2 + len(tasks) else None
                    for i in range(len(row))])
    return out


def _plots(data: RunData, analysis: Any, plot_paths: Sequence[Path] | None) -> list[dict[str, str]]:
    """The report's plots as SVG (the files report wrote, or drawn afresh into a temporary folder)."""
    def encode(paths: Sequence[Path]) -> list[dict[str, str]]:
        svgs = [Path(p) for p in paths if Path(p).suffix == ".svg" and Path(p).is_file()]
        return [{"name": p.stem, "svg": base64.b64encode(p.read_bytes()).decode("ascii")} for p in svgs]

    if plot_paths is not None:
        return encode(plot_paths)
    from experiments.report.curve import write_curve
    from experiments.report.write import _write_plots

    with tempfile.TemporaryDirectory(prefix="ctxcomp-view-") as tmp:
        paths = _write_plots(Path(tmp), data.cells)
        if analysis.curve:
            paths += [p for p in write_curve(analysis.curve, analysis.saturation, Path(tmp)) if p.suffix == ".svg"]
        return encode(paths)


def overview(data: RunData, plot_paths: Sequence[Path] | None, against: RunData | None) -> dict[str, Any]:
    """Tables (as report.md has them), plots, failures by reason and the run's manifest files."""
    from experiments.report.judged import judged_cells, judged_table
    from experiments.report.summary import report_tables
    from experiments.report.write import table_title

    analysis = report_tables(data)
    tables, contrast_notes, curve = analysis.tables, analysis.contrast_notes, analysis.curve
    out_tables = []
    for name, (header, body) in tables.items():
        notes = list(contrast_notes) if name == "contrasts" else []
        if body or notes:
            entry: dict[str, Any] = {"name": name, "title": table_title(name), "header": header, "body": body, "notes": notes}
            if name == "scores":
                entry["cells"] = _score_cells(data, header, body)
            out_tables.append(entry)
    judged = judged_cells(data.run_dir)
    if judged:
        header, body = judged_table(judged)
        out_tables.append({"name": "judged", "title": "Judged evaluation (x 100, 95% intervals)", "header": header,
                           "body": body, "notes": []})
    if curve:
        from experiments.report.curve import curve_table

        header, body = curve_table(curve, analysis.saturation)
        out_tables.append({"name": "curve", "title": "Open-domain curve: retriever recall@k and reader accuracy@k "
                           "(◀ marks the saturation k)", "header": header, "body": body, "notes": []})
    if against is not None:
        from experiments.report.compare import compare_runs

        header, body, notes = compare_runs(data.run_dir, against.run_dir)
        out_tables.append({"name": "compare", "title": f"Against {against.run_dir.name} (B - A)", "header": header,
                           "body": body, "notes": notes})
    from experiments.report.summary import summary_lines

    return {"tables": out_tables, "plots": _plots(data, analysis, plot_paths), "manifest": run_files(data.run_dir),
            "summary": summary_lines(data, analysis)}


def build_view(run: str | Path | RunData, *, against: str | Path | None = None, plot_paths: Sequence[Path] | None = None,
               contexts: ContextLoader | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the overview block, the other blocks by element id) of a run's view; ``contexts`` loads the examples
    (their original contexts), which the report room cannot do itself: it never reads a run's config.
    ``run``: a run directory or its records already loaded."""
    data = run if isinstance(run, RunData) else load_run(run)
    other = load_run(against) if against is not None else None
    sides = [RunSide.load(data, "", 0)]
    if other is not None:
        sides.append(RunSide.load(other, "B", len(data.cells)))
    cells: list[Cell] = list(data.cells) + (list(other.cells) if other else [])
    cell_json = []
    for side in sides:
        counts = flip_counts(side.data)
        cell_json += [_cell_json(c, side.label, counts.get((c.task, c.config_hash), {})) for c in side.data.cells]
    tasks, blocks, _ = task_blocks(sides, cells, contexts)
    meta = {"run": data.run_dir.name, "path": str(data.run_dir), "against": other.run_dir.name if other else None,
            "generated": time.strftime("%Y-%m-%d %H:%M:%S"), "cells": cell_json, "tasks": tasks,
            "failures": failures_by_reason(sides[0]), "right": 0.5,
            "n_predictions": len(data.predictions), **overview(data, plot_paths, other)}
    return meta, blocks


def render_html(meta: dict[str, Any], blocks: dict[str, Any]) -> str:
    """The page: template, style and script from ``assets/``, the data blocks after them."""
    template = (ASSETS / "view.html").read_text(encoding="utf-8")
    css = (ASSETS / "view.css").read_text(encoding="utf-8")
    js = "\n".join((ASSETS / name).read_text(encoding="utf-8") for name in SCRIPTS)
    if "</script" in js.lower() or "</style" in css.lower():
        raise ValueError("assets: the script or style closes its own element")
    script_hash = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")
    data = [f'<script type="application/json" id="meta">{embed_json(meta)}</script>']
    data += [f'<script type="application/json" id="{html.escape(k)}">{embed_json(v)}</script>' for k, v in blocks.items()]
    parts = {"TITLE": html.escape(f"ctxcomp view: {meta['run']}"), "CSS": css, "JS": js,
             "SCRIPT_HASH": script_hash, "DATA": "\n".join(data)}
    # one pass over the template: what is put in (the run's text included) is never searched for markers
    return re.sub(r"\{\{([A-Z_]+)\}\}", lambda m: parts[m.group(1)], template)


def view_file(against: str | Path | None = None) -> str:
    """The page's name in the run directory: ``view.html``, or beside it ``view-against-OTHER.html`` for a page
    compared with run OTHER, so a comparison never overwrites the run's own page."""
    return VIEW_FILE if against is None else f"view-against-{safe_name(Path(against).resolve().name)}.html"


def write_view(run: str | Path | RunData, *, against: str | Path | None = None, plot_paths: Sequence[Path] | None = None,
               out: str | Path | None = None, contexts: ContextLoader | None = None) -> Path:
    """Write ``RUN_DIR/view.html`` (``view-against-OTHER.html`` with ``against``; or ``out``) and return its
    path; ``run`` as for ``build_view``."""
    meta, blocks = build_view(run, against=against, plot_paths=plot_paths, contexts=contexts)
    folder = run.run_dir if isinstance(run, RunData) else Path(run)
    target = Path(out) if out is not None else folder / view_file(against)
    write_atomic(target, render_html(meta, blocks))
    return target


__all__ = ["VIEW_FILE", "build_view", "embed_json", "render_html", "view_file", "write_view"]

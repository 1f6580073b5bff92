"""Report tables: LongBench Table 4/5 layout with deltas vs full context, efficiency per task, breakdowns.

Rows follow the config (reader, then compressor, as the grid lists them);
every column header names its task's metric.
"""
from __future__ import annotations

import csv
import html
import io
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence

from experiments.data.records import split_swept_id
from experiments.report.cells import Cell, Table, format_n, merged_scores, paired_vs, pos_order
from experiments.report.lengths import length_items, length_label, length_tables
from experiments.report.stats import MIN_PAIRS, PairedDelta, format_delta, format_p
from experiments.scoring.registry import LONGBENCH_E_BUCKETS


def _fmt(score: float, paired: PairedDelta | None = None, delta: float | None = None) -> str:
    """``34.38`` for a baseline; ``34.38 (-6.24 [-18.75, +6.25])`` with the paired delta and its 95% interval,
    a star when the interval excludes 0; below ``MIN_PAIRS`` pairs only the paired delta and its n
    (``34.38 (-6.24, n=3)``); ``delta`` (unpaired) only where no example was paired."""
    if score != score:  # NaN: every example of the cell failed
        return "—"
    if paired is not None and paired.n >= MIN_PAIRS:
        return f"{score:.2f} ({format_delta(paired)})"
    if paired is not None and paired.n:
        return f"{score:.2f} ({paired.delta:+.2f}, n={format_n(paired.n, paired.clusters)})"
    if delta is None:
        return f"{score:.2f}"
    return f"{score:.2f} ({delta:+.2f})"


def rows_in_order(cells: Sequence[Cell]) -> list[tuple[str, str]]:
    """(reader, compressor) pairs in config order."""
    first: dict[tuple[str, str], tuple[int, int]] = {}
    for c in cells:
        key = (c.reader, c.compressor)
        first[key] = min(first.get(key, c.order), c.order)
    return sorted(first, key=lambda k: first[k])


def task_columns(cells: Sequence[Cell]) -> list[str]:
    """Tasks in config order."""
    first: dict[str, int] = {}
    for c in cells:
        first[c.task] = min(first.get(c.task, c.order[1]), c.order[1])
    return sorted(first, key=lambda t: first[t])


def score_table(cells: Sequence[Cell], items: dict[tuple[str, str], dict[str, float]] | None = None) -> Table:
    """One row per reader x compressor, one column per task (headed with its metric), category averages, and n.

    A compressed cell shows its paired delta vs full context with the 95%
    interval; an average's delta is paired on (task, example) with each task
    weighted equally, as the average itself (needs ``items``).  An average
    covers the tasks its row has a score on; where that is not every task of
    its columns, it names the tasks it leaves out (``(over 1 task; no score on
    t2)``).  The last column is n: each task's examples, with their documents
    where examples share them (``12 (4 docs)``), one per task in column order
    when the tasks differ.
    """
    tasks = task_columns(cells)
    metric_of = {c.task: c.metric for c in cells if c.metric}
    averages = _averages(cells, tasks)
    header = ["reader", "compressor", *(f"{t} ({metric_of[t]})" if t in metric_of else t for t in tasks),
              *averages, "n" if len(tasks) == 1 else "n (per task)"]
    full_labels = {c.compressor for c in cells if c.is_full}
    full_avgs: dict[tuple[str, str], tuple[float, set[str]]] = {}  # (reader, column) -> full's average, its tasks
    body = []
    for reader, comp in rows_in_order(cells):
        mine = {c.task: c for c in cells if c.reader == reader and c.compressor == comp}
        row = [reader, comp]
        for t in tasks:
            c = mine.get(t)
            row.append(_fmt(c.score, c.paired or _bare(c), c.delta_vs_full) + cut_mark(c) if c else "")
        for column, columns in averages.items():
            group = [mine[t] for t in columns if t in mine]
            scored = {c.task for c in group if c.score == c.score}
            avg = round(statistics.fmean(c.score for c in group if c.task in scored), 2) if scored else float("nan")
            missing = [t for t in columns if t not in scored]
            mark = f" (over {len(scored)} task{'' if len(scored) == 1 else 's'}; no score on {', '.join(missing)})" \
                if scored and missing else ""
            if not group:
                row.append("")
            elif comp in full_labels:
                full_avgs[(reader, column)] = (avg, scored)
                row.append(_fmt(avg) + mark)
            else:
                base = full_avgs.get((reader, column))
                # a grown run's cells show confidence sequences: an average has none, so it shows no interval
                sequence = any(c.sequence for c in group)
                paired = _paired_average(group, cells, items) if items and base is not None and not sequence else None
                # unpaired, the difference means something only where both rows average the same tasks
                delta = round(avg - base[0], 2) if base is not None and paired is None and base[1] == scored else None
                mark += " (no interval: the looks give none for an average)" if sequence else ""
                row.append(_fmt(avg, paired, delta) + mark)
        ns = [format_n(mine[t].n, mine[t].n_clusters) if t in mine else "—" for t in tasks]
        body.append([*row, ns[0] if len(set(ns)) == 1 else " / ".join(ns)])
    return header, body


def _averages(cells: Sequence[Cell], tasks: Sequence[str]) -> dict[str, list[str]]:
    """The average columns, each with the tasks it averages: a category's, where it averages more than one task
    and not every task (then it would repeat ``avg``), and ``avg`` over every task, where there are several."""
    if len(tasks) < 2:
        return {}
    by_category: dict[str, list[str]] = defaultdict(list)
    for t in tasks:
        by_category[next(c.category for c in cells if c.task == t)].append(t)
    out = {f"avg {cat}": ts for cat, ts in by_category.items() if 1 < len(ts) < len(tasks)}
    return {**out, "avg": list(tasks)}


def cut_mark(c: Cell) -> str:
    """`` [reader cut 60%]`` after a score when the reader's own window cut some of the cell's prompts."""
    return f" [reader cut {c.reader_cut_pct:.0f}%]" if c.reader_cut_pct > 0 else ""


def _bare(c: Cell) -> PairedDelta | None:
    nan = float("nan")
    return (PairedDelta(c.delta_paired, nan, nan, nan, c.n_paired, c.clusters_paired)
            if c.delta_paired is not None else None)


def _paired_average(group: Sequence[Cell], cells: Sequence[Cell],
                    items: dict[tuple[str, str], dict[str, float]]) -> PairedDelta | None:
    """The delta of an average over tasks vs full context, paired on (task, example), stratified by task."""
    pairs = []
    for c in group:
        full = next((f for f in cells if f.is_full and f.task == c.task and f.reader == c.reader), None)
        if full is None:
            return None
        pairs.append((full, c))
    return paired_over_tasks(pairs, items)


def paired_over_tasks(pairs: Sequence[tuple[Cell, Cell]],
                      items: dict[tuple[str, str], dict[str, float]]) -> PairedDelta | None:
    """``other - base`` averaged over tasks (each weighted equally), paired on (task, example) and resampled
    within each task; ``pairs`` holds one (base, other) cell pair per task."""
    base, strata = merged_scores([(b.task, items.get((b.task, b.config_hash), {})) for b, _ in pairs])
    other, _ = merged_scores([(o.task, items.get((o.task, o.config_hash), {})) for _, o in pairs])
    return paired_vs(base, other, strata) if set(base) & set(other) else None


def contrast_table(cells: Sequence[Cell], items: dict[tuple[str, str], dict[str, float]],
                   contrasts: Sequence[dict[str, str]]) -> tuple[Table, list[str]]:
    """Planned contrasts: ``arm - against`` per reader, on each task both rows scored and on their average,
    paired on the example, with 95% intervals; and a note for each contrast naming a row that is not there."""
    tasks = task_columns(cells)
    header = ["reader", "contrast", *tasks, "avg", "p (avg)", "tasks", "n"]
    labels = sorted({c.compressor for c in cells})
    body, notes = [], []
    for con in contrasts:
        arm, against = con["arm"], con["against"]
        missing = [label for label in (arm, against) if label not in labels]
        if missing:
            notes.append(f"contrast {arm!r} - {against!r}: no row labelled {', '.join(map(repr, missing))} "
                         f"(rows: {', '.join(labels)})")
            continue
        for reader in dict.fromkeys(c.reader for c in cells):
            cell = {(c.compressor, c.task): c for c in cells if c.reader == reader}
            pairs = [(cell[(against, t)], cell[(arm, t)]) for t in tasks if (arm, t) in cell and (against, t) in cell]
            per_task = {b.task: pd for b, o in pairs if (pd := paired_over_tasks([(b, o)], items)) is not None}
            pairs = [p for p in pairs if p[0].task in per_task]  # a task whose examples all failed has no pairs
            if not pairs:
                continue
            avg = paired_over_tasks(pairs, items) if len(pairs) > 1 else None
            overall = avg if avg is not None else per_task[pairs[0][0].task]
            row = [reader, f"{arm} - {against}", *(_fmt_delta(per_task.get(t)) for t in tasks), _fmt_delta(avg),
                   format_p(overall), str(len(pairs)),
                   format_n(sum(pd.n for pd in per_task.values()), sum(pd.clusters for pd in per_task.values()))]
            body.append(row)
    keep = [i for i in range(len(header)) if not 2 <= i < 2 + len(tasks) or any(row[i] for row in body)]
    return ([header[i] for i in keep], [[row[i] for i in keep] for row in body]), notes


def _fmt_delta(pd: PairedDelta | None) -> str:
    if pd is None or pd.n == 0:
        return ""
    return format_delta(pd) if pd.n >= MIN_PAIRS else f"{pd.delta:+.2f} (n={pd.n})"


def efficiency_table(cells: Sequence[Cell]) -> Table:
    """One row per task and configuration: compression ratio, tokens, the share of examples the reader's own
    window cut and the context tokens it saw, cost, latency."""
    header = [
        "task", "reader", "compressor", "config", "n", "failed", "ratio (in/out)", "ctx tokens in", "ctx tokens out",
        "reader cut %", "ctx tokens seen", "answer in ctx %", "reader tokens in", "reader tokens out", "cost $",
        "latency s", "compress s", "cache hits",
    ]
    body = []
    for c in sorted(cells, key=lambda c: (c.order[1], c.order[0])):
        body.append([
            c.task, c.reader, c.compressor, c.config_hash, format_n(c.n, c.n_clusters), str(c.n_failed),
            f"{c.tokens_in / c.tokens_out:.2f}" if c.tokens_out else "—", f"{c.tokens_in:.0f}", f"{c.tokens_out:.0f}",
            f"{c.reader_cut_pct:.0f}", f"{c.tokens_seen:.0f}", "" if c.answer_in_context is None else f"{c.answer_in_context:.1f}",
            f"{c.reader_tokens_in:.0f}", f"{c.reader_tokens_out:.1f}", f"{c.cost_usd:.4f}", f"{c.latency_s:.3f}",
            f"{c.compress_s:.3f}", str(c.cache_hits),
        ])
    return header, body


def breakdown_table(cells: Sequence[Cell], attr: str) -> Table:
    """Scores by length bucket (``buckets``) or by gold/key position (``by_position``)."""
    keys: list[str] = []
    for c in cells:
        for k in getattr(c, attr):
            if k not in keys:
                keys.append(k)
    if attr == "by_position":
        keys.sort(key=pos_order)
    elif set(keys) <= set(LONGBENCH_E_BUCKETS):
        keys = [b for b in LONGBENCH_E_BUCKETS if b in keys]
    header = ["task", "reader", "compressor", *keys]

    def value(c: Cell, k: str) -> str:
        if k not in getattr(c, attr):
            return ""
        ci = c.by_position_ci.get(k) if attr == "by_position" else None
        return f"{getattr(c, attr)[k]:.2f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")

    body = [[c.task, c.reader, c.compressor, *(value(c, k) for k in keys)] for c in cells if getattr(c, attr)]
    return header, body


def position_contrasts(cells: Sequence[Cell], items: dict[tuple[str, str], dict[str, float]]) -> Table:
    """First and last position against the middle one, paired on the question (each question is asked
    at every position of a sweep), with 95% intervals: what a U-shape or a recency bias needs to show."""
    header = ["task", "reader", "compressor", "positions", "first - middle", "p (first)", "last - middle", "p (last)",
              "n"]
    body = []
    for c in cells:
        positions = sorted((int(k) for k in c.by_position if k.lstrip("-").isdigit()))
        if len(positions) < 3:
            continue
        by_pos: dict[int, dict[str, float]] = {}
        for ex_id, score in items.get((c.task, c.config_hash), {}).items():
            if (swept := split_swept_id(ex_id)) is not None:
                question, position = swept
                by_pos.setdefault(position, {})[question] = score
        first, middle, last = positions[0], positions[len(positions) // 2], positions[-1]
        a = paired_vs(by_pos.get(middle, {}), by_pos.get(first, {}))
        b = paired_vs(by_pos.get(middle, {}), by_pos.get(last, {}))
        if min(a.n, b.n) == 0:  # positions spread over different questions (no sweep): nothing to pair
            continue
        body.append([c.task, c.reader, c.compressor, f"{first} / {middle} / {last}",
                     format_delta(a) or f"{a.delta:+.2f}", format_p(a), format_delta(b) or f"{b.delta:+.2f}",
                     format_p(b), format_n(*min((a.n, a.clusters), (b.n, b.clusters)))])
    return header, body


# what Markdown would read as HTML: a tag (or comment, declaration) and a character reference; nothing else of
# ``<``, ``>`` and ``&`` needs escaping, so ``<=512 tokens`` reads as it is written, in a terminal too
_HTML_LIKE = re.compile(r"<[A-Za-z/!?][^<>]*>?|&(?:#\d+|#x[0-9A-Fa-f]+|\w+);")


def markdown_cell(text: str) -> str:
    """A label as table text: ``|`` cannot split the row, a tag or character reference stays text (``<b>`` is
    shown, not applied), ``<=`` stays ``<=``, a newline stays in its cell."""
    text = _HTML_LIKE.sub(lambda m: html.escape(m.group(), quote=False), str(text))
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", "<br>")


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(map(markdown_cell, header)) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(map(markdown_cell, row)) + " |" for row in body]
    return "\n".join(lines)


def csv_text(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(body)
    return buf.getvalue()


# LaTeX's special characters and what stands for each in text (one pass, so an escape is never escaped again)
_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_LATEX_SPECIAL = re.compile("|".join(map(re.escape, _LATEX)))
_NUMBER_FIRST = re.compile(r"^\s*[+\-\u2212]?(\d|\.\d|nan|inf)", re.I)


def latex_cell(text: str) -> str:
    """A cell as LaTeX text: ``_ % & # $ { } ~ ^ \\`` escaped, a line break a space (a table cell is one line)."""
    return _LATEX_SPECIAL.sub(lambda m: _LATEX[m.group()], str(text)).replace("\r", " ").replace("\n", " ")


def latex_table(header: Sequence[str], body: Sequence[Sequence[str]], *, caption: str = "", label: str = "") -> str:
    """A table for a paper: booktabs rules (``\\usepackage{booktabs}``), the same rows and cells as its CSV, columns
    whose every cell starts with a number set right.  Cells keep their Unicode (Δ, ≤, —): XeLaTeX and LuaLaTeX
    set it as it is; pdfLaTeX needs ``\\usepackage[utf8]{inputenc}`` and a font with those glyphs."""
    columns = "".join("r" if body and all(_NUMBER_FIRST.match(str(row[i])) for row in body if i < len(row)) else "l"
                      for i in range(len(header)))
    lines = ["% written by ctxcomp report; needs \\usepackage{booktabs}", "\\begin{table}[t]", "\\centering"]
    lines += [f"\\caption{{{latex_cell(caption)}}}"] if caption else []
    lines += [f"\\label{{tab:{re.sub(r'[^A-Za-z0-9:-]', '-', label)}}}"] if label else []
    lines += [f"\\begin{{tabular}}{{{columns}}}", "\\toprule", " & ".join(map(latex_cell, header)) + " \\\\",
              "\\midrule"]
    lines += [" & ".join(map(latex_cell, row)) + " \\\\" for row in body]
    lines += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(lines) + "\n"


__all__ = ["Table", "breakdown_table", "contrast_table", "csv_text", "cut_mark", "efficiency_table", "latex_cell",
           "latex_table", "length_items", "length_label", "length_tables", "markdown_cell",
           "markdown_table",
           "paired_over_tasks", "position_contrasts", "rows_in_order", "score_table", "task_columns"]

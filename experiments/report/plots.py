"""Paper-ready figures: each function writes ``<path>.png`` and ``<path>.svg`` and returns both paths.

Figures are sized for a paper column (3.4 in) or page (6.8 in) with fonts of
at least 8 pt.  matplotlib is imported, and the Agg backend chosen, inside the
functions, so importing this module neither costs time nor changes a user's
backend.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

COLUMN_IN = 3.4
PAGE_IN = 6.8
_STYLE = {
    "font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "legend.fontsize": 7,
    "xtick.labelsize": 8, "ytick.labelsize": 8, "savefig.dpi": 200,
}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


@functools.lru_cache(maxsize=1)
def cjk_family() -> str | None:
    """The family name of the CJK font (Noto Sans CJK, from the ``noto-cjk-sans-jp-regular`` package: every
    Chinese, Japanese and Korean glyph), registered with matplotlib once; None when the package is absent."""
    try:
        from noto_cjk_sans_jp_regular import FONT_PATH
    except ImportError:
        return None
    from matplotlib import font_manager

    font_manager.fontManager.addfont(str(FONT_PATH))
    return font_manager.FontProperties(fname=str(FONT_PATH)).get_name()


def _style() -> dict[str, Any]:
    """The figures' style; the CJK font follows the default sans-serif, so matplotlib draws a character with it
    only where the first font has no glyph (a task or arm named in Chinese, as LongBench's Chinese tasks may be)."""
    family = cjk_family()
    return {**_STYLE, "font.family": ["sans-serif", family]} if family else _STYLE


def _save(fig, path: str | Path) -> list[Path]:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix in (".png", ".svg"):
        target = path.with_suffix(suffix)
        fig.savefig(target, bbox_inches="tight")
        written.append(target)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return written


def plot_curve(rows: Iterable[Any], path: str | Path, *, saturation: Mapping[str, int] | None = None,
               title: str = "Open-domain QA: recall vs reader accuracy") -> list[Path]:
    """Retriever recall@k (dashed) and each reader's accuracy@k (solid) against k, in percent, with 95% bands.

    ``rows`` are ``experiments.report.curve.CurveRow``; points without a value
    are left out.  A ring marks each reader's saturation k.
    """
    plt = _pyplot()
    rows = [r for r in rows if r.accuracy is not None]
    recall: dict[int, Any] = {}
    for r in rows:  # recall does not depend on the reader: take the row that scored the most questions
        if r.recall is not None and (r.k not in recall or r.n > recall[r.k].n):
            recall[r.k] = r
    readers: dict[str, list[Any]] = {}
    for r in rows:
        readers.setdefault(r.reader, []).append(r)
    with plt.rc_context(_style()):
        fig, ax = plt.subplots(figsize=(COLUMN_IN, 2.6 + 0.16 * (len(readers) + 1)), layout="constrained")
        ks = sorted(recall)
        if ks:
            ax.plot(ks, [recall[k].recall for k in ks], "k--", marker="s", markersize=3, label="retriever recall@k")
            ax.fill_between(ks, [recall[k].recall_ci[0] for k in ks], [recall[k].recall_ci[1] for k in ks],
                            color="black", alpha=0.08, linewidth=0)
        for name, points in readers.items():
            points = sorted(points, key=lambda r: r.k)
            xs = [r.k for r in points]
            line, = ax.plot(xs, [r.accuracy for r in points], marker="o", markersize=3, label=f"{name} accuracy")
            ax.fill_between(xs, [r.accuracy_ci[0] for r in points], [r.accuracy_ci[1] for r in points],
                            color=line.get_color(), alpha=0.15, linewidth=0)
            k_sat = (saturation or {}).get(name)
            if k_sat is not None:
                y = next(r.accuracy for r in points if r.k == k_sat)
                ax.plot([k_sat], [y], marker="o", markersize=9, markerfacecolor="none", color=line.get_color(),
                        linestyle="none", label=f"{name} saturates (k={k_sat})")
        all_ks = sorted({r.k for r in rows} | set(ks))
        ax.set_xscale("log")  # ks are spread geometrically (1, 2, 5, 10, 20, 50)
        ax.set_xticks(all_ks, [str(k) for k in all_ks])
        ax.minorticks_off()
        ax.set_xlabel("k (retrieved passages)")
        ax.set_ylabel("recall / accuracy (%)")
        ax.set_ylim(0, 100)
        ax.set_title(_fit(title, 90))
        ax.grid(alpha=0.3)
        fig.legend(loc="outside lower center", ncol=1, frameon=False)
        return _save(fig, path)


def plot_position(
    acc_by_position: Mapping[str, Mapping[int, float]],
    path: str | Path,
    *,
    closed_book: Mapping[str, float] | None = None,
    oracle: Mapping[str, float] | None = None,
    intervals: Mapping[str, Mapping[int, tuple[float, float]]] | None = None,
    title: str = "Accuracy by gold document position",
) -> list[Path]:
    """Accuracy against 0-based gold position (the U-shape), closed-book and oracle as horizontal lines.

    Values are fractions in [0, 1]; they are drawn in percent, positions 1-based as in the paper.
    ``intervals`` (fractions too) become error bars: the 95% interval of each point.
    """
    plt = _pyplot()
    entries = len(acc_by_position) + len(closed_book or {}) + len(oracle or {})
    with plt.rc_context(_style()):
        # the legend sits under the axes, one entry a line; the figure grows with it so the axes keep their size
        fig, ax = plt.subplots(figsize=(COLUMN_IN, 2.6 + 0.16 * entries), layout="constrained")
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, (name, by_pos) in enumerate(acc_by_position.items()):
            color = colors[i % len(colors)]
            xs = sorted(by_pos)
            ax.plot([x + 1 for x in xs], [100 * by_pos[x] for x in xs], marker="o", markersize=3,
                    color=color, label=_fit(name))
            ci = (intervals or {}).get(name)
            if ci:
                xs_ci = [x for x in xs if x in ci]
                lows = [100 * (by_pos[x] - ci[x][0]) for x in xs_ci]
                highs = [100 * (ci[x][1] - by_pos[x]) for x in xs_ci]
                # the bars of several readers are dodged sideways so they never hide one another
                dodge = (i - (len(acc_by_position) - 1) / 2) * 0.012 * (max(xs) - min(xs) + 1)
                ax.errorbar([x + 1 + dodge for x in xs_ci], [100 * by_pos[x] for x in xs_ci], yerr=[lows, highs],
                            fmt="none", ecolor=color, elinewidth=0.8, capsize=2)
            if closed_book and name in closed_book:
                ax.axhline(100 * closed_book[name], color=color, linestyle=":", linewidth=1,
                           label=f"{_fit(name)} closed-book")
            if oracle and name in oracle:
                ax.axhline(100 * oracle[name], color=color, linestyle="--", linewidth=1, label=f"{_fit(name)} oracle")
        positions = sorted({x for by_pos in acc_by_position.values() for x in by_pos})
        ax.set_xticks([x + 1 for x in positions])
        ax.set_xlabel("position of the document with the answer")
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(-2, 102)  # a fixed scale, so U-shapes of different readers and runs compare by eye
        ax.set_title(_fit(title, 90))
        ax.grid(alpha=0.3)
        fig.legend(loc="outside lower center", ncol=1, frameon=False)
        return _save(fig, path)


def _fit(label: str, width: int = 40) -> str:
    """A label that leaves the axes room: a long one keeps its start and end around an ellipsis; a control
    character (a NUL, a tab) is shown escaped, as no font draws it."""
    label = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in label)
    return label if len(label) <= width else f"{label[: width // 2 - 1]}…{label[-(width // 2 - 1):]}"


def _two_lines(name: str, columns: int) -> str:
    """A panel title that fits its column: a long name breaks at the underscore nearest its middle."""
    name = _fit(name)
    if len(name) * columns <= 60 or "_" not in name:
        return name
    cut = min((i for i, ch in enumerate(name) if ch == "_"), key=lambda i: abs(i - len(name) / 2))
    return name[: cut + 1] + "\n" + name[cut + 1:]


def plot_delta_forest(deltas: Mapping[str, Mapping[str, Mapping[str, float]]], path: str | Path,
                      intervals: Mapping[str, Mapping[str, Mapping[str, tuple[float, float]]]] | None = None) -> list[Path]:
    """A forest plot of the change against full context: one panel per reader (rows) and task (columns),
    one line per compressor, the paired 95% interval as a bar; a filled dot when the interval excludes 0.

    ``deltas[reader][compressor][task]`` is in score points; ``intervals`` alike.  A compressor with no
    value on a task (not run, or every example failed) is written "n/a" in that panel.
    """
    plt = _pyplot()
    readers = list(deltas)
    arms: list[str] = []
    tasks: list[str] = []
    for by_arm in deltas.values():
        arms.extend(a for a in by_arm if a not in arms)
        for by_task in by_arm.values():
            tasks.extend(t for t in by_task if t not in tasks)
    intervals = intervals or {}
    with plt.rc_context(_style()):
        height = 0.5 + len(readers) * (0.35 + 0.17 * len(arms))
        fig, axes = plt.subplots(len(readers), len(tasks), figsize=(PAGE_IN, height), sharey=True, sharex="col",
                                 squeeze=False, layout="constrained")
        ys = list(range(len(arms)))[::-1]  # the config's first compressor at the top
        for r, reader in enumerate(readers):
            for t, task in enumerate(tasks):
                ax = axes[r][t]
                ax.axvline(0, color="black", linewidth=0.8)
                for arm, y in zip(arms, ys):
                    value = deltas[reader].get(arm, {}).get(task, float("nan"))
                    if value != value:
                        ax.annotate("n/a", (0, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=6,
                                    color="0.4")
                        continue
                    ci = intervals.get(reader, {}).get(arm, {}).get(task)
                    solid = ci is not None and (ci[0] > 0 or ci[1] < 0)
                    if ci is not None:
                        ax.plot([ci[0], ci[1]], [y, y], color="C0", linewidth=1.2)
                    ax.plot([value], [y], "o", color="C0", markersize=3.5, markerfacecolor="C0" if solid else "white")
                ax.set_yticks(ys, [_fit(a) for a in arms])
                ax.set_ylim(-0.7, len(arms) - 0.3)
                ax.grid(axis="x", alpha=0.3)
                if r == 0:
                    ax.set_title(_two_lines(task, len(tasks)))
                if t == 0:
                    ax.set_ylabel(_fit(reader))
        fig.supxlabel("Δ score vs full context (points); bar: paired 95% interval, filled: excludes 0")
        return _save(fig, path)


def plot_length_buckets(scores: Mapping[str, Mapping[str, float]], path: str | Path) -> list[Path]:
    """Score per input-length bucket (``scores[config][bucket]``, in score points), one line per config."""
    plt = _pyplot()
    with plt.rc_context(_style()):
        fig, ax = plt.subplots(figsize=(COLUMN_IN, 2.6), layout="constrained")
        buckets: list[str] = []
        for values in scores.values():
            buckets.extend(b for b in values if b not in buckets)
        if all(b.isdigit() for b in buckets):  # token lengths: in increasing order, not as met
            buckets.sort(key=int)
        for config, values in scores.items():
            ax.plot(range(len(buckets)), [values.get(b, float("nan")) for b in buckets], marker="o",
                    markersize=3, label=_fit(config))
        ax.set_xticks(range(len(buckets)), buckets)
        ax.set_xlabel("input length bucket")
        ax.set_ylabel("score")
        ax.set_title("Score by input length")
        ax.grid(alpha=0.3)
        fig.legend(loc="outside lower center", ncol=1, frameon=False)  # below the axes: many lines never cover them
        return _save(fig, path)


# Colours and markers follow the compressor's name (and a retrieval line's retriever and order), never a config hash,
# so a line looks the same in every run and every figure.
KIND_STYLE = {"full": ("black", "*"), "truncate": ("#7f7f7f", "x"), "summarize": ("#2ca02c", "^"),
              "llmlingua": ("#d62728", "D"), "top_k": ("#9467bd", "v"), "retrieval": ("#1f77b4", "o")}
RETRIEVER_COLOURS = {"bm25": "#1f77b4", "minilm": "#ff7f0e", "contriever": "#8c564b", "mcontriever": "#8c564b",
                     "contriever_msmarco": "#c49c94", "openai": "#e377c2", "hybrid": "#17becf", "rerank": "#bcbd22"}
ORDER_STYLES = {"score": "-", "document": "--"}
_OTHER = ("#17becf", "#bcbd22", "#e377c2", "#8c564b", "#ff7f0e", "#9edae5")


def line_style(kind: str, retriever: str = "", order: str = "") -> tuple[str, str, str]:
    """(colour, marker, line style) of a compressor line: fixed by its kind's name, a retrieval line's colour by
    its retriever and its line style by its order; a name not in the tables gets a colour fixed by its letters."""
    import zlib

    colour, marker = KIND_STYLE.get(kind, (_OTHER[zlib.crc32(kind.encode()) % len(_OTHER)], "P"))
    if kind == "retrieval" and retriever:
        colour = RETRIEVER_COLOURS.get(retriever, _OTHER[zlib.crc32(retriever.encode()) % len(_OTHER)])
    return colour, marker, ORDER_STYLES.get(order, "-")


def plot_tradeoff(panels: Sequence[Any], path: str | Path, *, title: str = "", margin: float | None = None) -> list[Path]:
    """Score against the context tokens the reader saw (log x), one line per compressor (retriever, order).

    ``panels`` are ``experiments.report.curve.Panel``: per task (and the task average) the points of each line,
    each ``{"x", "y", "band": (lo, hi) | None, "frontier": bool, "kind", "retriever", "order"}``, and full's
    point with its score interval.  Bands are the paired 95% intervals against full, drawn around each point's
    score; full is a hatched horizontal band (its 95% interval) with a star at its own token count; rings mark
    the Pareto frontier; with ``margin`` (points) a dashed line at full's score minus the margin is the
    non-inferiority bound.  The legend names every line and every kind of band and mark.
    """
    plt = _pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    entries: dict[str, Any] = {}
    with plt.rc_context(_style()):
        fig, axes = plt.subplots(rows, columns, figsize=(PAGE_IN, 0.6 + 2.3 * rows), squeeze=False,
                                 layout="constrained")
        for ax, panel in zip(axes.flat, panels):
            if panel.full is not None:
                lo, hi = panel.full["band"]
                ax.axhspan(lo, hi, facecolor="none", hatch="////", edgecolor="0.7", linewidth=0, zorder=0)
                ax.axhline(panel.full["y"], color="black", linewidth=0.8, linestyle=":", zorder=1)
                entries["full"] = ax.plot([panel.full["x"]], [panel.full["y"]], "*", color="black", markersize=7,
                                          zorder=3)[0]
                if margin is not None:
                    ax.axhline(panel.full["y"] - margin, color="0.35", linewidth=0.8, linestyle=(0, (5, 3)), zorder=1)
                if panel.full.get("frontier"):
                    ax.plot([panel.full["x"]], [panel.full["y"]], "o", markersize=10, markerfacecolor="none",
                            markeredgecolor="black", zorder=4)
            for line, points in panel.lines.items():
                colour, marker, style = line_style(points[0]["kind"], points[0]["retriever"], points[0]["order"])
                xs, ys = [p["x"] for p in points], [p["y"] for p in points]
                entries[line] = ax.plot(xs, ys, marker=marker, linestyle=style, color=colour, markersize=3.5,
                                        linewidth=1, zorder=2)[0]
                banded = [p for p in points if p["band"] is not None]
                if banded:
                    ax.fill_between([p["x"] for p in banded], [p["band"][0] for p in banded],
                                    [p["band"][1] for p in banded], color=colour, alpha=0.12, linewidth=0)
                ring = [p for p in points if p.get("frontier")]
                ax.plot([p["x"] for p in ring], [p["y"] for p in ring], "o", markersize=9, markerfacecolor="none",
                        markeredgecolor="black", linewidth=0, zorder=4)
            ax.set_xscale("log", base=2)  # budgets double: 256, 512, 1024, 2048
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.minorticks_off()
            ax.set_title(_fit(panel.task, 48))
            ax.grid(alpha=0.3)
        for i, ax in enumerate(axes.flat):
            if i >= len(panels):
                ax.set_visible(False)
            elif i + columns >= len(panels):  # the lowest panel of its column
                ax.set_xlabel("context tokens seen (mean, log scale)")
        fig.supylabel("score")
        if title:
            fig.suptitle(_fit(title, 110))
        names = [_fit(name, 60) for name in entries]
        handles = list(entries.values())
        if any(p.full is not None for p in panels):
            handles.append(Patch(facecolor="none", hatch="////", edgecolor="0.7", label="full: its 95% interval"))
            names.append("full: its 95% interval")
            if margin is not None:
                handles.append(Line2D([], [], color="0.35", linewidth=0.8, linestyle=(0, (5, 3))))
                names.append(f"full - margin ({margin:g} points): the non-inferiority bound")
        if any(p["band"] is not None for panel in panels for points in panel.lines.values() for p in points):
            handles.append(Patch(facecolor="0.5", alpha=0.2, linewidth=0))
            names.append("shaded: the line's paired 95% interval against full")
        if any(p.get("frontier") for panel in panels for points in panel.lines.values() for p in points) or any(
                p.full is not None and p.full.get("frontier") for p in panels):
            handles.append(Line2D([], [], marker="o", markersize=8, markerfacecolor="none", markeredgecolor="black",
                                  linestyle="none"))
            names.append("ring: on the Pareto frontier")
        fig.legend(handles, names, loc="outside lower center", ncol=2, frameon=False)
        return _save(fig, path)


def plot_score_by_length(series: Mapping[str, Mapping[str, Mapping[str, Any]]], path: str | Path) -> list[Path]:
    """The "effective length" picture: score against context length, one panel per task (columns) and reader
    (rows), one line per compressor, 95% intervals as bars; ``series[reader][task][compressor]`` is
    ``(labels, means, lows, highs)`` in score points, lengths in increasing order."""
    plt = _pyplot()
    readers = list(series)
    tasks = list(dict.fromkeys(t for by_task in series.values() for t in by_task))
    with plt.rc_context(_style()):
        fig, axes = plt.subplots(len(readers), len(tasks), figsize=(PAGE_IN, 0.8 + 1.9 * len(readers)), sharey=True,
                                 squeeze=False, layout="constrained")
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        arms = list(dict.fromkeys(a for by_task in series.values() for arms in by_task.values() for a in arms))
        legend: dict[str, Any] = {}
        for r, reader in enumerate(readers):
            for t, task in enumerate(tasks):
                ax = axes[r][t]
                for a, arm in enumerate(arms):
                    line = series[reader].get(task, {}).get(arm)
                    if line is None:
                        continue
                    labels, means, lows, highs = line
                    xs = list(range(len(labels)))
                    dodge = (a - (len(arms) - 1) / 2) * 0.06
                    errors = [[m - lo for m, lo in zip(means, lows)], [hi - m for m, hi in zip(means, highs)]]
                    drawn = ax.errorbar([x + dodge for x in xs], means, yerr=errors, marker="o", markersize=3,
                                        linewidth=1, elinewidth=0.7, capsize=1.5, color=colors[a % len(colors)])
                    legend.setdefault(arm, drawn)
                    ax.set_xticks(xs, labels)
                ax.set_ylim(-2, 102)
                ax.grid(alpha=0.3)
                if r == 0:
                    ax.set_title(_two_lines(task, len(tasks)))
                if t == 0:
                    ax.set_ylabel(f"{reader}\nscore")
                if r == len(readers) - 1:
                    ax.set_xlabel("context tokens")
        # every arm once, in full: two budgets of one retriever differ only at the end of their names
        fig.legend(list(legend.values()), [_fit(arm, 70) for arm in legend], loc="outside lower center", ncol=2,
                   frameon=False, title="bars: 95% bootstrap intervals", title_fontsize=7)
        return _save(fig, path)


__all__ = ["line_style", "plot_curve", "plot_delta_forest", "plot_length_buckets", "plot_position",
           "plot_score_by_length", "plot_tradeoff"]

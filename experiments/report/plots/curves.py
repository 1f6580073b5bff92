"""The figures of score against the amount of context: the open-domain curve (recall@k and accuracy@k against k)
and the trade-off (score against the context tokens the reader saw, a line per compressor)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from core.style import fixed_colour
from experiments.report.plots.figure import COLUMN_IN, PAGE_IN, compressor_style, fit, paper_style, pyplot, save
from retrievers.base import PLUGIN_PALETTE
from retrievers.registry import RETRIEVERS


def plot_curve(rows: Iterable[Any], path: str | Path, *, saturation: Mapping[str, int] | None = None,
               title: str = "Open-domain QA: recall vs reader accuracy") -> list[Path]:
    """Retriever recall@k (dashed) and each reader's accuracy@k (solid) against k, in percent, with 95% bands.

    ``rows`` are ``experiments.report.curve.CurveRow``; points without a value
    are left out.  A ring marks each reader's saturation k.
    """
    plt = pyplot()
    rows = [r for r in rows if r.accuracy is not None]
    recall: dict[int, Any] = {}
    for r in rows:  # recall does not depend on the reader: take the row that scored the most questions
        if r.recall is not None and (r.k not in recall or r.n > recall[r.k].n):
            recall[r.k] = r
    readers: dict[str, list[Any]] = {}
    for r in rows:
        readers.setdefault(r.reader, []).append(r)
    with plt.rc_context(paper_style()):
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
        ax.set_xticks(all_ks, tick_labels(all_ks))
        ax.minorticks_off()
        ax.set_xlabel("k (retrieved passages)")
        ax.set_ylabel("recall / accuracy (%)")
        ax.set_ylim(0, 100)
        ax.set_title(fit(title, 90))
        ax.grid(alpha=0.3)
        fig.legend(loc="outside lower center", ncol=1, frameon=False)
        return save(fig, path)


def tick_labels(ks: Sequence[int], *, ratio: float = 1.3) -> list[str]:
    """A label for each k on a log axis, left blank where it would run into its neighbour (30, 40, 50 sit
    closer than the labels are wide); the smallest and the largest k are always labelled."""
    labels = ["" for _ in ks]
    last = None
    for i, k in enumerate(ks):
        if last is None or k >= last * ratio:
            labels[i], last = str(k), k
    if ks and not labels[-1]:
        kept = [i for i, text in enumerate(labels) if text]
        if len(kept) > 1 and ks[-1] < ks[kept[-1]] * ratio:
            labels[kept[-1]] = ""
        labels[-1] = str(ks[-1])
    return labels


# A line's colour and marker come from its compressor's class (``Compressor.style``), a line that names a retriever
# takes its retriever's class colour (``Retriever.colour``) and its order's line style, never a config hash: a line
# looks the same in every run and every figure, a plugin's as a built-in's.
ORDER_STYLES = {"score": "-", "document": "--"}


def line_style(kind: str, retriever: str = "", order: str = "") -> tuple[str, str, str]:
    """(colour, marker, line style) of a compressor line: its compressor's colour and marker, the colour of the
    retriever it names if it names one, and the line style of its order."""
    colour, marker = compressor_style(kind)
    return (retriever_colour(retriever) if retriever else colour), marker, ORDER_STYLES.get(order, "-")


def retriever_colour(name: str) -> str:
    """The colour of the retriever a config names (a short name or an import path): its class's; a plugin that
    cannot be imported on this machine gets a plugin colour fixed by the name, so its report still draws."""
    try:
        cls = RETRIEVERS.get(name)
    except Exception:  # noqa: BLE001 - a plugin that fails to import: the plot goes on without its class
        return fixed_colour(name, PLUGIN_PALETTE)
    return cls.colour()


def plot_tradeoff(panels: Sequence[Any], path: str | Path, *, title: str = "", margin: float | None = None) -> list[Path]:
    """Score against the context tokens the reader saw (log x), one line per compressor (retriever, order).

    ``panels`` are ``experiments.report.tradeoff.frontier.Panel``: per task (and the task average) the points of each line,
    each ``{"x", "y", "band": (lo, hi) | None, "frontier": bool, "kind", "retriever", "order"}``, and full's
    point with its score interval.  Bands are the paired 95% intervals against full, drawn around each point's
    score; full is a hatched horizontal band (its 95% interval) with a star at its own token count; rings mark
    the Pareto frontier; with ``margin`` (points) a dashed line at full's score minus the margin is the
    non-inferiority bound.  The legend names every line and every kind of band and mark.
    """
    plt = pyplot()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    entries: dict[str, Any] = {}
    with plt.rc_context(paper_style()):
        fig, axes = plt.subplots(rows, columns, figsize=(PAGE_IN, 0.6 + 2.3 * rows), squeeze=False,
                                 layout="constrained")
        for ax, panel in zip(axes.flat, panels):
            if panel.full is not None:
                lo, hi = panel.full["band"]
                ax.axhspan(lo, hi, facecolor="none", hatch="////", edgecolor="0.7", linewidth=0, zorder=0)
                ax.axhline(panel.full["y"], color="black", linewidth=0.8, linestyle=":", zorder=1)
                colour, marker = compressor_style(panel.full["kind"])
                entries[panel.full["line"]] = ax.plot([panel.full["x"]], [panel.full["y"]], marker, color=colour,
                                                      markersize=7, zorder=3)[0]
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
            ax.set_title(fit(panel.task, 48))
            ax.grid(alpha=0.3)
        for i, ax in enumerate(axes.flat):
            if i >= len(panels):
                ax.set_visible(False)
            elif i + columns >= len(panels):  # the lowest panel of its column
                ax.set_xlabel("context tokens seen (mean, log scale)")
        fig.supylabel("score")
        if title:
            fig.suptitle(fit(title, 110))
        names = [fit(name, 60) for name in entries]
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
        return save(fig, path)

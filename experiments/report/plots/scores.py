"""The figures of scores: accuracy by gold position, the forest of deltas against full, score by length bucket, and
score by context length with intervals."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from experiments.report.plots.figure import COLUMN_IN, PAGE_IN, Style, fit, paper_style, pyplot, save, two_lines


def plot_position(
    acc_by_position: Mapping[str, Mapping[int, float]],
    path: str | Path,
    *,
    closed_book: Mapping[str, float] | None = None,
    oracle: Mapping[str, float] | None = None,
    intervals: Mapping[str, Mapping[int, tuple[float, float]]] | None = None,
    title: str = "Accuracy by gold document position",
    styles: Mapping[str, Style] | None = None,
) -> list[Path]:
    """Accuracy against 0-based gold position (the U-shape), closed-book and oracle as horizontal lines.

    Values are fractions in [0, 1]; they are drawn in percent, positions 1-based as in the paper.
    ``intervals`` (fractions too) become error bars: the 95% interval of each point.  ``styles`` (by name,
    ``arm_styles``) give each line its compressor's colour, marker and line style.
    """
    plt = pyplot()
    entries = len(acc_by_position) + len(closed_book or {}) + len(oracle or {})
    with plt.rc_context(paper_style()):
        # the legend sits under the axes, one entry a line; the figure grows with it so the axes keep their size
        fig, ax = plt.subplots(figsize=(COLUMN_IN, 2.6 + 0.16 * entries), layout="constrained")
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, (name, by_pos) in enumerate(acc_by_position.items()):
            color, marker, style = (styles or {}).get(name, (colors[i % len(colors)], "o", "-"))
            xs = sorted(by_pos)
            ax.plot([x + 1 for x in xs], [100 * by_pos[x] for x in xs], marker=marker, markersize=3,
                    color=color, linestyle=style, label=fit(name))
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
                           label=f"{fit(name)} closed-book")
            if oracle and name in oracle:
                ax.axhline(100 * oracle[name], color=color, linestyle="--", linewidth=1, label=f"{fit(name)} oracle")
        positions = sorted({x for by_pos in acc_by_position.values() for x in by_pos})
        ax.set_xticks([x + 1 for x in positions])
        ax.set_xlabel("position of the document with the answer")
        ax.set_ylabel("accuracy (%)")
        ax.set_ylim(-2, 102)  # a fixed scale, so U-shapes of different readers and runs compare by eye
        ax.set_title(fit(title, 90))
        ax.grid(alpha=0.3)
        fig.legend(loc="outside lower center", ncol=1, frameon=False)
        return save(fig, path)


def plot_delta_forest(deltas: Mapping[str, Mapping[str, Mapping[str, float]]], path: str | Path,
                      intervals: Mapping[str, Mapping[str, Mapping[str, tuple[float, float]]]] | None = None,
                      styles: Mapping[str, Style] | None = None) -> list[Path]:
    """A forest plot of the change against full context: one panel per reader (rows) and task (columns),
    one line per compressor, the paired 95% interval as a bar; a filled dot when the interval excludes 0.

    ``deltas[reader][compressor][task]`` is in score points; ``intervals`` alike.  A compressor with no
    value on a task (not run, or every example failed) is written "n/a" in that panel.  ``styles`` (by
    compressor, ``arm_styles``) colour each line as its compressor.
    """
    plt = pyplot()
    readers = list(deltas)
    arms: list[str] = []
    tasks: list[str] = []
    for by_arm in deltas.values():
        arms.extend(a for a in by_arm if a not in arms)
        for by_task in by_arm.values():
            tasks.extend(t for t in by_task if t not in tasks)
    intervals = intervals or {}
    with plt.rc_context(paper_style()):
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
                    colour, marker, _ = (styles or {}).get(arm, ("C0", "o", "-"))
                    if ci is not None:
                        ax.plot([ci[0], ci[1]], [y, y], color=colour, linewidth=1.2)
                    ax.plot([value], [y], marker, color=colour, markersize=3.5,
                            markerfacecolor=colour if solid else "white")
                ax.set_yticks(ys, [fit(a) for a in arms])
                ax.set_ylim(-0.7, len(arms) - 0.3)
                ax.grid(axis="x", alpha=0.3)
                if r == 0:
                    ax.set_title(two_lines(task, len(tasks)))
                if t == 0:
                    ax.set_ylabel(fit(reader))
        fig.supxlabel("Δ score vs full context (points); bar: paired 95% interval, filled: excludes 0")
        return save(fig, path)


def plot_length_buckets(scores: Mapping[str, Mapping[str, float]], path: str | Path, *,
                        styles: Mapping[str, Style] | None = None) -> list[Path]:
    """Score per input-length bucket (``scores[config][bucket]``, in score points), one line per config, styled as
    its compressor (``styles`` by config, ``arm_styles``)."""
    plt = pyplot()
    with plt.rc_context(paper_style()):
        fig, ax = plt.subplots(figsize=(COLUMN_IN, 2.6), layout="constrained")
        buckets: list[str] = []
        for values in scores.values():
            buckets.extend(b for b in values if b not in buckets)
        if all(b.isdigit() for b in buckets):  # token lengths: in increasing order, not as met
            buckets.sort(key=int)
        for config, values in scores.items():
            colour, marker, style = (styles or {}).get(config, (None, "o", "-"))
            ax.plot(range(len(buckets)), [values.get(b, float("nan")) for b in buckets], marker=marker,
                    color=colour, linestyle=style, markersize=3, label=fit(config))
        ax.set_xticks(range(len(buckets)), buckets)
        ax.set_xlabel("input length bucket")
        ax.set_ylabel("score")
        ax.set_title("Score by input length")
        ax.grid(alpha=0.3)
        fig.legend(loc="outside lower center", ncol=1, frameon=False)  # below the axes: many lines never cover them
        return save(fig, path)


def plot_score_by_length(series: Mapping[str, Mapping[str, Mapping[str, Any]]], path: str | Path, *,
                         styles: Mapping[str, Style] | None = None) -> list[Path]:
    """The "effective length" picture: score against context length, one panel per task (columns) and reader
    (rows), one line per compressor, 95% intervals as bars; ``series[reader][task][compressor]`` is
    ``(labels, means, lows, highs)`` in score points, lengths in increasing order; ``styles`` (by compressor,
    ``arm_styles``) draw each line as its compressor."""
    plt = pyplot()
    readers = list(series)
    tasks = list(dict.fromkeys(t for by_task in series.values() for t in by_task))
    with plt.rc_context(paper_style()):
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
                    colour, marker, style = (styles or {}).get(arm, (colors[a % len(colors)], "o", "-"))
                    drawn = ax.errorbar([x + dodge for x in xs], means, yerr=errors, marker=marker, markersize=3,
                                        linewidth=1, linestyle=style, elinewidth=0.7, capsize=1.5, color=colour)
                    legend.setdefault(arm, drawn)
                    ax.set_xticks(xs, labels)
                ax.set_ylim(-2, 102)
                ax.grid(alpha=0.3)
                if r == 0:
                    ax.set_title(two_lines(task, len(tasks)))
                if t == 0:
                    ax.set_ylabel(f"{reader}\nscore")
                if r == len(readers) - 1:
                    ax.set_xlabel("context tokens")
        # every arm once, in full: two budgets of one retriever differ only at the end of their names
        fig.legend(list(legend.values()), [fit(arm, 70) for arm in legend], loc="outside lower center", ncol=2,
                   frameon=False, title="bars: 95% intervals (valid bounds, docs/metrics.md)", title_fontsize=7)
        return save(fig, path)

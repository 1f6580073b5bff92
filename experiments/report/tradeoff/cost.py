"""What each cell asked for and what it cost: requested vs achieved (budget, tokens kept, ratio, over budget), the
cost account (the compressor's and the reader's time and model work), and the break-even budget against full."""
from __future__ import annotations

import statistics
from collections.abc import Collection, Sequence

from experiments.data.records import budget_text
from experiments.inference.results import MIN_PAIRS, PairedDelta, format_delta
from experiments.report.cells import Cell, Table, format_n
from experiments.report.tradeoff.points import Arm, budget_lines, full_arms, paired_arms


def _range(values: Sequence[float], fmt: str = "{:.0f}") -> str:
    if not values:
        return "—"
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}, {fmt.format(max(values))}]"


def _score(c: Cell) -> str:
    paired = c.paired
    return f"{c.score:.2f}" + (f" ({format_delta(paired)})" if paired is not None else
                               f" ({c.delta_paired:+.2f}, n={c.n_paired})" if c.delta_paired is not None else "")


def budget_table(all_arms: Sequence[Arm]) -> Table:
    """Requested vs achieved, one row per cell: the budget, the achieved tokens and ratio (median [range]),
    examples over budget, and the score with its paired interval against full."""
    header = ["task", "reader", "compressor", "budget", "n", "failed", "budget tokens (median)",
              "tokens out (median [range])", "ratio in/out (median [range])", "over budget", "tokens seen (mean)",
              "score (Δ vs full [95% CI])"]
    body = []
    for a in all_arms:
        ratios = [r.tokens_in / r.tokens_out for r in a.recs if r.tokens_out]
        over = sum(r.over_budget for r in a.recs)
        bt = a.budget_tokens
        body.append([a.cell.task, a.cell.reader, a.line, budget_text(a.budget) or "—", format_n(a.cell.n, a.cell.n_clusters),
                     str(a.cell.n_failed), "—" if bt is None else f"{bt:.0f}",
                     _range([r.tokens_out for r in a.recs]), _range(ratios, "{:.2f}"),
                     f"{over}/{len(a.recs)}" if a.budget else "—", f"{a.tokens:.0f}", _score(a.cell)])
    return header, body


def cost_table(all_arms: Sequence[Arm]) -> Table:
    """The cost account, totals per cell, and end-to-end seconds per example against full (paired)."""
    header = ["task", "reader", "compressor", "budget", "n", "compressor s", "compressor model calls (cached)",
              "compressor model tokens in/out", "embedded texts (cached)", "reader prompt tokens",
              "reader generated tokens", "reader s", "end-to-end s", "end-to-end ms/example vs full [95% CI]"]
    body = []
    for a in all_arms:
        total = lambda name: sum(getattr(r, name) for r in a.recs)  # noqa: E731
        vs = _time_vs_full(a.time_vs_full)
        body.append([a.cell.task, a.cell.reader, a.line, budget_text(a.budget) or "—", format_n(len(a.recs), a.cell.n_clusters),
                     f"{total('compress_s'):.2f}", f"{total('compress_calls')} ({total('compress_cache_hits')})",
                     f"{total('compress_tokens_in')}/{total('compress_tokens_out')}",
                     f"{total('embed_texts')} ({total('embed_hits')})", str(total("reader_tokens_in")),
                     str(total("reader_tokens_out")), f"{total('latency_s'):.2f}",
                     f"{total('compress_s') + total('latency_s'):.2f}", vs])
    return header, body


def _time_vs_full(pd: PairedDelta | None) -> str:
    """End-to-end ms per example against full with its interval; below ``MIN_PAIRS`` pairs the delta and its n, no
    interval (an interval of three pairs says little, and the break-even cannot tell there)."""
    if pd is None or not pd.n:
        return ""
    return format_delta(pd) if pd.n >= MIN_PAIRS else f"{pd.delta:+.2f} (n={format_n(pd.n, pd.clusters)})"


# End-to-end differences smaller than this, per example, are below what a run's timing resolves: a shared
# machine's scheduling moves a call by milliseconds, so a model-free reader's "saving" there is noise, not a cost.
TIME_RESOLUTION_MS = 10.0


def _negligible(pd: PairedDelta) -> bool:
    """Whether a paired end-to-end difference (ms per example) lies wholly within +-``TIME_RESOLUTION_MS``."""
    return pd.n >= MIN_PAIRS and pd.lo == pd.lo and max(abs(pd.lo), abs(pd.hi)) < TIME_RESOLUTION_MS


def _cheaper(pd: PairedDelta) -> bool | None:
    """True: the arm costs less than full (interval below 0); False: more (above 0); None: cannot tell (or the
    whole interval is within the timing's resolution)."""
    if pd.n < MIN_PAIRS or pd.lo != pd.lo or _negligible(pd):
        return None
    return True if pd.hi < 0 else False if pd.lo > 0 else None


def _mean_difference(base: dict[str, float], other: dict[str, float]) -> float:
    """Mean of ``other - base`` over the ids both hold (NaN when none): token counts need no interval."""
    ids = set(base) & set(other)
    return statistics.fmean(other[i] - base[i] for i in ids) if ids else float("nan")


def _break_even(points: Sequence[tuple[str, bool | None]], below_resolution: Collection[str] = ()) -> str:
    """From (budget, cheaper?) smallest budget first: the largest budget up to which every point is cheaper.
    Where the first budget that is not shown cheaper is undecided (None), the text says why, never "not
    cheaper": its interval lies within the timing's resolution (``below_resolution``; it may exclude 0 there and
    still decides nothing), or it cannot tell at this n (too few pairs, or an interval across 0)."""
    cheap = 0
    while cheap < len(points) and points[cheap][1] is True:
        cheap += 1
    if cheap == len(points):
        return f"{points[-1][0]} or more (cheaper at every budget)"
    stop, undecided = points[cheap][0], points[cheap][1] is None
    if not undecided:
        return (f"under {stop} (not cheaper at the smallest budget)" if cheap == 0 else
                f"{points[cheap - 1][0]} (cheaper up to it; not at {stop})")
    if stop in below_resolution:
        why = f"within {TIME_RESOLUTION_MS:g} ms per example of full, below what the run's timing resolves"
        return (f"not shown cheaper at {stop}: {why}" if cheap == 0 else
                f"{points[cheap - 1][0]} (cheaper up to it; at {stop} {why})")
    return (f"cannot tell at this n (not shown cheaper at {stop})" if cheap == 0 else
            f"{points[cheap - 1][0]} (cheaper up to it; cannot tell at {stop})")


def break_even_table(all_arms: Sequence[Arm]) -> Table:
    """Per line: the budget below which compressing and then reading costs less than reading the full context,
    in end-to-end seconds (decided by each budget's paired interval) and in model tokens (means)."""
    full = full_arms(all_arms)
    header = ["task", "reader", "compressor", "budgets", "end-to-end ms/example vs full, per budget", "break-even (time)",
              "break-even (model tokens)"]
    body = []
    for (task, reader, line), points in budget_lines(all_arms).items():
        base = full.get((task, reader))
        if base is None:
            continue
        labels = [budget_text(a.budget) or a.line for a in points]
        time = [a.time_vs_full or paired_arms(base, a, "e2e_s") for a in points]
        tokens = [_mean_difference(base.per_example("model_tokens"), a.per_example("model_tokens")) for a in points]
        below = {b for b, t in zip(labels, time) if _negligible(t)}
        in_time = (f"none: every budget is within {TIME_RESOLUTION_MS:g} ms per example of full, below what the "
                   "run's timing resolves" if all(map(_negligible, time)) else
                   _break_even(list(zip(labels, map(_cheaper, time))), below))
        body.append([task, reader, line, ", ".join(labels), "; ".join(f"{t.delta:+.0f}" for t in time), in_time,
                     _break_even([(b, t < 0 if t == t else None) for b, t in zip(labels, tokens)])])
    return header, body

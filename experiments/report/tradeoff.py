"""The trade-off, not one delta: every cell as a point of score against context kept, and what it cost.

A run with a budget axis (``budget:`` / ``ratio:``) gives each compressor a
line of points, one per budget; ``full`` is the reference, at the tokens the
reader saw of it (after its own truncation).  From the prediction lines alone:

- requested vs achieved: per cell the budget, the achieved tokens and ratio
  (median and range over examples) and how many examples went over budget;
- the cost account: the compressor's time and model work and the reader's
  tokens and time, totals per cell, and end-to-end time against full, paired;
- the break-even: the budgets at which compressing and then reading costs
  less than reading the full context, in time and in model tokens;
- the Pareto frontier of (tokens, score) per task and for the task average;
- "how much can go": non-inferiority against full with the config's margin,
  Holm-adjusted over the run's tests, and the smallest non-inferior budget;
- the OP-RAG questions: document against score order at equal budgets, and
  the number of chunks kept against the score (an inverted U or not).

Every difference is paired on the example with its 95% interval and n
(``experiments.report.stats``); docs/metrics.md explains each test.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from experiments.data.records import BUDGET_MARK, Prediction, budget_text
from experiments.report.cells import Cell, RunData, format_n, noninferiority_vs, paired_vs, scores_interval
from experiments.report.stats import (
    ALPHA,
    MIN_PAIRS,
    NOT_WORSE,
    NonInferiority,
    PairedDelta,
    at_edge,
    format_delta,
    holm,
)
from experiments.report.tables import Table, paired_over_tasks

Items = dict[tuple[str, str], dict[str, float]]


@dataclass
class Arm:
    """One cell as a point of the trade-off: its line (the compressor row without the budget), its budget,
    and its prediction lines."""

    cell: Cell
    line: str
    budget: dict[str, Any] | None
    retriever: str = ""
    order: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    recs: list[Prediction] = field(default_factory=list)
    time_vs_full: PairedDelta | None = None  # end-to-end ms per example against full, paired (set by ``arms``)

    @property
    def kind(self) -> str:
        return self.cell.compressor_kind or self.cell.compressor

    @property
    def budget_tokens(self) -> float | None:
        """The median per-example budget in tokens (a ratio's budget differs per example)."""
        values = [r.budget for r in self.recs if r.budget is not None]
        return statistics.median(values) if values else None

    @property
    def tokens(self) -> float:
        """Mean context tokens the reader saw (after its own truncation): the x of the picture."""
        return statistics.fmean(r.context_seen for r in self.recs) if self.recs else float("nan")

    def per_example(self, what: str) -> dict[str, float]:
        """A per-example figure by id: ``e2e_s`` (compressor + reader seconds), ``model_tokens`` (every token
        a model read or wrote for this example), or a prediction field."""
        def value(r: Prediction) -> float:
            if what == "e2e_s":
                return r.compress_s + r.latency_s
            if what == "model_tokens":
                return r.reader_tokens_in + r.reader_tokens_out + r.compress_tokens_in + r.compress_tokens_out
            return float(getattr(r, what))
        return {r.id: value(r) for r in self.recs}


def arms(data: RunData) -> list[Arm]:
    """Every cell of the run with a score, as a trade-off point, in config order."""
    points = {p["config_hash"]: p for p in data.manifest.get("points", [])}
    recs: dict[tuple[str, str], list[Prediction]] = defaultdict(list)
    for r in data.predictions:
        recs[(r.task, r.config_hash)].append(r)
    out = []
    for c in data.cells:
        if c.score != c.score:
            continue
        point = points.get(c.config_hash, {})
        params = (point.get("compressor") or {}).get("params") or {}
        budget = point.get("budget")
        suffix = f"{BUDGET_MARK}{budget_text(budget)}"
        line = c.compressor[: -len(suffix)] if budget and c.compressor.endswith(suffix) else c.compressor
        retriever = params.get("retriever", "bm25" if c.compressor_kind == "retrieval" else "")
        retriever = retriever.get("name", "") if isinstance(retriever, dict) else str(retriever)
        order = str(params.get("order") or "score") if c.compressor_kind == "retrieval" else ""
        out.append(Arm(c, line, budget, retriever, order, params, recs.get((c.task, c.config_hash), [])))
    for base, arm in compared(out):
        arm.time_vs_full = paired_arms(base, arm, "e2e_s")
    return out


def floor_or_ceiling(full: Mapping[str, float], arm: Mapping[str, float], margin: float) -> bool:
    """Whether full's mean over the examples both hold lies within ``margin`` points of the metric's floor or
    ceiling, where the margin cannot fail and the non-inferiority verdict is "uninformative" (``at_edge``)."""
    ids = set(full) & set(arm)
    return bool(ids) and at_edge(statistics.fmean(full[i] for i in ids), margin,
                                 statistics.fmean(arm[i] for i in ids)) is not None


def full_arms(all_arms: Sequence[Arm]) -> dict[tuple[str, str], Arm]:
    """The full-context arm of each (task, reader)."""
    return {(a.cell.task, a.cell.reader): a for a in all_arms if a.cell.is_full}


def compared(all_arms: Sequence[Arm]) -> list[tuple[Arm, Arm]]:
    """(full, arm) for every compressed arm whose task and reader have a full-context cell."""
    full = full_arms(all_arms)
    return [(full[(a.cell.task, a.cell.reader)], a) for a in all_arms
            if not a.cell.is_full and (a.cell.task, a.cell.reader) in full]


def _lines(all_arms: Sequence[Arm]) -> dict[tuple[str, str, str], list[Arm]]:
    """Compressed arms by (task, reader, line), each line's points from the smallest budget up."""
    lines: dict[tuple[str, str, str], list[Arm]] = defaultdict(list)
    for a in all_arms:
        if not a.cell.is_full:
            lines[(a.cell.task, a.cell.reader, a.line)].append(a)
    for points in lines.values():
        points.sort(key=lambda a: (a.budget_tokens is None, a.budget_tokens or 0, a.tokens))
    return lines


def _range(values: Sequence[float], fmt: str = "{:.0f}") -> str:
    if not values:
        return "—"
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}, {fmt.format(max(values))}]"


def paired_arms(full: Arm, arm: Arm, what: str, items: Items | None = None) -> PairedDelta:
    """``arm - full`` paired on the example: the score (from ``items``, in points), or a per-example figure
    (``Arm.per_example``): seconds as milliseconds, tokens as they are."""
    if what == "score":
        if items is None:
            raise ValueError("a paired score needs the run's item scores")
        return paired_vs(items.get((full.cell.task, full.cell.config_hash), {}),
                         items.get((arm.cell.task, arm.cell.config_hash), {}))
    return paired_vs(full.per_example(what), arm.per_example(what), scale=1000.0 if what.endswith("_s") else 1.0)


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
        body.append([a.cell.task, a.cell.reader, a.line, budget_text(a.budget) or "—", str(a.cell.n),
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
        vs = format_delta(a.time_vs_full) if a.time_vs_full is not None else ""
        body.append([a.cell.task, a.cell.reader, a.line, budget_text(a.budget) or "—", str(len(a.recs)),
                     f"{total('compress_s'):.2f}", f"{total('compress_calls')} ({total('compress_cache_hits')})",
                     f"{total('compress_tokens_in')}/{total('compress_tokens_out')}",
                     f"{total('embed_texts')} ({total('embed_hits')})", str(total("reader_tokens_in")),
                     str(total("reader_tokens_out")), f"{total('latency_s'):.2f}",
                     f"{total('compress_s') + total('latency_s'):.2f}", vs])
    return header, body


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


def _break_even(points: Sequence[tuple[str, bool | None]]) -> str:
    """From (budget, cheaper?) smallest budget first: the largest budget up to which every point is cheaper.
    Where the first budget that is not shown cheaper is undecided (None: too few pairs, or an interval across
    0), the text says "cannot tell" rather than "not cheaper"."""
    cheap = 0
    while cheap < len(points) and points[cheap][1] is True:
        cheap += 1
    if cheap == len(points):
        return f"{points[-1][0]} or more (cheaper at every budget)"
    stop, undecided = points[cheap][0], points[cheap][1] is None
    if cheap == 0:
        return (f"cannot tell at this n (not shown cheaper at {stop})" if undecided
                else f"under {stop} (not cheaper at the smallest budget)")
    return f"{points[cheap - 1][0]} (cheaper up to it; {'cannot tell' if undecided else 'not'} at {stop})"


def break_even_table(all_arms: Sequence[Arm]) -> Table:
    """Per line: the budget below which compressing and then reading costs less than reading the full context,
    in end-to-end seconds (decided by each budget's paired interval) and in model tokens (means)."""
    full = full_arms(all_arms)
    header = ["task", "reader", "compressor", "budgets", "end-to-end ms/example vs full, per budget", "break-even (time)",
              "break-even (model tokens)"]
    body = []
    for (task, reader, line), points in _lines(all_arms).items():
        base = full.get((task, reader))
        if base is None:
            continue
        labels = [budget_text(a.budget) or a.line for a in points]
        time = [a.time_vs_full or paired_arms(base, a, "e2e_s") for a in points]
        tokens = [_mean_difference(base.per_example("model_tokens"), a.per_example("model_tokens")) for a in points]
        in_time = (f"none: every budget is within {TIME_RESOLUTION_MS:g} ms per example of full, below what the "
                   "run's timing resolves" if all(map(_negligible, time)) else _break_even(list(zip(labels, map(_cheaper, time)))))
        body.append([task, reader, line, ", ".join(labels), "; ".join(f"{t.delta:+.0f}" for t in time), in_time,
                     _break_even([(b, t < 0 if t == t else None) for b, t in zip(labels, tokens)])])
    return header, body


def noninferiority_rows(all_arms: Sequence[Arm], items: Items, margin: float,
                        alpha: float = ALPHA) -> list[dict[str, Any]]:
    """One test per compressed cell against full (``noninferiority_test``: verdict, the interval it inverts,
    one-sided p-values, clusters) and the Holm adjustment of the p-values over all of them (the family: every
    task x reader x compressed row of the run)."""
    rows = []
    for base, a in compared(all_arms):
        test = noninferiority_vs(items.get((base.cell.task, base.cell.config_hash), {}),
                                 items.get((a.cell.task, a.cell.config_hash), {}), margin, alpha=alpha)
        rows.append({"arm": a, "test": test, "verdict": test.verdict, "p": test.p if test.n else float("nan")})
    for row, adjusted in zip(rows, holm([r["p"] for r in rows])):
        row["p_holm"] = adjusted
    return rows


def _bound(value: float) -> str:
    return "−∞" if value == -np.inf else "+∞" if value == np.inf else f"{value:+.2f}"


def format_test(test: NonInferiority) -> str:
    """``+1.63 [-4.44, +9.57]``: the delta and the interval its test inverts (infinite below ``MIN_CLUSTERS``)."""
    if not test.n:
        return ""
    return f"{test.delta:+.2f} [{_bound(test.lo)}, {_bound(test.hi)}]"


def noninferiority_table(rows: Sequence[dict[str, Any]], margin: float) -> Table:
    tested = sum(1 for r in rows if r["p"] == r["p"])
    alpha = rows[0]["test"].alpha if rows else ALPHA
    header = ["task", "reader", "compressor", "budget", f"Δ vs full [{100 * (1 - 2 * alpha):g}% CI, inverted test]",
              "n", "clusters", f"verdict (margin {margin:g}, one-sided α {alpha:g})", "p (one-sided)",
              f"p Holm (family of {tested} tests)"]
    p = lambda v: "—" if v != v else f"{v:.4f}"  # noqa: E731
    body = [[r["arm"].cell.task, r["arm"].cell.reader, r["arm"].line, budget_text(r["arm"].budget) or "—",
             format_test(r["test"]), str(r["test"].n), str(r["test"].n_clusters), r["verdict"], p(r["p"]),
             p(r["p_holm"])] for r in rows]
    return header, body


def fixed_sequence(tests: Sequence[dict[str, Any]]) -> tuple[int, str]:
    """The fixed-sequence procedure down one compressor's budget ladder (Maurer, Hothorn & Lehmacher 1995;
    Westfall & Krishen 2001): test the largest budget first, each at the full ``alpha``, and go down only
    while the verdict is "not worse"; the first budget that is not shown not worse ends the ladder.  The
    family-wise error over that compressor's budgets stays at ``alpha`` because a hypothesis is tested only
    once every hypothesis before it was rejected.  ``tests`` are ordered from the largest budget down;
    returns how many were passed and why the ladder stopped."""
    passed = 0
    for row in tests:
        if row["verdict"] != NOT_WORSE:
            return passed, f"stopped at {budget_text(row['arm'].budget)}: {row['verdict']}"
        passed += 1
    return passed, "every budget passed"


def smallest_noninferior_table(rows: Sequence[dict[str, Any]]) -> Table:
    """Per (task, reader, line): the smallest budget shown not worse than full by the fixed-sequence
    procedure (``fixed_sequence``), which controls the family-wise error over the line's budgets."""
    by_line: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        a = r["arm"]
        if a.budget:
            by_line[(a.cell.task, a.cell.reader, a.line)].append(r)
    header = ["task", "reader", "compressor", "budgets tested (largest first)",
              "smallest non-inferior budget (fixed-sequence, FWER ≤ α over the line)", "ladder"]
    body = []
    for (task, reader, line), tests in by_line.items():
        tests.sort(key=lambda r: -(r["arm"].budget_tokens or 0))
        passed, why = fixed_sequence(tests)
        smallest = budget_text(tests[passed - 1]["arm"].budget) if passed else "none at this n"
        body.append([task, reader, line, ", ".join(budget_text(r["arm"].budget) for r in tests), smallest, why])
    return header, body


def order_table(all_arms: Sequence[Arm], items: Items) -> Table:
    """Document order minus score order for retrieval arms that differ only in ``order``, at each budget,
    per task and averaged over the tasks both ran (paired on (task, example))."""
    pairs: dict[tuple[str, str, str], dict[str, dict[str, Arm]]] = defaultdict(lambda: defaultdict(dict))
    for a in all_arms:
        if a.kind == "retrieval" and a.order:
            rest = {k: v for k, v in a.params.items() if k != "order"}
            key = (a.cell.reader, repr(sorted(rest.items())), budget_text(a.budget))
            pairs[key][a.cell.task][a.order] = a
    header = ["reader", "retrieval (score order)", "budget", "task", "document - score [95% CI]", "p", "n"]
    body = []
    for (reader, _, budget), per_task in pairs.items():
        both = {t: o for t, o in per_task.items() if {"score", "document"} <= set(o)}
        for task, o in both.items():
            pd = paired_arms(o["score"], o["document"], "score", items)
            body.append([reader, o["score"].line, budget or "—", task, format_delta(pd) or f"{pd.delta:+.2f}",
                         f"{pd.p_value:.3f}" if pd.n >= MIN_PAIRS else "", str(pd.n)])
        if len(both) > 1:
            pd = paired_over_tasks([(o["score"].cell, o["document"].cell) for o in both.values()], items)
            if pd is not None:
                line = next(iter(both.values()))["score"].line
                body.append([reader, line, budget or "—", f"average of {len(both)} tasks",
                             format_delta(pd) or f"{pd.delta:+.2f}", f"{pd.p_value:.3f}", str(pd.n)])
    return header, body


def chunks_table(all_arms: Sequence[Arm], items: Items) -> Table:
    """Retrieval lines: chunks kept and score at each budget, and the peak against both ends of the line,
    paired on the example (an inverted U needs both differences above 0; the peak is picked after looking)."""
    header = ["task", "reader", "compressor", "budget", "chunks kept (mean)", "score [95% CI]", "peak - smallest",
              "peak - largest", "shape"]
    body = []
    for (task, reader, line), points in _lines(all_arms).items():
        points = [a for a in points if a.kind == "retrieval" and a.budget]
        if len(points) < 2:
            continue
        peak = max(range(len(points)), key=lambda i: points[i].cell.score)
        ends = [paired_arms(points[0], points[peak], "score", items), paired_arms(points[-1], points[peak], "score", items)]
        interior = 0 < peak < len(points) - 1
        shape = ("inverted U" if interior and all(e.n >= MIN_PAIRS and e.lo > 0 for e in ends) else
                 "peak inside, not shown at this n" if interior else "peak at an end")
        for i, a in enumerate(points):
            mi = scores_interval(items.get((a.cell.task, a.cell.config_hash), {}))
            row = [task, reader, line, budget_text(a.budget), f"{statistics.fmean(len(r.kept_chunks) for r in a.recs):.1f}",
                   f"{mi.mean:.2f} [{mi.lo:.2f}, {mi.hi:.2f}]", "", "", ""]
            if i == peak:
                row[6:] = [format_delta(ends[0]) or "", format_delta(ends[1]) or "", shape]
            body.append(row)
    return header, body


def sequential_table(data: RunData) -> Table:
    """The looks of a run that grew until each cell was decided (``ctxcomp run --until-decided``; its manifest's
    ``sequential`` entry): per cell, the last look it was read at, its n and documents there, the log-wealth of
    each betting test against log(1/alpha), the confidence sequence and the decision (empty for a fixed-n run)."""
    from experiments.data.provenance import read_manifest

    state = read_manifest(data.run_dir).get("sequential") if (data.run_dir / "manifest.json").is_file() else None
    if not state:
        return [], []
    label = {(c.task, c.config_hash): c for c in data.cells}
    points = {p["config_hash"]: p for p in data.manifest.get("points", [])}
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for seen in state["looks"]:
        for row in seen["cells"]:
            latest[(row["task"], row["config_hash"])] = {**row, "look": seen["look"]}
    header = ["task", "reader", "compressor", "budget", "looks", "n (docs) at the last look",
              "log-wealth (not worse)", "log-wealth (worse)", "threshold log(1/α)", "Δ vs full [95% confidence sequence]",
              "decision"]
    body = []
    for key, row in latest.items():
        cell = label.get(key)
        budget = budget_text((points.get(key[1]) or {}).get("budget"))
        interval = f"{row.get('delta', float('nan')):+.2f} [{_bound(row.get('lo', -np.inf))}, {_bound(row.get('hi', np.inf))}]"
        body.append([key[0], cell.reader if cell else "", cell.compressor if cell else key[1], budget or "—",
                     str(row["look"]), format_n(row.get("n", 0), row.get("n_clusters", 0)),
                     f"{row.get('log_wealth_not_worse', float('nan')):.2f}",
                     f"{row.get('log_wealth_worse', float('nan')):.2f}", f"{row.get('threshold', float('nan')):.2f}",
                     interval, state["cells"].get(f"{key[0]}\x1f{key[1]}", {}).get("decision") or row["decision"] or
                     "open"])
    return header, body


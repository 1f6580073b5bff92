"""The trade-off's points: every scored cell as an ``Arm`` (its line without the budget, its budget, its prediction
lines), the full-context arm each is compared with, and two arms' difference paired on the example."""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compressors.registry import compressor_class
from experiments.data.records import BUDGET_MARK, Prediction, budget_text
from experiments.inference.results import PairedDelta
from experiments.inference.verdicts import at_edge
from experiments.report.cells import Cell, RunData, paired_vs

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
        cls = compressor_class(c.compressor_kind or c.compressor)
        resolved = cls.resolved_params(params) if cls is not None else dict(params)  # the class's own defaults
        budget = point.get("budget")
        suffix = f"{BUDGET_MARK}{budget_text(budget)}"
        line = c.compressor[: -len(suffix)] if budget and c.compressor.endswith(suffix) else c.compressor
        retriever = resolved.get("retriever") or ""
        retriever = retriever.get("name", "") if isinstance(retriever, dict) else str(retriever)
        order = str(resolved.get("order") or "")
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


def budget_lines(all_arms: Sequence[Arm]) -> dict[tuple[str, str, str], list[Arm]]:
    """Compressed arms by (task, reader, line), each line's points from the smallest budget up."""
    lines: dict[tuple[str, str, str], list[Arm]] = defaultdict(list)
    for a in all_arms:
        if not a.cell.is_full:
            lines[(a.cell.task, a.cell.reader, a.line)].append(a)
    for points in lines.values():
        points.sort(key=lambda a: (a.budget_tokens is None, a.budget_tokens or 0, a.tokens))
    return lines


def paired_arms(full: Arm, arm: Arm, what: str, items: Items | None = None) -> PairedDelta:
    """``arm - full`` paired on the example: the score (from ``items``, in points), or a per-example figure
    (``Arm.per_example``): seconds as milliseconds, tokens as they are."""
    if what == "score":
        if items is None:
            raise ValueError("a paired score needs the run's item scores")
        return paired_vs(items.get((full.cell.task, full.cell.config_hash), {}),
                         items.get((arm.cell.task, arm.cell.config_hash), {}))
    return paired_vs(full.per_example(what), arm.per_example(what), scale=1000.0 if what.endswith("_s") else 1.0)

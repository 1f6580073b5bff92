"""Judged rates per cell, aggregated from ``judgements.jsonl`` (written by ``experiments.judge.judging``).

The latest judgement of each prediction wins; a cell's value is the mean over
its judged examples x 100 with a 95% interval (``mean_interval``), and the failed
judgements (unparseable verdicts, judge errors, a pairwise judgement with one
order only) are counted beside it and left out; with ``--single-order`` a pairwise
judgement whose other order failed counts, and how many did is counted too.
Of the failed HELMET-rubric judgements, those that HELMET's
``scripts/eval_gpt4_summ.py`` would have scored (a recall above the number of
key points, say; docs/metrics.md lists the cases) are counted apart, since
they are where ctxcomp's rate and HELMET's part.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.data.records import Judgement
from experiments.data.store import RunDir
from experiments.inference.paired import mean_interval


@dataclass
class JudgedCell:
    """A judged rate for one (task, config): the value x 100 with its 95% interval, n and failures."""

    task: str
    reader: str
    compressor: str
    config_hash: str
    protocol: str
    judge: str
    against: str
    value: float
    ci95: tuple[float, float]
    n: int
    n_failed: int
    n_one_order: int = 0  # pairwise judgements counted on one order only (``ctxcomp judge --single-order``)
    n_helmet_scores: int = 0  # failed judgements that HELMET's rubric script would have scored


def judged_cells(run_dir: str | Path) -> list[JudgedCell]:
    """Judgement rates per cell (the latest judgement of each prediction wins), 0-100 with 95% intervals."""
    latest: dict[tuple[str, ...], Judgement] = {r.key: r for r in RunDir(Path(run_dir)).judgements.read()}
    groups: dict[tuple[str, ...], list[Judgement]] = defaultdict(list)
    for r in latest.values():
        groups[(r.task, r.config_hash, r.protocol, r.judge, r.against)].append(r)
    cells = []
    for (task, config_hash, protocol, judge, against), recs in groups.items():
        ok = [r for r in recs if r.status == "ok" and r.value is not None]
        one_order = sum(bool((r.parts or {}).get("failed_orders")) for r in ok)
        helmet_scores = sum(r.status != "ok" and bool((r.parts or {}).get("helmet_scores")) for r in recs)
        mi = mean_interval([float(r.value) for r in ok])
        cells.append(JudgedCell(task, recs[0].reader, recs[0].compressor, config_hash, protocol, judge, against,
                                mi.mean, (mi.lo, mi.hi), mi.n, len(recs) - len(ok), one_order, helmet_scores))
    return cells


def judged_table(cells: Sequence[JudgedCell]) -> tuple[list[str], list[list[str]]]:
    one_order = any(c.n_one_order for c in cells)  # a column only when --single-order let some count
    helmet = any(c.n_helmet_scores for c in cells)  # a column only when some failure is one HELMET scores
    header = ["task", "reader", "compressor", "protocol", "against", "judge", "value [95% CI]", "n", "failed"]
    header += (["one order only"] if one_order else []) + (["failed, HELMET scores"] if helmet else [])
    fmt = lambda c: "—" if not c.n else f"{c.value:.1f} [{c.ci95[0]:.1f}, {c.ci95[1]:.1f}]"  # noqa: E731
    body = [[c.task, c.reader, c.compressor, c.protocol, c.against, c.judge, fmt(c), str(c.n), str(c.n_failed)]
            + ([str(c.n_one_order)] if one_order else []) + ([str(c.n_helmet_scores)] if helmet else [])
            for c in cells]
    return header, body

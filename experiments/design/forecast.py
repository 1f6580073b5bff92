"""``ctxcomp plan``: from a finished (pilot) run, the n every cell's verdict needs and what that n costs.

For every (task, compressor, budget, reader) cell against full, and for each compressor line's average over
the tasks it ran on: the pilot's paired difference, and the documents a non-inferiority verdict at the
margin needs with the given power at an assumed true difference (``--delta``, default 0: a plan made at the
pilot's own noisy difference chases its luck), computed with the report's own test and allowing for the
pilot's uncertainty about the spread (``experiments.inference.power``); the power the test reaches there;
and the cost of getting there from the pilot's n: reader and summarizer calls, prompt tokens, hours on this
machine and dollars.  A plan never asks for more documents than the task's pool holds: past that it says
the task cannot decide the cell at this margin.  Costs per example come from the pilot itself: calls and
tokens as recorded, seconds from the predictions a model made in the pilot (cache hits left out: they
measure the cache, not the model), dollars from token counts and a price per million tokens.  Growing a cell
means reading more examples with the arm and with full, so both are counted.
"""
from __future__ import annotations

import functools
import math
import operator
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from experiments.data.records import Prediction, budget_text
from experiments.inference.power import Pilot, Plan, needed, needed_for_average, pilot
from experiments.inference.results import ALPHA
from experiments.report.cells import cluster_keys, format_n, load_run
from experiments.report.tradeoff import Arm, arms, compared

Table = tuple[list[str], list[list[str]]]


@dataclass(frozen=True)
class Rate:
    """What one more example costs an arm, from the pilot (NaN where the pilot cannot tell)."""

    reader_calls: float
    summarizer_calls: float
    prompt_tokens: float
    output_tokens: float
    seconds: float  # NaN when every generation came from the cache
    dollars: float  # NaN when no price is known

    def __add__(self, other: "Rate") -> "Rate":
        return Rate(*(a + b for a, b in zip(self.astuple(), other.astuple())))

    def __mul__(self, k: float) -> "Rate":
        return Rate(*(a * k for a in self.astuple()))

    def astuple(self) -> tuple[float, ...]:
        return (self.reader_calls, self.summarizer_calls, self.prompt_tokens, self.output_tokens, self.seconds,
                self.dollars)


@functools.cache
def default_prices() -> dict[str, dict[str, float]]:
    return yaml.safe_load((Path(__file__).with_name("prices.yaml")).read_text(encoding="utf-8")) or {}


def price_of(reader: str, params: Mapping[str, Any], prices: Mapping[str, Mapping[str, float]]) -> tuple[float, float] | None:
    """(input, output) dollars per million tokens of a reader: the config's ``prices`` by its label or model
    name, its own ``price_in_per_1k``/``price_out_per_1k``, the shipped list (``prices.yaml``); a local model
    (no model name that any table knows and no price parameter) costs nothing; None: unknown API model."""
    model = str(params.get("model", ""))
    for key in (reader, model):
        if key and key in prices:
            p = prices[key]
            return float(p["input_per_1m"]), float(p.get("output_per_1m", 0.0))
    if "price_in_per_1k" in params or "price_out_per_1k" in params:
        return 1000 * float(params.get("price_in_per_1k", 0.0)), 1000 * float(params.get("price_out_per_1k", 0.0))
    for key in (model, model.rsplit("/", 1)[-1]):
        if key in default_prices():
            p = default_prices()[key]
            return float(p["input_per_1m"]), float(p["output_per_1m"])
    return None if params.get("base_url") or params.get("base_urls") or model.startswith("gpt") else (0.0, 0.0)


def rate(recs: Sequence[Prediction], price: tuple[float, float] | None) -> Rate:
    """Cost per example of one arm in the pilot."""
    if not recs:
        nan = float("nan")
        return Rate(nan, nan, nan, nan, nan, nan)
    fresh = [r for r in recs if not r.cached]
    mean = lambda values: statistics.fmean(values) if values else float("nan")  # noqa: E731
    tokens_in = mean([r.reader_tokens_in + r.compress_tokens_in for r in recs])
    tokens_out = mean([r.reader_tokens_out + r.compress_tokens_out for r in recs])
    seconds = mean([r.latency_s + r.compress_s for r in fresh])
    dollars = float("nan") if price is None else (tokens_in * price[0] + tokens_out * price[1]) / 1e6
    return Rate(1.0, mean([r.compress_calls for r in recs]), tokens_in, tokens_out, seconds, dollars)


def format_cost(r: Rate) -> str:
    """``1,240 reader calls, 310 summaries, 2.1M tokens, 3.4 h, $5.20`` (parts the pilot cannot tell say so)."""
    if r.reader_calls != r.reader_calls:
        return "—"
    if r.reader_calls <= 0:
        return "nothing more"
    parts = [f"{r.reader_calls:,.0f} reader calls"]
    if r.summarizer_calls > 0:
        parts.append(f"{r.summarizer_calls:,.0f} summaries")
    parts.append(f"{r.prompt_tokens / 1e6:.2f}M prompt tokens")
    parts.append("time unknown (all cached)" if r.seconds != r.seconds else f"{r.seconds / 3600:.2f} h")
    parts.append("$ unknown (no price)" if r.dollars != r.dollars else f"${r.dollars:,.2f}")
    return ", ".join(parts)


def _n(need: Plan) -> str:
    if need.n != need.n:
        return "—"
    if math.isinf(need.n):
        return need.note or "not reachable"
    return format_n(int(math.ceil(need.n)), int(need.n_clusters)) + (f" ({need.note})" if need.note else "")


@dataclass
class PlanRow:
    task: str
    reader: str
    compressor: str
    budget: str
    pilot: Pilot
    plan: Plan
    per_example: Rate  # the arm's and full's together
    pilots: tuple[Pilot, ...] = ()  # an average row's tasks

    def cost(self, need: Plan) -> Rate:
        have = self.pilot.n if not self.pilots else min(p.n for p in self.pilots)
        extra = need.n - have
        if extra != extra or math.isinf(extra):
            nan = float("nan")
            return Rate(nan, nan, nan, nan, nan, nan)
        return self.per_example * max(0.0, math.ceil(extra))

    def cells(self) -> list[str]:
        p = self.pilot
        spread = (f"{p.discordant} of {p.n} changed" if p.binary else
                  "—" if p.sd != p.sd else f"SD {100 * p.sd:.1f}")
        power = "—" if self.plan.power != self.plan.power else f"{self.plan.power:.2f}"
        return [self.task, self.reader, self.compressor, self.budget, format_n(p.n, p.n_clusters),
                f"{100 * p.delta:+.2f}", spread, _n(self.plan), power, format_cost(self.cost(self.plan))]


def header(delta: float) -> list[str]:
    return ["task", "reader", "compressor", "budget", "pilot n (docs)", "Δ vs full (pilot)", "spread",
            f"n needed at Δ = {delta:g}", "power there (the report's test)", "cost to get there"]


def plan_run(run_dir: str | Path, *, margin: float | None = None, power: float = 0.8, alpha: float = ALPHA,
             prices: Mapping[str, Mapping[str, float]] | None = None,
             delta: float = 0.0) -> tuple[list[PlanRow], dict[str, Any]]:
    """The plan of every cell and of each line's task average at the assumed ``delta`` (points); and the
    settings used (margin from the run), with the tasks whose pool could not be read here (``pools_unknown``:
    their plans are not capped at the documents the task holds, and the user is told so)."""
    data = load_run(run_dir)
    margin = float(data.manifest.get("margin", 5.0)) if margin is None else margin
    config_prices = _config_prices(Path(run_dir))
    config_prices.update(prices or {})
    pools = _pools(Path(run_dir))
    points = {p["config_hash"]: p for p in data.manifest.get("points", [])}
    items = data.items()
    all_arms = arms(data)
    rows = []
    per_task: dict[tuple[str, str], list[tuple[Arm, Arm]]] = defaultdict(list)

    def price(a: Arm) -> tuple[float, float] | None:
        return price_of(a.cell.reader, (points.get(a.cell.config_hash, {}).get("reader") or {}).get("params") or {},
                        config_prices)

    for base, a in compared(all_arms):
        full_items = items.get((base.cell.task, base.cell.config_hash), {})
        arm_items = items.get((a.cell.task, a.cell.config_hash), {})
        ids = sorted(set(full_items) & set(arm_items))
        p = pilot([full_items[i] for i in ids], [arm_items[i] for i in ids], cluster_keys(ids, full_items, arm_items))
        documents, largest = pools.get(a.cell.task, (None, None))
        per_example = rate(a.recs, price(a)) + rate(base.recs, price(base))
        rows.append(PlanRow(a.cell.task, a.cell.reader, a.line, budget_text(a.budget) or "—", p,
                            needed(p, margin, delta=delta, power=power, alpha=alpha, pool=documents,
                                   max_cluster=largest), per_example))
        per_task[(a.cell.reader, a.cell.compressor)].append((base, a))
    rows += _averages(per_task, rows, margin, power, alpha, delta, pools)
    unknown = sorted({a.cell.task for _, a in compared(all_arms)} - set(pools))
    return rows, {"margin": margin, "power": power, "alpha": alpha, "delta": delta, "pools_unknown": unknown}


def _averages(per_task: dict[tuple[str, str], list[tuple[Arm, Arm]]], rows: Sequence[PlanRow], margin: float,
              power: float, alpha: float, delta: float, pools: Mapping[str, tuple[int | None, int]]) -> list[PlanRow]:
    """A line's average over its tasks, each task weighted equally and growing by the same number of
    documents (``needed_for_average``: the power it promises is a lower bound)."""
    by_cell = {(r.task, r.reader, r.compressor, r.budget): r for r in rows}
    out = []
    for (reader, _), pairs in per_task.items():
        if len(pairs) < 2:
            continue
        mine = [by_cell[(a.cell.task, reader, a.line, budget_text(a.budget) or "—")] for _, a in pairs]
        pilots = tuple(r.pilot for r in mine)
        plan = needed_for_average(pilots, margin, delta=delta, power=power, alpha=alpha,
                                  pools=[pools.get(r.task, (None, None))[0] for r in mine])
        per_example = functools.reduce(operator.add, (r.per_example for r in mine))
        first = mine[0]
        merged = Pilot(*(np.concatenate([getattr(p, f) for p in pilots]) for f in ("sums", "sizes")),
                       all(p.binary for p in pilots), sum(p.discordant for p in pilots), sum(p.n for p in pilots))
        out.append(PlanRow(f"average of {len(mine)} tasks (n per task)", reader, first.compressor, first.budget,
                           merged, plan, per_example, pilots))
    return out


def _pools(run_dir: Path) -> dict[str, tuple[int | None, int]]:
    """Per task: the documents its source holds and the most questions one holds (``run_pools``: never a
    pilot's ``limit``)."""
    from experiments.run.examples import run_pools

    return run_pools(run_dir)


def _config_prices(run_dir: Path) -> dict[str, Mapping[str, float]]:
    from experiments.data.store import CONFIG

    path = run_dir / CONFIG
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return dict(data.get("prices") or {})


def plan_table(rows: Sequence[PlanRow], delta: float = 0.0) -> Table:
    return header(delta), [r.cells() for r in rows]


__all__ = ["PlanRow", "Rate", "format_cost", "header", "plan_run", "plan_table", "price_of", "rate"]

"""Runs that grow until each cell is decided: ``ctxcomp run CONFIG --until-decided [--step N] [--max-n N]
[--max-cost ...]``.

A fixed-n run spends as many reader calls on a cell that is clearly fine after 40 questions as on one at the
edge.  Here each task's nested sample (``sample:``, ``experiments.data.sampling``) grows by ``step`` questions
at a time, dealt by whole documents (``deal: whole``: a document enters a look with all its questions, the
last one rounding the step up, so no later look adds a question to a document an earlier look tested and each
look extends the one wealth path the last look read; every prediction records its ``look`` and ``document``
in ``predictions.jsonl``, so anyone can check which data each look saw); after each step every compressed cell that is not yet decided is tested against full with the
anytime-valid betting rule of ``experiments.inference.sequential`` (however many looks are taken, each cell's
error stays at alpha), and a decided cell gets no more examples: later steps read only the undecided cells and
the full context they are compared with (one ``full`` generation per reader, task and example, shared by every
arm).  A cell the documents still to come can no longer decide stops for futility (``futility``: certain, or
projected from the documents seen), undecided: that never adds an error, and it stops paying for a cell that
cannot end.  Because a larger sample holds the smaller one, every generation of an
earlier step is kept, and the run directory is an ordinary run that ``report``, ``show`` and ``view`` read.

The run stops when every cell is decided, when each task's sample reaches ``--max-n`` (or its whole pool:
undecided cells end "cannot tell at the maximum n"; a cell whose arm and full both sit at the metric's floor
or ceiling is never decided early, and ends "uninformative"), or before a step whose forecast cost would pass
``--max-cost`` (stopping for cost never adds an error: a cell is only left undecided).  The settings, every
look with its boundary and statistics, and the look at which each cell was decided are kept in the run's
``manifest.json`` under ``sequential``, written after every look, so ``ctxcomp run --resume RUN_DIR``
continues a killed sequential run where it stopped.
"""
from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from core.errors import UserError
from core.files import write_atomic
from experiments.data.provenance import MANIFEST, read_manifest
from experiments.data.records import Prediction
from experiments.data.store import RunDir
from experiments.design.forecast import price_of, rate
from experiments.inference.results import ALPHA
from experiments.inference.sequential import FUTILE, NOT_DECIDED_AT_MAX, futility, look
from experiments.inference.units import as_units
from experiments.inference.verdicts import UNINFORMATIVE, at_edge
from experiments.report.cells import cluster_keys, item_scores
from experiments.run.config import RunConfig
from experiments.run.driver import Runner, RunStats
from experiments.run.examples import pools
from experiments.run.grid import GridPoint, expand_grid
from experiments.run.sections import SampleConfig

DEALT = "whole documents"  # how this version deals a growing sample; a run started otherwise is not continued

KEY = "sequential"
CostUnit = Literal["usd", "hours", "calls"]
_COST = re.compile(r"^\s*\$?\s*(\d+(?:\.\d+)?)\s*(usd|\$|h|hours?|min|minutes?|calls?)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class CostLimit:
    """``--max-cost``: dollars (``$5``, ``5usd``), hours (``2h``, ``90min``) or reader and summarizer calls
    (``1000calls``)."""

    amount: float
    unit: CostUnit

    @classmethod
    def parse(cls, text: str) -> "CostLimit":
        m = _COST.match(text)
        if not m or (text.strip().startswith("$") and m.group(2) not in (None, "$", "usd")):
            raise UserError(f"--max-cost expects dollars ($5, 5usd), hours (2h, 90min) or calls (1000calls), "
                            f"got {text!r}")
        value, unit = float(m.group(1)), (m.group(2) or ("usd" if "$" in text else "")).lower()
        if unit in ("usd", "$"):
            return cls(value, "usd")
        if unit.startswith("h"):
            return cls(value, "hours")
        if unit.startswith("min"):
            return cls(value / 60, "hours")
        if unit.startswith("call"):
            return cls(value, "calls")
        raise UserError(f"--max-cost {text!r} needs a unit: $ or usd, h or min, calls")

    def describe(self) -> str:
        return {"usd": f"${self.amount:g}", "hours": f"{self.amount:g} h", "calls": f"{self.amount:g} calls"}[self.unit]


@dataclass(frozen=True)
class Limits:
    """How a run grows and when it stops."""

    step: int = 10
    max_n: int | None = None
    max_cost: CostLimit | None = None
    alpha: float = ALPHA

    def __post_init__(self) -> None:
        if self.step < 1:
            raise UserError(f"--step must be >= 1, got {self.step}")
        if self.max_n is not None and self.max_n < self.step:
            raise UserError(f"--max-n ({self.max_n}) must be at least --step ({self.step})")

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "max_n": self.max_n, "alpha": self.alpha,
                "max_cost": None if self.max_cost is None else asdict(self.max_cost)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Limits":
        cost = data.get("max_cost")
        return cls(int(data["step"]), data.get("max_n"), CostLimit(**cost) if cost else None,
                   float(data.get("alpha", ALPHA)))


@dataclass(frozen=True)
class Cell:
    """A compressed arm on one task and the full-context arm of the same reader it is tested against."""

    task: str
    config_hash: str
    full_hash: str
    point: GridPoint

    @property
    def key(self) -> str:
        return f"{self.task}\x1f{self.config_hash}"


def first_sizes(config: RunConfig, limits: Limits) -> dict[str, int]:
    """Each task's sample at the first look: the config's own ``sample: {n: ...}`` where it gives one (a run
    starts from the sample the config asks for), else one step."""
    return {t.key: (t.sample.n if t.sample is not None and t.sample.n else limits.step) for t in config.tasks}


def grown_sample(sample: SampleConfig | None, step: int) -> SampleConfig:
    """A task's sample as a growing run draws it: its seed kept, dealt by whole documents (``by: none``
    included: a question's document is still the unit its test reads), n set per step."""
    base = sample or SampleConfig(n=step)
    return base.model_copy(update={"n": step, "by": "document", "deal": "whole"})


def next_size(held: int, start: int, step: int, cap: int) -> int:
    """The questions a task's sample asks for at its next look: ``start`` at the first, then one ``step`` more
    than the sample holds (a whole-document sample may hold more than it asked for), never past ``cap``."""
    return min(start, cap) if not held else min(held + step, cap)


def held_sizes(config: RunConfig) -> dict[str, int]:
    """The questions each task's sample holds (before a sweep moves each through its positions)."""
    from experiments.run.examples import load_task_examples

    return {t.key: len(load_task_examples(t.model_copy(update={"sweep": None, "open_domain": None, "chunks": None})))
            for t in config.tasks}


def growable(config: RunConfig, limits: Limits) -> RunConfig:
    """The config with every task on a nested sample dealt by whole documents (``grown_sample``): a task with
    ``limit`` or a benchmark's generated task cannot grow and is refused in one line."""
    tasks = []
    for task in config.tasks:
        if task.limit is not None:
            raise UserError(f"--until-decided grows each task's sample: task {task.key!r} has `limit: "
                            f"{task.limit}` (the first N questions); give it `sample: {{n: {task.limit}, "
                            "seed: 0}` instead")
        if task.generate is not None:
            raise UserError(f"--until-decided cannot grow the generated task {task.key!r} (its size is set in "
                            "its `generate:` section); run it at a fixed size")
        tasks.append(task.model_copy(update={"sample": grown_sample(task.sample, limits.step)}))
    return config.model_copy(update={"tasks": tasks})


def at_step(config: RunConfig, n: dict[str, int]) -> RunConfig:
    """The config with each task's sample at ``n[task key]`` questions."""
    tasks = [t.model_copy(update={"sample": t.sample.model_copy(update={"n": n[t.key]})}) if t.sample else t
             for t in config.tasks]
    return config.model_copy(update={"tasks": tasks})


def cells_of(config: RunConfig, grid: list[GridPoint]) -> list[Cell]:
    """Every compressed (task, grid point) with a full-context point of the same reader and budget-free."""
    full = {p.reader.model_dump_json(): p.config_hash for p in grid if p.compressor.name == "full"}
    out = []
    for point in grid:
        if point.compressor.name == "full" or point.reader.model_dump_json() not in full:
            continue
        for task in config.tasks:
            if point.compressor.applies_to(task.key):
                out.append(Cell(task.key, point.config_hash, full[point.reader.model_dump_json()], point))
    return out


def largest_documents(config: RunConfig, caps: dict[str, int]) -> dict[str, int]:
    """Per task, the most questions one document holds in the sample at the maximum n (after a sweep moves
    each question through its positions): what bounds a document's sum in the betting test.  Samples are
    nested and dealt by whole documents, so every look's documents are among them, and the sample is drawn
    before any score is seen, so the bound is fixed in advance as the test needs.  It is never below the pool's
    largest document: a sample that happened to miss the rare long documents would otherwise bound the sums by
    its own short ones and test a mean the pool does not have (docs/metrics.md, "Rare long documents")."""
    from collections import Counter

    from experiments.run.examples import load_task_examples, pools

    capped = at_step(config, caps)
    pooled = pools(config)
    return {t.key: max(max(Counter(e.cluster or e.id for e in load_task_examples(t)).values(), default=1),
                       pooled[t.key][1])
            for t in capped.tasks}


def pool_sizes(config: RunConfig) -> dict[str, int]:
    """How many questions each task's file (or generator) holds: the most a sample can take."""
    return {key: size for key, (size, _) in pools(config).items()}


@dataclass
class Outcome:
    """What a growing run did: its looks and why it stopped."""

    run_dir: Path
    state: dict[str, Any]
    stats: list[RunStats]

    @property
    def stopped(self) -> str:
        return str(self.state.get("stopped") or "")


def grow(config: RunConfig, run_dir: str | Path, limits: Limits, *, margin: float | None = None,
         progress: bool = True, notify: Callable[[str], None] = lambda _m: None, **runner_options: Any) -> Outcome:
    """Grow ``config``'s samples step by step until every cell is decided (module docstring); continue the
    sequential run ``run_dir`` holds, if any, with the settings it was started with."""
    run_dir = Path(run_dir)
    state = load_state(run_dir)
    if state is not None and state.get("dealt") != DEALT:
        raise UserError(f"{run_dir} holds a sequential run started before looks dealt whole documents (a later "
                        "look added questions to documents an earlier look had tested, which passes alpha); start "
                        "it again in a new --out: every generation it made is cached and is not asked again")
    if state is not None:
        held = Limits.from_dict(state["settings"])
        if held != limits:
            notify(f"{run_dir} holds a sequential run started with {held.as_dict()}; it continues with those settings")
        limits = held
        margin = float(state["margin"])
    margin = config.margin if margin is None else margin
    start = first_sizes(config, limits)
    config = growable(config, limits)
    grid = expand_grid(config)
    cells = cells_of(config, grid)
    if not cells:
        raise UserError("--until-decided needs at least one compressed arm beside `full` to decide")
    sizes = pools(config)
    caps = {t: min(sizes[t][0], limits.max_n or sizes[t][0]) for t in sizes}
    state = state or {"settings": limits.as_dict(), "dealt": DEALT, "margin": margin, "max_n": caps, "looks": [],
                      "largest_document": {},
                      "cells": {c.key: {"task": c.task, "config_hash": c.config_hash, "full_hash": c.full_hash,
                                        "documents": [], "decision": "", "look": None} for c in cells},
                      "stopped": None}
    state["stopped"] = None
    bounds, held_bounds = largest_documents(config, caps), state.get("largest_document") or {}
    if held_bounds and any(held_bounds.get(t, 0) < b for t, b in bounds.items()):
        # a run started before the bound counted a sweep's positions: its smaller bound is not a bound
        notify(f"{run_dir}: this run recorded the betting bounds {held_bounds}, which its documents exceed; "
               f"it continues with {bounds}")
    state["largest_document"] = {t: max(held_bounds.get(t, 0), b) for t, b in bounds.items()}
    runs: list[RunStats] = []
    while True:
        k = len(state["looks"]) + 1
        previous = state["looks"][-1]["n"] if state["looks"] else {t: 0 for t in caps}
        open_cells = [c for c in cells if not state["cells"][c.key]["decision"]]
        open_tasks = {c.task for c in open_cells}
        # a task whose cells are all decided stays where it is; the others take one more step
        n = {t: next_size(previous[t], start[t], limits.step, caps[t]) if not previous[t] or t in open_tasks
             else previous[t] for t in caps}
        if not open_cells:
            open_at_end = sum(state["cells"][c.key]["decision"] not in ("not worse", "worse") for c in cells)
            state["stopped"] = ("every cell decided" if not open_at_end else
                                f"every cell decided or at its maximum n ({open_at_end} of {len(cells)} not decided)")
            break
        growing = [c for c in open_cells if n[c.task] > previous[c.task]]
        if not growing:
            state["stopped"] = "every task's sample reached its maximum n"
            for c in open_cells:
                state["cells"][c.key]["decision"] = NOT_DECIDED_AT_MAX
            break
        over = _over_budget(run_dir, config, grid, limits, growing, n, previous, state)
        if over:
            state["stopped"] = over
            break
        step_config = at_step(config, n)
        wanted = {(c.task, c.config_hash) for c in growing} | {(c.task, c.full_hash) for c in growing}
        notify(f"step {k}: {', '.join(f'{t} n={v}' for t, v in n.items())}; reading {len(growing)} undecided "
               f"cell(s) of {len(cells)}")
        quiet = (lambda m: None if "holds a run of this config" in m else notify(m)) if k > 1 else notify
        runner = Runner(step_config, run_dir, progress=progress, notify=quiet,
                        only=lambda task, h: (task, h) in wanted, look=k, **runner_options)
        try:
            runs.append(runner.run())
        finally:
            runner.close()
        state["spent_s"] = round(state.get("spent_s", 0.0) + runs[-1].wall_s, 3)
        state["looks"].append(_look(run_dir, growing, held_sizes(step_config), caps, margin, limits, state))
        save_state(run_dir, state)
    save_state(run_dir, state)
    return Outcome(run_dir, state, runs)


def _look(run_dir: Path, growing: list[Cell], n: dict[str, int], caps: dict[str, int], margin: float,
          limits: Limits, state: dict[str, Any]) -> dict[str, Any]:
    """Test every growing cell at this look and record the decisions.

    ``n``: the questions each task's sample holds at this look.  The betting test reads a cell's documents in
    the order they entered (``entered``), so each look extends the same wealth path and the running maximum
    over it keeps Ville's guarantee."""
    items = item_scores(RunDir(run_dir).predictions.read())
    k = len(state["looks"]) + 1
    rows = []
    for c in growing:
        record = state["cells"][c.key]
        full, arm = items.get((c.task, c.full_hash), {}), items.get((c.task, c.config_hash), {})
        ids = sorted(set(full) & set(arm))
        if not ids:
            rows.append({"task": c.task, "config_hash": c.config_hash, "n": 0, "decision": "no pairs"})
            continue
        keys = cluster_keys(ids, full, arm) or ids  # no shared documents: each question its own
        ordered = entered(record.setdefault("documents", []), ids, keys)
        units = as_units([arm[ids[j]] - full[ids[j]] for j in ordered], clusters=[keys[j] for j in ordered])
        bound = state.get("largest_document", {}).get(c.task)
        seen = look(units.sums, units.sizes, margin, alpha=limits.alpha, bound=bound)
        edge = at_edge(sum(full[i] for i in ids) / len(ids), margin, sum(arm[i] for i in ids) / len(ids))
        decision = seen.decision if edge is None else ""
        why = (futility(seen, units.sums, units.sizes, margin, remaining=caps[c.task] - n[c.task], bound=bound)
               if edge is None and not decision else "")
        if why:
            decision = FUTILE.format(n=seen.n_clusters, why=why)
        if not decision and n[c.task] >= caps[c.task]:
            decision = UNINFORMATIVE.format(edge) if edge is not None else NOT_DECIDED_AT_MAX
        if decision:
            record["decision"], record["look"] = decision, k
        rows.append({"task": c.task, "config_hash": c.config_hash, **asdict(seen), "decision": decision,
                     "edge": edge})
    return {"look": k, "n": dict(n), "cells": rows}


def entered(documents: list[str], ids: Sequence[str], keys: Sequence[str]) -> list[int]:
    """The order a look reads a cell's questions (``ids``, of documents ``keys``) in: documents in the order
    they entered the sample, those of earlier looks (``documents``, extended here with this look's) first, this
    look's new ones by key (an order fixed before their scores are seen), and questions by id within each."""
    known = set(documents)
    documents.extend(sorted({d for d in keys if d not in known}))
    rank = {d: i for i, d in enumerate(documents)}
    return sorted(range(len(ids)), key=lambda j: (rank[keys[j]], ids[j]))


def _over_budget(run_dir: Path, config: RunConfig, grid: list[GridPoint], limits: Limits, growing: list[Cell],
                 n: dict[str, int], previous: dict[str, int], state: dict[str, Any]) -> str:
    """Why the next step is not taken (its forecast cost would pass ``--max-cost``), or ""."""
    if limits.max_cost is None or not state["looks"]:
        return ""
    preds = RunDir(run_dir).predictions.read() if (run_dir / "predictions.jsonl").is_file() else []
    by_cell: dict[tuple[str, str], list[Prediction]] = {}
    for r in preds:
        by_cell.setdefault((r.task, r.config_hash), []).append(r)
    points = {p.config_hash: p for p in grid}
    prices = {name: p.model_dump() for name, p in config.prices.items()}

    def price(h: str) -> tuple[float, float] | None:
        point = points[h]
        return price_of(point.reader.label or point.reader.name, point.reader.params, prices)

    unit = limits.max_cost.unit
    spent = _spent(preds, unit, price, state)
    ahead = 0.0
    for key in {(c.task, h) for c in growing for h in (c.config_hash, c.full_hash)}:
        r = rate(by_cell.get(key, []), price(key[1]))
        each = {"usd": r.dollars, "hours": r.seconds / 3600, "calls": r.reader_calls + r.summarizer_calls}[unit]
        ahead += (each if each == each else 0.0) * (n[key[0]] - previous[key[0]])
    if spent + ahead > limits.max_cost.amount:
        return (f"the next step would pass --max-cost {limits.max_cost.describe()} (spent "
                f"{_amount(spent, unit)}, the step about {_amount(ahead, unit)} more)")
    return ""


def _spent(preds: list[Prediction], unit: CostUnit, price: Callable[[str], tuple[float, float] | None],
           state: dict[str, Any]) -> float:
    if unit == "hours":
        return float(state.get("spent_s", 0.0)) / 3600
    fresh = [r for r in preds if not r.cached]
    if unit == "calls":
        return float(len(fresh) + sum(r.compress_calls - r.compress_cache_hits for r in preds))
    total = 0.0
    for r in fresh:
        p = price(r.config_hash)
        if p is not None:
            total += ((r.reader_tokens_in + r.compress_tokens_in) * p[0]
                      + (r.reader_tokens_out + r.compress_tokens_out) * p[1]) / 1e6
    return total


def _amount(value: float, unit: CostUnit) -> str:
    return {"usd": f"${value:,.2f}", "hours": f"{value:.2f} h", "calls": f"{value:,.0f} calls"}[unit]


def load_state(run_dir: Path) -> dict[str, Any] | None:
    """The sequential state a run directory's manifest holds, or None."""
    if not (Path(run_dir) / MANIFEST).is_file():
        return None
    return read_manifest(run_dir).get(KEY)


def save_state(run_dir: Path, state: dict[str, Any]) -> None:
    manifest = read_manifest(run_dir)
    manifest[KEY] = state
    write_atomic(Path(run_dir) / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False))


def summary(state: dict[str, Any]) -> dict[str, Any]:
    """Counts of decisions and the mean look at which cells were decided, for the end-of-run line."""
    futile = FUTILE.split("{")[0]  # one count for every futility stop, whatever its reason
    decisions = ["stopped for futility" if (c["decision"] or "").startswith(futile) else c["decision"] or "open"
                 for c in state["cells"].values()]
    looks = [c["look"] for c in state["cells"].values() if c["look"]]
    return {"cells": len(decisions), **{d: decisions.count(d) for d in sorted(set(decisions))},
            "mean look": round(statistics.fmean(looks), 2) if looks else None, "looks": len(state["looks"]),
            "stopped": state.get("stopped")}


def summary_line(state: dict[str, Any]) -> str:
    """The end-of-run line: the decisions as the looks table gives them, and how many confidence sequences
    exclude 0 (the ``*`` of the scores table printed after it), so the console counts what the tables show."""
    counts = summary(state)
    total, decided = counts["cells"], {d: counts.get(d, 0) for d in ("not worse", "worse")}
    other = {k: v for k, v in counts.items()
             if k not in ("cells", "not worse", "worse", "mean look", "looks", "stopped") and v}
    latest = {(row["task"], row["config_hash"]): row for seen in state["looks"] for row in seen["cells"] if "lo" in row}
    excludes = sum(1 for row in latest.values() if row["lo"] > 0 or row["hi"] < 0)
    undecided = total - sum(decided.values())
    when = f"; a decision at look {counts['mean look']:g} on average" if counts["mean look"] else ""
    return (f"{total} cell(s): {decided['not worse']} not worse than full, {decided['worse']} worse, {undecided} not "
            "decided" + (f" ({', '.join(f'{k}: {v}' for k, v in other.items())})" if other else "")
            + f"; the 95% confidence sequence excludes 0 in {excludes} of {len(latest)} (the `*` of the scores "
            f"table); {counts['looks']} look(s){when}; stopped: {counts['stopped']}")


__all__ = ["KEY", "CostLimit", "Limits", "Outcome", "entered", "grow", "grown_sample", "load_state", "next_size",
           "summary", "summary_line"]

"""The grid a run config stands for: every compressor x reader combination, each with the hash that keys it.

Lists inside a component's ``params`` expand into a grid (product), except
keys named in ``zip``, which are paired; a parameter whose list is one value
(a fleet's ``base_urls``) is never an axis.  The grid is expanded once per run
and each point's hash is computed once.

A budget axis (``budget:`` / ``ratio:``, see ``experiments.run.config``) makes
one point per budget for each compressor that takes one; the budget is part
of the point's hash, and a point without a budget hashes as it always did.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.errors import UnknownComponentError
from experiments.run.config import Budget, ComponentConfig, CompressorConfig, ConfigError, RunConfig, budget_points


def expand_component(spec: ComponentConfig, literal: tuple[str, ...] = ()) -> list[ComponentConfig]:
    """All concrete components a spec with list-valued params stands for, in a stable order.

    ``literal`` names parameters whose value is a list in its own right (a reader's ``base_urls``):
    they are never a grid axis.
    """
    zipped = spec.zip
    free = [k for k, v in spec.params.items() if isinstance(v, list) and k not in zipped and k not in literal]
    empty = [k for k in (*free, *zipped) if not spec.params[k]]
    if empty:  # an axis without values would leave the grid without points, and the run without predictions
        raise ConfigError(f"{spec.name}: params.{empty[0]} is an empty list; a grid axis needs at least one value")
    fixed = {k: v for k, v in spec.params.items() if k not in free and k not in zipped}
    zip_rows = list(zip(*(spec.params[k] for k in zipped))) if zipped else [()]
    out = []
    for zip_values in zip_rows:
        for free_values in itertools.product(*(spec.params[k] for k in free)):
            params = dict(fixed)
            params.update(zip(zipped, zip_values))
            params.update(zip(free, free_values))
            params = {k: params[k] for k in spec.params}  # keep the user's key order
            out.append(ComponentConfig(name=spec.name, params=params, label=spec.label, tasks=spec.tasks))
    return out


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def short_hash(obj: Any, n: int = 12) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:n]


class GridPoint(BaseModel):
    """One compressor x reader combination; its hash keys predictions across runs and resumes."""

    model_config = ConfigDict(frozen=True)

    compressor: ComponentConfig
    reader: ComponentConfig
    budget: Budget | None = None

    @functools.cached_property
    def config_hash(self) -> str:
        """Keys the point's predictions. A reader's ``operational`` parameters (where its servers are, how a
        fleet ejects them) change no output, so moving a fleet to other hosts keeps the keys."""
        from readers.registry import READERS

        operational = _component_attr(READERS, self.reader.name, "operational")
        reader_params = {k: v for k, v in self.reader.params.items() if k not in operational}
        keyed: dict[str, Any] = {
            "compressor": {"name": self.compressor.name, "params": self.compressor.params},
            "reader": {"name": self.reader.name, "params": reader_params},
        }
        if self.budget is not None:  # only then: a point without a budget keeps the hash it always had
            keyed["budget"] = self.budget.as_key()
        return short_hash(keyed)



def _component_attr(registry: Any, name: str, attr: str) -> tuple[str, ...]:
    """A class-level declaration of a component (``literal_lists``, ``operational``); empty when unknown."""
    try:
        return tuple(getattr(registry.get(name), attr, ()))
    except UnknownComponentError:  # reported with its suggestions by the component check
        return ()


def budget_support(name: str) -> str:
    """How the compressor a config names takes a budget (``Compressor.budget_support``); "none" when unknown."""
    from compressors.registry import COMPRESSORS

    try:
        return str(getattr(COMPRESSORS.get(name), "budget_support", "none"))
    except UnknownComponentError:  # reported with its suggestions by the component check
        return "none"


def budget_axis(spec: CompressorConfig, config: RunConfig) -> list[Budget | None]:
    """The budgets one compressor section runs at: its own axis, else the run's for a compressor that takes
    a budget, else none (``[None]``: once, at its own size)."""
    own = budget_points(spec)
    if own is not None:
        return list(own) or [None]
    run = budget_points(config)
    if run and budget_support(spec.name) != "none":
        return list(run)
    return [None]


def expand_grid(config: RunConfig) -> list[GridPoint]:
    from compressors.registry import COMPRESSORS
    from readers.registry import READERS

    readers = [r for spec in config.readers
               for r in expand_component(spec, _component_attr(READERS, spec.name, "literal_lists"))]
    compressors = [(c, b) for spec in config.compressors
                   for c in expand_component(spec, _component_attr(COMPRESSORS, spec.name, "literal_lists"))
                   for b in budget_axis(spec, config)]
    points = [GridPoint(compressor=c, reader=r, budget=b) for r in readers for c, b in compressors]
    seen: dict[str, GridPoint] = {}
    for point in points:
        seen.setdefault(point.config_hash, point)
    return list(seen.values())


def grid_manifest(config: RunConfig, grid: list[GridPoint]) -> dict[str, Any]:
    """``grid.json``: the run's tasks and grid points in config order (reports list rows in this order)."""
    return {
        "tasks": [{"key": t.key, "name": t.name, **({"sample": t.sample.model_dump()} if t.sample else {})}
                  for t in config.tasks],
        "points": [
            {"config_hash": p.config_hash, "compressor": p.compressor.model_dump(mode="json", exclude={"zip"}),
             "reader": p.reader.model_dump(mode="json", exclude={"zip"}),
             **({"budget": p.budget.as_key()} if p.budget is not None else {})}
            for p in grid
        ],
        "contrasts": [c.model_dump(mode="json") for c in config.contrasts],
        "margin": config.margin,
    }

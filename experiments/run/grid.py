"""The grid a run config stands for: every compressor x reader combination, each with the hash that keys it.

Lists inside a component's ``params`` expand into a grid (product), except
keys named in ``zip``, which are paired.  The same holds at any depth of the
component sections a component nests (a retrieval compressor's ``retriever``,
a hybrid retriever's ``retrievers``, a rerank's ``first`` and ``second``, a
summarizer): ``retriever: {name: bm25, params: {k1: [1.2, 2.0]}}`` is two
points, and a nested section takes its own ``zip``.

A list is one value, not an axis, where the parameter takes a list: its
constructor annotation accepts the list as it stands (``retrievers: [...]``
of ``hybrid``, a reader's ``base_urls``, ``question_markers``), or the
component names it in ``literal_lists``.  To try several such lists, give a
list of lists.  A point made by a nested list names the nested value in its
row label (``[retriever.k1=2.0]``); its hash keys the whole nested section,
so a section without lists keeps the hash it always had.

The grid is expanded once per run and each point's hash is computed once.

A budget axis (``budget:`` / ``ratio:``, see ``experiments.run.config``) makes
one point per budget for each compressor that takes one; the budget is part
of the point's hash, and a point without a budget hashes as it always did.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.checks import annotation_accepts
from core.errors import UnknownComponentError
from experiments.run.config import ConfigError, RunConfig
from experiments.run.sections import Budget, ComponentConfig, CompressorConfig, budget_points

Axes = tuple[str, ...]  # "retriever.k1=2.0": the nested values one expanded section was given


def expand_component(spec: ComponentConfig, literal: tuple[str, ...] = (), registry: Any = None) -> list[ComponentConfig]:
    """All concrete components a spec with list-valued params stands for, in a stable order.

    ``literal`` names parameters whose value is a list in its own right (a reader's ``base_urls``):
    they are never a grid axis.  ``registry``: the one the component is in, for its nested sections and
    the parameters that take a list (without it, every list is an axis, as at the top of any section).
    """
    return [config for config, _ in _expand_config(spec, literal, registry)]


def _expand_config(spec: ComponentConfig, literal: tuple[str, ...], registry: Any) -> list[tuple[ComponentConfig, Axes]]:
    """``expand_component`` with, for each point, the nested values it was given (for its row label)."""
    target = _resolve(registry, spec.name)
    literal = (*literal, *getattr(target, "literal_lists", ()))
    return [(ComponentConfig(name=spec.name, params=params, label=spec.label, tasks=spec.tasks), axes)
            for params, axes in _expand_params(spec.name, target, spec.params, spec.zip, literal, "")]


def _resolve(registry: Any, name: str) -> Any:
    """The class a section names, or None (no registry given, or a name the component check reports)."""
    if registry is None:
        return None
    try:
        return registry.get(name)
    except UnknownComponentError:
        return None


def _expand_params(name: str, target: Any, params: Mapping[str, Any], zipped: list[str], literal: tuple[str, ...],
                   where: str) -> list[tuple[dict[str, Any], Axes]]:
    """Every concrete ``params`` one section stands for: the product of its axes, zipped keys paired, nested
    sections expanded in place.  ``where``: this section's dotted path (``retriever.``; empty at the top,
    whose own axes the component's label already names) for the values a point is given."""
    nested = getattr(target, "nested", None) or {}
    choices: dict[str, list[tuple[Any, Axes]]] = {}  # per key: each value it takes, with the values it names
    for key, value in params.items():
        if key in nested and nested[key].many:  # a list of sections is one value; each section may expand
            choices[key] = _expand_many(nested[key].registry, value, f"{where}{key}")
        elif key in nested:
            alternatives = value if isinstance(value, list) else [value]
            choices[key] = [(v, (f"{where}{key}={_section_name(alt)}",) * (bool(where) and len(alternatives) > 1)
                             + named)
                            for alt in alternatives
                            for v, named in _expand_section(nested[key].registry, alt, f"{where}{key}")]
        elif isinstance(value, list) and (key in zipped or _is_axis(target, key, value, literal)):
            choices[key] = [(v, (f"{where}{key}={_show(v)}",) * bool(where)) for v in value]
        else:
            choices[key] = [(value, ())]
    empty = [k for k in params if not choices[k]]
    if empty:  # an axis without values would leave the grid without points, and the run without predictions
        raise ConfigError(f"{name}: params.{where}{empty[0]} is an empty list; a grid axis needs at least one value")
    if len({len(choices[k]) for k in zipped}) > 1:
        raise ConfigError(f"{name}: zip keys {zipped} must stand for as many values each, got "
                          f"{[len(choices[k]) for k in zipped]} (a zipped section whose own lists expand)")
    free = [k for k in params if k not in zipped]
    zip_rows = list(zip(*(choices[k] for k in zipped))) if zipped else [()]
    out = []
    for zip_values in zip_rows:
        for free_values in itertools.product(*(choices[k] for k in free)):
            picked = {**dict(zip(zipped, zip_values)), **dict(zip(free, free_values))}
            out.append(({k: picked[k][0] for k in params},  # the user's key order
                        tuple(a for k in params for a in picked[k][1])))
    return out


def _is_axis(target: Any, key: str, value: list, literal: tuple[str, ...]) -> bool:
    """A list is an axis unless the parameter takes a list as one value (see the module docstring)."""
    return key not in literal and annotation_accepts(target, key, value) is not True


def _expand_section(registry: Any, section: Any, where: str) -> list[tuple[Any, Axes]]:
    """A nested component section (``bm25`` or ``{name, params, label, zip}``) and every section its lists
    stand for; one without lists is kept as written, so its hash stays what it was.  A section that is not
    a section (the component check names what is wrong with it) is kept as written too."""
    if not isinstance(section, Mapping) or not isinstance(section.get("name"), str):
        return [(section, ())]
    params, zipped = section.get("params") or {}, section.get("zip") or []
    if not isinstance(params, Mapping) or not isinstance(zipped, list):
        return [(section, ())]
    what = f"{where} {section['name']!r}"
    for key in zipped:
        if not isinstance(params.get(key), list):
            raise ConfigError(f"{what}: zip key {key!r} must name a list-valued entry of params")
    if len({len(params[k]) for k in zipped}) > 1:
        raise ConfigError(f"{what}: zip keys {zipped} must have lists of equal length")
    target = _resolve(registry, section["name"])
    expanded = _expand_params(section["name"], target, params, zipped, tuple(getattr(target, "literal_lists", ())),
                              f"{where}.")
    if "zip" not in section and len(expanded) == 1 and expanded[0][0] == dict(params):
        return [(section, ())]
    rest = {k: v for k, v in section.items() if k != "zip"}
    return [({**rest, "params": point}, named) for point, named in expanded]


def _expand_many(registry: Any, value: Any, where: str) -> list[tuple[Any, Axes]]:
    """A list of sections (``retrievers`` of hybrid) is one value; the product of what each of its sections
    stands for makes the choices."""
    if not isinstance(value, list):
        return [(value, ())]  # the component check says it must be a list
    per_item = [_expand_section(registry, item, f"{where}.{i}") for i, item in enumerate(value)]
    return [([v for v, _ in combo], tuple(a for _, named in combo for a in named))
            for combo in itertools.product(*per_item)]


def _section_name(section: Any) -> str:
    return section if isinstance(section, str) else str(section.get("name")) if isinstance(section, Mapping) else "?"


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


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
    # the nested values this point was given by lists inside nested sections (``retriever.k1=2.0``); not hashed
    axes: Axes = ()

    def row_label(self, label: str) -> str:
        """A compressor's row label, naming the nested values that tell this point from its siblings."""
        return f"{label} [{', '.join(self.axes)}]" if self.axes else label

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

    readers = [r for spec in config.readers for r, _ in _expand_config(spec, (), READERS)]
    compressors = [(c, axes, b) for spec in config.compressors
                   for c, axes in _expand_config(spec, (), COMPRESSORS)
                   for b in budget_axis(spec, config)]
    points = [GridPoint(compressor=c, reader=r, budget=b, axes=axes) for r in readers for c, axes, b in compressors]
    seen: dict[str, GridPoint] = {}
    for point in points:
        seen.setdefault(point.config_hash, point)
    return list(seen.values())


def grid_manifest(config: RunConfig, grid: list[GridPoint],
                  pools: Mapping[str, tuple[int | None, int]] | None = None) -> dict[str, Any]:
    """``grid.json``: the run's tasks and grid points in config order (reports list rows in this order).

    ``pools`` (``experiments.run.examples.source_pools``) records, before any score, each task's source: its
    documents and its largest document, the bound the report's betting test puts on a document's sum."""
    pools = pools or {}
    return {
        # what the report needs to say which mean a task's verdicts are about (experiments.report.estimand)
        "tasks": [{"key": t.key, "name": t.name, **({"sample": t.sample.model_dump()} if t.sample else {}),
                   **({"limit": t.limit} if t.limit else {}),
                   **({"generated": True} if t.generated else {}),
                   **({"pool_documents": pools[t.key][0], "largest_document": pools[t.key][1]}
                      if t.key in pools else {})}
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

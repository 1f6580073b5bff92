"""Compare two runs cell by cell, paired on the examples both scored.

Cells are matched by (task, reader, compressor label).  A matched pair is
compared on the example ids both runs scored: the two means over those
examples, ``B - A`` with its paired 95% interval and p-value, and the common
n beside each run's own n; a note warns when the two sets of examples differ
(a mean over other examples is another number, not a change).

``match`` compares across names and settings (A and B may be one run directory):

- a row field: ``{"reader": "smollm2:gemma"}`` takes A's cells of reader
  ``smollm2`` and B's of ``gemma`` as the same rows (also ``task``, ``compressor``);
- a setting of the grid: ``{"chunk_size": "100:200"}`` pairs every arm of A
  whose config sets ``chunk_size`` to 100 with the arm of B that sets it to
  200 and is otherwise the same config (same task, reader, compressor, other
  parameters and budget).  A setting is a compressor parameter (a nested
  section by its ``name``: ``retriever=bm25:minilm``), a reader parameter, or
  ``budget``.

Where both runs have a full-context cell for a row's task and reader (each
run's own reader, when readers are matched), every row also gives each run's
change against full and their difference -- a difference of differences,
paired on the examples all four cells scored ("does retrieval help the weaker
reader more?").  A cell is never compared with itself.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import UserError
from experiments.data.provenance import run_version_warnings
from experiments.data.records import budget_text
from experiments.inference.paired import paired_delta
from experiments.inference.results import MIN_PAIRS, PairedDelta, format_delta
from experiments.report.cells import Cell, RunData, cluster_keys, format_n, load_run, paired_vs
from experiments.report.estimand import estimand_text, estimands

FIELDS = ("task", "reader", "compressor")
Key = tuple[str, str, str]


@dataclass(frozen=True)
class Side:
    """One run's cells as the comparison names them: by (task, reader, compressor key), with each cell's label."""

    data: RunData
    cells: dict[Key, Cell]
    labels: dict[Key, str]


def _settings(point: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a grid point a ``--match`` may name: compressor parameters, then reader parameters (a
    nested section as its ``name``), and ``budget``."""
    out: dict[str, Any] = {}
    for section in ("reader", "compressor"):  # the compressor's wins a name both have
        for name, value in ((point.get(section) or {}).get("params") or {}).items():
            out[name] = value.get("name", value) if isinstance(value, Mapping) else value
    if point.get("budget"):
        out["budget"] = budget_text(point["budget"])
    return out


def _text(value: Any) -> str:
    """A setting's value as a ``--match`` names it: ``100``, ``bm25``, ``true``."""
    return json.dumps(value) if isinstance(value, (bool, type(None))) else str(value)


def _points(data: RunData) -> dict[str, Mapping[str, Any]]:
    return {p["config_hash"]: p for p in data.manifest.get("points", [])}


def resolve_match(match: Mapping[str, str], a: RunData, b: RunData) -> dict[str, tuple[str, str]]:
    """``{"reader": "smollm2:gemma"}`` as ``{"reader": ("smollm2", "gemma")}``: the split at the colon that names
    a value of A on its left and one of B on its right (labels may hold colons); a one-line error otherwise.
    A name that is not a row field is a setting of the runs' grids (``chunk_size``, ``retriever``, ``budget``)."""
    out = {}
    for name, spec in match.items():
        if name in FIELDS:
            in_a, in_b = ({getattr(c, name) for c in d.cells} for d in (a, b))
        else:
            in_a, in_b = ({_text(s[name]) for p in _points(d).values() if name in (s := _settings(p))} for d in (a, b))
            if not in_a and not in_b:
                raise UserError(f"--match {name}={spec}: no arm of either run sets {name!r}; match a row field "
                                f"({', '.join(FIELDS)}) or a setting of the grid (a compressor or reader parameter, "
                                "budget)")
        splits = [(spec[:i], spec[i + 1:]) for i, ch in enumerate(spec) if ch == ":"]
        found = [(x, y) for x, y in splits if x in in_a and y in in_b]
        if not found:
            raise UserError(f"--match {name}={spec}: expected A_VALUE:B_VALUE with a {name} of A "
                            f"({', '.join(sorted(in_a))}) and one of B ({', '.join(sorted(in_b))})")
        out[name] = found[0]
    return out


def _side(data: RunData, match: dict[str, tuple[str, str]], side: int) -> Side:
    """The run's cells by (task, reader, compressor key), named as A names them.  A matched field keeps only its
    value; an arm that sets a matched setting keeps only its value and is keyed by its config without it."""
    points = _points(data)
    settings = [name for name in match if name not in FIELDS]
    cells, labels = {}, {}
    for c in data.cells:
        key = [c.task, c.reader, c.compressor]
        keep = True
        for i, name in enumerate(FIELDS):
            if name in match:
                keep = keep and key[i] == match[name][side]
                key[i] = match[name][0]
        point = points.get(c.config_hash, {})
        own = _settings(point)
        matched = [name for name in settings if name in own]
        if matched:
            keep = keep and all(_text(own[name]) == match[name][side] for name in matched)
            rest = {k: v for k, v in (point.get("compressor") or {}).items() if k not in ("label", "tasks")}
            rest["params"] = {k: v for k, v in (rest.get("params") or {}).items() if k not in matched}
            key[2] = "\x00" + json.dumps([rest, {k: v for k, v in own.items() if k not in matched and k != "budget"},
                                         None if "budget" in matched else point.get("budget")], sort_keys=True)
        if keep:
            cells[(key[0], key[1], key[2])] = c
            labels[(key[0], key[1], key[2])] = c.compressor
    return Side(data, cells, labels)


def _full(data: RunData, task: str, reader: str) -> Cell | None:
    """The run's full-context cell of ``task`` and ``reader`` (whatever the match keeps of the run)."""
    return next((c for c in data.cells if c.is_full and c.task == task and c.reader == reader), None)


def _mean(values: list[float]) -> str:
    return f"{100 * sum(values) / len(values):.2f}" if values else "—"


def _fmt(pd: PairedDelta | None, attainable: float = 100.0) -> str:
    """A paired difference with its interval; an interval as wide as everything the difference can be (a
    difference of differences spans [-200, +200]) bounds nothing, so it is named as such, not printed."""
    if pd is None or pd.n == 0:
        return ""
    if pd.n < MIN_PAIRS:
        return f"{pd.delta:+.2f} (n={pd.n})"
    if pd.lo <= -attainable + 1e-9 and pd.hi >= attainable - 1e-9:
        return f"{pd.delta:+.2f} (no bound at this n)"
    return format_delta(pd)


def _difference_of_differences(a: RunData, b: RunData, ca: Cell, cb: Cell, fa: Cell | None,
                               fb: Cell | None) -> tuple[PairedDelta, PairedDelta, PairedDelta] | None:
    """(A's change vs full, B's, and B's minus A's), each paired on the examples all four cells scored."""
    if fa is None or fb is None or ca.is_full or cb.is_full:
        return None
    ia, ib = a.items(), b.items()
    cells = [ia.get((fa.task, fa.config_hash), {}), ia.get((ca.task, ca.config_hash), {}),
             ib.get((fb.task, fb.config_hash), {}), ib.get((cb.task, cb.config_hash), {})]
    ids = sorted(set.intersection(*(set(c) for c in cells)))
    if not ids:
        return None
    score = [[c[i] for i in ids] for c in cells]
    d_a = [arm - full for full, arm in zip(score[0], score[1])]
    d_b = [arm - full for full, arm in zip(score[2], score[3])]
    clusters = cluster_keys(ids, *cells)  # questions on one document move together in every difference
    # each run's change is a difference of scores in [0, 1], tested as one (its interval within [-100, +100];
    # a change in [-1, 1] tested against 0 as one sample is tested over [-2, 2] and can print [-200, +200]);
    # the difference of the changes lies in [-2, 2], where the valid tests of experiments.inference take it
    return (paired_delta(score[0], score[1], clusters=clusters), paired_delta(score[2], score[3], clusters=clusters),
            paired_delta(d_a, d_b, clusters=clusters, bounded=(-1.0, 1.0)))


def _name(side: Side, key: Key) -> str:
    return " | ".join([key[0], key[1], side.labels[key]])


def compare_runs(run_a: str | Path, run_b: str | Path,
                 match: Mapping[str, str] | None = None) -> tuple[list[str], list[list[str]], list[str]]:
    """Rows for the cells both runs have, paired on their common examples, and notes: cells only one run has,
    and rows whose two runs scored different examples.

    A comparison with no common cell is not a table of half-empty rows: the
    notes say so, and name what each run holds.
    """
    da, db = load_run(run_a), load_run(run_b)
    pairs = resolve_match(match or {}, da, db)
    a, b = _side(da, pairs, 0), _side(db, pairs, 1)
    same_run = da.run_dir.resolve() == db.run_dir.resolve()
    header = ["task", "reader", "compressor", "A", "B", "B - A [95% CI]", "p", "n common", "n A", "n B",
              "A - full", "B - full", "(B - full) - (A - full) [95% CI]", "p (diff of diffs)", "n (diff of diffs)"]
    body, notes = [], run_version_warnings(run_a, run_b)
    ia, ib = da.items(), db.items()
    readers = pairs.get("reader")
    common = [k for k in a.cells if k in b.cells
              and not (same_run and a.cells[k].config_hash == b.cells[k].config_hash)]
    for key in common:
        ca, cb = a.cells[key], b.cells[key]
        items_a, items_b = ia.get((ca.task, ca.config_hash), {}), ib.get((cb.task, cb.config_hash), {})
        ids = sorted(set(items_a) & set(items_b))
        pd = paired_vs(items_a, items_b)
        label = [key[0], f"{readers[0]} : {readers[1]}" if readers else key[1],
                 a.labels[key] if a.labels[key] == b.labels[key] else f"{a.labels[key]} : {b.labels[key]}"]
        row = [*label, _mean([items_a[i] for i in ids]), _mean([items_b[i] for i in ids]), _fmt(pd),
               f"{pd.p_value:.3f}" if pd.n >= MIN_PAIRS else "", format_n(len(ids), pd.clusters),
               str(len(items_a)), str(len(items_b))]
        dod = _difference_of_differences(da, db, ca, cb, _full(da, ca.task, ca.reader), _full(db, cb.task, cb.reader))
        row += ["", "", "", "", ""] if dod is None else [
            _fmt(dod[0]), _fmt(dod[1]), _fmt(dod[2], attainable=200.0), f"{dod[2].p_value:.3f}" if dod[2].n >= MIN_PAIRS else "",
            format_n(dod[2].n, dod[2].clusters)]
        body.append(row)
        if set(items_a) != set(items_b):
            notes.append(f"{' | '.join(label)}: A scored {len(items_a)} example(s), B {len(items_b)}, {len(ids)} in "
                         "common; A, B and B - A are over the common ones")
    said = [estimand_text(estimands(d.manifest, d.predictions)) for d in (da, db)]
    if body and said[0] != said[1]:  # B - A then mixes two means (docs/metrics.md, "Which mean")
        notes.append(f"the runs estimate different means: in A {said[0] or 'unknown'}; in B {said[1] or 'unknown'}")
    if not any(row[10] for row in body):  # no row has a full-context cell on both sides: no such columns
        header, body = header[:10], [row[:10] for row in body]
    if not common:
        notes.append(f"no cell in common: {run_a} and {run_b} share no (task, reader, compressor)")
    only_a = [k for k in a.cells if k not in b.cells]
    only_b = [k for k in b.cells if k not in a.cells]
    if only_a:
        notes.append(f"only in A ({len(only_a)}): " + "; ".join(_name(a, k) for k in only_a))
    if only_b:
        notes.append(f"only in B ({len(only_b)}): " + "; ".join(_name(b, k) for k in only_b))
    return header, body, notes

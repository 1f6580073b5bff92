"""Compare two runs cell by cell, paired on the examples both scored.

Cells are matched by (task, reader, compressor label).  A matched pair is
compared on the example ids both runs scored: the two means over those
examples, ``B - A`` with its paired 95% interval and p-value, and the common
n beside each run's own n; a note warns when the two sets of examples differ
(a mean over other examples is another number, not a change).

``match`` compares across names: ``{"reader": "smollm2:gemma"}`` takes A's
cells of reader ``smollm2`` and B's of ``gemma`` as the same rows (A and B
may be one run directory).  Where both runs have a full-context cell for a
row's task and reader, the row also gives each run's change against full and
their difference -- a difference of differences, paired on the examples all
four cells scored ("does retrieval help the weaker reader more?").
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from core.errors import UserError
from experiments.data.provenance import run_version_warnings
from experiments.report.cells import Cell, RunData, load_run, paired_vs
from experiments.report.stats import MIN_PAIRS, PairedDelta, format_delta, paired_delta

FIELDS = ("task", "reader", "compressor")
Key = tuple[str, str, str]


def resolve_match(match: Mapping[str, str], a: RunData, b: RunData) -> dict[str, tuple[str, str]]:
    """``{"reader": "smollm2:gemma"}`` as ``{"reader": ("smollm2", "gemma")}``: the split at the colon that names
    a value of A on its left and one of B on its right (labels may hold colons); a one-line error otherwise."""
    out = {}
    for name, spec in match.items():
        if name not in FIELDS:
            raise UserError(f"--match {name}=...: can match {', '.join(FIELDS)}, not {name!r}")
        in_a = {getattr(c, name) for c in a.cells}
        in_b = {getattr(c, name) for c in b.cells}
        splits = [(spec[:i], spec[i + 1:]) for i, ch in enumerate(spec) if ch == ":"]
        found = [(x, y) for x, y in splits if x in in_a and y in in_b]
        if not found:
            raise UserError(f"--match {name}={spec}: expected A_VALUE:B_VALUE with a {name} of A "
                            f"({', '.join(sorted(in_a))}) and one of B ({', '.join(sorted(in_b))})")
        out[name] = found[0]
    return out


def _cells(data: RunData, match: dict[str, tuple[str, str]], side: int) -> dict[Key, Cell]:
    """The run's cells by (task, reader, compressor), named as A names them; a matched field keeps only its value."""
    out = {}
    for c in data.cells:
        key = [c.task, c.reader, c.compressor]
        keep = True
        for i, name in enumerate(FIELDS):
            if name in match:
                keep = keep and key[i] == match[name][side]
                key[i] = match[name][0]
        if keep:
            out[(key[0], key[1], key[2])] = c
    return out


def _mean(values: list[float]) -> str:
    return f"{100 * sum(values) / len(values):.2f}" if values else "—"


def _fmt(pd: PairedDelta | None) -> str:
    if pd is None or pd.n == 0:
        return ""
    return format_delta(pd) if pd.n >= MIN_PAIRS else f"{pd.delta:+.2f} (n={pd.n})"


def _difference_of_differences(a: RunData, b: RunData, ca: Cell, cb: Cell, fa: Cell | None,
                               fb: Cell | None) -> tuple[PairedDelta, PairedDelta, PairedDelta] | None:
    """(A's change vs full, B's, and B's minus A's), each paired on the examples all four cells scored."""
    if fa is None or fb is None or ca.is_full:
        return None
    ia, ib = a.items(), b.items()
    cells = [ia.get((fa.task, fa.config_hash), {}), ia.get((ca.task, ca.config_hash), {}),
             ib.get((fb.task, fb.config_hash), {}), ib.get((cb.task, cb.config_hash), {})]
    ids = sorted(set.intersection(*(set(c) for c in cells)))
    if not ids:
        return None
    d_a = [cells[1][i] - cells[0][i] for i in ids]
    d_b = [cells[3][i] - cells[2][i] for i in ids]
    zeros = [0.0] * len(ids)
    return paired_delta(zeros, d_a), paired_delta(zeros, d_b), paired_delta(d_a, d_b)


def compare_runs(run_a: str | Path, run_b: str | Path,
                 match: Mapping[str, str] | None = None) -> tuple[list[str], list[list[str]], list[str]]:
    """Rows for the cells both runs have, paired on their common examples, and notes: cells only one run has,
    and rows whose two runs scored different examples.

    A comparison with no common cell is not a table of half-empty rows: the
    notes say so, and name what each run holds.
    """
    da, db = load_run(run_a), load_run(run_b)
    pairs = resolve_match(match or {}, da, db)
    a, b = _cells(da, pairs, 0), _cells(db, pairs, 1)
    full_a = {(k[0], k[1]): c for k, c in a.items() if c.is_full}
    full_b = {(k[0], k[1]): c for k, c in b.items() if c.is_full}
    header = ["task", "reader", "compressor", "A", "B", "B - A [95% CI]", "p", "n common", "n A", "n B"]
    common = [k for k in a if k in b]
    body, notes, dod_rows = [], run_version_warnings(run_a, run_b), {}
    ia, ib = da.items(), db.items()
    for key in common:
        ca, cb = a[key], b[key]
        items_a, items_b = ia.get((ca.task, ca.config_hash), {}), ib.get((cb.task, cb.config_hash), {})
        ids = sorted(set(items_a) & set(items_b))
        pd = paired_vs(items_a, items_b)
        label = list(key)
        if pairs.get("reader"):
            label[1] = f"{pairs['reader'][0]} : {pairs['reader'][1]}"
        body.append([*label, _mean([items_a[i] for i in ids]), _mean([items_b[i] for i in ids]), _fmt(pd),
                     f"{pd.p_value:.3f}" if pd.n >= MIN_PAIRS else "", str(len(ids)), str(len(items_a)),
                     str(len(items_b))])
        if set(items_a) != set(items_b):
            notes.append(f"{' | '.join(key)}: A scored {len(items_a)} example(s), B {len(items_b)}, {len(ids)} in "
                         "common; A, B and B - A are over the common ones")
        dod = _difference_of_differences(da, db, ca, cb, full_a.get(key[:2]), full_b.get(key[:2]))
        if dod is not None:
            dod_rows[len(body) - 1] = dod
    if dod_rows:
        header += ["A - full", "B - full", "(B - full) - (A - full) [95% CI]", "p (diff of diffs)", "n (diff of diffs)"]
        for i, row in enumerate(body):
            d = dod_rows.get(i)
            row += ["", "", "", "", ""] if d is None else [
                _fmt(d[0]), _fmt(d[1]), _fmt(d[2]), f"{d[2].p_value:.3f}" if d[2].n >= MIN_PAIRS else "", str(d[2].n)]
    if not common:
        notes.append(f"no cell in common: {run_a} and {run_b} share no (task, reader, compressor)")
    only_a, only_b = [k for k in a if k not in b], [k for k in b if k not in a]
    if only_a:
        notes.append(f"only in A ({len(only_a)}): " + "; ".join(" | ".join(k) for k in only_a))
    if only_b:
        notes.append(f"only in B ({len(only_b)}): " + "; ".join(" | ".join(k) for k in only_b))
    return header, body, notes

"""Compare two runs cell by cell (matched by task, reader and compressor label)."""
from __future__ import annotations

from pathlib import Path

from experiments.report.cells import load_run


def compare_runs(run_a: str | Path, run_b: str | Path) -> tuple[list[str], list[list[str]], list[str]]:
    """Rows for the cells both runs have (score in A, in B, B - A), and notes on the cells only one has.

    A comparison with no common cell is not a table of half-empty rows: the
    notes say so, and name what each run holds.
    """
    a = {(c.task, c.reader, c.compressor): c for c in load_run(run_a).cells}
    b = {(c.task, c.reader, c.compressor): c for c in load_run(run_b).cells}
    header = ["task", "reader", "compressor", "A", "B", "B - A", "n A", "n B"]
    common = [k for k in a if k in b]
    body = []
    for key in common:
        ca, cb = a[key], b[key]
        diff = cb.score - ca.score
        body.append([*key, f"{ca.score:.2f}", f"{cb.score:.2f}", "—" if diff != diff else f"{diff:+.2f}",
                     str(ca.n), str(cb.n)])
    notes = []
    if not common:
        notes.append(f"no cell in common: {run_a} and {run_b} share no (task, reader, compressor)")
    only_a, only_b = [k for k in a if k not in b], [k for k in b if k not in a]
    if only_a:
        notes.append(f"only in A ({len(only_a)}): " + "; ".join(" | ".join(k) for k in only_a))
    if only_b:
        notes.append(f"only in B ({len(only_b)}): " + "; ".join(" | ".join(k) for k in only_b))
    return header, body, notes

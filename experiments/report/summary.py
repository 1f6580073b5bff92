"""What report.md and the view read, computed once (``report_tables``: the tables by name, the curve, the tests the
summary counts), and the summary that opens them: what ran, what to distrust first, and what was decided."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from experiments.data.records import budget_text
from experiments.inference.results import ALPHA, MIN_PAIRS
from experiments.inference.verdicts import NOT_WORSE, WORSE
from experiments.report.cells import Cell, RunData, Table
from experiments.report.curve import curve_contrasts, curve_rows, saturation
from experiments.report.estimand import estimand_text, estimands
from experiments.report.lengths import length_tables
from experiments.report.tables import breakdown_table, contrast_table, efficiency_table, position_contrasts, score_table
from experiments.report.tradeoff.analysis import tradeoff_analysis
from experiments.report.tradeoff.noninferiority import run_margin
from experiments.report.truncation import truncation_warnings
from experiments.tasks.benchmark import benchmarks


@dataclass
class Analysis:
    """What report.md, tables/ and the view show, computed once: the tables by name (in order), the notes on
    planned contrasts not computed, the curve's rows and each curve's saturation, and the non-inferiority tests
    (``tradeoff.noninferiority_rows``) that the summary counts."""

    tables: dict[str, Table]
    contrast_notes: list[str]
    curve: list[Any]
    saturation: dict[tuple[str, str], Any]
    noninferiority: list[dict[str, Any]]
    margin: float


def report_tables(data: RunData) -> Analysis:
    """The tables of report.md (by name, in order) and what its summary reads: one computation shared by the
    report and the view."""
    cells = data.cells
    contrasts, contrast_notes = contrast_table(cells, data.items(), data.manifest.get("contrasts") or [])
    tables = {
        "scores": score_table(cells, data.items()),
        "contrasts": contrasts,
        "efficiency": efficiency_table(cells),
        "length_buckets": breakdown_table(cells, "buckets"),
        "positions": breakdown_table(cells, "by_position"),
        "position_contrasts": position_contrasts(cells, data.items()),
    }
    tables.update(context_length_tables(data))
    curve = curve_rows(data)
    sat = saturation(data) if curve else {}
    if curve:
        tables["curve_contrasts"] = curve_contrasts(data, sat)
    tradeoff, noninferiority = tradeoff_analysis(data)
    if tradeoff.get("sequential", ([], []))[1]:
        # a grown run's verdicts are its looks': a fixed-n re-test of the last look's data controls no error
        # after repeated looks, and its intervals contradicted the confidence sequences, so it is not shown
        tradeoff = {name: table for name, table in tradeoff.items()
                    if name not in ("noninferiority", "smallest_noninferior")}
        noninferiority = []
    tables.update(tradeoff)
    return Analysis(tables, contrast_notes, curve, sat, noninferiority, run_margin(data))


def context_length_tables(data: RunData) -> dict[str, Table]:
    """The score-by-length tables (with intervals, and deltas vs full paired by length) and the benchmarks' own
    tables (LongBench v2's result.py table), when the run has tasks they apply to."""
    scores, deltas = length_tables(data.cells, data.predictions)
    own = {name: table.build(data.cells, data.predictions)
           for bench in benchmarks() for name, table in bench.report_tables.items()}
    return {"score_by_length": scores, "length_deltas": deltas, **own}


MAX_NAMED = 6  # a summary line names at most this many rows, then says how many more


def _named(items: Sequence[str]) -> str:
    shown = ", ".join(items[:MAX_NAMED])
    return shown + (f" and {len(items) - MAX_NAMED} more" if len(items) > MAX_NAMED else "")


def error_control_statement(analysis: Analysis) -> str:
    """The sentence of the summary that says which error each verdict controls, over which family, and how many
    verdicts survive the family's adjustment (docs/metrics.md, "How much can go")."""
    text = ("Each interval is a 95% interval over documents (examples that share one move together) and each "
            f"verdict a one-sided test at α = {ALPHA:g} of its own cell, so a grid of many cells holds false verdicts "
            "at that rate per cell")
    rows = analysis.noninferiority
    tested = [r for r in rows if r["p"] == r["p"]]
    if tested:
        survive = sum(1 for r in tested if r["verdict"] == NOT_WORSE and r["p_holm"] <= ALPHA)
        shown = sum(1 for r in tested if r["verdict"] == NOT_WORSE)
        text += (f"; over the family of all {len(tested)} non-inferiority tests, Holm's adjustment controls the "
                 f"family-wise error at {ALPHA:g}: {survive} of the {shown} 'not worse' verdicts survive it")
    sequential = analysis.tables.get("sequential", ([], []))[1]
    if sequential:
        return text + ("; a sequential run's decisions keep α per cell across its repeated looks (anytime-valid "
                       "betting).")
    if analysis.curve and not rows:  # a curve has ks, not budgets
        return text + ("; the walk down from a curve's largest k controls the family-wise error over its ks (each "
                       "k against every larger k, the fixed-sequence procedure).")
    return text + ("; the smallest non-inferior budget controls the family-wise error over each compressor's "
                   "budgets (the fixed-sequence procedure).")


def resume_advice(failed: int, repeats: int, resume: str) -> str:
    """What to do about ``failed`` examples that failed, ``repeats`` of them failures a resume only repeats
    (``Failure.resume_repeats``: a compressor's refusal, a rejected request); ``resume`` is the command that retries
    the others.  The console's warning after a run and report.md's summary say it alike."""
    if not repeats:
        return f"retry with {resume}"
    return (f"{repeats} of them were refused by their compressor or rejected by the server, which a resume repeats: "
            "change the config (e.g. a larger budget)"
            + (f"; retry the other {failed - repeats} with {resume}" if repeats < failed else ""))


def against_full(cells: Sequence[Cell], interval: str = "interval") -> str:
    """How many compressed cells' paired 95% ``interval`` excludes 0, of how many, and which cells have none
    and why (fewer than 5 pairs, no full-context cell to pair with, every example failed): a count that hides
    cells is not a count of the grid."""
    compressed = [c for c in cells if not c.is_full]
    if not compressed or not any(c.is_full for c in cells):  # a curve: no row is paired with full context
        return ""
    shown = [c for c in compressed if c.paired is not None and c.paired.n >= MIN_PAIRS]
    better = [f"{c.compressor} on {c.task} ({c.delta_paired:+.2f})" for c in shown if c.paired.lo > 0]
    worse = [f"{c.compressor} on {c.task} ({c.delta_paired:+.2f})" for c in shown if c.paired.hi < 0]
    text = (f"the paired 95% {interval} excludes 0 in {len(better) + len(worse)} of {len(shown)} compressed cells "
            f"with one: better in {len(better)}, worse in {len(worse)}"
            + (f"; better: {_named(better)}" if better else "") + (f"; worse: {_named(worse)}" if worse else ""))
    missing = [c for c in compressed if c not in shown]
    if missing:
        why = [_why_no_interval(c) for c in missing]
        text += (f"; {len(missing)} of the {len(compressed)} compressed cells have no interval: "
                 + "; ".join(f"{count} {reason}" for reason, count in Counter(why).most_common()))
    return text


def _why_no_interval(cell: Cell) -> str:
    if cell.n == 0:
        return "had every example fail"
    if cell.delta_vs_full is None and cell.paired is None:
        return "have no full-context cell of their reader and task to pair with"
    return f"have fewer than {MIN_PAIRS} pairs"


def summary_lines(data: RunData, analysis: Analysis) -> list[tuple[str, str]]:
    """The opening of report.md (and of the view): what ran, what to distrust first, and what was decided, as
    (topic, plain text) lines."""
    cells = data.cells
    readers, tasks = list(dict.fromkeys(c.reader for c in cells)), list(dict.fromkeys(c.task for c in cells))
    arms = list(dict.fromkeys(c.compressor for c in cells))
    ns = sorted(c.n for c in cells if c.n) or [0]
    given = data.manifest.get("given", {})
    margin = f"margin {analysis.margin:g} points"
    from_cli = (f" (given to `ctxcomp report`; the config says {given['margin'][1]:g})"
                if given.get("margin") and given["margin"][1] is not None else "")
    n = str(ns[0]) if ns[0] == ns[-1] else f"{ns[0]}-{ns[-1]}"
    lines = [("Run", f"{len(tasks)} task(s) x {len(arms)} arm(s) x {len(readers)} reader(s); n = {n} examples per "
                     f"cell; {margin}{from_cli}.")]
    recorded = {r.key for r in data.predictions} if data.failures else set()
    failed = {f.key: f for f in data.failures if f.key not in recorded}  # the last failure of each example
    if failed:
        advice = resume_advice(len(failed), sum(f.resume_repeats for f in failed.values()), "`ctxcomp run --resume`")
        lines.append(("Failed", f"{len(failed)} example(s) failed and are excluded from the scores "
                                f"(`failures.jsonl`): {advice}."))
    lines += [("Warning", f"{w}.") for w in truncation_warnings(data.predictions)]
    sequential = analysis.tables.get("sequential", ([], []))[1]
    against = against_full(cells, "confidence sequence" if sequential else "interval")
    if against:
        lines.append(("Against full context", f"{against}."))
    if sequential:
        decisions = [row[-1] for row in sequential]
        decided = {d: decisions.count(d) for d in ("not worse", "worse")}
        lines.append(("Decided as the run grew", f"{decided['not worse']} not worse than full, {decided['worse']} "
                      f"worse, {len(decisions) - sum(decided.values())} not decided of {len(decisions)} cells, by "
                      "the sequential rule (anytime-valid betting over the looks): these are the run's verdicts, and "
                      "every interval of this report is a cell's confidence sequence at its last look (a fixed-n "
                      "test of the same data would ignore the looks, so none is shown)."))
    if analysis.noninferiority:
        verdicts = [r["verdict"] for r in analysis.noninferiority]
        kept = [" ".join(filter(None, [r["arm"].line, budget_text(r["arm"].budget), "on", r["arm"].cell.task]))
                for r in analysis.noninferiority if r["verdict"] == NOT_WORSE]
        undecided = len(verdicts) - verdicts.count(NOT_WORSE) - verdicts.count(WORSE)
        lines.append(("How much can go", f"{margin}: {verdicts.count(NOT_WORSE)} not worse than full, "
                      f"{verdicts.count(WORSE)} worse, {undecided} undecided (cannot tell at this n, too few "
                      f"documents, or a floor or ceiling) of {len(verdicts)} tests"
                      + (f"; not worse: {_named(kept)}" if kept else "") + "."))
    contrasts = analysis.tables.get("contrasts", ([], []))[1]
    if contrasts:
        resolved = [f"{row[1]} ({row[0]})" for row in contrasts if any(cell.endswith("*") for cell in row[2:])]
        lines.append(("Planned contrasts", f"{len(resolved)} of {len(contrasts)} resolve (an interval excludes 0)"
                      + (f": {_named(resolved)}" if resolved else "") + "."))
    for s in analysis.saturation.values():
        vs = s.test
        lines.append((f"Saturation ({s.task}, {s.reader})",
                      f"k = {s.text} (largest k = {s.reference_k}, best k = {s.best_k}"
                      + (f"; k = {s.k} minus largest: {vs.delta:+.2f} [{vs.lo:+.2f}, {vs.hi:+.2f}]" if vs else "")
                      + f"; {s.ladder})."))
    said = estimand_text(estimands(data.manifest, data.predictions))
    if said and any(not c.is_full for c in cells):
        lines.append(("What is estimated", f"{said[0].upper()}{said[1:]} (docs/metrics.md, \"Which mean\")."))
    lines.append(("Error control", error_control_statement(analysis)))
    return lines

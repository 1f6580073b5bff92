import itertools
import json

import numpy as np
import pytest

from experiments.data.records import Failure, Prediction
from experiments.data.store import RunDir
from experiments.inference.paired import paired_delta
from experiments.report.cells import compute_cells
from experiments.report.compare import compare_runs
from experiments.report.tables import efficiency_table, score_table
from experiments.report.write import write_report
from experiments.scoring import length_bucket


def rec(task, id_, comp, h, score, *, length=100, meta=None, reader="r", tin=100, tout=25, kind=""):
    return Prediction(task=task, id=id_, config_hash=h, compressor=comp, compressor_kind=kind, reader=reader,
                      prediction="", metric="qa_f1", score=score, length=length, tokens_in=tin, tokens_out=tout,
                      reader_tokens_in=tout + 10, reader_tokens_out=3, latency_s=0.5, compress_s=0.01, cost_usd=0.001,
                      meta=meta or {})


def failure(task, id_, comp, h):
    return Failure(task=task, id=id_, config_hash=h, compressor=comp, reader="r", stage="compress", reason="x")


def test_cell_score_is_100_x_mean_rounded_and_delta_is_against_full_of_same_reader():
    preds = [
        rec("hotpotqa", "a", "full", "F", 1.0, tout=100), rec("hotpotqa", "b", "full", "F", 0.0, tout=100),
        rec("hotpotqa", "c", "full", "F", 0.5, tout=100),
        rec("hotpotqa", "a", "retrieval(bm25, 200x7)", "R", 1.0), rec("hotpotqa", "b", "retrieval(bm25, 200x7)", "R", 1 / 3),
        rec("hotpotqa", "c", "retrieval(bm25, 200x7)", "R", 0.0),
    ]
    cells = {c.compressor: c for c in compute_cells(preds)}
    assert cells["full"].score == 50.0
    assert cells["retrieval(bm25, 200x7)"].score == 44.44  # 100 * (4/3) / 3 = 44.444...
    assert cells["retrieval(bm25, 200x7)"].delta_vs_full == -5.56
    assert cells["full"].delta_vs_full is None
    assert cells["retrieval(bm25, 200x7)"].ratio == 4.0  # 300 tokens in / 75 out
    # paired over a, b, c: (1 - 1) + (1/3 - 0) + (0 - 0.5) = -1/6 over 3 -> -5.56; n = 3 is too few for an interval
    assert (cells["retrieval(bm25, 200x7)"].delta_paired, cells["retrieval(bm25, 200x7)"].n_paired) == (-5.56, 3)
    assert cells["retrieval(bm25, 200x7)"].delta_ci95 is None


def test_paired_interval_agrees_with_scipy_bootstrap_and_an_exact_sign_flip_test():
    from scipy import stats

    rng = np.random.default_rng(3)
    a = rng.integers(0, 2, 60).astype(float)
    b = np.where(rng.random(60) < 0.25, 1.0 - a, a)  # flip a quarter of the outcomes
    b[:6] = 1.0  # and a few wins for b
    pd = paired_delta(a, b)
    assert pd.n == 60 and pd.delta == round(100 * float((b - a).mean()), 2)
    ref = stats.bootstrap(((b - a),), np.mean, n_resamples=10_000, method="percentile", confidence_level=0.95,
                          random_state=11).confidence_interval
    assert pd.lo == pytest.approx(100 * ref.low, abs=2.0) and pd.hi == pytest.approx(100 * ref.high, abs=2.0)
    # the sign-flip p-value against the exact enumeration on a small sample (2^12 sign patterns)
    d = (b - a)[:12] + np.linspace(0, 0.01, 12)  # distinct magnitudes, so the permutation distribution is fine-grained
    exact = np.mean([abs(np.mean(np.array(signs) * d)) >= abs(d.mean()) - 1e-12
                     for signs in itertools.product((-1, 1), repeat=12)])
    # 2^12 patterns <= 10,000 resamples: scipy's permutation_test enumerates them, so the p-value is exact
    assert paired_delta(np.zeros(12), d).p_value == pytest.approx(exact, abs=1e-4)


def test_at_small_n_the_interval_and_its_p_value_say_the_same():
    from experiments.inference.results import format_delta, format_p

    # 4 of 16 questions right at the last position and wrong in the middle, none the other way (a LITM sweep):
    # a percentile bootstrap excludes 0 here (a `*`) beside a p of 0.125; the interval is the one the exact test
    # inverts, so it takes in 0 exactly when its p-value is above 0.05
    pd = paired_delta(np.zeros(16), np.array([1.0] * 4 + [0.0] * 12))
    assert not format_delta(pd).endswith("*") and pd.lo <= 0 < pd.hi
    assert 0.05 < float(format_p(pd)) < 0.125
    stronger = paired_delta(np.zeros(16), np.array([1.0] * 7 + [0.0] * 9))
    assert format_delta(stronger).endswith("*") and stronger.lo > 0 and stronger.p_value <= 0.05
    assert format_p(paired_delta(np.zeros(4), np.ones(4))) == ""  # below 5 pairs, no test


def test_cells_with_enough_pairs_carry_interval_n_and_p_value():
    preds = [rec("hotpotqa", str(i), "full", "F", float(i % 2)) for i in range(40)]
    preds += [rec("hotpotqa", str(i), "retrieval", "R", 1.0 if i % 4 else 0.0) for i in range(40)]
    cells = {c.compressor: c for c in compute_cells(preds)}
    r = cells["retrieval"]
    assert r.n_paired == 40 and r.delta_paired == 25.0
    assert r.delta_ci95[0] < 25.0 < r.delta_ci95[1] and 0 <= r.p_value <= 1
    header, body = score_table(list(cells.values()))
    assert body[1][2].startswith("75.00 (+25.00 [") and body[1][2].endswith("]*)")  # the star: the interval excludes 0


def test_failures_are_counted_not_scored_and_disappear_once_predicted():
    preds = [rec("hotpotqa", "a", "full", "F", 1.0)]
    fails = [failure("hotpotqa", "b", "full", "F")]
    (cell,) = compute_cells(preds, fails)
    assert (cell.score, cell.n, cell.n_failed) == (100.0, 1, 1)
    (cell,) = compute_cells(preds + [rec("hotpotqa", "b", "full", "F", 0.0)], fails)
    assert (cell.score, cell.n, cell.n_failed) == (50.0, 2, 0)


def test_longbench_e_buckets_and_positions():
    assert [length_bucket(n) for n in (0, 3999, 4000, 7999, 8000)] == ["0-4k", "0-4k", "4-8k", "4-8k", "8k+"]
    preds = [rec("hotpotqa", str(i), "full", "F", s, length=n) for i, (s, n) in enumerate([(1, 100), (0, 5000), (1, 9000), (0, 9500)])]
    (cell,) = compute_cells(preds)
    assert cell.buckets == {"0-4k": 100.0, "4-8k": 0.0, "8k+": 50.0}
    from experiments.data.synthetic import make_multidoc_qa
    from experiments.protocols import litm

    (ex,) = make_multidoc_qa(1, num_docs=10, words_per_doc=30)
    variants = [litm.with_gold_at(ex, 0, 10), litm.with_gold_at(ex, 9, 10), litm.closed_book(ex), litm.oracle(ex)]
    sweep = [rec("nq_multidoc", v.id, "full", "F", score, meta=v.meta) for v, score in zip(variants, (1.0, 0.0, 1.0, 0.0))]
    (cell,) = compute_cells(sweep)
    # the oracle's single document sits at position 0, but it is a setting, not a point of the sweep
    assert cell.by_position == {"0": 100.0, "9": 0.0, "closed_book": 100.0, "oracle": 0.0}


def test_table_layout_rows_reader_x_compressor_columns_tasks_with_averages():
    preds = [rec("hotpotqa", "a", "full", "F", 1.0), rec("gov_report", "a", "full", "F", 0.5),
             rec("hotpotqa", "a", "retrieval", "R", 0.0), rec("gov_report", "a", "retrieval", "R", 0.5)]
    header, body = score_table(compute_cells(preds))
    assert header[:4] == ["reader", "compressor", "hotpotqa (qa_f1)", "gov_report (qa_f1)"]  # first seen, metric named
    assert header[-2:] == ["avg", "n (per task)"]
    assert body[0][:2] == ["r", "full"] and body[0][-2:] == ["75.00", "1"]
    assert body[1][:2] == ["r", "retrieval"] and body[1][-2] == "25.00 (-50.00)"
    assert body[1][2] == "0.00 (-100.00, n=1)"


def test_rows_follow_the_config_order_and_efficiency_has_one_row_per_task():
    manifest = {"tasks": [{"key": "t2"}, {"key": "t1"}],
                "points": [{"config_hash": "Z"}, {"config_hash": "F"}, {"config_hash": "A"}]}
    preds = [rec(t, "x", comp, h, 0.5) for t in ("t1", "t2") for comp, h in (("alpha", "A"), ("full", "F"), ("zeta", "Z"))]
    cells = compute_cells(preds, manifest=manifest)
    header, body = score_table(cells)
    assert [row[1] for row in body] == ["zeta", "full", "alpha"] and header[2:4] == ["t2 (qa_f1)", "t1 (qa_f1)"]
    header, body = efficiency_table(cells)
    assert [(row[0], row[2]) for row in body] == [("t2", "zeta"), ("t2", "full"), ("t2", "alpha"),
                                                 ("t1", "zeta"), ("t1", "full"), ("t1", "alpha")]


def test_two_configs_with_one_label_never_share_a_row():
    preds = [rec("hotpotqa", "x", "retrieval(bm25, top3)", "H1", 1.0), rec("hotpotqa", "x", "retrieval(bm25, top3)", "H2", 0.0)]
    labels = {c.compressor for c in compute_cells(preds)}
    assert labels == {"retrieval(bm25, top3) [H1]", "retrieval(bm25, top3) [H2]"}


def test_write_report_and_compare(tmp_path):
    for name, score in (("a", 1.0), ("b", 0.0)):
        run = tmp_path / name
        run.mkdir()
        RunDir(run).predictions.append(rec("hotpotqa", "x", "full", "F", score))
    md, plots = write_report(tmp_path / "a", plots=False)
    assert "| r | full | 100.00 |" in md
    assert json.loads((tmp_path / "a" / "scores.json").read_text())["cells"][0]["score"] == 100.0
    header, body, notes = compare_runs(tmp_path / "a", tmp_path / "b")
    assert body == [["hotpotqa", "r", "full", "100.00", "0.00", "-100.00 (n=1)", "", "1", "1", "1"]] and notes == []


def test_compare_with_no_common_cell_warns_instead_of_half_empty_rows(tmp_path):
    for name, task in (("a", "hotpotqa"), ("b", "qasper")):
        (tmp_path / name).mkdir()
        RunDir(tmp_path / name).predictions.append(rec(task, "x", "full", "F", 1.0))
    header, body, notes = compare_runs(tmp_path / "a", tmp_path / "b")
    assert body == []
    assert notes[0].startswith("no cell in common") and "only in A (1): hotpotqa | r | full" in notes[1]


def test_a_relabelled_full_context_is_still_the_baseline_and_nan_is_null_in_json(tmp_path):
    preds = [rec("hotpotqa", "a", "whole document", "F", 1.0, kind="full"),
             rec("hotpotqa", "a", "bm25 top-3", "R", 0.0, kind="retrieval")]
    fails = [failure("gov_report", "z", "bm25 top-3", "R")]
    cells = {(c.task, c.compressor): c for c in compute_cells(preds, fails)}
    assert cells[("hotpotqa", "bm25 top-3")].delta_vs_full == -100.0
    header, body = score_table(list(cells.values()))
    assert body[0][1] == "whole document"
    run = tmp_path / "run"
    run.mkdir()
    for r in preds:
        RunDir(run).predictions.append(r)
    for f in fails:
        RunDir(run).failures.append(f)
    write_report(run, plots=False)
    data = json.loads((run / "scores.json").read_text())  # strict JSON: no NaN
    assert {c["task"]: c["score"] for c in data["cells"]}["gov_report"] is None


def test_an_average_over_fewer_tasks_counts_only_tasks_that_were_scored():
    preds = [rec(t, "a", "full", "F", 1.0) for t in ("t1", "t2", "t3")] + [rec("t1", "a", "summ", "S", 0.5)]
    fails = [failure("t2", "a", "summ", "S")]
    header, body = score_table(compute_cells(preds, fails))
    row = next(r for r in body if r[1] == "summ")
    assert row[header.index("avg")].endswith("(over 1 task; no score on t2, t3)")
    assert row[header.index("t2 (qa_f1)")] == "—"


def test_planned_contrasts_pair_two_compressed_rows_per_task_and_over_tasks():
    from experiments.report.tables import contrast_table

    rng = np.random.default_rng(3)
    preds = []
    for task in ("t1", "t2"):
        for i in range(12):
            preds += [rec(task, f"e{i}", "a", "A", float(rng.integers(0, 2))), rec(task, f"e{i}", "b", "B", float(rng.integers(0, 2)))]
    preds.append(rec("t3", "e0", "a", "A", 1.0))  # a task only one row scored: not part of the contrast
    fails = [failure("t3", "e0", "b", "B")]
    cells = compute_cells(preds, fails)
    items = {}
    for p in preds:
        items.setdefault((p.task, p.config_hash), {})[p.id] = p.score
    (header, body), notes = contrast_table(cells, items, [{"arm": "b", "against": "a"}])
    assert header == ["reader", "contrast", "t1", "t2", "avg", "p (avg)", "tasks", "n"] and notes == []
    row = body[0]
    by_hand = [paired_delta([items[(t, "A")][f"e{i}"] for i in range(12)], [items[(t, "B")][f"e{i}"] for i in range(12)])
               for t in ("t1", "t2")]
    assert row[2].startswith(f"{by_hand[0].delta:+.2f} [{by_hand[0].lo:+.2f}, {by_hand[0].hi:+.2f}]")
    assert row[4].startswith(f"{(by_hand[0].delta + by_hand[1].delta) / 2:+.2f}") and row[6:] == ["2", "24"]
    assert row[5] == ""  # an average over tasks is decided by its interval (each task's at alpha / 2): no p


def test_position_contrasts_pair_a_sweep_and_skip_positions_spread_over_different_questions():
    from experiments.report.tables import position_contrasts

    preds = []
    for q in range(8):  # a sweep: every question asked with the gold at 0, 4 and 9; right only when last
        for pos in (0, 4, 9):
            preds.append(rec("sweep", f"q{q}@gold{pos}", "full", "F", 1.0 if pos == 9 and q < 6 else 0.0,
                             meta={"gold_position": pos}))
    for q in range(9):  # no sweep: each question has its own gold position (the quickstart's synthetic data)
        preds.append(rec("spread", f"s{q}", "full", "F", float(q % 2), meta={"gold_position": q % 3 * 4}))
    cells = compute_cells(preds, [])
    items = {}
    for p in preds:
        items.setdefault((p.task, p.config_hash), {})[p.id] = p.score
    header, body = position_contrasts(cells, items)
    assert [row[0] for row in body] == ["sweep"]  # never a row of NaN for the spread task
    row = dict(zip(header, body[0]))
    assert row["positions"] == "0 / 4 / 9" and row["n"] == "8" and row["first - middle"].startswith("+0.00")
    # 6 of 8 questions right only when last: the exact test's two-sided p, below the sign flip's 2/2^6 = 0.031
    # (the unconditional test need not condition on the 6 that changed)
    assert row["last - middle"].startswith("+75.00") and 0 < float(row["p (last)"]) <= 2 / 64

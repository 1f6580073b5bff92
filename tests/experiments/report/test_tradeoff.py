"""The trade-off report on scripted runs: break-even, non-inferiority against a by-hand computation, Holm against
statsmodels, the Pareto frontier, the picture's stable styles, document vs score order, and paired comparisons
across runs (a difference of differences across readers)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from experiments.data.records import Prediction, budget_row_label
from experiments.data.store import RunDir
from experiments.inference.paired import paired_delta
from experiments.inference.verdicts import CANNOT_TELL, NOT_WORSE, TOO_FEW, WORSE, holm, noninferiority_test
from experiments.report.cells import load_run
from experiments.report.compare import compare_runs
from experiments.report.plots import line_style
from experiments.report.tradeoff import arms, break_even_table, cost_table, noninferiority_rows, order_table
from experiments.report.tradeoff.analysis import tradeoff_tables
from experiments.report.tradeoff.frontier import frontier_table, panels, write_tradeoff_plots
from experiments.report.write import write_report

BUDGETS = (256, 512, 1024)


def pred(task, id_, h, compressor, kind, score, *, reader="r", budget=None, tin=3000, tout=None, compress_s=0.0,
         latency_s=1.0, rtin=None, rtout=10, ctin=0, ctout=0, kept=()):
    tout = tin if tout is None else tout
    return Prediction(task=task, id=id_, config_hash=h, compressor=compressor, compressor_kind=kind, reader=reader,
                      prediction="", metric="qa_f1", score=score, tokens_in=tin, tokens_out=tout, budget=budget,
                      reader_tokens_in=rtin if rtin is not None else tout + 50, reader_tokens_out=rtout,
                      latency_s=latency_s, compress_s=compress_s, compress_tokens_in=ctin, compress_tokens_out=ctout,
                      kept_chunks=list(kept))


def write_run(run_dir, preds, points, margin=5.0):
    run_dir.mkdir(parents=True)
    files = RunDir(run_dir)
    for p in preds:
        files.predictions.append(p)
    (run_dir / "grid.json").write_text(json.dumps({"tasks": [{"key": t, "name": t} for t in
                                                             dict.fromkeys(p.task for p in preds)],
                                                   "points": points, "contrasts": [], "margin": margin}))
    return load_run(run_dir)


def point(h, name, budget=None, **params):
    out = {"config_hash": h, "compressor": {"name": name, "params": params}, "reader": {"name": "r", "params": {}}}
    if budget is not None:
        out["budget"] = {"tokens": budget}
    return out


def scripted_run(tmp_path, n=8):
    """Full reads 3,000 tokens in 2.0 s; a summarize line costs 0.5 s per 256 budget tokens to compress and reads
    its budget at 1 s per 1,000 tokens, so end-to-end it is cheaper than full at 256 and 512 but not at 1024."""
    preds, points = [], [point("F", "full")]
    for i in range(n):
        preds.append(pred("qa", f"q{i}", "F", "full", "full", 1.0 if i % 2 else 0.5, latency_s=2.0 + 0.01 * i,
                          rtin=3000))
    for b in BUDGETS:
        h = f"S{b}"
        points.append(point(h, "summarize", b, chunk_size=1000))
        label = budget_row_label("summarize(longbench:1000)", {"tokens": b})
        for i in range(n):
            compress = 0.5 * b / 256 + 0.01 * i  # the same spread as full's latency: differences are exact
            preds.append(pred("qa", f"q{i}", h, label, "summarize", 1.0 if i % 2 else 0.5, budget=b, tout=b - 6,
                              compress_s=compress, latency_s=b / 1000, ctin=4 * b, ctout=b))
    return preds, points


def test_break_even_on_a_scripted_run(tmp_path):
    preds, points = scripted_run(tmp_path)
    data = write_run(tmp_path / "run", preds, points)
    header, body = break_even_table(arms(data))
    (row,) = body
    # end-to-end per example vs full: 0.5 + 0.256 - 2 = -1.24 s; 1.0 + 0.512 - 2 = -0.49 s; 2.0 + 1.024 - 2 = +1.02 s
    assert row[header.index("end-to-end ms/example vs full, per budget")] == "-1244; -488; +1024"
    assert row[header.index("break-even (time)")] == "512 (cheaper up to it; not at 1024)"
    # model tokens vs full (3,000 + 10): 256 -> 250 + 50 + 10 + 1024 + 256 = 1590; 512 -> 3126; 1024 -> 6198
    assert row[header.index("break-even (model tokens)")] == "256 (cheaper up to it; not at 512)"


def test_break_even_with_too_few_pairs_says_it_cannot_tell_not_that_compressing_costs_more(tmp_path):
    preds, points = scripted_run(tmp_path, n=3)  # every difference as before, but 3 pairs: below MIN_PAIRS
    data = write_run(tmp_path / "run", preds, points)
    header, body = break_even_table(arms(data))
    (row,) = body
    assert row[header.index("end-to-end ms/example vs full, per budget")] == "-1244; -488; +1024"
    assert row[header.index("break-even (time)")] == "cannot tell at this n (not shown cheaper at 256)"
    assert row[header.index("break-even (model tokens)")] == "256 (cheaper up to it; not at 512)"  # means: no n


def test_below_min_pairs_the_cost_table_gives_no_interval_beside_a_break_even_that_cannot_tell(tmp_path):
    """Three pairs: the break-even cannot tell, so the cost table beside it gives each difference and its n, not
    a bootstrap interval of three pairs that excludes 0 (as it did)."""
    preds, points = scripted_run(tmp_path, n=3)
    all_arms = arms(write_run(tmp_path / "run", preds, points))
    header, body = cost_table(all_arms)
    assert [row[-1] for row in body] == ["", "-1244.00 (n=3)", "-488.00 (n=3)", "+1024.00 (n=3)"]
    header, body = break_even_table(all_arms)
    assert body[0][header.index("break-even (time)")] == "cannot tell at this n (not shown cheaper at 256)"


def test_a_budget_whose_interval_excludes_0_within_the_timings_resolution_is_said_so_not_cannot_tell(tmp_path):
    """3 ms more per example at every pair: the interval excludes 0 but lies within 10 ms, what a run's timing
    resolves; the break-even said "cannot tell" beside it."""
    preds = [pred("qa", f"q{i}", "F", "full", "full", 1.0, latency_s=2.0 + 0.01 * i) for i in range(8)]
    points = [point("F", "full")]
    for line, kind, seconds in (("truncate(middle)", "truncate", (0.0, 2.003)), ("summarize(x)", "summarize", (2.003, 3.0))):
        for b, latency in zip((256, 512), seconds):
            h = f"{kind}{b}"
            points.append(point(h, kind, b))
            preds += [pred("qa", f"q{i}", h, budget_row_label(line, {"tokens": b}), kind, 1.0, budget=b,
                           latency_s=latency + 0.01 * i) for i in range(8)]
    all_arms = arms(write_run(tmp_path / "run", preds, points))
    header, body = cost_table(all_arms)
    vs = {(row[2], row[3]): row[-1] for row in body}
    assert vs[("truncate(middle)", "512")] == "+3.00 [+3.00, +3.00]"  # excludes 0
    header, body = break_even_table(all_arms)
    by_line = {row[2]: row[header.index("break-even (time)")] for row in body}
    assert by_line == {
        "truncate(middle)": "256 (cheaper up to it; at 512 within 10 ms per example of full, below what the run's "
                            "timing resolves)",
        "summarize(x)": "not shown cheaper at 256: within 10 ms per example of full, below what the run's timing "
                        "resolves"}


@pytest.mark.parametrize("arm_kind, expected", [("same", NOT_WORSE), ("worse", WORSE), ("noisy", CANNOT_TELL)])
def test_noninferiority_verdict_interval_and_p_on_0_1_scores(arm_kind, expected):
    """200 questions of 0/1 scores: identical answers are not worse at a 5-point margin (0.95^200 ~ 0), an arm
    that loses half of full's right answers is worse, and a third flipped at random on 30 cannot tell."""
    rng = np.random.default_rng(7)
    n = 30 if arm_kind == "noisy" else 200
    full = (rng.random(n) < 0.6).astype(float)
    if arm_kind == "same":
        arm = full.copy()
    elif arm_kind == "worse":
        arm = np.where((full == 1) & (rng.random(n) < 0.5), 0.0, full)
    else:
        arm = np.where(rng.random(n) < 0.35, 1 - full, full)
    test = noninferiority_test(full, arm, 5.0)
    assert test.verdict == expected and test.method == "exact"
    # verdict, interval and p agree: not worse <=> p <= alpha <=> lo > -margin
    assert (test.verdict == NOT_WORSE) == (test.p <= 0.025) == (test.lo > -5)
    assert (test.verdict == WORSE) == (test.p_worse <= 0.025) == (test.hi < -5)


def test_under_six_documents_there_is_no_verdict_and_a_floor_is_uninformative():
    assert noninferiority_test([1.0] * 5, [1.0] * 5, 5.0).verdict == TOO_FEW  # 1/32 > 0.025: no test can reject
    many = noninferiority_test([1.0] * 30, [1.0] * 30, 5.0, clusters=[str(i % 5) for i in range(30)])
    assert (many.verdict, many.n, many.n_clusters) == (TOO_FEW, 30, 5)
    assert noninferiority_test([0.0] * 20, [0.0] * 20, 5.0).verdict == "uninformative: the reference scores 0"
    assert noninferiority_test([1.0] * 20, [1.0] * 20, 5.0).verdict == "uninformative: the reference scores 100"


def test_verdict_interval_and_p_agree_in_every_row_of_a_large_grid():
    """Hundreds of cells of 0/1 and continuous scores, clustered and not, at margins 2-10: no row where the
    verdict says more or less than its test or its interval."""
    rng = np.random.default_rng(11)
    rows = 0
    for n in (6, 9, 15, 40, 120):
        for kind in ("binary", "continuous"):
            for clustered in (False, True):
                for _ in range(6):
                    full = (rng.random(n) < 0.6).astype(float) if kind == "binary" else rng.random(n)
                    noise = rng.normal(rng.uniform(-0.15, 0.05), 0.2, n)
                    arm = np.clip(full + noise, 0, 1) if kind == "continuous" else \
                        np.where(rng.random(n) < 0.2, 1 - full, full)
                    clusters = [str(i // 3) for i in range(n)] if clustered else None
                    for margin in (2.0, 5.0, 10.0):
                        t = noninferiority_test(full, arm, margin, clusters=clusters)
                        rows += 1
                        if t.verdict not in (NOT_WORSE, WORSE, CANNOT_TELL):  # too few documents, floor, ceiling
                            # no test, but the cell's one interval: the scores table's, which contains the delta
                            pd = paired_delta(full, arm, clusters=clusters)
                            assert t.p != t.p and (t.lo, t.hi) == (pd.lo, pd.hi) and t.lo <= t.delta <= t.hi
                            continue
                        # the verdict is read off the interval, and the interval is the inverted test
                        assert (t.verdict == NOT_WORSE) == (t.lo > -margin) == (t.p <= t.alpha)
                        assert (t.verdict == WORSE) == (t.hi < -margin) == (t.p_worse <= t.alpha)
                        assert t.lo <= t.delta <= t.hi
    assert rows == 5 * 2 * 2 * 6 * 3


def test_the_noninferiority_p_value_of_partial_credit_is_one_over_the_betting_e_value():
    """F1-like scores: p = min(1, 1/e) of the betting test at the margin, the e-value by its definition
    (the wealth of each seeded order, averaged)."""
    from experiments.inference import betting
    from tests.support.betting_by_hand import fixed_n_e

    rng = np.random.default_rng(2)
    full = rng.random(80)
    arm = np.where(rng.random(80) < 0.03, 0.0, full)
    d = arm - full
    orders = betting.orders(80)
    # the stake tuned to n = 80 for alpha = 0.025, its cap chosen per step (issue 50)
    e = sum(fixed_n_e(list((d[order] + 0.05) / 0.95), 0.025) for order in orders) / len(orders)
    assert noninferiority_test(full, arm, 5.0).p == pytest.approx(min(1.0, 1 / e), rel=1e-9)


def test_holm_matches_statsmodels_multipletests():
    multipletests = pytest.importorskip("statsmodels.stats.multitest").multipletests
    rng = np.random.default_rng(3)
    for size in (1, 2, 7, 30):
        p = np.round(rng.random(size) ** 3, 3)  # rounded: ties
        assert holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]), abs=1e-12)
    with_nan = [0.01, float("nan"), 0.04, 0.03]
    adjusted = holm(with_nan)
    assert adjusted[1] != adjusted[1]  # not a test: stays NaN and is not counted
    assert [adjusted[i] for i in (0, 2, 3)] == pytest.approx(list(multipletests([0.01, 0.04, 0.03], method="holm")[1]))


def test_the_holm_family_is_every_test_of_the_run_and_the_report_names_it(tmp_path):
    preds, points = scripted_run(tmp_path)
    data = write_run(tmp_path / "run", preds, points, margin=10.0)
    rows = noninferiority_rows(arms(data), data.items(), 10.0)
    assert [r["p_holm"] for r in rows] == pytest.approx(holm([r["p"] for r in rows]))
    header, body = tradeoff_tables(data)["noninferiority"]
    assert header[-1] == "p Holm (family of 3 tests)" and header[7] == "verdict (margin 10, one-sided α 0.025)"
    # identical scores on 8 questions: Δ = 0, yet 8 unchanged answers cannot show "not worse" at 10 points
    assert {row[7] for row in body} == {CANNOT_TELL}
    md, _ = write_report(tmp_path / "run", plots=False)
    assert "over the family of every informative test in this table" in md
    assert "over the family of all 3 non-inferiority tests, Holm's adjustment controls the family-wise error" in md
    # the fixed-sequence procedure down the ladder, largest budget first: it stops at the first budget
    assert ("| qa | r | summarize(longbench:1000) | 1024, 512, 256 | none at this n | stopped at 1024: cannot tell at "
            "this n |") in md


def test_the_pareto_frontier_and_the_picture(tmp_path):
    preds, points = scripted_run(tmp_path)
    # a retrieval line that scores 0 everywhere: dominated by every summarize point
    for b in BUDGETS:
        points.append(point(f"R{b}", "retrieval", b, retriever="minilm", order="document"))
        preds += [pred("qa", f"q{i}", f"R{b}", budget_row_label("retrieval(minilm, 100x any, order=document)",
                                                                 {"tokens": b}), "retrieval", 0.0, budget=b, tout=b - 1)
                  for i in range(8)]
    data = write_run(tmp_path / "run", preds, points)
    header, body = frontier_table(panels(arms(data), data.items()))
    # every line scores as full does but the retrieval one; the frontier is the fewest tokens at that score
    assert [(row[2], row[3]) for row in body] == [("summarize(longbench:1000)", "256")]
    paths = write_tradeoff_plots(data, tmp_path / "plots")
    svg = next(p for p in paths if p.suffix == ".svg").read_text()
    assert line_style("retrieval", "minilm", "document") == ("#ff7f0e", "o", "--")
    assert line_style("summarize") == ("#2ca02c", "^", "-") and "#2ca02c" in svg and "#ff7f0e" in svg


def test_document_order_against_score_order_at_equal_budgets(tmp_path):
    preds, points = [], [point("F", "full")]
    preds += [pred("qa", f"q{i}", "F", "full", "full", 1.0) for i in range(6)]
    for order, score in (("score", 0.0), ("document", 1.0)):
        for b in (256, 512):
            h = f"{order}{b}"
            points.append(point(h, "retrieval", b, retriever="bm25", chunk_size=100, order=order))
            label = budget_row_label(f"retrieval(bm25, 100x any, order={order})", {"tokens": b})
            preds += [pred("qa", f"q{i}", h, label, "retrieval", score if i < 5 else 0.5, budget=b, tout=b - 3,
                           kept=("a", "b")) for i in range(6)]
    data = write_run(tmp_path / "run", preds, points)
    header, body = order_table(arms(data), data.items())
    assert [(row[2], row[4].split(" ")[0]) for row in body] == [("256", "+83.33"), ("512", "+83.33")]
    assert all(row[-1] == "6" for row in body)


def test_the_order_table_leaves_a_p_value_blank_where_its_test_gives_none(tmp_path):
    """An average over tasks is decided by its interval and has no p-value: the cell is blank, never "nan"."""
    preds, points = [], [point("F", "full")]
    for task in ("qa", "qb"):
        preds += [pred(task, f"q{i}", "F", "full", "full", 0.5) for i in range(6)]
    for order, score in (("score", 0.25), ("document", 0.75)):
        points.append(point(order, "retrieval", 256, retriever="bm25", chunk_size=100, order=order))
        label = budget_row_label(f"retrieval(bm25, 100x any, order={order})", {"tokens": 256})
        for task in ("qa", "qb"):
            preds += [pred(task, f"q{i}", order, label, "retrieval", score, budget=256, tout=250, kept=("a",))
                      for i in range(6)]
    data = write_run(tmp_path / "run", preds, points)
    header, body = order_table(arms(data), data.items())
    assert [row[3] for row in body] == ["qa", "qb", "average of 2 tasks"]
    p = header.index("p")
    assert body[-1][p] == "" and all(row[p] != "nan" for row in body)


def test_compare_pairs_on_the_examples_both_runs_scored_and_warns(tmp_path):
    a = [pred("qa", f"q{i}", "F", "full", "full", 1.0) for i in range(3)]
    b = [pred("qa", f"q{i}", "F", "full", "full", 0.0 if i < 3 else 1.0) for i in range(6)]
    write_run(tmp_path / "a", a, [point("F", "full")])
    write_run(tmp_path / "b", b, [point("F", "full")])
    header, body, notes = compare_runs(tmp_path / "a", tmp_path / "b")
    (row,) = body
    # over the 3 common examples B scored 0, A 1; B's other 3 examples (all 1.0) do not enter
    assert row[3:6] == ["100.00", "0.00", "-100.00 (n=3)"] and row[7:] == ["3", "3", "6"]
    assert notes == ["qa | r | full: A scored 3 example(s), B 6, 3 in common; A, B and B - A are over the common ones"]


def test_compare_across_readers_gives_a_difference_of_differences(tmp_path):
    """Retrieval helps the weak reader by +0.5 on every example and the strong one by 0: the difference of the two
    changes is -50 points, paired on the examples all four cells scored."""
    preds = []
    for reader, full_score, arm_score in (("weak", 0.25, 0.75), ("strong", 0.75, 0.75)):
        preds += [pred("qa", f"q{i}", f"F{reader}", "full", "full", full_score, reader=reader) for i in range(8)]
        preds += [pred("qa", f"q{i}", f"R{reader}", "bm25", "retrieval", arm_score, reader=reader) for i in range(8)]
    points = [point(h, n) for h, n in (("Fweak", "full"), ("Rweak", "retrieval"), ("Fstrong", "full"),
                                         ("Rstrong", "retrieval"))]
    write_run(tmp_path / "run", preds, points)
    header, body, notes = compare_runs(tmp_path / "run", tmp_path / "run", {"reader": "weak:strong"})
    rows = {row[2]: dict(zip(header, row)) for row in body}
    assert rows["bm25"]["reader"] == "weak : strong"
    assert rows["bm25"]["A - full"].startswith("+50.00") and rows["bm25"]["B - full"].startswith("+0.00")
    # 8 examples: the valid test of changes bounded in [-1, 1] gives an interval around -50, not a point
    dod = paired_delta([0.5] * 8, [0.0] * 8, bounded=(-1.0, 1.0))
    assert rows["bm25"]["(B - full) - (A - full) [95% CI]"].startswith(f"-50.00 [{dod.lo:+.2f}, {dod.hi:+.2f}]")
    assert dod.lo < -50 < dod.hi
    assert rows["bm25"]["n (diff of diffs)"] == "8" and rows["full"]["B - A [95% CI]"].startswith("+50.00")
    assert notes == []
    from core.errors import UserError

    with pytest.raises(UserError, match="expected A_VALUE:B_VALUE"):
        compare_runs(tmp_path / "run", tmp_path / "run", {"reader": "weak-strong"})


def test_the_all_lengths_delta_is_the_cells_own_paired_delta_with_its_one_interval(tmp_path):
    from dataclasses import replace

    from experiments.report.lengths import length_tables

    # full scores 0 everywhere; the arm scores 1, 1 at 1k (delta 1.0) and 0, 0, 0, 1 at 2k (delta 0.25): every length
    # pooled is the cell's own 6 pairs, 3 / 6 = 0.5, with the scores table's interval, not a mean over lengths
    # (0.625) tested length by length at alpha / 2, which printed a second, wider interval for the same pairs
    arm = {"1024": [1, 1], "2048": [0, 0, 0, 1]}
    preds = []
    for length, scores in arm.items():
        for i, s in enumerate(scores):
            meta = {"length_bucket": int(length)}
            preds.append(replace(pred("t", f"{length}-{i}", "F", "full", "full", 0.0), meta=meta))
            preds.append(replace(pred("t", f"{length}-{i}", "T", "truncate(middle)", "truncate", float(s)), meta=meta))
    data = write_run(tmp_path / "run", preds, [point("F", "full"), point("T", "truncate", max_tokens=9)])
    _, (header, body) = length_tables(data.cells, data.predictions)
    (row,) = body
    assert header[-3:] == ["1k", "2k", "all lengths"]
    assert row[-3].startswith("+100.00") and row[-3].endswith("(n=2)")  # below 5 pairs: the delta and n only
    assert row[-2].startswith("+25.00") and row[-2].endswith("(n=4)")
    (cell,) = [c for c in data.cells if not c.is_full]
    lo, hi = cell.delta_ci95
    assert cell.delta_paired == 50.0 and row[-1].startswith(f"+50.00 [{lo:+.2f}, {hi:+.2f}]") and row[-1].endswith("(n=6)")


def test_no_arm_at_a_floor_or_a_ceiling_sits_on_the_frontier(tmp_path):
    """A reader that scores 0 everywhere and an arm that ties full at 100 on every example say nothing of the
    trade-off: neither is put on the frontier, and their verdicts say why."""
    points = [point("F", "full"), point("Z", "truncate", 256, policy="middle"), point("C", "truncate", 512, policy="middle")]
    preds = [pred("qa", f"q{i}", "F", "full", "full", 1.0) for i in range(8)]
    preds += [pred("qa", f"q{i}", "Z", budget_row_label("truncate(middle)", {"tokens": 256}), "truncate", 0.0,
                   budget=256, tout=250) for i in range(8)]
    preds += [pred("qa", f"q{i}", "C", budget_row_label("truncate(middle)", {"tokens": 512}), "truncate", 1.0,
                   budget=512, tout=500) for i in range(8)]
    data = write_run(tmp_path / "run", preds, points)
    (panel,) = panels(arms(data), data.items(), 5.0)
    on = {p["budget"] for ps in panel.lines.values() for p in ps if p["frontier"]}
    assert on == set() and panel.full["frontier"]
    verdicts = {r["arm"].cell.config_hash: r["verdict"] for r in noninferiority_rows(arms(data), data.items(), 5.0)}
    assert verdicts == {"Z": WORSE, "C": "uninformative: the reference scores 100"}

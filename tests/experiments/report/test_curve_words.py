"""The curve speaks for itself: verdicts against the largest k (the reference the saturation test fixes before
looking), the retriever and reader in curve.csv, the plot's name
and title, and a report without a full-context row or an infinite interval printed as a number."""
from __future__ import annotations

import csv
import gzip
import json
import re

from typer.testing import CliRunner

from experiments.cli.app import app
from experiments.inference.verdicts import NOT_WORSE, NonInferiority
from experiments.report.curve import CurveRow, Saturation, _vs_best, curve_table, saturation_k


def test_verdicts_compare_with_the_largest_k_not_with_full():
    # 200 questions, accuracy 49 / 49.5 / 50 at k = 1 / 2 / 5: both smaller ks are shown not worse than k = 5
    scores = {k: {f"q{i}": float(i < round(acc * 2)) for i in range(200)} for k, acc in {1: 49, 2: 49.5, 5: 50}.items()}
    sat = saturation_k(scores, 5.0, task="t", reader="r")
    assert sat.tests[1].verdict == NOT_WORSE  # the statistics' own words are the budget sweep's
    rows = [CurveRow("t", "r", k, 90.0, (80.0, 95.0), 50.0, (40.0, 60.0), 200, 0, retriever="bm25") for k in (1, 2, 5)]
    header, body = curve_table(rows, {("t", "r"): sat})
    cells = [cell for row in body for cell in row]
    assert any(c.endswith("not worse than the largest k by more than the margin of 5") for c in cells), cells
    assert not any("full" in c for c in cells)


def test_a_verdict_that_is_no_decision_names_the_margin_it_tests():
    """`-10.00 [-23.77, -0.11] cannot tell at this n`: the interval excludes 0 and the verdict is about the
    5-point margin; the column says which."""
    test = NonInferiority(-10.0, -23.77, -0.11, 0.2, 0.001, 40, 40, "cannot tell at this n")
    sat = Saturation("t", "r", 5, None, 5.0, {1: test}, "stopped at k=1", 5)
    rows = [CurveRow("t", "r", k, 90.0, (80.0, 95.0), 50.0, (40.0, 60.0), 40, 0, retriever="bm25") for k in (1, 5)]
    _, body = curve_table(rows, {("t", "r"): sat})
    assert body[0][7] == "-10.00 [-23.77, -0.11] cannot tell at this n (margin 5)"


def test_an_infinite_interval_is_said_not_printed():
    test = NonInferiority(0.0, float("-inf"), float("inf"), 1.0, 1.0, 3, 3, "too few documents")
    assert _vs_best(test) == "+0.00 (no interval at this n)"


def test_curve_csv_plot_and_report_name_the_retriever_and_reader(tmp_path):
    path = tmp_path / "qa.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for i in range(6):
            ctx = [{"title": f"Item {i}", "text": f"item {i} has the code zq{i}x", "hasanswer": True, "isgold": True}]
            f.write(json.dumps({"question": f"what is the code of item {i}?", "answers": [f"zq{i}x"], "ctxs": ctx}) + "\n")
    out = tmp_path / "curve"
    got = CliRunner().invoke(app, ["curve", "--litm", str(path), "--reader", "extractive", "--ks", "1,2", "--out", str(out),
                                   "--plain"])
    assert got.exit_code == 0, got.output
    with open(out / "curve.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {(r["retriever"], r["reader"]) for r in rows} == {("bm25", "extractive")}
    assert sorted(p.name for p in (out / "plots").glob("curve*")) == ["curve_nq_open_bm25_extractive.png",
                                                                       "curve_nq_open_bm25_extractive.svg"]
    report = (out / "report.md").read_text()
    assert "full-context row" not in report and not re.search(r"[-+]inf\b", report)
    assert "plots/curve_nq_open_bm25_extractive.png" in report

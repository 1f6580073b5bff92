"""Re-reading a run as a researcher iterates: ``ctxcomp report --margin/--contrast`` rewrites the tables without a
model call, report.md opens with what was decided, labels read ``<=`` outside HTML, the trade-off plot names
every band and draws the margin."""
from __future__ import annotations

import csv
import io
import re

import pytest
from typer.testing import CliRunner

from experiments.cli.app import app

CONFIG = {
    "name": "iterate",
    "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 8, "num_docs": 6,
                                                     "words_per_doc": 40}}],
    "compressors": ["full", {"name": "truncate", "params": {"policy": "right", "max_tokens": [64, 128]}},
                    {"name": "retrieval", "params": {"retriever": "bm25", "chunk_size": 20, "token_budget": [64, 128]}}],
    "readers": ["extractive"],
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from experiments import evaluate

    out = tmp_path_factory.mktemp("iterate") / "run"
    evaluate(CONFIG, out, report=False, progress=False)
    return out


def _table(run, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((run / "tables" / f"{name}.csv").read_text(encoding="utf-8"))))


def test_a_new_margin_and_contrasts_rewrite_the_report_and_nothing_else(run):
    logs = {name: (run / name).read_bytes() for name in ("predictions.jsonl", "config.yaml", "grid.json")}
    runner = CliRunner()
    first = runner.invoke(app, ["report", str(run), "--no-plots", "--no-view"])
    assert first.exit_code == 0, first.output
    header5 = next(k for k in _table(run, "noninferiority")[0] if k.startswith("verdict"))
    arm, against = "retrieval(bm25, 20x any, <=128 tokens, order=score)", "truncate(128, right)"
    again = runner.invoke(app, ["report", str(run), "--no-plots", "--no-view", "--margin", "30",
                                "--contrast", f"{arm} - {against}"])
    assert again.exit_code == 0, again.output
    rows = _table(run, "noninferiority")
    header30 = next(k for k in rows[0] if k.startswith("verdict"))
    assert "margin 5," in header5 and "margin 30," in header30
    assert [r["contrast"] for r in _table(run, "contrasts")] == [f"{arm} - {against}"]
    md = (run / "report.md").read_text(encoding="utf-8")
    assert "margin 30 points (given to `ctxcomp report`; the config says 5)" in md
    assert {name: (run / name).read_bytes() for name in logs} == logs  # no prediction, no config rewritten
    bad = runner.invoke(app, ["report", str(run), "--no-plots", "--no-view", "--contrast", "nope - full"])
    assert bad.exit_code == 2 and "expected 'ARM - AGAINST' with two row labels" in bad.output
    assert len(bad.output.strip().splitlines()) == 1


def test_report_md_opens_with_a_summary_of_what_was_decided(run):
    result = CliRunner().invoke(app, ["report", str(run), "--no-plots", "--no-view"])
    assert result.exit_code == 0, result.output
    md = (run / "report.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", md, re.M)
    assert headings[0] == "Summary" and headings[1] == "Scores"
    summary = md.split("## Scores")[0]
    for topic in ("**Run**", "**Against full context**", "**How much can go**", "**Error control**"):
        assert topic in summary
    tests = len(_table(run, "noninferiority"))
    assert re.search(rf"of {tests} tests", summary)
    assert len(summary.splitlines()) <= 20


def test_labels_read_lt_eq_in_the_terminal_and_report_md_and_stay_escaped_in_the_view(run, tmp_path):
    runner = CliRunner()
    assert runner.invoke(app, ["report", str(run), "--no-plots", "--no-view"]).exit_code == 0
    md = (run / "report.md").read_text(encoding="utf-8")
    assert "<=64 tokens" in md and "&lt;" not in md
    out = runner.invoke(app, ["compare", str(run), str(run), "--match", "token_budget=64:128", "--plain"]).output
    assert "<=64 tokens" in out and "&lt;" not in out
    view = tmp_path / "v.html"
    assert runner.invoke(app, ["view", str(run), "--out", str(view)]).exit_code == 0
    page = view.read_text(encoding="utf-8")
    assert "\\u003c=64 tokens" in page and "<=64 tokens" not in page


def test_the_tradeoff_plot_names_every_band_and_draws_the_margin(run):
    from experiments.report.cells import load_run
    from experiments.report.tradeoff.frontier import write_tradeoff_plots
    from experiments.report.write import with_analysis

    (png, svg) = write_tradeoff_plots(with_analysis(load_run(run), margin=7.5), run / "plots")
    text = svg.read_text(encoding="utf-8")
    for entry in ("full: its 95% interval", "full - margin (7.5 points): the non-inferiority bound",
                  "shaded: the line's paired 95% interval against full", "ring: on the Pareto frontier"):
        assert entry in text, entry


def test_a_break_even_below_the_timings_resolution_says_so_instead_of_a_budget(tmp_path):
    """Half a millisecond saved per example at every budget is no break-even: it reads as below the timing's
    resolution; a line that saves two seconds keeps its break-even."""
    import json

    from experiments.data.records import Prediction
    from experiments.data.store import RunDir
    from experiments.report.cells import load_run
    from experiments.report.tradeoff import arms, break_even_table

    run = tmp_path / "timed"
    run.mkdir()
    points, files = [], RunDir(run)
    for h, name, budget, latency in (("F", "full", None, 2.0005), ("A", "truncate", 64, 2.0), ("B", "truncate", 128, 2.0),
                                     ("C", "retrieval", 64, 0.0005), ("D", "retrieval", 128, 0.0005)):
        points.append({"config_hash": h, "compressor": {"name": name, "params": {}}, "reader": {"name": "r"},
                       **({"budget": {"tokens": budget}} if budget else {})})
        label = name if budget is None else f"{name} @{budget}"
        for i in range(8):
            files.predictions.append(Prediction(task="t", id=f"q{i}", config_hash=h, compressor=label,
                                                compressor_kind=name, reader="r", prediction="", metric="qa_f1",
                                                score=1.0, budget=budget, latency_s=latency + 0.001 * (i % 2)))
    (run / "grid.json").write_text(json.dumps({"tasks": [{"key": "t", "name": "t"}], "points": points}))
    header, body = break_even_table(arms(load_run(run)))
    by_line = {row[2]: dict(zip(header, row)) for row in body}
    assert by_line["truncate"]["break-even (time)"].startswith("none: every budget is within 10 ms per example")
    assert by_line["retrieval"]["break-even (time)"] == "128 or more (cheaper at every budget)"

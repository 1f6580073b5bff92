"""Planning n from a pilot: the planned n reaches the stated power (simulated with the report's own test), and
``ctxcomp plan`` prints n, documents and cost for every cell of a real run."""
from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from experiments.cli.app import app
from experiments.design.forecast import Rate, plan_run, price_of, rate
from experiments.design.power import needed_n, power_at, spread
from experiments.report.stats import NOT_WORSE, noninferiority_test
from testkit.simulated import binary, clustered, f1_like

_binary, _f1_like, _clustered = binary, f1_like, clustered


@pytest.mark.parametrize("draw", [_binary, _f1_like, _clustered], ids=["0/1", "f1-like", "clustered"])
def test_the_planned_n_reaches_the_stated_power(draw):
    """Pilot of 2,000 from the model, plan at margin 10 and true delta 0, then 300 trials at the planned n with
    the report's own test: the share of "not worse" verdicts is 0.8 within Monte Carlo error (3 SE = 0.07)."""
    rng = np.random.default_rng(17)
    pilot, clusters = draw(rng, 2_000, 0.0)
    plan = needed_n(spread(pilot - pilot.mean(), clusters), 10.0, delta=0.0, power=0.8)
    n = int(np.ceil(plan.n))
    assert 20 < n < 1_500
    wins = 0
    trials = 300
    for _ in range(trials):
        d, cl = draw(rng, n, 0.0)
        test = noninferiority_test(np.zeros(n), d, 10.0, clusters=cl, n_resamples=1_000, seed=int(rng.integers(1e9)))
        wins += test.verdict == NOT_WORSE
    assert abs(wins / trials - 0.8) < 0.07, (n, wins / trials)


def test_ignoring_the_clusters_plans_too_few_examples():
    rng = np.random.default_rng(3)
    pilot, clusters = _clustered(rng, 2_000, 0.0, size=5, rho=0.5)
    with_clusters = needed_n(spread(pilot, clusters), 10.0, delta=0.0)
    without = needed_n(spread(pilot), 10.0, delta=0.0)
    assert with_clusters.n > 2 * without.n  # design effect 1 + (5 - 1) 0.5 = 3
    s = spread(pilot, clusters)
    assert power_at(s, 10.0, without.n_clusters / 5, delta=0.0) < 0.5


def test_unreachable_and_spreadless_pilots_say_so():
    assert needed_n(spread([-0.2] * 10 + [0.0] * 10), 5.0).note.startswith("not reachable")
    flat = needed_n(spread([0.0] * 30), 5.0)
    assert flat.n == 6 and "no spread" in flat.note


def test_prices_come_from_the_config_the_reader_or_the_shipped_list():
    assert price_of("smollm2", {}, {}) == (0.0, 0.0)  # a local model
    assert price_of("gpt", {"model": "gpt-4o-mini"}, {}) == (0.15, 0.6)
    assert price_of("gpt", {"model": "gpt-4o-mini"}, {"gpt": {"input_per_1m": 1.0, "output_per_1m": 2.0}}) == (1.0, 2.0)
    assert price_of("x", {"model": "m", "price_in_per_1k": 0.001}, {}) == (1.0, 0.0)
    assert price_of("x", {"model": "my-served", "base_url": "http://h/v1"}, {}) is None  # unknown API model


def test_plan_prints_every_cell_with_its_n_documents_and_cost(tmp_path, shared_data):
    from experiments.run.api import evaluate

    config = {"name": "pilot", "readers": ["extractive"], "compressors": [
        "full", {"name": "truncate", "params": {"policy": "middle"}}],
        "budget": [64, 512],
        "tasks": [{"name": "financial_qa", "path": str(shared_data / "leval" / "financial_qa.jsonl"),
                   "sample": {"n": 18, "seed": 0}, "max_new_tokens": 32},
                  {"name": "natural_question", "path": str(shared_data / "leval" / "natural_question.jsonl"),
                   "sample": {"n": 12, "seed": 0}, "max_new_tokens": 16}],
        "prices": {"extractive": {"input_per_1m": 1.0, "output_per_1m": 0.0}}}
    evaluate(config, tmp_path / "run", progress=False, plots=False)
    rows, settings = plan_run(tmp_path / "run")
    assert settings["margin"] == 5.0 and len(rows) == 2 * 2 + 2  # 2 tasks x 2 budgets, and 2 task averages
    cell = rows[0]
    assert cell.spread.n == 18 and cell.spread.n_clusters < 18  # financial_qa asks several questions a document
    assert cell.per_example.reader_calls == 2.0 and cell.per_example.dollars > 0  # the arm and full
    result = CliRunner().invoke(app, ["plan", str(tmp_path / "run"), "--plain", "--margin", "10", "--power", "0.9"])
    assert result.exit_code == 0, result.output
    assert "margin 10 points, power 0.9" in result.output and "n needed at Δ = 0" in result.output
    assert "reader calls" in result.output and "$" in result.output
    bad = CliRunner().invoke(app, ["plan", str(tmp_path / "run"), "--price", "x=abc"])
    assert bad.exit_code == 2 and "--price expects" in bad.output


def test_a_rate_counts_only_generations_the_model_made_for_time():
    from experiments.data.records import Prediction

    def p(cached, latency):
        return Prediction(task="t", id="q", config_hash="h", compressor="c", reader="r", prediction="", metric="m",
                          score=1.0, cached=cached, latency_s=latency, reader_tokens_in=100)

    r = rate([p(True, 50.0), p(False, 2.0), p(False, 4.0)], (1.0, 0.0))
    assert isinstance(r, Rate) and r.seconds == 3.0 and r.dollars == pytest.approx(1e-4)
    assert rate([p(True, 5.0)], None).seconds != rate([p(True, 5.0)], None).seconds  # all cached: unknown
    json.dumps(r.astuple())

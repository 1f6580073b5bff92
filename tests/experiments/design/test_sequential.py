"""Group-sequential non-inferiority: boundaries against published values, the decision rule's error rate,
power and expected n by simulation (a vectorized form of the rule; ``look`` is checked to decide as it does),
and a growing run end to end on real L-Eval data with the extractive reader."""
from __future__ import annotations

import json

import numpy as np
import pytest

from experiments.design.grow import CostLimit, Limits, grow, load_state
from experiments.design.sequential import boundaries, look, simulate, studentized
from experiments.run.config import parse_config
from testkit.simulated import trials


def test_boundaries_are_lan_demets_published_values():
    # O'Brien-Fleming-type and Pocock-type spending, one-sided 0.025, equally spaced looks (as gsDesign /
    # Jennison & Turnbull tabulate them)
    assert boundaries([1 / 3, 2 / 3, 1], 0.025) == pytest.approx([3.7103, 2.5114, 1.9930], abs=2e-3)
    assert boundaries([0.2, 0.4, 0.6, 0.8, 1], 0.025) == pytest.approx([4.8769, 3.3569, 2.6803, 2.2898, 2.0310],
                                                                      abs=2e-3)
    assert boundaries([0.2, 0.4, 0.6, 0.8, 1], 0.025, "pocock") == pytest.approx(
        [2.4380, 2.4268, 2.4101, 2.3966, 2.3859], abs=2e-3)
    assert boundaries([1.0], 0.025) == pytest.approx([1.96], abs=1e-3)
    with pytest.raises(ValueError):
        boundaries([0.5, 0.5], 0.025)


@pytest.mark.parametrize("kind, cluster", [("binary", 0), ("continuous", 0), ("continuous", 4)])
def test_the_sequential_rule_keeps_its_error_rate_and_saves_examples(kind, cluster):
    """4,000 simulated trials per setting (docs/metrics.md gives 10^4 from benchmarks/sim_stats.py): at the
    margin the false "not worse" rate is at most alpha; at a true difference of 0 the power is within 2 points of
    the fixed design's at the same maximum n (no exact-alpha design that stops early can exceed it: the fixed
    test is most powerful on the same data) and the expected n is below the fixed n."""
    rng = np.random.default_rng(2024 + cluster)
    margin, count = 5.0 if kind == "continuous" and not cluster else 10.0, 4_000
    looks = [40, 80, 120, 160, 200]
    at_margin = simulate(trials(rng, count, 200, -margin / 100, kind, cluster), looks, margin, cluster_size=cluster or 1)
    assert at_margin.not_worse.mean() <= 0.025 + 3 * np.sqrt(0.025 * 0.975 / count), at_margin.not_worse.mean()
    at_zero = simulate(trials(rng, count, 200, 0.0, kind, cluster), looks, margin, cluster_size=cluster or 1)
    assert at_zero.not_worse.mean() >= at_zero.fixed_not_worse.mean() - 0.02
    assert at_zero.used.mean() < 0.85 * 200, at_zero.used.mean()


def test_the_vectorized_rule_decides_as_look_does():
    rng = np.random.default_rng(9)
    d = trials(rng, 50, 60, -0.02, "continuous", 3)
    looks = [15, 30, 60]
    sim = simulate(d, looks, 5.0, cluster_size=3)
    bounds = boundaries([0.25, 0.5, 1.0], 0.025)
    for row, stopped, used in zip(d, sim.not_worse, sim.used):
        for n, c in zip(looks, bounds):
            sums = row[:n].reshape(-1, 3).sum(axis=1)
            seen = look(sums, np.full(len(sums), 3.0), 5.0, n / 60, c)
            if seen.decision or n == 60:
                assert used == n and stopped == (seen.decision == "not worse")
                break


def test_look_decides_as_the_rule_and_its_interval_agrees():
    rng = np.random.default_rng(1)
    for _ in range(200):
        clusters = int(rng.integers(6, 40))
        sizes = rng.integers(1, 4, clusters).astype(float)
        sums = rng.normal(rng.uniform(-0.2, 0.1), 0.3, clusters) * sizes
        margin, c = float(rng.choice([2.0, 5.0, 10.0])), float(rng.uniform(1.9, 4.0))
        seen = look(sums, sizes, margin, 0.5, c)
        z = studentized(sums + margin / 100 * sizes)
        assert seen.decision == ("not worse" if z >= c else "worse" if -z >= c else "")
        if seen.decision == "not worse":
            assert seen.lo >= -margin - 0.01
        if seen.decision == "worse":
            assert seen.hi <= -margin + 0.01
        if not seen.decision and np.isfinite(seen.lo) and np.isfinite(seen.hi):
            assert seen.lo <= -margin + 0.01 <= seen.hi + 0.02


def test_max_cost_parses_dollars_hours_and_calls():
    assert CostLimit.parse("$5") == CostLimit(5.0, "usd") == CostLimit.parse("5usd")
    assert CostLimit.parse("90min") == CostLimit(1.5, "hours") and CostLimit.parse("2h") == CostLimit(2.0, "hours")
    assert CostLimit.parse("1000calls") == CostLimit(1000.0, "calls")
    for bad in ("five dollars", "5", "$5h"):
        with pytest.raises(Exception, match="--max-cost"):
            CostLimit.parse(bad)


def _config(shared_data):
    return parse_config({"name": "grow", "readers": ["extractive"], "compressors": [
        "full", {"name": "truncate", "params": {"policy": "middle"}}], "budget": [32, 4096],
        "tasks": [{"name": "natural_question", "path": str(shared_data / "leval" / "natural_question.jsonl"),
                   "sample": {"n": 5, "seed": 0}, "max_new_tokens": 16}]})


LIMITS = Limits(step=12, max_n=36)


@pytest.fixture(scope="module")
def grown(tmp_path_factory, shared_data):
    """One growing run (natural_question, truncation at 32 and 4096 tokens, extractive reader), shared."""
    run = tmp_path_factory.mktemp("grown") / "run"
    return grow(_config(shared_data), run, LIMITS, progress=False)


def test_a_run_grows_until_each_cell_is_decided_and_reads_only_undecided_cells(grown):
    out = grown
    state = load_state(out.run_dir)
    assert state == out.state and state["stopped"]
    not_decided = sum(c["decision"] not in ("not worse", "worse") for c in state["cells"].values())
    assert (state["stopped"] == "every cell decided") == (not not_decided)  # never "decided" over open cells
    assert not not_decided or f"({not_decided} of {len(state['cells'])} not decided)" in state["stopped"]
    looks = state["looks"]
    assert [l["n"]["natural_question"] for l in looks] == [12 * (k + 1) for k in range(len(looks))]
    preds = [json.loads(l) for l in (out.run_dir / "predictions.jsonl").read_text().splitlines()]
    for key, cell in state["cells"].items():
        assert cell["decision"]  # decided, or "cannot tell at the maximum n" at the last look
        made = [p for p in preds if p["config_hash"] == cell["config_hash"]]
        decided_at = cell["look"] or len(looks)
        assert len(made) == 12 * decided_at  # no examples after its decision
        fractions = cell["fractions"]
        assert fractions == sorted(fractions) and len(fractions) == decided_at
    # each look's boundary is the spending boundary of the looks made so far
    first = looks[0]["cells"][0]
    assert first["boundary"] == pytest.approx(boundaries([1 / 3], 0.025)[0])


def test_a_killed_sequential_run_continues_to_the_same_decisions(grown, tmp_path, shared_data, monkeypatch):
    """Killed after step 2's predictions were saved but before its look: the same command continues, asks the
    reader nothing again, and ends with the looks and decisions of a run that was never killed."""
    import experiments.design.grow as grow_module

    config, limits, whole = _config(shared_data), LIMITS, grown
    real, calls = grow_module.Runner, []

    class Killed(real):
        def run(self):
            stats = super().run()
            calls.append(stats)
            if len(calls) == 2:
                raise KeyboardInterrupt
            return stats

    monkeypatch.setattr(grow_module, "Runner", Killed)
    with pytest.raises(KeyboardInterrupt):
        grow(config, tmp_path / "killed", limits, progress=False)
    assert len(load_state(tmp_path / "killed")["looks"]) == 1
    monkeypatch.setattr(grow_module, "Runner", real)
    resumed = grow(config, tmp_path / "killed", limits, progress=False)
    assert resumed.stats[0].predicted == 0  # step 2 was saved before the kill: nothing is asked again
    strip = lambda state: [[{k: v for k, v in c.items()} for c in look["cells"]] for look in state["looks"]]  # noqa: E731
    assert strip(resumed.state) == strip(whole.state)
    assert {k: c["decision"] for k, c in resumed.state["cells"].items()} == \
        {k: c["decision"] for k, c in whole.state["cells"].items()}


def test_growing_refuses_a_task_with_limit(shared_data):
    config = parse_config({"readers": ["extractive"], "compressors": ["full", "truncate"], "tasks": [
        {"name": "natural_question", "path": str(shared_data / "leval" / "natural_question.jsonl"), "limit": 4}]})
    with pytest.raises(Exception, match="sample: {n: 4, seed: 0}"):
        grow(config, "/nonexistent", Limits(step=4))


def test_the_cli_grows_a_run_and_resume_continues_it(tmp_path):
    from typer.testing import CliRunner

    from experiments.cli.app import app

    config = tmp_path / "c.yaml"
    config.write_text("name: g\nreaders: [extractive]\ncompressors: [full, {name: retrieval, params: {top_n: 1}}]\n"
                      "tasks:\n  - {name: nq_multidoc, synthetic: {kind: multidoc_qa, n: 30, num_docs: 4, "
                      "words_per_doc: 30}, sample: {n: 1, seed: 3}}\n")
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(config), "--out", str(run), "--until-decided", "--step", "10",
                                      "--max-n", "20", "--no-report"])
    assert result.exit_code == 0, result.output
    # the extractive reader answers every synthetic question with either arm: a ceiling, never decided early
    assert "decided: cells 1, uninformative: the reference scores 100 1" in result.output
    state = load_state(run)
    assert [look["n"]["nq_multidoc"] for look in state["looks"]] == [10, 20]
    again = CliRunner().invoke(app, ["run", "--resume", str(run), "--no-report"])
    assert again.exit_code == 0 and load_state(run)["looks"] == state["looks"]
    wrong = CliRunner().invoke(app, ["run", str(config), "--out", str(tmp_path / "x"), "--max-n", "5"])
    assert wrong.exit_code == 2 and "--until-decided" in wrong.output


def test_the_report_of_a_grown_run_shows_its_looks_and_what_error_is_controlled(grown):
    from experiments.report.write import write_report

    md, _ = write_report(grown.run_dir, plots=False)
    assert "Decided as the run grew" in md and "repeated 95% CI" in md
    assert "keep α per cell across its repeated looks" in md
    summary = md.split("Detailed tables follow")[0]
    decisions = [c["decision"] for c in grown.state["cells"].values()]
    assert (f"**Decided as the run grew**: {decisions.count('not worse')} not worse than full, "
            f"{decisions.count('worse')} worse") in summary and "in this run they are descriptive" in summary
    assert "Holm's adjustment controls the family-wise error" in md
    rows = (grown.run_dir / "tables" / "sequential.csv").read_text().splitlines()
    assert len(rows) == 1 + len(grown.state["cells"])

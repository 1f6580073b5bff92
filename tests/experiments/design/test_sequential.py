"""Sequential non-inferiority by betting: anytime-valid decisions at any looks, the vectorized rule against
``look``, the confidence sequence against the decision, and a growing run end to end on real L-Eval data with
the extractive reader."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from experiments.design.grow import CostLimit, Limits, grow, load_state
from experiments.inference import betting
from experiments.inference.sequential import decide_in_looks, look, simulate_not_worse
from experiments.run.config import parse_config


def _wealth_by_hand(x, bound, cap=0.75, prior=0.25):
    """The betting wealth by its definition, one document at a time (an independent loop, not the vectorized
    code): stake mu / (sigma^2 + mu^2) of the past (mu their mean, sigma^2 their squared deviations from the
    running means shrunk towards the prior by one pseudo-observation), clipped to [0, cap], on X / A with
    A = 0.95 * bound."""
    y = np.asarray(x, dtype=float) / (0.95 * bound)
    wealth, best, total, squares = 1.0, 1.0, 0.0, 0.0
    for i, v in enumerate(y):
        mean = total / i if i else 0.0  # the mean of the past outcomes
        var = (prior + squares) / (i + 1) if i else prior
        stake = min(max(mean / (var + mean * mean), 0.0), cap)
        wealth *= 1 + stake * v
        best = max(best, wealth)
        squares += (v - mean) ** 2
        total += v
    return wealth, best


def test_the_wealth_is_the_bet_by_its_definition():
    rng = np.random.default_rng(4)
    sums = rng.choice([-1.0, 0.0, 1.0], size=30, p=[0.05, 0.85, 0.1])
    sizes = np.ones(30)
    path = betting.sequence_log_wealth(sums, sizes, -0.05, values=(-1.0, 1.0), bound=1.0, upper=True)
    wealth, best = _wealth_by_hand(sums + 0.05, 1.0)
    assert math.exp(path[-1]) == pytest.approx(wealth, rel=1e-9)
    assert math.exp(path.max()) == pytest.approx(best, rel=1e-9)


def test_looks_are_free_the_error_stays_at_alpha_whenever_the_run_stops():
    """At a true difference of exactly -margin, looking after every question of 200 (the most looks a run can
    take) says "not worse" at most alpha of the time (3 standard errors of 4,000 trials)."""
    rng = np.random.default_rng(2024)
    count, n = 4000, 200
    u = rng.random((count, n))
    d = np.where(u < 0.061, -1.0, np.where(u < 0.072, 1.0, 0.0))  # 6.1% losses, 1.1% gains: mean -5 points
    d = d + (-0.05 - d.mean(axis=1, keepdims=True)) * 0  # exact in expectation, not per trial
    every = simulate_not_worse(d, np.ones_like(d), list(range(1, n + 1)), 5.0)
    assert every.mean() <= 0.025 + 3 * np.sqrt(0.025 * 0.975 / count), every.mean()


def test_the_vectorized_rule_decides_as_look_does():
    rng = np.random.default_rng(9)
    sums = rng.choice([-3.0, -1.0, 0.0, 1.0, 2.0], size=(40, 30), p=[0.02, 0.08, 0.6, 0.2, 0.1])
    sizes = np.full((40, 30), 3.0)
    looks = [6, 12, 24, 30]
    fast = simulate_not_worse(sums, sizes, looks, 5.0, bound=3.0)
    for row, stopped in zip(range(40), fast):
        decided = ""
        for n in looks:
            decided = look(sums[row, :n], sizes[row, :n], 5.0, bound=3.0).decision
            if decided:
                break
        assert stopped == (decided == "not worse")


def test_look_decides_as_its_confidence_sequence_says():
    rng = np.random.default_rng(1)
    for _ in range(60):
        clusters = int(rng.integers(6, 60))
        sizes = rng.integers(1, 4, clusters).astype(float)
        sums = np.clip(rng.normal(rng.uniform(-0.2, 0.15), 0.3, clusters) * sizes, -sizes, sizes)
        margin = float(rng.choice([2.0, 5.0, 10.0]))
        seen = look(sums, sizes, margin, bound=3.0)
        assert seen.decision == ("not worse" if seen.lo > -margin else "worse" if seen.hi < -margin else "")
        assert seen.lo <= seen.delta <= seen.hi
        assert (seen.decision == "not worse") <= (seen.log_wealth_not_worse >= seen.threshold)


def test_decide_in_looks_takes_the_papers_shape_and_stops_at_the_first_decision():
    full = np.ones(300) * 0.6
    assert decide_in_looks(full, full.copy(), 5.0, clusters=None, looks=[12, 24]) == "cannot tell at the maximum n"
    # nothing ever changes: the wealth grows by (1 + 0.75 x 0.05 / 0.95) a question: decided once it passes 40
    verdict = decide_in_looks(full, full.copy(), 5.0, clusters=None, looks=list(range(10, 301, 10)))
    assert verdict == "not worse"
    floor = np.zeros(40)
    assert decide_in_looks(floor, floor, 5.0, clusters=None, looks=[40]).startswith("uninformative")


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
    # the first look is the config's own sample (5 questions), then a step of 12 at a time, up to --max-n 36,
    # each rounded up to the end of the document it reaches (a document enters a look whole)
    sizes = [l["n"]["natural_question"] for l in looks]
    assert sizes[0] >= 5 and all(b >= a + 12 for a, b in zip(sizes, sizes[1:-1])) and max(sizes[:-1]) < 36
    preds = [json.loads(l) for l in (out.run_dir / "predictions.jsonl").read_text().splitlines()]
    # every prediction says which look read it and its document; each document is read by one look only, whole
    looks_of: dict[tuple[str, str], set[int]] = {}
    for p in preds:
        assert p["look"] >= 1 and p["document"] == (p.get("cluster") or p["id"])
        looks_of.setdefault((p["config_hash"], p["document"]), set()).add(p["look"])
    assert looks_of and all(len(v) == 1 for v in looks_of.values())
    assert sorted({p["look"] for p in preds}) == list(range(1, len(looks) + 1))
    for key, cell in state["cells"].items():
        assert cell["decision"]  # decided, or "cannot tell at the maximum n" at the last look
        made = [p for p in preds if p["config_hash"] == cell["config_hash"]]
        decided_at = cell["look"] or len(looks)
        assert len(made) == sizes[decided_at - 1]  # no examples after its decision
        assert len(cell["documents"]) == len(set(cell["documents"]))  # the sampling order of its documents
    # each look's threshold is log(1 / alpha): looks need no plan
    first = looks[0]["cells"][0]
    assert first["threshold"] == pytest.approx(math.log(40))


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
    assert ("1 cell(s): 0 not worse than full, 0 worse, 1 not decided (uninformative: the reference scores 100: 1); "
            "the 95% confidence sequence excludes 0 in 0 of 1") in result.output
    state = load_state(run)
    assert [look["n"]["nq_multidoc"] for look in state["looks"]] == [1, 11, 20]  # from the config's sample
    again = CliRunner().invoke(app, ["run", "--resume", str(run), "--no-report"])
    assert again.exit_code == 0 and load_state(run)["looks"] == state["looks"]
    wrong = CliRunner().invoke(app, ["run", str(config), "--out", str(tmp_path / "x"), "--max-n", "5"])
    assert wrong.exit_code == 2 and "--until-decided" in wrong.output


def test_the_report_of_a_grown_run_shows_its_looks_and_what_error_is_controlled(grown):
    from experiments.report.write import write_report

    md, _ = write_report(grown.run_dir, plots=False)
    assert "Decided as the run grew" in md and "95% confidence sequence" in md
    assert "keep α per cell across its repeated looks" in md
    summary = md.split("Detailed tables follow")[0]
    decisions = [c["decision"] for c in grown.state["cells"].values()]
    assert (f"**Decided as the run grew**: {decisions.count('not worse')} not worse than full, "
            f"{decisions.count('worse')} worse") in summary and "every interval of this report is a cell's" in summary
    rows = (grown.run_dir / "tables" / "sequential.csv").read_text().splitlines()
    assert len(rows) == 1 + len(grown.state["cells"])
    # no fixed-n re-test of the last look's data: after repeated looks it controls no error, and its intervals
    # contradicted the confidence sequences
    assert not (grown.run_dir / "tables" / "noninferiority.csv").exists() and "Holm" not in md


def test_every_table_of_a_grown_run_shows_the_confidence_sequence_and_the_console_counts_it(grown):
    """The scores table printed the fixed-n `+8.18 [+1.37, +16.09]*` beside the looks table's `[-2.82, +20.39]`:
    now each tested cell shows the confidence sequence of its last look, `*` only where that excludes 0, and
    the end-of-run line counts those stars."""
    from experiments.design.grow import summary_line
    from experiments.report.cells import load_run
    from experiments.report.tables import score_table

    data = load_run(grown.run_dir)
    latest = {(r["task"], r["config_hash"]): r for seen in grown.state["looks"] for r in seen["cells"]}
    tested = [c for c in data.cells if (c.task, c.config_hash) in latest]
    assert tested and all(c.sequence for c in tested)
    header, body = score_table(data.cells, data.items())
    column = next(i for i, h in enumerate(header) if h.startswith("natural_question"))
    stars = 0
    for c in tested:
        row = latest[(c.task, c.config_hash)]
        shown = f"{row['delta']:+.2f} [{row['lo']:+.2f}, {row['hi']:+.2f}]"
        text = next(r[column] for r in body if r[1] == c.compressor)
        assert shown in text and text.endswith("*") == (row["lo"] > 0 or row["hi"] < 0), (text, row)
        stars += text.endswith("*")
    assert f"the 95% confidence sequence excludes 0 in {stars} of {len(tested)}" in summary_line(grown.state)


def test_a_cell_left_open_at_the_floor_says_so_in_the_looks_table(tmp_path, shared_data):
    """Stopped for cost after the first look: natural_question's extractive full scores within the margin of 0,
    so the fixed-n table calls its cells uninformative, and the looks table (the run's verdicts) says the same of
    the cells it keeps open, instead of a bare "open"."""
    from experiments.report.write import write_report

    out = grow(_config(shared_data), tmp_path / "run", Limits(step=12, max_n=36, max_cost=CostLimit.parse("12calls")),
               progress=False)
    assert len(out.state["looks"]) == 1 and "max-cost" in out.state["stopped"]
    rows = [r for look in out.state["looks"] for r in look["cells"]]
    assert rows and all(r["edge"] == "0" and not r["decision"] for r in rows)
    write_report(out.run_dir, plots=False)
    table = (out.run_dir / "tables" / "sequential.csv").read_text().splitlines()[1:]
    assert table and all("open (uninformative: the reference scores 0 at this look)" in r for r in table)

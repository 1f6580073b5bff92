"""Futility stopping in ``--until-decided`` and the betting bound of a growing run: a cell the documents still
to come cannot decide stops undecided (never a new decision, so never a new error), a cell on its way to a
decision is not stopped, and a swept task's documents are bounded by their positions, not by the pool's count
of questions."""
from __future__ import annotations

import numpy as np
import pytest

from experiments.design.grow import Limits, grow, largest_documents, summary
from experiments.inference.sequential import FUTILE, decide_in_looks, futility, look
from experiments.run.config import parse_config

LOOKS = [4, 8, 12, 16]


def test_futility_only_ends_a_cell_undecided_never_with_another_verdict():
    """Over many random cells (rare losses, gains, both; sizes 1-3), the rule with futility returns the rule
    without it, or a futility "cannot tell": it can cost power, never add a verdict."""
    rng = np.random.default_rng(11)
    stopped = 0
    for trial in range(300):
        n_docs = 16
        sizes = rng.integers(1, 4, size=n_docs)
        clusters = [str(i) for i, s in enumerate(sizes) for _ in range(s)]
        p_loss, p_gain = rng.choice([0.0, 0.05, 0.3]), rng.choice([0.0, 0.05, 0.3])
        full = (rng.random(len(clusters)) < 0.7).astype(float)
        u = rng.random(len(clusters))
        arm = np.where((full == 1) & (u < p_loss), 0.0, np.where((full == 0) & (u < p_gain), 1.0, full))
        plain = decide_in_looks(full, arm, 5.0, clusters=clusters, looks=LOOKS)
        early = decide_in_looks(full, arm, 5.0, clusters=clusters, looks=LOOKS, stop_futile=True)
        if early != plain:
            assert early.startswith("cannot tell: stopped for futility"), (trial, plain, early)
            stopped += 1
    assert stopped > 0  # the rule does fire on cells like these


def test_a_cell_that_cannot_reach_the_threshold_stops_for_certain():
    """Four documents seen, two to come: even two documents at their best could not lift the wealth to 1/alpha."""
    sums, sizes = np.zeros(4), np.ones(4)
    seen = look(sums, sizes, 5.0, bound=1)
    assert futility(seen, sums, sizes, 5.0, remaining=2, bound=1) == "2 more could not reach 1/α even at their best"
    assert futility(seen, sums, sizes, 5.0, remaining=40, bound=1) == ""  # 40 more could, at their best
    assert futility(seen, sums, sizes, 5.0, remaining=0, bound=1) == ""  # at the maximum n: "cannot tell at ..."


def test_a_cell_stops_when_more_of_the_same_could_not_decide_it():
    """Thirty identical answers: no valid test says "not worse" at margin 5 before about 72 (docs/metrics.md),
    so 30 more like them cannot decide the cell, while 60 more could."""
    sums, sizes = np.zeros(30), np.ones(30)
    seen = look(sums, sizes, 5.0, bound=1)
    why = futility(seen, sums, sizes, 5.0, remaining=30, bound=1)
    assert why.startswith("at Δ +0.00 ± 2 standard errors, 30 more would lift the log-wealth to at most ")
    assert why.endswith("of the 3.69 a decision needs")
    assert FUTILE.format(n=30, why=why).startswith("cannot tell: stopped for futility at 30 documents (at Δ +0.00")
    assert futility(seen, sums, sizes, 5.0, remaining=60, bound=1) == ""  # 90 identical answers could decide
    # one loss in 12 (-8.33 points, both wealths at 0): hopeless with 8 more, not with 40
    sums = np.array([-1.0] + [0.0] * 11)
    seen = look(sums, np.ones(12), 5.0, bound=1)
    assert futility(seen, sums, np.ones(12), 5.0, remaining=8, bound=1)
    assert futility(seen, sums, np.ones(12), 5.0, remaining=40, bound=1) == ""


def test_a_cell_on_its_way_to_a_decision_is_not_stopped():
    """An arm that loses half the answers is decided "worse", futility or not."""
    full = np.ones(48)
    arm = np.tile([1.0, 0.0], 24)
    clusters = [str(i // 3) for i in range(48)]
    assert decide_in_looks(full, arm, 5.0, clusters=clusters, looks=LOOKS, stop_futile=True) == "worse"


def test_the_bound_of_a_swept_task_is_its_positions(shared_data):
    """Lost in the Middle swept over 3 positions: each question is a document of 3 items, though the file holds
    one item a question (the pool's count, 1, once gave every stake a range it could leave: NaN wealth)."""
    litm = shared_data / "lost_in_the_middle" / "nq-open-oracle.jsonl.gz"
    config = parse_config({"name": "b", "readers": ["extractive"], "compressors": ["full", "truncate"], "tasks": [
        {"name": "nq_multidoc", "path": str(litm), "sample": {"n": 4, "seed": 0},
         "sweep": {"positions": [0, 2, 4], "num_docs": 5, "distractors": {"method": "random"}}},
        {"name": "natural_question", "path": str(shared_data / "leval" / "natural_question.jsonl"),
         "sample": {"n": 8, "seed": 0, "by": "document"}}]})
    keys = [t.key for t in config.tasks]
    # the sample of 8 documents holds one question each, but the pool's largest document holds 10: a sample that
    # missed the long documents must not bound their sums by its own (issue 50, rare long documents)
    assert largest_documents(config, dict(zip(keys, [6, 8]))) == dict(zip(keys, [3, 10]))
    assert largest_documents(config, dict(zip(keys, [6, 30])))[keys[1]] == 10


def test_look_refuses_a_document_past_its_bound():
    with pytest.raises(ValueError, match="passes the bound of 1"):
        look(np.array([0.0, -2.0]), np.array([1.0, 3.0]), 5.0, bound=1)


def test_a_grown_run_stops_feeding_a_futile_cell(tmp_path, monkeypatch):
    """The wiring: a cell the rule calls futile at the first look ends there, with its look, and is read no
    more (the rule itself is tested above)."""
    import experiments.design.grow as grow_module

    monkeypatch.setattr(grow_module, "futility", lambda *args, **kwargs: "stand-in reason")
    config = parse_config({"name": "f", "readers": ["extractive"], "compressors": [
        "full", {"name": "truncate", "params": {"policy": "middle"}}], "budget": [24],
        "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 30, "num_docs": 4,
                                                        "words_per_doc": 30}, "sample": {"n": 6, "seed": 1}}]})
    out = grow(config, tmp_path / "run", Limits(step=6, max_n=30), progress=False)
    (cell,) = out.state["cells"].values()
    if cell["decision"] in ("not worse", "worse") or cell["decision"].startswith("uninformative"):
        pytest.skip(f"the synthetic cell ended {cell['decision']!r} before futility could be asked")
    assert cell["decision"] == "cannot tell: stopped for futility at 6 documents (stand-in reason)"
    assert cell["look"] == 1 and len(out.state["looks"]) == 1
    assert summary(out.state)["stopped for futility"] == 1  # the end-of-run line counts it under one name

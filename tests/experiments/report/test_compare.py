"""``ctxcomp compare`` as a researcher iterates: runs that differ in one setting are paired arm by arm
(``--match chunk_size=30:60``), a run's own axis too, and every matched row carries its difference of differences."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from core.errors import UserError
from experiments.cli.app import app
from experiments.report.compare import compare_runs

DOD = "(B - full) - (A - full) [95% CI]"


def _config(chunk_size) -> dict:
    return {
        "name": "compare",
        "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 6, "num_docs": 5,
                                                         "words_per_doc": 40}}],
        "compressors": [
            "full",
            {"name": "truncate", "params": {"max_tokens": 60, "policy": "right"}},
            {"name": "retrieval", "params": {"retriever": "bm25", "top_n": [1, 2], "unit": "chunk",
                                             "chunk_size": chunk_size}},
            {"name": "retrieval", "params": {"retriever": "bm25", "top_n": 1, "unit": "chunk", "order": "document",
                                             "chunk_size": chunk_size}},
        ],
        "readers": ["extractive"],
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from experiments import evaluate

    root = tmp_path_factory.mktemp("compare")
    for name, size in (("a", 30), ("b", 60), ("axis", [30, 60])):
        evaluate(_config(size), root / name, report=False, progress=False)
    return root


def test_runs_that_differ_in_chunk_size_pair_every_arm_with_a_difference_of_differences(runs):
    header, body, notes = compare_runs(runs / "a", runs / "b", {"chunk_size": "30:60"})
    rows = {row[2]: dict(zip(header, row)) for row in body}
    retrieval = [label for label in rows if label.startswith("retrieval")]
    assert len(retrieval) == 3 and {"full", "truncate(60, right)"} <= set(rows)
    assert not [n for n in notes if n.startswith("only in")]  # nothing left unmatched
    for label in retrieval:
        a_label, b_label = label.split(" : ")
        assert "30x" in a_label and "60x" in b_label and a_label.replace("30x", "60x") == b_label
        assert rows[label]["n common"] == "6" and rows[label][DOD]  # every matched row: paired Δ and the DoD
        assert rows[label]["B - A [95% CI]"]
    assert rows["full"][DOD] == ""  # full against full has no difference of differences


def test_a_runs_own_axis_is_compared_without_comparing_a_cell_with_itself(runs):
    header, body, notes = compare_runs(runs / "axis", runs / "axis", {"chunk_size": "30:60"})
    labels = [row[2] for row in body]
    assert len(labels) == 3 and all(" : " in label for label in labels)  # full and truncate are not rows
    by_run = {row[2]: row for row in compare_runs(runs / "a", runs / "b", {"chunk_size": "30:60"})[1]}
    for row in body:  # the same configs and examples as the two runs: the same numbers
        assert row[3:] == by_run[row[2]][3:]


def test_a_compressor_match_keeps_its_difference_of_differences(runs):
    a = "retrieval(bm25, 30x1, order=score)"
    b = "retrieval(bm25, 60x1, order=document)"
    header, body, notes = compare_runs(runs / "a", runs / "b", {"compressor": f"{a}:{b}"})
    (row,) = [dict(zip(header, r)) for r in body if r[2] == f"{a} : {b}"]
    assert row[DOD] and row["n (diff of diffs)"] == "6"


def test_an_unknown_setting_or_value_is_one_line_naming_what_exists(runs):
    with pytest.raises(UserError, match="no arm of either run sets 'chunk_sise'"):
        compare_runs(runs / "a", runs / "b", {"chunk_sise": "30:60"})
    with pytest.raises(UserError, match=r"a chunk_size of A \(30\) and one of B \(60\)"):
        compare_runs(runs / "a", runs / "b", {"chunk_size": "30:90"})
    result = CliRunner().invoke(app, ["compare", str(runs / "a"), str(runs / "b"), "--match", "chunk_size=30:60",
                                      "--plain"])
    assert result.exit_code == 0, result.output
    assert "retrieval(bm25, 30x2, order=score) : retrieval(bm25, 60x2, order=score)" in result.output


def test_compare_pairs_over_documents_where_questions_share_them(tmp_path):
    """Two runs of 24 questions on 8 documents: B - A and the difference of differences are the clustered
    paired deltas, and n says how many documents they rest on."""
    import numpy as np

    from experiments.inference.paired import paired_delta

    rng = np.random.default_rng(4)
    ids = [f"q{i:02d}" for i in range(24)]
    docs = [f"doc{i // 3}" for i in range(24)]
    scores = {name: rng.integers(0, 2, 24).astype(float) for name in ("fa", "ca", "fb", "cb")}
    row = _truncate_row(tmp_path, ids, scores, docs)
    assert row["n common"] == "24 (8 docs)" and row["n (diff of diffs)"] == "24 (8 docs)"
    b_minus_a = paired_delta(scores["ca"], scores["cb"], clusters=docs)
    assert row["B - A [95% CI]"].startswith(f"{b_minus_a.delta:+.2f} [{b_minus_a.lo:+.2f}, {b_minus_a.hi:+.2f}]")
    dod = paired_delta(scores["ca"] - scores["fa"], scores["cb"] - scores["fb"], clusters=docs, bounded=(-1.0, 1.0))
    assert row[DOD].startswith(f"{dod.delta:+.2f} [{dod.lo:+.2f}, {dod.hi:+.2f}]")


def test_no_interval_compare_prints_passes_what_its_quantity_can_attain(tmp_path):
    """Six documents of partial-credit scores: every interval stays within what its quantity can attain, a
    score's change against full within [-100, +100] (it printed [-200.00, +200.00]: a change tested as a value
    in [-2, 2]), the difference of the two changes within [-200, +200]; one as wide as that whole range bounds
    nothing and is said so ("no bound at this n") instead of printed."""
    import re

    from experiments.inference.paired import paired_delta

    ids = [f"q{i}" for i in range(6)]
    scores = {"fa": [0.5, 0.2, 0.9, 0.4, 0.7, 0.1], "ca": [0.6, 0.2, 0.3, 0.4, 0.9, 0.1],
              "fb": [0.5, 0.3, 0.9, 0.4, 0.7, 0.2], "cb": [0.8, 0.2, 0.9, 0.6, 0.7, 0.3]}
    row = _truncate_row(tmp_path, ids, scores)
    reach = {"B - A [95% CI]": 100, "A - full": 100, "B - full": 100, DOD: 200}
    for column, most in reach.items():
        bounds = re.search(r"\[([-+0-9.]+), ([-+0-9.]+)\]", row[column])
        if bounds is None:  # an interval as wide as all the quantity can be is named, not printed
            assert row[column].endswith("(no bound at this n)"), (column, row[column])
            continue
        lo, hi = (float(x) for x in bounds.groups())
        assert -most <= lo <= hi <= most and (lo, hi) != (-most, most), (column, row[column])
    a_full = paired_delta(scores["fa"], scores["ca"], clusters=ids)
    assert row["A - full"].startswith(f"{a_full.delta:+.2f}")


def test_an_interval_as_wide_as_all_its_quantity_can_be_is_named_not_printed():
    """A difference of differences spans [-200, +200]: an interval that wide bounds nothing, and printed as
    `+33.33 [-200.00, +200.00]` beside 0-100 scores it reads as a scale error; a narrower one is printed."""
    from experiments.inference.results import PairedDelta
    from experiments.report.compare import _fmt

    vacuous = PairedDelta(33.33, -200.0, 200.0, 1.0, 6, 6, method="betting")
    assert _fmt(vacuous, attainable=200.0) == "+33.33 (no bound at this n)"
    assert "[" not in _fmt(PairedDelta(5.0, -100.0, 100.0, 1.0, 6, 6, method="betting"))
    assert _fmt(PairedDelta(5.0, -120.0, 150.0, 1.0, 6, 6, method="betting"), attainable=200.0) == \
        "+5.00 [-120.00, +150.00]"


def _truncate_row(tmp_path, ids, scores, clusters=None) -> dict[str, str]:
    """Two runs (a, b) of full and truncate on one task with these item scores; the truncate row of their
    comparison, by column."""
    from experiments.data.records import Prediction
    from tests.experiments.report.test_tradeoff import point, write_run

    for name, full, arm in (("a", scores["fa"], scores["ca"]), ("b", scores["fb"], scores["cb"])):
        preds = [Prediction(task="t", id=i, config_hash=h, compressor=label, compressor_kind=kind, reader="r",
                            prediction="", metric="qa_f1", score=float(v[k]),
                            **({"cluster": clusters[k]} if clusters else {}))
                 for h, label, kind, v in (("F", "full", "full", full), ("C", "truncate", "truncate", arm))
                 for k, i in enumerate(ids)]
        write_run(tmp_path / name, preds, [point("F", "full"), point("C", "truncate")])
    header, body, _ = compare_runs(tmp_path / "a", tmp_path / "b")
    return dict(zip(header, next(r for r in body if r[2] == "truncate")))

"""The open-domain curve as a runner mode: recall@k vs reader accuracy@k, per-question records, resume, no NaN."""
from __future__ import annotations

import csv
import json
import math
from typing import Sequence

import pytest

from experiments.data.store import write_jsonl
from experiments.data.synthetic import make_multidoc_qa
from experiments.inference.verdicts import CANNOT_TELL, NOT_WORSE
from experiments.protocols.litm import litm_qa_record
from experiments.report.cells import Scores, load_run
from experiments.report.curve import curve_rows, saturation, saturation_k
from experiments.run.config import parse_config
from experiments.run.driver import Runner
from readers.base import Generation, GenerationRequest, Reader
from readers.extractive import ExtractiveReader

ORACLE = "lost_in_the_middle/nq-open-oracle.jsonl.gz"
HERE = "tests.experiments.protocols.test_curve"


def _nested(accuracy: dict[int, float], n: int) -> dict[int, Scores]:
    """Item scores of a constructed curve: at each k the first ``accuracy% of n`` questions are right (nested, so
    a question right at a lower accuracy is right at every higher one: paired differences are all of one sign)."""
    return {k: Scores({f"q{i}": float(i < round(acc * n / 100)) for i in range(n)}) for k, acc in accuracy.items()}


@pytest.mark.parametrize(
    "accuracy,n,expected,ladder",
    [
        # a flat top on 200 questions: k = 5 ties k = 10, k = 2 is 2 points below both (within the margin), k = 1
        # is 28 points below k = 2: the walk down from the largest k stops there
        # (on 200 questions the 8 answers k = 2 loses are 4%: a 5% loss rate leaves that few with probability 0.03)
        ({1: 20, 2: 48, 5: 50, 10: 50}, 400, 2, "stopped at k=1: against k=2, worse"),
        ({1: 49, 2: 49.5, 5: 50}, 200, 1, "every smaller k passed"),
        # the best k picked after looking (k = 1) is never the reference: the largest k is, and k = 5 is 19.5
        # points below it, so the curve has not saturated by k = 10 as far as this test can say
        ({1: 50, 5: 30, 10: 49.5}, 40, None, "stopped at k=5: against k=10, worse"),
        ({10: 42}, 20, 10, "the largest k is the only k"),
        # 10 identical answers cannot show "not worse" at a 5-point margin (0.95^10 = 0.6)
        ({1: 20, 2: 50, 5: 50, 10: 50}, 10, None, "stopped at k=5: against k=10, cannot tell at this n"),
    ],
)
def test_saturation_is_the_smallest_k_not_worse_than_every_larger_k(accuracy, n, expected, ladder):
    sat = saturation_k(_nested(accuracy, n), 5.0)
    assert (sat.k, sat.ladder) == (expected, ladder)
    assert sat.reference_k == max(accuracy)
    if expected is None:
        assert sat.text in (CANNOT_TELL, f"not reached by k = {max(accuracy)}")
    else:
        assert sat.text == str(expected)
    if expected is not None and expected != sat.reference_k:  # reported with its interval against the largest k
        assert sat.test.verdict == NOT_WORSE and sat.test.lo > -5.0 and sat.test.n == n


def test_picking_the_best_k_first_would_call_a_worse_k_saturated():
    """k = 5 is within the margin of k = 10 but 7.5 points below k = 20.  Tested against k = 10 alone (as a
    rule that picked k = 10 as the best would), k = 5 passes; it is not within the margin of every larger k,
    so it is not called saturated."""
    n = 600
    curve = _nested({5: 50, 10: 51.5, 20: 57.5}, n)
    sat = saturation_k(curve, 5.0)
    assert sat.k != 5
    best_first = saturation_k({5: curve[5], 10: curve[10]}, 5.0)  # what testing against k = 10 alone gives
    assert best_first.k == 5


def test_saturation_needs_points():
    with pytest.raises(ValueError):
        saturation_k({}, 5.0)


def test_a_larger_margin_moves_the_saturation_down():
    curve = _nested({1: 40, 2: 47, 5: 50}, 1000)  # k = 2 is 3 points below the best, k = 1 is 10 below
    assert saturation_k(curve, 5.0).k == 2 and saturation_k(curve, 15.0).k == 1


class HalfBrokenReader(Reader):
    """Fails every other request, as a flaky remote service would; answers the rest extractively."""

    def __init__(self) -> None:
        self.inner = ExtractiveReader()
        self.calls = 0

    @property
    def identity(self) -> str:
        return "half-broken"

    @property
    def label(self) -> str:
        return "half-broken"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for gen in self.inner.generate(requests):
            self.calls += 1
            out.append(Generation(text="", error="HTTP 503") if self.calls % 2 else gen)
        return out


class DeadReader(HalfBrokenReader):
    @property
    def identity(self) -> str:
        return "dead"

    @property
    def label(self) -> str:
        return "dead"

    def generate(self, requests):
        return [Generation(text="", error="connection refused") for _ in requests]


def _litm_file(tmp_path, n=12, seed=2):
    questions = make_multidoc_qa(n, num_docs=4, words_per_doc=40, seed=seed)
    return write_jsonl([litm_qa_record(q) for q in questions], tmp_path / "qa.jsonl"), questions


def _curve_config(path, readers, ks, limit=None, retriever="bm25"):
    return parse_config({
        "name": "curve",
        "tasks": [{"name": "nq_multidoc", "label": "nq_open", "path": str(path), "limit": limit,
                   "open_domain": {"retriever": retriever, "depth": max(ks)}}],
        "compressors": [{"name": "top_k", "params": {"k": ks}}],
        "readers": readers,
    })


def _run(cfg, out):
    runner = Runner(cfg, out, progress=False) if not (out / "config.yaml").exists() else Runner.resume(out, progress=False)
    try:
        return runner.run()
    finally:
        runner.close()


def test_curve_rows_count_failures_per_question_and_never_write_nan(tmp_path):
    path, questions = _litm_file(tmp_path)
    readers = [{"name": "extractive"}, {"name": f"{HERE}:HalfBrokenReader"}, {"name": f"{HERE}:DeadReader"}]
    out = tmp_path / "run"
    stats = _run(_curve_config(path, readers, [1, 3]), out)
    assert stats.predicted == 12 * 2 + 6 * 2 and stats.failed == 6 * 2 + 12 * 2
    from experiments.report.write import write_report

    write_report(out, plots=False)
    rows = {(r.reader, r.k): r for r in curve_rows(load_run(out))}
    assert rows[("extractive", 1)].n == 12 and rows[("extractive", 1)].failed == 0
    assert rows[("half-broken", 1)].n == 6 and rows[("half-broken", 1)].failed == 6
    dead = rows[("dead", 3)]
    assert (dead.accuracy, dead.recall, dead.n, dead.failed) == (None, None, 0, 12) and "failed" in dead.note
    # recall@k from the per-question records: the kept passages contain the answer
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    at1 = [p for p in preds if p["reader"] == "extractive" and p["kept_chunks"] and len(p["kept_chunks"]) == 1]
    assert len(at1) == 12 and rows[("extractive", 1)].recall == pytest.approx(
        100 * sum(p["answer_in_context"] for p in at1) / 12, abs=0.01)
    assert rows[("extractive", 1)].recall >= 80  # the entity name picks out the gold passage
    text = (out / "curve.csv").read_text()
    assert "nan" not in text.lower()
    with open(out / "curve.csv", newline="") as f:
        dead_row = next(r for r in csv.DictReader(f) if r["reader"] == "dead" and r["k"] == "3")
    assert dead_row["accuracy"] == "" and dead_row["failed"] == "12"
    info = json.loads((out / "curve.json").read_text())  # strict JSON: no NaN anywhere
    assert any(r["reader"] == "dead" and r["accuracy"] is None for r in info["rows"])
    lo, hi = rows[("extractive", 3)].accuracy_ci
    assert lo <= rows[("extractive", 3)].accuracy <= hi
    # largest k vs smallest k, paired on the question: only questions both ends answered; none for the dead reader
    from experiments.report.curve import curve_contrasts

    header, body = curve_contrasts(load_run(out))
    contrast = {row[1]: row for row in body}
    assert set(contrast) == {"extractive", "half-broken"} and contrast["extractive"][2] == "3 vs 1"
    ext, n = contrast["extractive"], header.index("n")
    assert ext[n] == "12" and ext[3].startswith(f"{rows[('extractive', 3)].recall - rows[('extractive', 1)].recall:+.2f}")
    assert int(contrast["half-broken"][n]) < 12
    # the saturation k with its test against the largest k, beside the pre-set ends; the best k for reading only
    sat = saturation(load_run(out))[("nq_open", "extractive")]
    assert ext[header.index("best k (descriptive)")] == str(sat.best_k)
    assert ext[header.index("saturation k (margin 5)")] == sat.text
    assert "Largest k against smallest k" in (out / "report.md").read_text()


def test_curve_resumes_and_a_second_run_reuses_everything(tmp_path):
    path, _ = _litm_file(tmp_path, n=8, seed=5)
    out = tmp_path / "run"
    cfg = _curve_config(path, [{"name": "extractive"}], [1, 2, 4])
    first = _run(cfg, out)
    lines = (out / "predictions.jsonl").read_text().splitlines()
    (out / "predictions.jsonl").write_text("\n".join(lines[:10]) + "\n" + lines[10][:25])  # a kill mid-write
    second = _run(cfg, out)
    assert (first.predicted, second.predicted, second.already_done) == (24, 14, 10)
    keys = [(r["id"], r["config_hash"]) for r in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())]
    assert len(keys) == len(set(keys)) == 24


def test_curve_on_real_oracle_keeps_the_whole_corpus(shared_data, tmp_path):
    out = tmp_path / "run"
    _run(_curve_config(shared_data / ORACLE, [{"name": "extractive"}], [1, 5, 20], limit=30), out)
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert {p["meta"]["corpus_size"] for p in preds} == {2600}  # --limit limits questions, never the corpus
    rows = {r.k: r for r in curve_rows(load_run(out))}
    recall = [rows[k].recall for k in (1, 5, 20)]
    assert recall == sorted(recall) and recall[2] > recall[0]
    from experiments.report.write import write_report

    write_report(out, plots=False)
    (sat,) = saturation(load_run(out)).values()
    assert rows[sat.best_k].accuracy == max(r.accuracy for r in rows.values())
    assert sat.reference_k == 20 and (sat.k is None or sat.k <= sat.reference_k)
    with open(out / "curve.csv", newline="") as f:
        assert {r["saturation_k"] for r in csv.DictReader(f)} == {sat.text}


def _app():
    import typer

    from experiments.cli.app import build_app
    from experiments.cli.curve import curve

    app = typer.Typer()
    app.command("curve")(curve)
    app.add_typer(build_app, name="build")
    return app


def test_curve_command_and_errors(tmp_path):
    from typer.testing import CliRunner

    path, _ = _litm_file(tmp_path, n=6, seed=4)
    runner = CliRunner()
    ok = runner.invoke(_app(), ["curve", "--litm", str(path), "--reader", "extractive", "--ks", "1,2",
                                "--out", str(tmp_path / "out")])
    assert ok.exit_code == 0, ok.output
    assert "saturation k" in ok.output and (tmp_path / "out" / "curve.csv").is_file()
    assert (tmp_path / "out" / "plots" / "curve_nq_open_bm25_extractive.png").stat().st_size > 1000
    again = runner.invoke(_app(), ["curve", "--litm", str(path), "--reader", "extractive", "--ks", "1,2",
                                   "--out", str(tmp_path / "out")])
    assert again.exit_code == 0 and "0 predicted, 12 already done" in again.output
    bad = runner.invoke(_app(), ["curve", "--litm", str(path), "--ks", "1,x", "--out", str(tmp_path / "o2")])
    assert bad.exit_code == 2 and "--ks" in bad.output
    missing = runner.invoke(_app(), ["curve", "--litm", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o3")])
    assert missing.exit_code == 2 and "nope.jsonl" in missing.output
    typo = runner.invoke(_app(), ["curve", "--litm", str(path), "--retriever", "bm52", "--out", str(tmp_path / "o4")])
    assert typo.exit_code == 2 and "Did you mean 'bm25'" in typo.output


def test_build_commands_write_loadable_files(tmp_path):
    from typer.testing import CliRunner

    from experiments.data.store import write_jsonl
    from experiments.protocols.kv import key_position
    from experiments.protocols.litm import litm_qa_record
    from experiments.tasks.litm import load_litm_kv, load_litm_qa
    from experiments.tasks.loading import load_examples

    runner = CliRunner()
    kv_out = tmp_path / "kv.jsonl.gz"
    res = runner.invoke(_app(), ["build", "kv", "--n", "3", "--num-keys", "10", "--positions", "0,9", "--out", str(kv_out)])
    assert res.exit_code == 0, res.output
    assert [key_position(e) for e in load_litm_kv(kv_out)] == [0, 0, 0, 9, 9, 9]

    questions = make_multidoc_qa(40, num_docs=2, words_per_doc=40, seed=6)
    gold_only = write_jsonl([litm_qa_record(q) | {"ctxs": [c for c in litm_qa_record(q)["ctxs"] if c["isgold"]]}
                             for q in questions], tmp_path / "oracle.jsonl")
    res = runner.invoke(_app(), ["build", "sweep", "--litm", str(gold_only), "--num-docs", "5", "--positions", "0,4",
                                 "--out", str(tmp_path / "sweep")])
    assert res.exit_code == 0, res.output
    at4 = load_litm_qa(tmp_path / "sweep" / "nq-open-5_total_documents_gold_at_4.jsonl.gz")
    assert len(at4) == 40 and all(e.passages[4].is_gold and len(e.passages) == 5 for e in at4)
    bad = runner.invoke(_app(), ["build", "sweep", "--litm", str(gold_only), "--num-docs", "5", "--positions", "5",
                                 "--out", str(tmp_path / "sweep2")])
    assert bad.exit_code == 2

    m4le_out = tmp_path / "m4le.jsonl"
    res = runner.invoke(_app(), ["build", "m4le", "--source", str(gold_only), "--target-words", "500,1000",
                                 "--ability", "semantic_single,explicit_single", "--n", "2", "--out", str(m4le_out)])
    assert res.exit_code == 0, res.output
    assert len(load_examples(m4le_out, "m4le")) == 8


@pytest.mark.slow
def test_curve_with_real_smollm2(tmp_path):
    """The real offline LLM reads short synthetic contexts; kept tiny (3 questions, 2 cut-offs)."""
    pytest.importorskip("readers.smollm2")
    path, _ = _litm_file(tmp_path, n=3, seed=9)
    out = tmp_path / "run"
    stats = _run(_curve_config(path, [{"name": "smollm2"}], [1, 3]), out)
    assert (stats.predicted, stats.failed) == (6, 0)
    rows = curve_rows(load_run(out))
    assert all(r.n == 3 and 0 <= r.accuracy <= 100 and not math.isnan(r.accuracy) for r in rows)


def test_curve_takes_max_new_tokens_and_the_saturation_margin(tmp_path):
    import yaml
    from typer.testing import CliRunner

    path, _ = _litm_file(tmp_path, n=6, seed=4)
    out = tmp_path / "out"
    ok = CliRunner().invoke(_app(), ["curve", "--litm", str(path), "--reader", "extractive", "--ks", "1,2",
                                     "--max-new-tokens", "7", "--margin", "12", "--out", str(out)])
    assert ok.exit_code == 0, ok.output
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["margin"] == 12 and config["tasks"][0]["max_new_tokens"] == 7
    assert "saturation k (margin 12)" in (out / "tables" / "curve_contrasts.csv").read_text()
    bad = CliRunner().invoke(_app(), ["curve", "--litm", str(path), "--max-new-tokens", "0", "--out", str(tmp_path / "b")])
    assert bad.exit_code == 2 and "--max-new-tokens must be >= 1" in bad.output

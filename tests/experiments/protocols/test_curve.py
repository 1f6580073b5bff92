"""Open-domain curve: recall@k vs reader accuracy@k, saturation, failure accounting, files written."""
from __future__ import annotations

import csv
import json
from typing import Sequence

import pytest

from experiments.curve import load_litm_corpus, run_curve, saturation_k
from experiments.data.synthetic import make_multidoc_qa
from readers.base import Generation, GenerationRequest, Reader
from readers.extractive import ExtractiveReader

ORACLE = "lost_in_the_middle/nq-open-oracle.jsonl.gz"


@pytest.mark.parametrize(
    "acc,expected",
    [
        ({1: 0.30, 5: 0.50, 20: 0.505, 50: 0.51}, 5),  # 0.50 is exactly 1 point below the best
        ({1: 0.20, 2: 0.40, 5: 0.60}, 5),
        ({1: 0.50, 5: 0.30, 10: 0.495}, 1),  # the best can come first
        ({10: 0.42}, 10),
        ({1: 0.30, 5: 0.489, 20: 0.50}, 20),  # 1.1 points below is not saturated
    ],
)
def test_saturation_k_hand_cases(acc, expected):
    assert saturation_k(acc) == expected


def test_saturation_k_needs_points():
    with pytest.raises(ValueError):
        saturation_k({})


class HalfBrokenReader(Reader):
    """Fails every other request, as a flaky remote service would; answers the rest extractively."""

    def __init__(self) -> None:
        self.inner = ExtractiveReader()
        self.calls = 0

    @property
    def identity(self) -> str:
        return "half-broken"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        out = []
        for gen in self.inner.generate(requests):
            self.calls += 1
            out.append(Generation(text="", error="HTTP 503") if self.calls % 2 else gen)
        return out


def _corpus_of(examples):
    seen = {}
    for ex in examples:
        for p in ex.passages:
            seen.setdefault((p.title, p.text), p)
    return list(seen.values())


def test_curve_on_synthetic_counts_failures_and_writes_files(tmp_path):
    questions = make_multidoc_qa(12, num_docs=4, words_per_doc=40, seed=2)
    result = run_curve(questions, _corpus_of(questions), retriever="bm25",
                       readers=["extractive", HalfBrokenReader()], ks=[1, 3], out_dir=tmp_path, progress=False)
    by = {(r.reader, r.k): r for r in result.rows}
    assert by[("extractive", 1)].n == 12 and by[("extractive", 1)].failed == 0
    assert by[("half-broken", 1)].n == 6 and by[("half-broken", 1)].failed == 6
    assert result.recall[1] >= 0.8  # the entity name picks out the gold passage
    with open(tmp_path / "curve.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["reader", "k", "recall", "accuracy", "n", "failed"]
    assert [(r["reader"], r["n"], r["failed"]) for r in rows if r["k"] == "1"] == [("extractive", "12", "0"), ("half-broken", "6", "6")]
    assert len(rows) == 4 and all(0 <= float(r["accuracy"]) <= 1 for r in rows)
    info = json.loads((tmp_path / "curve.json").read_text())
    assert info["failed"]["half-broken"] == {"1": 6, "3": 6}
    assert set(info["saturation_k"]) == {"extractive", "half-broken"}
    for name in ("curve.png", "curve.svg"):
        assert (tmp_path / name).stat().st_size > 1000


def test_curve_on_real_oracle(shared_data, tmp_path):
    questions, corpus = load_litm_corpus(shared_data / ORACLE)
    assert len(questions) == 2655 and len(corpus) == 2600  # 55 gold passages serve two questions
    result = run_curve(questions[:30], corpus, retriever="bm25", readers=["extractive"], ks=[1, 5, 20],
                       out_dir=tmp_path, progress=False)
    recall = [result.recall[k] for k in (1, 5, 20)]
    assert recall == sorted(recall) and recall[2] > recall[0]
    acc = result.accuracy["extractive"]
    assert all(0 <= a <= 1 for a in acc.values()) and max(acc.values()) > 0
    assert result.saturation["extractive"] in (1, 5, 20)


def test_bad_ks(tmp_path):
    questions = make_multidoc_qa(2, num_docs=2, seed=1)
    with pytest.raises(ValueError):
        run_curve(questions, _corpus_of(questions), retriever="bm25", readers=["extractive"], ks=[0, 1],
                  out_dir=tmp_path, progress=False)


def _app():
    import typer

    from experiments.cli.build import build_kv, build_m4le, build_sweep
    from experiments.cli.curve import curve

    app = typer.Typer()
    app.command("curve")(curve)
    app.command("kv")(build_kv)
    app.command("m4le")(build_m4le)
    app.command("sweep")(build_sweep)
    return app


def test_curve_command_and_errors(tmp_path):
    from typer.testing import CliRunner

    from experiments.protocols.litm import litm_qa_record
    from experiments.protocols.m4le import write_jsonl

    questions = make_multidoc_qa(6, num_docs=3, words_per_doc=30, seed=4)
    data = write_jsonl([litm_qa_record(q) for q in questions], tmp_path / "qa.jsonl")
    runner = CliRunner()
    ok = runner.invoke(_app(), ["curve", "--litm", str(data), "--reader", "extractive", "--ks", "1,2",
                                "--out", str(tmp_path / "out")])
    assert ok.exit_code == 0, ok.output
    assert "saturation k (extractive)" in ok.output and (tmp_path / "out" / "curve.csv").is_file()
    bad = runner.invoke(_app(), ["curve", "--litm", str(data), "--ks", "1,x", "--out", str(tmp_path / "o2")])
    assert bad.exit_code == 2 and "--ks" in bad.output
    missing = runner.invoke(_app(), ["curve", "--litm", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path)])
    assert missing.exit_code == 2


def test_build_commands_write_loadable_files(tmp_path):
    from typer.testing import CliRunner

    from experiments.protocols.kv import key_position
    from experiments.protocols.litm import litm_qa_record
    from experiments.data.loaders import load_litm_kv, load_litm_qa, load_m4le
    from experiments.protocols.m4le import write_jsonl

    runner = CliRunner()
    kv_out = tmp_path / "kv.jsonl.gz"
    res = runner.invoke(_app(), ["kv", "--n", "3", "--num-keys", "10", "--positions", "0,9", "--out", str(kv_out)])
    assert res.exit_code == 0, res.output
    assert [key_position(e) for e in load_litm_kv(kv_out)] == [0, 0, 0, 9, 9, 9]

    questions = make_multidoc_qa(40, num_docs=2, words_per_doc=40, seed=6)
    gold_only = write_jsonl([litm_qa_record(q) | {"ctxs": [c for c in litm_qa_record(q)["ctxs"] if c["isgold"]]}
                             for q in questions], tmp_path / "oracle.jsonl")
    res = runner.invoke(_app(), ["sweep", "--litm", str(gold_only), "--num-docs", "5", "--positions", "0,4",
                                 "--out", str(tmp_path / "sweep")])
    assert res.exit_code == 0, res.output
    at4 = load_litm_qa(tmp_path / "sweep" / "nq-open-5_total_documents_gold_at_4.jsonl.gz")
    assert len(at4) == 40 and all(e.passages[4].is_gold and len(e.passages) == 5 for e in at4)
    bad = runner.invoke(_app(), ["sweep", "--litm", str(gold_only), "--num-docs", "5", "--positions", "5",
                                 "--out", str(tmp_path / "sweep2")])
    assert bad.exit_code == 2

    m4le_out = tmp_path / "m4le.jsonl"
    res = runner.invoke(_app(), ["m4le", "--source", str(gold_only), "--target-words", "500,1000",
                                 "--ability", "semantic_single,explicit_single", "--n", "2", "--out", str(m4le_out)])
    assert res.exit_code == 0, res.output
    assert len(load_m4le(m4le_out)) == 8


@pytest.mark.slow
def test_curve_with_real_smollm2(tmp_path):
    """The real offline LLM reads short synthetic contexts; kept tiny (3 questions, 2 cut-offs)."""
    pytest.importorskip("readers.smollm2")
    questions = make_multidoc_qa(3, num_docs=3, words_per_doc=30, seed=9)
    result = run_curve(questions, _corpus_of(questions), retriever="bm25", readers=["smollm2"], ks=[1, 3],
                       out_dir=tmp_path, progress=False)
    rows = {r.k: r for r in result.rows}
    assert rows[1].n + rows[1].failed == 3 and rows[1].failed == 0
    assert all(0 <= r.accuracy <= 1 for r in result.rows)

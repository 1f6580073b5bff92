"""``ctxcomp score`` through typer's CliRunner, on prediction files written by hand."""
from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from experiments.cli.scoring import score
from experiments.scoring.files import score_file

app = typer.Typer()
app.command("score")(score)


@app.callback()
def _root() -> None:
    """Keep `score` a subcommand, as in the real CLI."""


runner = CliRunner()

ROWS = [
    # pred, answers, length -> hotpotqa qa_f1 by hand
    ("Paris", ["Paris"], 1000),  # 1
    ("The city of London", ["Paris"], 5000),  # 0
    ("Rome", ["Berlin", "Rome"], 9000),  # 1 (max over answers)
    ("Paris, France", ["Paris"], 2000),  # paris france vs paris: P 1/2, R 1 -> 2/3
]


@pytest.fixture()
def preds(tmp_path):
    path = tmp_path / "hotpotqa.jsonl"
    lines = [json.dumps({"pred": p, "answers": a, "all_classes": None, "length": n}) for p, a, n in ROWS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_plain_score_is_eval_py_number(preds):
    result = runner.invoke(app, ["score", str(preds), "--dataset", "hotpotqa"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "66.67"  # (1 + 0 + 1 + 2/3) / 4


def test_json_and_buckets(preds):
    result = runner.invoke(app, ["score", str(preds), "--dataset", "hotpotqa_e", "--json"])
    assert json.loads(result.stdout) == {"dataset": "hotpotqa_e", "score": 66.67}
    result = runner.invoke(app, ["score", str(preds), "--dataset", "hotpotqa_e", "--e", "--json"])
    # 0-4k: (1 + 2/3) / 2; 4-8k: 0; 8k+: 1
    assert json.loads(result.stdout) == {"dataset": "hotpotqa_e", "buckets": {"0-4k": 83.33, "4-8k": 0.0, "8k+": 100.0}}
    result = runner.invoke(app, ["score", str(preds), "--dataset", "hotpotqa", "--e"])
    assert result.stdout.split("\n")[:3] == ["0-4k\t83.33", "4-8k\t0.0", "8k+\t100.0"]


def test_metric_override(preds):
    # best_subspan_em: "paris france" contains "paris" -> 1, so 3 of 4
    result = runner.invoke(app, ["score", str(preds), "--dataset", "nq", "--metric", "best_subspan_em", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["score"] == 75.0


def test_first_line_rule_applies_for_triviaqa(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"pred": "\nParis\nis the answer", "answers": ["Paris"], "all_classes": None}) + "\n")
    assert score_file(path, "triviaqa").score == 100.0
    assert score_file(path, "hotpotqa").score == 50.0  # whole text: paris is answer -> P 1/3, R 1, F1 1/2


def test_errors_exit_2_with_one_line(tmp_path, preds):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(preds.read_text().split("\n")[0] + "\n{oops\n")
    result = runner.invoke(app, ["score", str(bad), "--dataset", "hotpotqa"])
    assert result.exit_code == 2
    assert "bad.jsonl:2:" in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1
    result = runner.invoke(app, ["score", str(preds), "--dataset", "hotpotq"])
    assert result.exit_code == 2 and "hotpotqa" in result.stderr
    result = runner.invoke(app, ["score", str(tmp_path / "missing.jsonl"), "--dataset", "hotpotqa"])
    assert result.exit_code == 2 and "file not found" in result.stderr
    result = runner.invoke(app, ["score", str(preds), "--dataset", "hotpotqa", "--e"])
    assert result.exit_code == 0
    no_len = tmp_path / "nolen.jsonl"
    no_len.write_text(json.dumps({"pred": "x", "answers": ["x"], "all_classes": None}) + "\n")
    result = runner.invoke(app, ["score", str(no_len), "--dataset", "hotpotqa", "--e"])
    assert result.exit_code == 2 and "'length'" in result.stderr

"""The README's main command, end to end and offline (shrunk with --set so it stays quick)."""
import json

import pytest
from typer.testing import CliRunner

from experiments.cli.app import app

SMALL = ["--set", "tasks.0.synthetic.n=4", "--set", "tasks.1.synthetic.n=2"]


def _records(run_dir):
    return [json.loads(l) for l in (run_dir / "predictions.jsonl").read_text().splitlines()]


def test_quickstart_with_the_model_free_baseline_writes_table_report_and_plots(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "runs" / "quickstart-extractive"  # the folder the README names, with no --out
    result = CliRunner().invoke(app, ["quickstart", "--reader", "extractive", *SMALL])
    assert result.exit_code == 0, result.output
    assert "| reader | compressor | nq_multidoc (litm_qa_em) | kv_retrieval (litm_kv_accuracy) | avg |" in result.output
    records = _records(out)
    assert len(records) == (4 + 2) * 3  # full + bm25 + minilm arms
    assert {r["compressor"] for r in records} == {
        "full", "retrieval(bm25, top3, order=document)", "retrieval(minilm, top3, order=document)"}
    assert (out / "report.md").is_file() and (out / "plots" / "delta_vs_full.png").is_file()
    again = CliRunner().invoke(app, ["quickstart", "--reader", "extractive", "--out", str(out), *SMALL])
    assert again.exit_code == 0 and "done: 0 predicted, 18 already done" in again.output


def test_quickstart_script_leaves_the_run_folder_to_ctxcomp(tmp_path):
    """scripts/quickstart.sh passes no --out of its own (a plain quickstart and one with --reader extractive go to
    runs/quickstart and runs/quickstart-extractive), unless CTXCOMP_QUICKSTART_OUT names one.  Run on a copy
    whose setup step and ctxcomp only record what they were given."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    (tmp_path / "scripts").mkdir()
    shutil.copy(repo / "scripts" / "quickstart.sh", tmp_path / "scripts" / "quickstart.sh")
    (tmp_path / "scripts" / "setup.sh").write_text("true\n")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    ctxcomp = tmp_path / ".venv" / "bin" / "ctxcomp"
    ctxcomp.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$(dirname "$0")/args"\n')
    ctxcomp.chmod(0o755)

    def args(*extra: str, **env: str) -> list[str]:
        environ = {k: v for k, v in os.environ.items() if k != "CTXCOMP_QUICKSTART_OUT"} | env
        subprocess.run(["bash", "scripts/quickstart.sh", *extra], cwd=tmp_path, env=environ, check=True)
        return (tmp_path / ".venv" / "bin" / "args").read_text().split()

    assert args("--reader", "extractive") == ["quickstart", "--reader", "extractive"]
    assert args() == ["quickstart"]
    assert args(CTXCOMP_QUICKSTART_OUT="elsewhere") == ["quickstart", "--out", "elsewhere"]


@pytest.mark.slow
def test_quickstart_with_the_offline_llm(tmp_path):
    out = tmp_path / "qs"
    result = CliRunner().invoke(app, ["quickstart", "--out", str(out), "--set", "tasks.0.synthetic.n=2",
                                      "--set", "tasks.1.synthetic.n=1", "--set", "compressors.1.params.retriever=bm25"])
    assert result.exit_code == 0, result.output
    records = _records(out)
    assert len(records) == 3 * 2 and all(r["reader"] == "smollm2" for r in records)
    assert all(r["prediction"].strip() and r["reader_tokens_out"] > 0 for r in records)
    assert not (out / "failures.jsonl").exists() or not (out / "failures.jsonl").read_text()

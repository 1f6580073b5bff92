"""Nothing expensive is lost: a run stopped mid-batch keeps every compression it finished (the compression
cache), so a resume, with any batch size, compresses only the rest; and how a run is carried out
(``batch_size``) is no part of its identity."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[2]
N = 12


def _config(out: Path, batch_size: int = 8) -> dict:
    return {
        "name": "kept",
        "output_dir": str(out),
        "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": N, "num_docs": 3,
                                                         "words_per_doc": 20}}],
        "compressors": ["tests.support.counting_compressor:CountedLead"],
        "readers": ["extractive"],
        "batch_size": batch_size,
    }


def _run(config_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    code = ("import sys; from experiments.cli.app import app; "
            "sys.argv = ['ctxcomp', *sys.argv[1:]]; app()")
    return subprocess.run([sys.executable, "-c", code, "run", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "CTXCOMP_NO_PROGRESS": "1", **env}, timeout=300)


def _logged(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").split() if log.exists() else []


@pytest.mark.parametrize("resume_batch", [8, 3])
def test_a_run_killed_mid_batch_redoes_none_of_its_compressions(tmp_path, resume_batch):
    out, log = tmp_path / "run", tmp_path / "calls.log"
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(_config(out)), encoding="utf-8")
    env = {"CTXCOMP_CACHE_DIR": str(tmp_path / "cache"), "CTXCOMP_TEST_COMPRESS_LOG": str(log)}
    # SIGKILL at the 6th compression: five done, in the first batch of eight, none of them read by the reader yet
    killed = _run(config, {**env, "CTXCOMP_TEST_STOP_AT": "6", "CTXCOMP_TEST_STOP_HOW": "kill"}, str(config),
                  "--no-report")
    assert killed.returncode == -9, killed.stderr
    first = _logged(log)
    assert len(first) == 5
    assert not (out / "predictions.jsonl").exists() or not (out / "predictions.jsonl").read_text()  # none read yet
    batch = ["--set", f"batch_size={resume_batch}"] if resume_batch != 8 else []
    resumed = _run(config, env, "--resume", str(out), *batch, "--no-report")
    assert resumed.returncode == 0, resumed.stderr
    second = _logged(log)[len(first):]
    assert len(second) == N - 5 and not set(second) & set(first)  # none compressed twice
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert sorted(p["id"] for p in predictions) == sorted(first + second)


def test_an_interrupted_run_says_how_many_compressions_it_kept(tmp_path, monkeypatch):
    from experiments import evaluate
    from experiments.run.api import RunInterrupted

    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CTXCOMP_TEST_STOP_AT", "4")
    monkeypatch.setenv("CTXCOMP_TEST_STOP_HOW", "interrupt")
    import tests.support.counting_compressor as counted

    monkeypatch.setattr(counted, "_calls", 0)
    with pytest.raises(RunInterrupted) as stop:
        evaluate(_config(tmp_path / "run"), report=False, progress=False)
    message = str(stop.value)
    assert "3 compression(s)" in message and "0 prediction(s)" not in message, message


def test_batch_size_is_no_part_of_a_runs_identity(tmp_path):
    from experiments import evaluate
    from experiments.cli.app import app

    out = tmp_path / "run"
    config = {**_config(out), "compressors": ["full"]}
    config["tasks"][0]["synthetic"]["n"] = 4
    evaluate(config, report=False, progress=False)
    again = evaluate(config, overrides={"batch_size": 2}, report=False, progress=False)  # the same folder
    assert again.stats.already_done == 4 and again.stats.predicted == 0
    assert yaml.safe_load((out / "config.yaml").read_text())["batch_size"] == 2
    runner = CliRunner()
    resumed = runner.invoke(app, ["run", "--resume", str(out), "--set", "batch_size=3", "--no-report"])
    assert resumed.exit_code == 0, resumed.output
    refused = runner.invoke(app, ["run", "--resume", str(out), "--set", "tasks.0.limit=2", "--no-report"])
    assert refused.exit_code == 2 and "only how it is carried out can (batch_size)" in refused.output, refused.output

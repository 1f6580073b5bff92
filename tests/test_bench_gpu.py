"""benchmarks/bench_gpu.py's CPU path runs every arm end to end (timings are not checked: 2 noisy cores)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a benchmark script in its own process, loading a model: ~20 CPU s
def test_bench_gpu_runs_on_the_cpu_and_writes_its_table_and_json(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_gpu.py"), "--device", "cpu", "--quick",
                           "--out", str(out)], capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "CTXCOMP_NO_PROGRESS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    arms = [row["arm"] for row in result["rows"]]
    assert {row["part"] for row in result["rows"]} == {"reader", "encoder", "search"}
    assert any(a.startswith("ctxcomp default") for a in arms) and any(a.startswith("plain model.generate") for a in arms)
    assert any(a.startswith("plain SentenceTransformer.encode") for a in arms)
    search = next(row for row in result["rows"] if row["arm"].startswith("torch"))
    assert search["same_ids"] and search["max_score_diff"] < 1e-5
    reader = result["rows"][0]
    assert reader["defaults"] == {"batch_size": 4, "batch_tokens": None, "prefill_apart": True}  # the CPU's
    assert "| reader | ctxcomp default" in done.stdout and result["environment"]["device"] == "cpu"

"""The Ray executor against a local Ray instance with 2 CPUs: same predictions as the local executor,
resume across executors, a worker or the driver killed with SIGKILL, bad input before any work.

Ray is a hard requirement of this module: if it cannot be imported or cannot start, the tests fail (they
are not skipped).  One Ray instance serves the whole module.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from compressors.base import CompressedContext, Compressor
from core.errors import ParamError
from experiments.run.config import parse_config
from experiments.run.driver import Runner
from experiments.run.executors import RayExecutor
from experiments.run.ray_pool import RayExecutorError
from testkit.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.slow  # local Ray clusters and CLI processes

REPO = Path(__file__).resolve().parents[3]

GRID = {
    "name": "ray",
    "tasks": [
        {"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 10, "num_docs": 6, "words_per_doc": 40}},
        {"name": "kv_retrieval", "synthetic": {"kind": "kv", "n": 6, "num_keys": 8}},
    ],
    "compressors": ["full", {"name": "retrieval", "params": {"retriever": "bm25", "top_n": [1, 2]}}],
    "readers": ["extractive"],
    "batch_size": 3,
}
N_GRID = (10 + 6) * 3
VOLATILE = {"latency_s", "compress_s", "cached"}  # timings, and whether an earlier run left the answer in a cache


@pytest.fixture(scope="module")
def ray_instance():
    """A local Ray instance with 2 CPUs for the whole module; failing to start it fails the tests (without the
    ``ray`` extra they skip)."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed")

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


@pytest.fixture
def executor(ray_instance):
    pool = RayExecutor(workers=2, progress=False)
    yield pool
    pool.close()


@pytest.fixture(autouse=True)
def _no_bars(monkeypatch, tmp_path):
    monkeypatch.setenv("CTXCOMP_NO_PROGRESS", "1")
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))  # actors on this node take it from the driver


def keyed(run_dir: Path) -> dict[tuple[str, str, str], dict]:
    """Prediction lines by (task, id, config hash), without timings; a duplicated key fails the test."""
    out = {}
    for line in (run_dir / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        key = (rec["task"], rec["id"], rec["config_hash"])
        assert key not in out, f"duplicated prediction {key}"
        out[key] = {k: v for k, v in rec.items() if k not in VOLATILE}
    return out


def run_local(config: dict, run_dir: Path) -> dict:
    Runner(parse_config(config), run_dir, progress=False).run()
    return keyed(run_dir)


def run_ray(config: dict, run_dir: Path, pool: RayExecutor, *, resume: bool = False):
    runner = Runner.resume(run_dir, progress=False, executor=pool) if resume else \
        Runner(parse_config(config), run_dir, progress=False, executor=pool)
    pool.share_examples(runner.worker)
    return runner.run()


# -- same results as the local executor ---------------------------------------------------------


def test_predictions_equal_the_local_executors(tmp_path, executor):
    local = run_local(GRID, tmp_path / "local")
    stats = run_ray(GRID, tmp_path / "ray", executor)
    ray_side = keyed(tmp_path / "ray")
    assert len(local) == N_GRID and stats.predicted == N_GRID
    assert ray_side == local
    assert len(set(executor.pids)) == 2 and os.getpid() not in executor.pids  # the work ran in two other processes
    traces = (tmp_path / "ray" / "traces.jsonl").read_text().splitlines()
    assert len(traces) == N_GRID and (tmp_path / "ray" / "prompts").is_dir()  # the driver wrote everything


def test_a_run_resumes_across_executors(tmp_path, executor):
    expected = run_local(GRID, tmp_path / "full")

    # started locally, cut after 11 lines (the last one torn), finished on Ray
    Runner(parse_config(GRID), tmp_path / "a", progress=False).run()
    kept = (tmp_path / "a" / "predictions.jsonl").read_bytes().splitlines(keepends=True)[:11]
    (tmp_path / "a" / "predictions.jsonl").write_bytes(b"".join(kept) + b'{"task": "kv_re')
    stats = run_ray(GRID, tmp_path / "a", executor, resume=True)
    assert (stats.already_done, stats.predicted) == (11, N_GRID - 11)
    assert keyed(tmp_path / "a") == expected

    # started on Ray, cut, finished locally
    run_ray(GRID, tmp_path / "b", executor)
    kept = (tmp_path / "b" / "predictions.jsonl").read_bytes().splitlines(keepends=True)[:20]
    (tmp_path / "b" / "predictions.jsonl").write_bytes(b"".join(kept))
    stats = Runner.resume(tmp_path / "b", progress=False).run()
    assert (stats.already_done, stats.predicted) == (20, N_GRID - 20)
    assert keyed(tmp_path / "b") == expected


# -- faults ---------------------------------------------------------------------------------


def _served_config(base_url: str, n: int) -> dict:
    """The openai reader against a slow fake server, so a unit is still running when its worker is killed."""
    reader = {"name": "openai", "params": {"model": "fake-model", "base_url": base_url, "concurrency": 1,
                                           "timeout_s": 5.0, "retry": {"backoff_base_s": 0.01, "backoff_max_s": 0.05}}}
    return {"name": "kill", "batch_size": 3, "compressors": ["full"], "readers": [reader],
            "tasks": [{"name": "nq_multidoc",
                       "synthetic": {"kind": "multidoc_qa", "n": n, "num_docs": 4, "words_per_doc": 30}}]}


@pytest.mark.parametrize("max_restarts", [2, 0], ids=["ray-restarts-the-actor", "ctxcomp-resubmits-the-unit"])
def test_a_worker_killed_mid_unit_loses_and_duplicates_nothing(tmp_path, ray_instance, max_restarts, monkeypatch):
    n = 18
    with FakeOpenAIServer(service_time_s=0.08) as server:
        expected = run_local(_served_config(server.base_url, n), tmp_path / "local")
        monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "ray-cache"))  # the Ray run must ask the server again
        served_before = server.stats["requests"]
        pool = RayExecutor(workers=2, max_restarts=max_restarts, progress=False)
        killed = {}

        def kill_one_worker_mid_unit():
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if len(pool.pids) == 2 and server.stats["requests"] - served_before >= 2:
                    killed["pid"] = pool.pids[0]
                    killed["requests"] = server.stats["requests"] - served_before
                    os.kill(killed["pid"], signal.SIGKILL)
                    return
                time.sleep(0.002)

        killer = threading.Thread(target=kill_one_worker_mid_unit)
        killer.start()
        try:
            stats = run_ray(_served_config(server.base_url, n), tmp_path / "ray", pool)
            killer.join()
            after = pool.worker_pids()
            served = server.stats["requests"] - served_before
        finally:
            pool.close()
    # each answer reached the shared generation cache as it returned: only the request in flight at the kill
    # (concurrency 1) is asked again, whatever the unit's size
    assert served <= n + 1, served
    assert killed and killed["requests"] < n, "the worker was not killed while the run was going on"
    assert stats.predicted == n and stats.failed == 0
    assert keyed(tmp_path / "ray") == expected  # every example exactly once, the same answers
    assert killed["pid"] not in after
    if max_restarts:
        assert pool.resubmitted == 0  # Ray restarted the actor and re-ran its units itself
    else:
        assert pool.resubmitted >= 1  # Ray gave up on the actor; the executor resubmitted its units


def test_a_killed_driver_resumes(tmp_path, executor):
    config = {**GRID, "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 150,
                                                                      "num_docs": 10, "words_per_doc": 80}}]}
    expected = run_local(config, tmp_path / "local")
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(config))
    run_dir = tmp_path / "run"
    env = {**os.environ, "CTXCOMP_CACHE_DIR": str(tmp_path / "cli-cache"), "CTXCOMP_NO_PROGRESS": "1",
           "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "experiments.cli", "run", str(tmp_path / "cfg.yaml"), "--out",
                             str(run_dir), "--executor", "ray", "--workers", "2", "--no-report"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    predictions = run_dir / "predictions.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if predictions.exists() and predictions.read_bytes().count(b"\n") >= 5:
            break
        time.sleep(0.005)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.communicate()}"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    written = predictions.read_bytes().count(b"\n")
    assert written < len(expected)

    stats = run_ray(config, run_dir, executor, resume=True)
    assert stats.already_done == written and stats.predicted == len(expected) - written
    assert keyed(run_dir) == expected


# -- open-domain corpora: encoder actors write embedding shards ------------------------------------


def test_a_pool_of_encoder_actors_writes_the_same_shards_and_fills_only_the_gaps(tmp_path, ray_instance):
    import numpy as np

    from experiments.run.sharding import RayEncoderPool
    from retrievers.shards import encode_corpus
    from tests.retrievers.test_shards import PLUGIN, HashDense, corpus

    chunks = corpus(250)
    local = encode_corpus(chunks, HashDense(), tmp_path / "local", shard_size=30)
    pool = RayEncoderPool({"name": PLUGIN}, workers=2)
    try:
        written = []
        store = encode_corpus(chunks, None, tmp_path / "ray", shard_size=30, pool=pool, on_shard=written.append)
        assert sorted(written) == list(range(9)) and len(set(pool.pids)) == 2 and os.getpid() not in pool.pids
        assert np.array_equal(store.vectors(), local.vectors())
        store.path(4).unlink()  # as if the encode had been killed before shard 4 was written
        written.clear()
        encode_corpus(chunks, None, tmp_path / "ray", shard_size=30, pool=pool, on_shard=written.append)
        assert written == [4] and np.array_equal(store.vectors(), local.vectors())
    finally:
        pool.close()


# -- bad input: one line, before any work -----------------------------------------------------


def test_an_unreachable_address_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(RayExecutorError, match=r"cannot reach the Ray cluster at 127\.0\.0\.1:1: "):
        RayExecutor("127.0.0.1:1")
    with pytest.raises(RayExecutorError, match="must be 'auto', HOST:PORT or ray://HOST:PORT"):
        RayExecutor("not an address")
    with pytest.raises(ValueError, match="workers must be >= 1"):  # the CLI names its flag (test_cli_...)
        RayExecutor(workers=0)


def test_the_cli_names_a_bad_address_in_one_line(tmp_path):
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(GRID))
    env = {**os.environ, "CTXCOMP_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    for extra, needle in [(["--executor", "ray", "--ray-address", "ray://127.0.0.1:1"], "cannot reach the Ray cluster"),
                          (["--workers", "2"], "--workers need(s) --executor ray"),
                          (["--executor", "dask"], "--executor must be 'local' or 'ray'")]:
        proc = subprocess.run([sys.executable, "-m", "experiments.cli", "run", str(tmp_path / "cfg.yaml"), "--out",
                               str(tmp_path / "run"), *extra], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=120)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
        assert needle in lines[0]
        assert not (tmp_path / "run").exists()  # nothing was written


def test_a_bad_reader_parameter_is_refused_by_the_driver_before_anything_is_written(tmp_path, executor):
    bad = {**GRID, "readers": [{"name": "openai", "params": {"model": "m", "base_urls": ["http://127.0.0.1:9/v1",
                                                                                         "ftp://10.0.0.1/v1"]}}]}
    with pytest.raises(ParamError) as err:
        Runner(parse_config(bad), tmp_path / "run", progress=False, executor=executor)
    assert str(err.value) == "openai: 'ftp://10.0.0.1/v1' in base_urls is not an http:// or https:// URL with a host and a numeric port"
    assert not (tmp_path / "run").exists()


def test_a_parameter_error_raised_in_a_worker_is_one_user_error_before_any_unit(tmp_path, executor):
    cfg = {**GRID, "compressors": ["tests.experiments.run.test_ray_executor:WorkerOnlyParamCompressor"]}
    runner = Runner(parse_config(cfg), tmp_path / "run", progress=False, executor=executor)
    with pytest.raises(ParamError) as err:
        runner.run()
    assert str(err.value) == "worker-only: index file 'missing.idx' does not exist on this machine"
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def test_a_programming_error_in_a_worker_stops_the_run_with_its_type(tmp_path, executor):
    cfg = {**GRID, "compressors": ["tests.experiments.run.test_ray_executor:BuggyCompressor"]}
    runner = Runner(parse_config(cfg), tmp_path / "run", progress=False, executor=executor)
    with pytest.raises(ZeroDivisionError) as err:
        runner.run()
    assert "test_ray_executor.py" in str(err.value) and "in compress" in str(err.value)  # the remote traceback
    assert not (tmp_path / "run" / ".lock").exists()


class BuggyCompressor(Compressor):
    """(Resolved by the Ray workers from the driver's directory, as a user's plugin would be.) Compresses examples whose id ends in 0..5, then divides by zero (a plugin's bug, not a failure)."""

    def compress(self, item):
        if item.id[-1] in "6789":
            return 1 / 0
        return CompressedContext(text=item.context, tokens_in=1, tokens_out=1)


class WorkerOnlyParamCompressor(Compressor):
    """A plugin whose setup passes the driver's checks but fails where it runs (a file only a worker lacks)."""

    def __init__(self, **params):
        raise ParamError("worker-only: index file 'missing.idx' does not exist on this machine")

    def compress(self, item):  # never reached
        raise AssertionError(item)

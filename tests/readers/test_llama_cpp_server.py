"""A real OpenAI-compatible server: llama-cpp-python's, on 127.0.0.1, serving the packaged SmolLM2 GGUF.

The `openai` reader, a 2-server fleet that loses a server mid-run, and
`ctxcomp judge` against it; the predictions must be complete and equal to the
in-process llama.cpp reader's (same GGUF, same chat template, greedy, no
repeat penalty).  llama-cpp-python is built from source (docs/readers.md says
how long that takes), so these tests run only where it is installed with its
`[server]` extra; scripts/test.sh installs it from pip's wheel cache.
"""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from readers.base import ReaderError

REPO = Path(__file__).resolve().parents[2]
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
N_CTX = 2048
# the server's own default repeat_penalty is 1.1; the in-process reader uses none
READER = {"model": "smollm2", "max_context": N_CTX, "extra_body": {"repeat_penalty": 1.0}, "timeout_s": 120,
          "retry": {"max_retries": 3, "backoff_base_s": 0.05, "backoff_max_s": 0.2}, "concurrency": 1}

pytestmark = pytest.mark.slow


def _gguf() -> Path:
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"llama-cpp-python's server is not installed (missing {', '.join(missing)}); "
                    "scripts/test.sh installs it: pip install 'llama-cpp-python[server]' (built from source)")
    from readers.smollm2 import gguf_path

    try:
        return gguf_path()
    except ReaderError as err:
        pytest.skip(str(err))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``python -m llama_cpp.server`` on a free local port, one thread, waited for until ``GET /v1/models`` answers."""

    def __init__(self, gguf: Path, log: Path) -> None:
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
                 "--port", str(self.port), "--n_ctx", str(N_CTX), "--n_threads", "1", "--n_threads_batch", "1"],
                stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"llama.cpp server exited with {self.proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.kill()
        raise AssertionError(f"llama.cpp server did not answer in 120 s:\n{log.read_text()[-3000:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    gguf = _gguf()
    folder = tmp_path_factory.mktemp("llama-servers")
    started = [Server(gguf, folder / f"server{i}.log") for i in range(2)]
    yield started
    for server in started:
        server.kill()


def _config(reader: dict, n: int) -> dict:
    return {"name": "llama-server", "batch_size": 4, "readers": [reader],
            "tasks": [{"name": "nq_multidoc", "max_new_tokens": 12,
                       "synthetic": {"kind": "multidoc_qa", "n": n, "num_docs": 3, "words_per_doc": 25, "seed": 3}}],
            "compressors": ["full", {"name": "retrieval", "params": {"top_n": 1, "chunk_size": 40}}]}


def _cli(args: list[str], cache: Path, **kw) -> subprocess.Popen | subprocess.CompletedProcess:
    env = {**os.environ, "CTXCOMP_CACHE_DIR": str(cache), "CTXCOMP_NO_PROGRESS": "1", "PYTHONPATH": str(REPO),
           "MPLBACKEND": "Agg", "OPENAI_API_KEY": "EMPTY"}
    argv = [sys.executable, "-m", "experiments.cli", *args]
    if kw.pop("background", False):
        return subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=kw.get("timeout", 600))


def _write(tmp_path: Path, name: str, config: dict) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _predictions(run: Path) -> dict[tuple[str, str], str]:
    lines = [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines()]
    keyed = {(r["id"], r["compressor_kind"]): r["prediction"] for r in lines}
    assert len(keyed) == len(lines), "an example was recorded twice"
    return keyed


def _failures(run: Path) -> str:
    path = run / "failures.jsonl"
    return path.read_text() if path.is_file() else ""


def _in_process(tmp_path: Path, n: int) -> dict[tuple[str, str], str]:
    """The same grid read by the in-process llama.cpp reader (``smollm2`` with ``backend: llama_cpp``)."""
    reader = {"name": "smollm2", "params": {"backend": "llama_cpp", "max_context": N_CTX, "n_threads": 1}}
    out = tmp_path / "in-process"
    done = _cli(["run", _write(tmp_path, "in-process", _config(reader, n)), "--out", out], tmp_path / "cache-local")
    assert done.returncode == 0, done.stderr[-3000:]
    return _predictions(out)


def test_openai_reader_fleet_with_a_server_killed_and_judge(servers, tmp_path):
    one, two = servers
    n = 6  # 6 questions x 2 compressors

    # 1. one real server through the openai reader
    single = tmp_path / "single"
    reader = {"name": "openai", "params": {**READER, "base_url": one.base_url}}
    done = _cli(["run", _write(tmp_path, "single", _config(reader, n)), "--out", single], tmp_path / "cache-single")
    assert done.returncode == 0, done.stderr[-3000:]
    served = _predictions(single)
    assert len(served) == 2 * n and not _failures(single)

    # 2. the same grid on a 2-server fleet; the second server is killed once the run has written predictions
    fleet = tmp_path / "fleet"
    reader = {"name": "openai", "params": {**READER, "base_urls": [one.base_url, two.base_url], "eject_after": 1}}
    run = _cli(["run", _write(tmp_path, "fleet", _config(reader, n)), "--out", fleet], tmp_path / "cache-fleet",
               background=True)
    predictions = fleet / "predictions.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and run.poll() is None:
        if predictions.is_file() and len(predictions.read_text().splitlines()) >= 2:
            break
        time.sleep(0.2)
    written_before_kill = len(predictions.read_text().splitlines()) if predictions.is_file() else 0
    two.kill()
    _, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr[-3000:]
    assert written_before_kill < 2 * n, "the run finished before the server could be killed"
    assert _predictions(fleet) == served  # complete, nothing lost or doubled, the same answers
    assert not _failures(fleet)

    # 3. the in-process llama.cpp reader gives the same predictions as the server
    assert _in_process(tmp_path, n) == served

    # 4. `ctxcomp judge` with the surviving server as the judge, on a one-question run (the judge may write up to
    # 1,024 tokens a verdict: a 135M model often does, about a minute each here), retrieval against full context
    tiny = tmp_path / "tiny"
    reader = {"name": "openai", "params": {**READER, "base_url": one.base_url}}
    done = _cli(["run", _write(tmp_path, "tiny", _config(reader, 1)), "--out", tiny], tmp_path / "cache-single")
    assert done.returncode == 0, done.stderr[-3000:]
    judge = ["judge", tiny, "--judge", "openai", "--against", "arm:full", "--plain"]
    for key, value in {**READER, "base_url": one.base_url}.items():
        judge += ["--judge-param", f"{key}={json.dumps(value)}"]
    judged = _cli([str(x) for x in judge], tmp_path / "cache-single")
    lines = [json.loads(x) for x in (tiny / "judgements.jsonl").read_text().splitlines()]
    assert judged.returncode in (0, 1), judged.stderr[-3000:]  # 1: the verdict was unparseable (a 135M judge)
    assert len(lines) == 1 and lines[0]["status"] in ("ok", "failed") and lines[0]["against"] == "arm:full"
    assert lines[0]["reason"] is None or "gave up" not in lines[0]["reason"]  # the server answered, whatever it said
    assert f"judged {sum(r['status'] == 'ok' for r in lines)}, 0 already judged" in judged.stderr

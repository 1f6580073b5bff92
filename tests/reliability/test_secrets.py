"""Secrets: the API key comes from the environment (or a key file outside the run dir) and is never written.

Runs ``ctxcomp`` with ``OPENAI_API_KEY=sk-test-<random>`` and every logger at
DEBUG against the fake server -- healthy, failing past the retry budget, and a
hostile server that echoes the ``Authorization`` header back in its error
bodies -- then scans every byte under the run dirs and the cache dir, and all
of stdout/stderr/logs, for the key.
"""
from __future__ import annotations

import json
import secrets
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from core.openai_client import ServerRefused
from testkit.fake_openai import FakeOpenAIServer

# Runs the CLI with the root logger at DEBUG (httpx, httpcore and our own loggers all emit).
DEBUG_CLI = ("import logging, sys; logging.basicConfig(level=logging.DEBUG); "
             "sys.argv = ['ctxcomp', *sys.argv[1:]]; from experiments.cli.app import app; app()")


class EchoHeadersServer:
    """A hostile server: every request gets ``status`` with the request's headers echoed in the error body."""

    def __init__(self, status: int) -> None:
        status_code = status

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                echoed = "; ".join(f"{k}: {v}" for k, v in self.headers.items())
                body = json.dumps({"error": {"message": f"rejected request with headers {echoed}"}}).encode()
                self.send_response(status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "EchoHeadersServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in sorted(root.rglob("*")) if p.is_file() and needle in p.read_bytes()]


@pytest.fixture
def key() -> str:
    return "sk-test-" + secrets.token_hex(16)


def _write_config(tmp_path: Path, name: str, reader: dict, rel) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(rel.synthetic_config(reader, n_qa=6, batch_size=3)), encoding="utf-8")
    return path


@pytest.mark.slow
def test_the_key_never_reaches_run_dirs_cache_output_or_logs(tmp_path, rel, cli, key, figures):
    outputs: list[str] = []

    def ctxcomp(*args) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-c", DEBUG_CLI, *map(str, args)], cwd=cli.env()["PYTHONPATH"],
                              env=cli.env(OPENAI_API_KEY=key), capture_output=True, text=True, timeout=120)
        outputs.extend([proc.stdout, proc.stderr])
        return proc

    # A healthy run, then a report.
    with FakeOpenAIServer() as healthy:
        ok = ctxcomp("run", _write_config(tmp_path, "ok", rel.openai_reader(healthy.base_url), rel), "--out", tmp_path / "ok")
        assert ok.returncode == 0, ok.stderr
        assert ctxcomp("report", tmp_path / "ok").returncode == 0
    assert len(rel.read_jsonl(tmp_path / "ok" / "predictions.jsonl")) == 6

    # A run whose every request fails past the retry budget: failures are recorded, with reasons.
    with FakeOpenAIServer(fault_rate=1.0, faults=("500", "429_retry_after", "malformed_json")) as down:
        failing = _write_config(tmp_path, "down", rel.openai_reader(down.base_url, max_retries=1, model="fake-model-down"), rel)
        bad = ctxcomp("run", failing, "--out", tmp_path / "down")
    assert bad.returncode == 1, bad.stderr  # every example failed: CI must see it
    assert "6 example(s) failed" in bad.stderr and "every example failed" in bad.stderr
    assert len(rel.read_jsonl(tmp_path / "down" / "failures.jsonl")) == 6

    # Servers that echo the Authorization header in their error bodies (401: the run stops in one line;
    # 500: retried, then recorded as failed).
    echoed_reasons = []
    for status in (401, 500):
        with EchoHeadersServer(status) as echo:
            cfg = _write_config(tmp_path, f"echo{status}", rel.openai_reader(echo.base_url, max_retries=1, model=f"fake-model-echo{status}"), rel)
            res = ctxcomp("run", cfg, "--out", tmp_path / f"echo{status}")
        if status == 401:
            assert res.returncode == 2 and "HTTP 401" in res.stderr and "refused the request" in res.stderr, res.stderr
            echoed_reasons.append(res.stderr)
            continue
        assert res.returncode == 1, res.stderr
        failures = rel.read_jsonl(tmp_path / f"echo{status}" / "failures.jsonl")
        assert len(failures) == 6 and all(f"HTTP {status}" in f["reason"] for f in failures)
        echoed_reasons += [f["reason"] for f in failures]
    # the echoed headers reached the messages (cut to a few hundred characters, the key redacted first)
    missing = [r for r in echoed_reasons if "python-httpx" not in r]
    assert not missing, missing

    leaks = _files_holding(tmp_path, key.encode()) + _files_holding(cli.cache_dir, key.encode())
    assert not leaks, f"the API key was written to {leaks}"
    assert not [o for o in outputs if key in o], "the API key was printed"
    # Not even a recognisable part of it.
    assert not _files_holding(tmp_path, key[8:24].encode())
    figures["secrets"] = {
        "runs": 5, "files_scanned": sum(1 for root in (tmp_path, cli.cache_dir) for p in root.rglob("*") if p.is_file()),
        "outputs_scanned": len(outputs), "files_holding_the_key": 0,
    }


def test_a_key_file_outside_the_run_dir_works_and_stays_there(tmp_path, rel, cli, key):
    key_file = tmp_path / "secret" / "openai.key"
    key_file.parent.mkdir()
    key_file.write_text(key + "\n", encoding="utf-8")
    with FakeOpenAIServer() as server:
        cfg = _write_config(tmp_path, "keyfile", rel.openai_reader(server.base_url, api_key_file=str(key_file)), rel)
        res = cli("run", cfg, "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    assert len(rel.read_jsonl(tmp_path / "run" / "predictions.jsonl")) == 6
    assert not _files_holding(tmp_path / "run", key.encode()) and not _files_holding(cli.cache_dir, key.encode())
    assert key not in res.stdout + res.stderr


def test_a_missing_key_file_is_a_clear_error(tmp_path, rel, cli):
    with FakeOpenAIServer() as server:
        reader = rel.openai_reader(server.base_url, api_key_file=str(tmp_path / "missing.key"))
        res = cli("run", _write_config(tmp_path, "nokey", reader, rel), "--out", tmp_path / "run")
    rel.assert_user_error(res, "missing.key")


def test_a_key_pasted_into_the_config_is_refused_and_never_copied(tmp_path, rel, cli, key):
    with FakeOpenAIServer() as server:
        cfg = _write_config(tmp_path, "pasted", rel.openai_reader(server.base_url, api_key=key), rel)
        res = cli("run", cfg, "--out", tmp_path / "run")
    assert key not in res.stdout + res.stderr
    leaks = _files_holding(tmp_path / "run", key.encode()) if (tmp_path / "run").exists() else []
    assert not leaks, f"the API key was copied into {leaks}"
    rel.assert_user_error(res, "api_key")


def test_reader_errors_and_repr_redact_the_key(key, monkeypatch):
    from core.openai_client import redact
    from readers.openai_compat import OpenAICompatReader

    monkeypatch.setenv("OPENAI_API_KEY", key)
    with EchoHeadersServer(401) as echo:
        reader = OpenAICompatReader("fake-model", base_url=echo.base_url, retry={"max_retries": 0}, timeout_s=2)
        from readers.base import GenerationRequest

        with pytest.raises(ServerRefused) as refused:  # a refused key stops the run, in one line
            reader.generate([GenerationRequest(prompt="Question: hi?")])
        reader.close()
    assert "HTTP 401" in str(refused.value) and key not in str(refused.value)
    assert key not in repr(reader) and key not in reader.identity and key not in repr(vars(reader))
    assert key not in redact(f"Authorization: Bearer {key}")
    assert key not in redact(f"key was {key}!", secret=None)

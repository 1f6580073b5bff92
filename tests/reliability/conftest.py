"""Shared pieces of the reliability suite: configs aimed at the fake OpenAI server, a CLI runner, figures.

The suite's figures (faults injected, retried, failed, kills survived, lines
lost or duplicated) are collected in one session-wide dict, printed at the end
(visible with ``pytest -s``) and written to ``reliability_figures.json`` in
pytest's base temp dir, or to ``$CTXCOMP_RELIABILITY_FIGURES`` when set, so
``docs/reliability.md`` can quote a real run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.support.in_process_cli import run_main

REPO = Path(__file__).resolve().parents[2]
BAD_INPUTS = Path(__file__).resolve().parent / "bad_inputs"

# Small backoff so hundreds of retried requests finish in seconds; timeout < hang so hangs are cut by the client.
FAST_RETRY = {"backoff_base_s": 0.01, "backoff_max_s": 0.05}


def openai_reader(base_url: str, max_retries: int = 6, **params: Any) -> dict[str, Any]:
    """A reader section for the ``openai`` reader pointed at a fake server."""
    retry = {**FAST_RETRY, "max_retries": max_retries}
    return {"name": "openai", "params": {"model": "fake-model", "base_url": base_url, "timeout_s": 1.0,
                                         "retry": retry, **params}}


def synthetic_config(reader: dict[str, Any], *, n_qa: int, n_kv: int = 0, batch_size: int = 16, **top: Any) -> dict[str, Any]:
    """A run config over the project's own synthetic multidoc QA (and KV) data, full context."""
    tasks: list[dict[str, Any]] = [
        {"name": "nq_multidoc",
         "synthetic": {"kind": "multidoc_qa", "n": n_qa, "num_docs": 5, "words_per_doc": 30, "seed": 0}},
    ]
    if n_kv:
        tasks.append({"name": "kv_retrieval", "synthetic": {"kind": "kv", "n": n_kv, "num_keys": 8, "seed": 0}})
    return {"name": "reliability", "tasks": tasks, "compressors": ["full"], "readers": [reader],
            "batch_size": batch_size, **top}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file, parsed; a line that does not parse fails the test."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


class Cli:
    """Runs ``ctxcomp`` with an isolated cache, no progress bars and no API key: in this process (``__call__``), or
    as ``python -m experiments.cli`` in a real one where the process is what a test checks (``process``,
    ``popen``: signals, kills, what a fresh interpreter prints)."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir

    def changes(self, **extra: str) -> dict[str, str | None]:
        """What the runs change in the environment (None: removed)."""
        return {"OPENAI_API_KEY": None, "CTXCOMP_NO_PROGRESS": "1", "CTXCOMP_CACHE_DIR": str(self.cache_dir),
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MPLBACKEND": "Agg", **extra}

    def env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(REPO), **self.changes(**extra)}
        return {k: v for k, v in env.items() if v is not None}

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "experiments.cli", *map(str, args)]

    def __call__(self, *args: str | Path, **env: str) -> CliResult:
        return CliResult(*run_main(list(map(str, args)), env=self.changes(**env), cwd=REPO))

    def process(self, *args: str | Path, timeout: float = 120, **env: str) -> CliResult:
        proc = subprocess.run(self.argv(*map(str, args)), cwd=REPO, env=self.env(**env), capture_output=True,
                              text=True, timeout=timeout)
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    def popen(self, *args: str | Path, **env: str) -> subprocess.Popen:
        return subprocess.Popen(self.argv(*map(str, args)), cwd=REPO, env=self.env(**env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "cli-cache")


def assert_user_error(result: CliResult, *needles: str) -> str:
    """Exit code 2, one line on stderr starting ``error:``, no traceback, naming every needle."""
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected a one-line message, got:\n{result.stderr}"
    assert lines[0].startswith("error:"), lines[0]
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def mount_tmpfs(mnt: Path, size: str = "2m") -> bool:
    """A small tmpfs at ``mnt`` (a full disk in two megabytes); False where mounting is not allowed (not root)."""
    mnt.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                          capture_output=True).returncode == 0


def unmount(mnt: Path) -> None:
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """Point ``$CTXCOMP_CACHE_DIR`` at a new folder, so an in-process run cannot reuse earlier generations."""

    def use(name: str) -> Path:
        path = tmp_path / f"cache-{name}"
        path.mkdir()
        monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(path))
        return path

    monkeypatch.setenv("CTXCOMP_NO_PROGRESS", "1")
    return use


_FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="session")
def figures(tmp_path_factory: pytest.TempPathFactory):
    """A dict the tests fill with the numbers ``docs/reliability.md`` quotes."""
    yield _FIGURES
    if not _FIGURES:
        return
    target = Path(os.environ.get("CTXCOMP_RELIABILITY_FIGURES")
                  or tmp_path_factory.getbasetemp() / "reliability_figures.json")
    target.write_text(json.dumps(_FIGURES, indent=2, sort_keys=True), encoding="utf-8")
    print(f"\nreliability figures ({target}):\n{json.dumps(_FIGURES, indent=2, sort_keys=True)}")


@pytest.fixture(scope="session")
def rel():
    """The helpers above as one namespace (test modules cannot import conftest under importlib mode)."""
    from types import SimpleNamespace

    return SimpleNamespace(openai_reader=openai_reader, synthetic_config=synthetic_config, read_jsonl=read_jsonl,
                           assert_user_error=assert_user_error, BAD_INPUTS=BAD_INPUTS, FAST_RETRY=FAST_RETRY,
                           mount_tmpfs=mount_tmpfs, unmount=unmount)

"""Provenance: every run's manifest says what made it (versions, commit, data files' sha256, machine, command),
``ctxcomp show --manifest`` prints it, a continued run or ``ctxcomp compare`` says when versions differ; and the
cache entries a run used are recorded, counted by ``ctxcomp cache info --run`` and removed by ``cache clear``."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.versions import OUTPUT_PACKAGES, PROMPT_VERSION, SCORING_VERSION, package_version
from experiments.cli.app import app
from experiments.data import provenance
from experiments.data.provenance import MANIFEST, file_digest, read_cache_keys, read_manifest
from experiments.data.session import gpus
from experiments.run.config import parse_config
from experiments.run.driver import Runner

REPO = Path(__file__).resolve().parents[3]
GOOD_LB = REPO / "tests" / "reliability" / "bad_inputs" / "good.jsonl"


def config(data: Path, n: int = 3, **top) -> dict:
    return {"name": "prov", "batch_size": 2, "readers": ["extractive"], **top,
            "tasks": [{"name": "hotpotqa", "path": str(data)},
                      {"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": n, "num_docs": 3,
                                                            "words_per_doc": 20, "seed": 0}}],
            "compressors": ["full", {"name": "retrieval", "params": {"retriever": "bm25", "top_n": 1,
                                                                     "chunk_size": 20}}]}


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "in" / "hotpot.jsonl"
    path.parent.mkdir()
    shutil.copy(GOOD_LB, path)
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(folder))
    provenance._stores.clear()
    return folder


def run(cfg: dict, out: Path, argv=("ctxcomp", "run", "c.yaml"), monkeypatch=None, notes=None):
    if monkeypatch is not None:
        monkeypatch.setattr(sys, "argv", list(argv))
    return Runner(parse_config(cfg), out, progress=False, notify=(notes.append if notes is not None else None)).run()


def test_the_manifest_records_versions_commit_data_machine_and_command(tmp_path, data, cache, monkeypatch):
    out = tmp_path / "run"
    run(config(data), out, argv=["/usr/bin/ctxcomp", "run", "c.yaml", "--set", "api_key=sk-abcdefghijkl"],
        monkeypatch=monkeypatch)
    (session,) = read_manifest(out)["sessions"]
    assert session["command"] == ["ctxcomp", "run", "c.yaml", "--set", "api_key=***"]
    assert session["versions"] == {"prompt": PROMPT_VERSION, "scoring": SCORING_VERSION}
    assert set(OUTPUT_PACKAGES) <= set(session["packages"])
    for name in ("torch", "transformers", "sentence-transformers", "bm25s", "openai"):
        assert session["packages"][name] == package_version(name)
    src = session["ctxcomp"]
    assert src["version"] == package_version("ctxcomp")
    if (REPO / ".git").exists() and shutil.which("git"):
        assert len(src["commit"]) == 40 and isinstance(src["dirty"], bool)
    (item,) = session["data"]
    assert item == {"path": str(data), "size": data.stat().st_size,
                    "sha256": hashlib.sha256(data.read_bytes()).hexdigest()}
    machine = session["machine"]
    assert machine["cores"] >= 1 and isinstance(machine["cpu"], str) and isinstance(machine["gpus"], list)
    if Path("/proc/cpuinfo").exists():
        assert machine["cpu_flags"] and machine["cpu_flags"] == sorted(machine["cpu_flags"])
    assert "torch" in machine["threads"] and session["ended"] >= session["started"]

    shown = CliRunner().invoke(app, ["show", str(out), "--manifest"])
    assert shown.exit_code == 0, shown.output
    assert f"sha256 {item['sha256']}" in shown.output and "ctxcomp run c.yaml --set api_key=***" in shown.output
    assert f"prompt {PROMPT_VERSION}, scoring {SCORING_VERSION}" in shown.output


def test_a_file_is_hashed_once_per_mtime(tmp_path, cache, monkeypatch):
    path = tmp_path / "f.jsonl"
    path.write_text("x" * 1000)
    calls = []
    real = provenance._sha256
    monkeypatch.setattr(provenance, "_sha256", lambda p, size: calls.append(p) or real(p, size))
    first = file_digest(path)
    provenance._stores.clear()  # another process: the digest comes from the cache on disk
    assert file_digest(path) == first and len(calls) == 1
    path.write_text("y" * 1000)  # same size, new content and mtime
    again = file_digest(path)
    assert len(calls) == 2 and again["sha256"] == hashlib.sha256(b"y" * 1000).hexdigest() != first["sha256"]


def test_a_continued_run_adds_a_session_and_says_when_versions_differ(tmp_path, data, cache):
    out = tmp_path / "run"
    run(config(data), out)
    manifest = read_manifest(out)
    manifest["sessions"][0]["packages"]["transformers"] = "0.0.1"
    (out / MANIFEST).write_text(json.dumps(manifest))
    notes = []
    run(config(data), out, notes=notes)
    sessions = read_manifest(out)["sessions"]
    assert len(sessions) == 2
    (warning,) = [n for n in notes if n.startswith("warning:")]
    assert f"transformers: 0.0.1 in the run's last session, {package_version('transformers')} in this session" in warning


def test_compare_warns_when_two_runs_differ_in_an_output_relevant_version(tmp_path, data, cache):
    a, b = tmp_path / "a", tmp_path / "b"
    run(config(data), a)
    run(config(data), b)
    same = CliRunner().invoke(app, ["compare", str(a), str(b), "--plain"])
    assert same.exit_code == 0 and "warning" not in same.output, same.output
    manifest = read_manifest(b)
    manifest["sessions"][0]["versions"]["scoring"] = SCORING_VERSION + 1
    manifest["sessions"][0]["packages"]["torch"] = "9.9.9"
    (b / MANIFEST).write_text(json.dumps(manifest))
    differ = CliRunner().invoke(app, ["compare", str(a), str(b), "--plain"])
    assert differ.exit_code == 0, differ.output
    (line,) = [ln for ln in differ.output.splitlines() if "different versions" in ln]
    assert line.startswith("warning:") and f"ctxcomp scoring version: {SCORING_VERSION} in A, {SCORING_VERSION + 1} in B" in line
    assert f"torch: {package_version('torch')} in A, 9.9.9 in B" in line and "transformers" not in line


def test_the_cache_entries_a_run_used_are_counted_and_cleared_without_touching_another_runs(tmp_path, data, cache):
    a, b = tmp_path / "a", tmp_path / "b"
    first = run(config(data), a)
    smaller = config(data)
    smaller.update(tasks=smaller["tasks"][1:], compressors=["full"])
    run(smaller, b)
    used = read_cache_keys(a)
    generations = next(use.keys for (name, folder), use in used.items() if name == "generations")
    assert len(generations) == first.model_calls  # every generation asked (identical prompts share one) is recorded
    assert {folder for _, folder in used} == {str((cache / "generations").resolve())}  # bm25 embeds nothing

    info = CliRunner().invoke(app, ["cache", "info", "--run", str(a), "--plain"])
    assert info.exit_code == 0, info.output
    assert f"| generations | {(cache / 'generations').resolve()} | {len(generations)} | {len(generations)} |" in info.output
    assert str(cache / "embeddings") in info.output and "cache root" in info.output

    b_keys = next(iter(read_cache_keys(b).values())).keys
    assert b_keys <= generations  # b asked a subset of a's questions: those entries are shared
    cleared = CliRunner().invoke(app, ["cache", "clear", "--run", str(b)])
    assert cleared.exit_code == 0 and f"removed {len(b_keys)} of the {len(b_keys)} entries {b} recorded" in cleared.output
    again = run(config(data), a)  # a continued run of a asks nothing: its predictions are all there
    assert again.predicted == 0
    rerun = run(config(data), tmp_path / "a2")
    assert rerun.model_calls == len(b_keys)  # only what was cleared is asked again


def test_a_cache_folder_that_cannot_be_made_is_one_line_naming_it_and_the_variable(tmp_path, data, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(blocker))
    provenance._stores.clear()
    (cfg := tmp_path / "c.json").write_text(json.dumps(config(data)))
    got = CliRunner().invoke(app, ["run", str(cfg), "--out", str(tmp_path / "run")])
    assert got.exit_code == 2
    assert f"the cache root in {blocker} cannot be used: {blocker} is a file, not a folder" in got.output
    assert "CTXCOMP_CACHE_DIR" in got.output and "Traceback" not in got.output
    assert not (tmp_path / "run").exists()  # refused before the run directory is made


def test_gpus_are_read_from_nvidia_smi(tmp_path, monkeypatch):
    """The query ctxcomp sends and the CSV it reads, with a stand-in for the tool on PATH (this machine has no GPU);
    the arguments must be the ones the stand-in answers, as the real tool would only for them."""
    tool = tmp_path / "bin" / "nvidia-smi"
    tool.parent.mkdir()
    tool.write_text('#!/bin/sh\n[ "$1 $2" = "--query-gpu=name,driver_version,memory.total --format=csv,noheader,nounits" ]'
                    ' || exit 9\nprintf "NVIDIA H100 80GB HBM3, 550.54.15, 81559\\nNVIDIA H100 80GB HBM3, 550.54.15, 81559\\n"\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:{os.environ['PATH']}")
    assert gpus() == [{"name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15", "memory_mb": 81559}] * 2


def test_a_whole_corpus_indexed_at_once_is_counted_not_recorded(monkeypatch):
    from core import caches

    monkeypatch.setattr(caches, "MAX_KEYS_PER_CALL", 3)
    ledger, holder = caches.KeyLedger(), object()
    ledger.note("embeddings", "/c", ["a"])  # nobody records yet
    ledger.start(holder)
    ledger.note("embeddings", "/c", ["b", "a"])
    ledger.note("embeddings", "/c", ["x1", "x2", "x3", "x4"])  # a corpus: counted only
    ledger.note("generations", "/g", ["k"])
    assert ledger.take() == [caches.CacheUse("embeddings", "/c", ["a", "b"], 4), caches.CacheUse("generations", "/g", ["k"])]
    assert ledger.take() == []
    ledger.note("generations", "/g", ["k2"])
    ledger.stop(holder)
    assert ledger.take() == []  # what no one took is dropped with the last holder


def test_show_manifest_prints_one_block_per_distinct_session():
    from experiments.data.provenance import describe_manifest

    look = {"command": ["ctxcomp", "run", "c.yaml", "--until-decided"], "cwd": "/w", "versions": {"prompt": 1},
            "ctxcomp": {"version": "0.1", "commit": "a" * 40, "dirty": False}, "machine": {"cpu": "x", "cores": 2},
            "data": [{"path": "d.jsonl", "size": 3, "sha256": "b" * 64}]}
    times = [{"started": f"2026-11-29T01:0{i}", "ended": f"2026-11-29T01:0{i}:30"} for i in range(4)]
    resumed = {**look, "command": ["ctxcomp", "run", "--resume", "r"], **times[3]}
    text = describe_manifest({"sessions": [{**look, **t} for t in times[:3]] + [resumed]})
    blocks = text.split("\n\n")
    assert len(blocks) == 2 and text.count("  command: ") == 2  # a sequential run's 3 alike looks are one block
    assert blocks[0].startswith("sessions 1-3 (3 alike but for their times): 2026-11-29T01:00 -> 2026-11-29T01:02:30")
    assert blocks[1].startswith("session 4: 2026-11-29T01:03 -> 2026-11-29T01:03:30")

"""Naming a plugin by import path: a typo gets "did you mean" (and, from a config, the file and line that name it);
`ctxcomp list pkg.mod:Class` describes the class; `curve --help` says import paths work."""
from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from experiments.cli.app import app

runner = CliRunner()
PLUGIN = "retrievers.bm25:BM25Retriever"  # any importable class does; the typo below is one letter off it


def test_a_class_path_typo_gets_did_you_mean_and_the_config_line(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({
        "name": "t", "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 2, "num_docs": 3}}],
        "compressors": [{"name": "retrieval", "params": {"retriever": {"name": "retrievers.bm25:BM25Retreiver"}}}],
        "readers": ["extractive"]}, sort_keys=False))
    line_no = next(i for i, line in enumerate(config.read_text().splitlines(), 1) if "BM25Retreiver" in line)
    got = runner.invoke(app, ["run", str(config), "--out", str(tmp_path / "run")])
    assert got.exit_code == 2, got.output
    (line,) = [ln for ln in got.output.splitlines() if ln.startswith("error:")]
    assert line.startswith(f"error: {config}:{line_no}: "), line
    assert line.endswith(f"did you mean '{PLUGIN}'?"), line


def test_retrieve_option_typo_gets_did_you_mean(tmp_path):
    (tmp_path / "qa.jsonl").write_text(json.dumps({"question": "q?", "answers": ["a"], "ctxs": [{"title": "t",
                                                                                                "text": "a"}]}) + "\n")
    got = runner.invoke(app, ["retrieve", "--litm", str(tmp_path / "qa.jsonl"), "--retriever",
                              "retrievers.bm25:BM25Retreiver"])
    assert got.exit_code == 2 and f"did you mean '{PLUGIN}'?" in got.output, got.output


def test_list_describes_an_import_path():
    got = runner.invoke(app, ["list", PLUGIN, "--plain"])
    assert got.exit_code == 0, got.output
    (row,) = [ln for ln in got.output.splitlines() if ln.startswith("| retrievers |")]
    assert f"| {PLUGIN} | Okapi BM25" in row and "k1=1.5" in row and row.rstrip(" |").endswith("retrievers/bm25.py")
    wrong = runner.invoke(app, ["list", "json:dumps", "--plain"])
    assert wrong.exit_code == 2 and "none of the kinds ctxcomp lists" in wrong.output
    unknown = runner.invoke(app, ["list", "retrievers", "--plain"])
    assert unknown.exit_code == 0


def test_curve_help_says_import_paths_work():
    got = runner.invoke(app, ["curve", "--help"], env={"COLUMNS": "200"})
    assert got.exit_code == 0 and "pkg.mod:Class" in got.output

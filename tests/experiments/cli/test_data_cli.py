"""``ctxcomp data list|get`` and data names in configs, as a user meets them; downloads come from 127.0.0.1."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import experiments.data.catalog as catalog_module
from experiments.cli.app import app
from tests.support.file_server import FileServer, closed_port_url
from tests.support.in_process_cli import run_main

REPO = Path(__file__).resolve().parents[3]
FILES = {"/qa.jsonl": b'{"question": "q", "answers": ["a"], "ctxs": []}\n' * 50, "/kv.jsonl.gz": bytes(range(256)) * 40}


def _catalog(tmp_path: Path, urls: dict[str, str]) -> Path:
    """A catalogue of two small files, served at ``urls`` (URL path -> URL)."""
    files = {}
    for path, body in FILES.items():
        stem = path.strip("/").split(".")[0]
        files[f"mini/{stem}"] = {"file": f"mini/{path.strip('/')}", "urls": [urls[path]], "size": len(body),
                                 "sha256": hashlib.sha256(body).hexdigest(), "licence": f"licence of {stem}"}
    out = tmp_path / "catalog.yaml"
    out.write_text(yaml.safe_dump({"files": files}))
    return out


@pytest.fixture
def use_catalog(monkeypatch):
    def use(path: Path) -> None:
        monkeypatch.setattr(catalog_module, "CATALOG", path)
    return use


def test_list_names_every_file_its_licence_and_whether_it_is_here(tmp_path):
    res = CliRunner().invoke(app, ["data", "list", "--dir", str(tmp_path), "--plain"])
    assert res.exit_code == 0, res.output
    assert f"data directory: {tmp_path}" in res.output
    for name in ("leval/financial_qa", "lost_in_the_middle/nq-open-oracle", "lost_in_the_middle/kv-retrieval-300_keys",
                 "lost_in_the_middle/nq-open-30_total_documents_gold_at_29"):
        assert f"| {name} |" in res.output
    assert "GPL-3.0" in res.output and "| no |" in res.output and "| yes |" not in res.output


def test_get_fetches_checks_and_reports_each_file_with_its_licence(tmp_path, use_catalog, monkeypatch):
    monkeypatch.setenv("CTXCOMP_NO_PROGRESS", "1")
    with FileServer(FILES) as server:
        use_catalog(_catalog(tmp_path, {p: server.url(p) for p in FILES}))
        out = tmp_path / "data"
        res = CliRunner().invoke(app, ["data", "get", "mini", "--dir", str(out)])  # a group: all of mini/
        assert res.exit_code == 0, res.output
        for path, body in FILES.items():
            assert (out / "mini" / path.strip("/")).read_bytes() == body
        assert "mini/qa: " in res.output and "downloaded, sha256 checked" in res.output
        assert "licence: licence of kv" in res.output and f"set CTXCOMP_DATA_DIR={out}" in res.output
        res = CliRunner().invoke(app, ["data", "get", "mini/qa", "--dir", str(out)])
        assert res.exit_code == 0 and "already here, sha256 checked" in res.output
        assert server.hits["/qa.jsonl"] == 1
        res = CliRunner().invoke(app, ["data", "list", "--dir", str(out), "--plain"])
        assert res.output.count("| yes |") == 2


def test_get_offline_or_corrupt_is_one_line_per_file_and_exit_2(tmp_path, use_catalog):
    with FileServer(FILES) as server:
        urls = {"/qa.jsonl": closed_port_url("/qa.jsonl"), "/kv.jsonl.gz": server.url("/kv.jsonl.gz", "corrupt")}
        use_catalog(_catalog(tmp_path, urls))
        res = CliRunner().invoke(app, ["data", "get", "mini/qa", "mini/kv", "--dir", str(tmp_path / "d"),
                                       "--no-progress"])
    assert res.exit_code == 2
    errors = [line for line in res.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2 and "Traceback" not in res.output
    assert "no connection" in errors[0] and f"Download {urls['/qa.jsonl']} by hand and put it at " \
                                            f"{tmp_path / 'd' / 'mini' / 'qa.jsonl'}" in errors[0]
    assert "corrupt download" in errors[1] and not (tmp_path / "d" / "mini" / "kv.jsonl.gz").exists()
    res = CliRunner().invoke(app, ["data", "get", "mini/q", "--dir", str(tmp_path)])
    assert res.exit_code == 2 and "unknown data name 'mini/q'; did you mean mini/qa" in res.output


def _cli(*args, env):
    return run_main(args, env={"CTXCOMP_NO_PROGRESS": "1", "HF_HUB_OFFLINE": "1", **env})


def test_a_config_naming_missing_data_is_one_line_naming_the_get_command(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"name": "t", "readers": ["extractive"],
                                      "tasks": [{"name": "kv_retrieval", "data": "lost_in_the_middle/kv-retrieval-140_keys"}]}))
    res = _cli("run", config, "--out", tmp_path / "run", env={"CTXCOMP_DATA_DIR": str(tmp_path / "empty")})
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"error: data lost_in_the_middle/kv-retrieval-140_keys is not in $CTXCOMP_DATA_DIR "
        f"({tmp_path / 'empty' / 'lost_in_the_middle' / 'kv-retrieval-140_keys.jsonl.gz'} is missing); "
        "fetch it with: ctxcomp data get lost_in_the_middle/kv-retrieval-140_keys"]
    config.write_text(config.read_text().replace("140_keys", "14_keys"))
    res = _cli("run", config, "--out", tmp_path / "run2", env={"CTXCOMP_DATA_DIR": str(tmp_path / "empty")})
    assert res.returncode == 2 and "unknown data name 'lost_in_the_middle/kv-retrieval-14_keys'" in res.stderr


def test_a_config_names_its_data_by_name_and_runs_from_the_data_directory(shared_data, tmp_path):
    """What a clone does after `ctxcomp data get`: the data name resolves in $CTXCOMP_DATA_DIR."""
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"name": "t", "readers": ["extractive"], "tasks": [
        {"name": "kv_retrieval", "data": "lost_in_the_middle/kv-retrieval-75_keys", "limit": 2}]}))
    res = _cli("run", config, "--out", tmp_path / "run", "--no-report", env={"CTXCOMP_DATA_DIR": str(shared_data)})
    assert res.returncode == 0, res.stderr
    assert len((tmp_path / "run" / "predictions.jsonl").read_text().splitlines()) == 2

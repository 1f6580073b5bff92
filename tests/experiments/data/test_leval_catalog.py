"""Every L-Eval task file is in the data catalogue, by name, at the pinned commit; a file whose sha256 is not
recorded yet is fetched unchecked and says so, with the digest to record."""
from __future__ import annotations

import hashlib
import re

import yaml
from typer.testing import CliRunner

import experiments.data.catalog as catalog_module
from experiments.cli.app import app
from experiments.data.catalog import catalog
from experiments.run.config import parse_config
from experiments.tasks.specs import TASKS
from tests.support.file_server import FileServer

PINNED = "https://raw.githubusercontent.com/OpenLMLab/LEval/70588d8d2510be1e2220712d1566cd3e77f16233/LEval-data/"
# codeU and sci_fi were added to L-Eval after 70588d8 (in 623ba2b); deeabd0 holds both, as last changed
LATER = {"codeU", "sci_fi"}
PINNED_LATER = "https://raw.githubusercontent.com/OpenLMLab/LEval/deeabd074eb27cfc36cd849eb852d54039612596/LEval-data/"


def test_every_leval_task_has_a_data_name_at_the_pinned_commit():
    tasks = sorted(name.removeprefix("leval_") for name in TASKS.names() if name.startswith("leval_"))
    assert len(tasks) == 20
    files = catalog()
    for task in tasks:
        item = files[f"leval/{task}"]
        folder = "Closed-ended-tasks" if TASKS.get(f"leval_{task}").category == "closed-ended" else "Open-ended-tasks"
        pinned = PINNED_LATER if task in LATER else PINNED
        assert item.urls[0] == f"{pinned}{folder}/{task}.jsonl" and item.file == f"leval/{task}.jsonl"
        if item.verified:
            assert re.fullmatch(r"[0-9a-f]{64}", item.sha256) and item.size > 0
        else:
            assert item.sha256 is None and item.checked.startswith("not yet")
    # the two whose blobs (over 4 MiB) were not in the copy of L-Eval's history the digests were read from
    assert {t for t in tasks if not files[f"leval/{t}"].verified} == {"codeU", "narrative_qa"}
    cfg = parse_config({"tasks": [{"name": "scientific_qa", "data": "leval/scientific_qa"}], "readers": ["extractive"]})
    assert cfg.tasks[0].data == "leval/scientific_qa"


def test_a_file_without_a_recorded_sha256_is_fetched_unchecked_and_its_digest_printed(tmp_path, monkeypatch):
    body = b'{"instructions": ["q"], "outputs": ["a"], "input": "doc", "source": "s", "evaluation": "f1"}\n'
    monkeypatch.setenv("CTXCOMP_NO_PROGRESS", "1")
    with FileServer({"/t.jsonl": body}) as server:
        path = tmp_path / "catalog.yaml"
        path.write_text(yaml.safe_dump({"files": {"leval/t": {
            "file": "leval/t.jsonl", "urls": [server.url("/t.jsonl")], "sha256": None, "size": None,
            "licence": "GPL-3.0", "checked": "not yet: a test"}}}))
        monkeypatch.setattr(catalog_module, "CATALOG", path)
        res = CliRunner().invoke(app, ["data", "get", "leval/t", "--dir", str(tmp_path / "d")])
        listed = CliRunner().invoke(app, ["data", "list", "--dir", str(tmp_path / "d"), "--plain"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "d" / "leval" / "t.jsonl").read_bytes() == body
    assert f"NOT checked: no sha256 recorded yet; its sha256 is {hashlib.sha256(body).hexdigest()}" in res.output
    assert "| leval/t | ? | yes | not yet |" in listed.output

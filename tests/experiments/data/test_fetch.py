"""Fetching data by name, without the network: a file server on 127.0.0.1 serves copies of the files (and
corrupt, truncated, over-long and missing ones), and every download is checked against its recorded sha256."""
from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path

import pytest
import yaml

from experiments.data.catalog import DataFile, MissingDataError, catalog, data_dir, entry, local_file
from experiments.data.fetch import FetchError, fetch
from tests.support.file_server import FileServer, closed_port_url

REPO = Path(__file__).resolve().parents[3]
BODY = b'{"ordered_kv_records": [["k", "v"]], "key": "k", "value": "v"}\n' * 300


def _item(body: bytes, *urls: str, name: str = "test/kv", file: str = "test/kv.jsonl") -> DataFile:
    return DataFile(name=name, file=file, urls=urls, sha256=hashlib.sha256(body).hexdigest(), size=len(body),
                    licence="MIT (test)")


def _leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name.startswith("."))


def test_a_download_is_checked_then_put_in_place_and_a_verified_file_is_not_fetched_again(tmp_path):
    with FileServer({"/kv.jsonl": BODY}) as server:
        item = _item(BODY, server.url("/kv.jsonl"))
        done = fetch(item, tmp_path, progress=False)
        assert done.status == "downloaded" and done.path == tmp_path / "test" / "kv.jsonl"
        assert done.path.read_bytes() == BODY and _leftovers(tmp_path) == []
        again = fetch(item, tmp_path, progress=False)
        assert again.status == "present" and server.hits["/kv.jsonl"] == 1


@pytest.mark.parametrize("mode, reason", [
    ("corrupt", r"corrupt download: sha256 [0-9a-f]{12}\.\.\., the recorded one is [0-9a-f]{12}\.\.\."),
    ("truncated", r"the connection broke off mid-download, truncated"),
    ("short", rf"truncated download: {len(BODY) // 2} of {len(BODY)} bytes"),
    ("long", rf"corrupt download: longer than the published {len(BODY)} bytes"),
])
def test_a_corrupt_or_truncated_download_is_refused_in_one_line_and_nothing_is_kept(tmp_path, mode, reason):
    with FileServer({"/kv.jsonl": BODY}) as server:
        item = _item(BODY, server.url("/kv.jsonl", mode))
        with pytest.raises(FetchError) as err:
            fetch(item, tmp_path, progress=False)
    msg = str(err.value)
    assert "\n" not in msg and re.search(reason, msg), msg
    assert f"put it at {tmp_path / 'test' / 'kv.jsonl'}" in msg and "nothing was kept" in msg
    assert not (tmp_path / "test" / "kv.jsonl").exists() and _leftovers(tmp_path) == []


def test_offline_names_the_missing_file_its_url_and_where_to_put_it_in_one_line(tmp_path):
    url = closed_port_url("/kv.jsonl")
    with pytest.raises(FetchError) as err:
        fetch(_item(BODY, url), tmp_path, progress=False, timeout=5)
    msg = str(err.value)
    assert "\n" not in msg and "no connection" in msg
    assert f"Download {url} by hand and put it at {tmp_path / 'test' / 'kv.jsonl'}" in msg
    assert f"sha256 {hashlib.sha256(BODY).hexdigest()}" in msg


def test_a_missing_file_is_http_404_and_the_next_url_is_tried(tmp_path):
    with FileServer({"/kv.jsonl": BODY}) as server:
        with pytest.raises(FetchError, match="HTTP 404"):
            fetch(_item(BODY, server.url("/gone.jsonl")), tmp_path, progress=False)
        item = _item(BODY, server.url("/gone.jsonl"), server.url("/kv.jsonl", "corrupt"), server.url("/kv.jsonl"))
        done = fetch(item, tmp_path, progress=False)
    assert done.url == server.url("/kv.jsonl") and done.path.read_bytes() == BODY


def test_a_wrong_file_already_there_is_replaced_by_the_published_one(tmp_path):
    dest = tmp_path / "test" / "kv.jsonl"
    dest.parent.mkdir()
    dest.write_bytes(BODY[:-1] + b"X")  # the right size, the wrong bytes
    with FileServer({"/kv.jsonl": BODY}) as server:
        done = fetch(_item(BODY, server.url("/kv.jsonl")), tmp_path, progress=False)
    assert done.status == "downloaded" and dest.read_bytes() == BODY


@pytest.mark.parametrize("name", ["leval/financial_qa", "lost_in_the_middle/kv-retrieval-75_keys"])
def test_copies_of_the_real_files_verify_against_the_catalogue(shared_data, tmp_path, name):
    """The catalogue's own entry, its URL pointed at a local copy: what it records is what the copy holds."""
    body = entry(name).path(shared_data).read_bytes()
    with FileServer({"/" + entry(name).file: body}) as server:
        item = dataclasses.replace(entry(name), urls=(server.url("/" + entry(name).file),))
        done = fetch(item, tmp_path, progress=False)
    assert done.status == "downloaded" and done.path.read_bytes() == body
    assert local_file(name, tmp_path) == done.path


def test_every_catalogued_file_in_the_shared_data_is_byte_identical_to_the_record(shared_data):
    from experiments.data.fetch import verify

    present = [item for item in catalog().values() if item.path(shared_data).is_file()]
    assert len(present) >= 6
    assert {item.name: verify(item.path(shared_data), item) for item in present} == {i.name: None for i in present}


def test_the_catalogue_covers_the_shipped_configs_and_pins_every_url():
    names = set(catalog())
    wanted = {f"leval/{t}" for t in ("financial_qa", "natural_question", "gov_report_summ", "news_summ")}
    wanted |= {"lost_in_the_middle/nq-open-oracle"} | {f"lost_in_the_middle/kv-retrieval-{k}_keys" for k in (75, 140, 300)}
    wanted |= {f"lost_in_the_middle/nq-open-{n}_total_documents_gold_at_{g}"
               for n, golds in ((10, (0, 4, 9)), (20, (0, 4, 9, 14, 19)), (30, (0, 4, 9, 14, 19, 24, 29))) for g in golds}
    assert wanted <= names
    for config in sorted((REPO / "experiments" / "configs").glob("*.yaml")):
        for task in yaml.safe_load(config.read_text())["tasks"]:
            # LongBench (a zip), LongBench v2 and ∞Bench (Hugging Face dataset pages) publish no pinned GitHub files
            assert "data" in task or "path" not in task or config.name.startswith(("longbench", "infinitebench")), \
                (config.name, task)
            assert task.get("data", next(iter(names))) in names, (config.name, task)
    for item in catalog().values():
        assert item.file.split(".")[0] == item.name and item.licence and (item.size > 0 if item.verified else item.checked)
        if item.name == "wikipedia-dpr-100w":  # DPR publishes it on Meta's file server only, unversioned
            assert item.urls == ("https://dl.fbaipublicfiles.com/dpr/wikipedia_split/psgs_w100.tsv.gz",)
            continue
        assert all(re.match(r"https://raw\.githubusercontent\.com/[^/]+/[^/]+/[0-9a-f]{40}/", u) for u in item.urls)


def test_a_data_name_resolves_in_the_data_directory_with_one_line_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXCOMP_DATA_DIR", str(tmp_path))
    assert data_dir() == tmp_path
    item = entry("leval/news_summ")
    with pytest.raises(MissingDataError, match=r"^data leval/news_summ is not in \$CTXCOMP_DATA_DIR \(.*news_summ"
                                               r"\.jsonl is missing\); fetch it with: ctxcomp data get leval/news_summ$"):
        local_file("leval/news_summ")
    path = tmp_path / "leval" / "news_summ.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"{}\n")
    with pytest.raises(MissingDataError, match=r"has 3 bytes, the published leval/news_summ has \d+; fetch it again"):
        local_file("leval/news_summ")
    with open(path, "wb") as fh:
        fh.truncate(item.size)
    assert local_file("leval/news_summ") == path
    with pytest.raises(MissingDataError, match=r"unknown data name 'leval/news_sum'; did you mean leval/news_summ"):
        entry("leval/news_sum")


def test_the_data_directory_defaults_to_the_cache_root(monkeypatch, tmp_path):
    monkeypatch.delenv("CTXCOMP_DATA_DIR", raising=False)
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path))
    assert data_dir() == tmp_path / "data"

import json

import pytest

from core.files import write_atomic
from experiments.data.store import JsonlLog


def test_append_and_recover_round_trip(tmp_path):
    log = JsonlLog(tmp_path / "p.jsonl")
    for i in range(3):
        log.append({"id": i, "text": "中文 ✓"})
    assert [r["id"] for r in log.recover()] == [0, 1, 2]


def test_torn_last_line_is_discarded_and_cut_off(tmp_path):
    path = tmp_path / "p.jsonl"
    log = JsonlLog(path)
    log.append({"id": 1})
    with open(path, "ab") as fh:
        fh.write(b'{"id": 2, "pred')  # a kill in the middle of a write
    assert [r["id"] for r in log.recover()] == [1]
    assert log.discarded_bytes == len(b'{"id": 2, "pred')
    assert path.read_bytes() == b'{"id": 1}\n'
    log.append({"id": 3})
    assert [r["id"] for r in JsonlLog(path).recover()] == [1, 3]


def test_corruption_in_the_middle_is_an_error_not_a_silent_skip(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": 1}\nnot json\n{"id": 3}\n')
    with pytest.raises(ValueError, match=r"p\.jsonl:2"):
        JsonlLog(path).recover()


def test_write_atomic_replaces_whole_file(tmp_path):
    path = tmp_path / "scores.json"
    write_atomic(path, json.dumps({"a": 1}))
    write_atomic(path, json.dumps({"a": 2}))
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["scores.json"]

"""Run-directory logs of typed records: append, read without writing, repair only on demand, name bad lines."""
import json
import logging
import os

import pytest

from core.files import DiskError, append_line, write_atomic
from experiments.data.records import Failure, Prediction, RunFileError
from experiments.data.store import RunLog


def pred(i, text="中文 ✓"):
    return Prediction(task="t", id=str(i), config_hash="h", compressor="full", reader="r", prediction=text,
                      metric="qa_f1", score=1.0)


def test_append_and_read_round_trip_typed_records(tmp_path):
    log = RunLog(tmp_path / "p.jsonl", Prediction)
    for i in range(3):
        log.append(pred(i))
    back = log.read()
    assert [r.id for r in back] == ["0", "1", "2"] and back[0] == pred(0)
    first = json.loads((tmp_path / "p.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert list(first)[:7] == ["task", "spec", "id", "config_hash", "compressor", "compressor_kind", "reader"]
    assert "score_parts" not in first  # empty optional fields are left out


def test_reading_skips_a_torn_last_line_with_a_warning_and_never_writes(tmp_path, caplog):
    path = tmp_path / "p.jsonl"
    log = RunLog(path, Prediction)
    log.append(pred(1))
    good = path.read_bytes()
    path.write_bytes(good + b'{"task": "t", "id": "2", "pred')  # a kill in the middle of a write
    with caplog.at_level(logging.WARNING):
        assert [r.id for r in log.read()] == ["1"]
    assert "torn last line" in caplog.text
    assert path.read_bytes().startswith(good) and len(path.read_bytes()) > len(good), "reading must not repair"
    assert [r.id for r in log.repair()] == ["1"] and path.read_bytes() == good  # the run, under its lock, cuts it
    log.append(pred(3))
    assert [r.id for r in RunLog(path, Prediction).read()] == ["1", "3"]


def test_a_whole_record_without_its_newline_is_still_torn(tmp_path):
    path = tmp_path / "p.jsonl"
    line = json.dumps(pred(0).as_dict())
    path.write_text(line + "\n" + line)
    log = RunLog(path, Prediction)
    assert len(log.repair()) == 1 and log.discarded_bytes == len(line)


@pytest.mark.parametrize("middle, said", [
    (b"not json", r"p\.jsonl:2: not a JSON record"),
    (b"", r"p\.jsonl:2: not a JSON record"),
    (b'{"task": "t", "id": "x", "config_hash": "h", "compressor": "c", "reader": "r", "prediction": "", "metric": "m"}',
     r"p\.jsonl:2: missing field 'score'"),
    (b'{"task": "t", "id": 7, "config_hash": "h", "compressor": "c", "reader": "r", "prediction": "", "metric": "m", '
     b'"score": 1}', r"p\.jsonl:2: field 'id' must be a string"),
    (b"[1, 2]", r"p\.jsonl:2: not a JSON object"),
])
def test_a_bad_line_in_the_middle_names_file_line_and_field_and_nothing_is_rewritten(tmp_path, middle, said):
    path = tmp_path / "p.jsonl"
    line = json.dumps(pred(0).as_dict()).encode()
    path.write_bytes(line + b"\n" + middle + b"\n" + line + b"\n")
    before = path.read_bytes()
    for call in (RunLog(path, Prediction).read, RunLog(path, Prediction).repair):
        with pytest.raises(RunFileError, match=said):
            call()
    assert path.read_bytes() == before


def test_a_short_write_is_cut_back_so_a_full_disk_never_leaves_a_torn_line(tmp_path, monkeypatch):
    path = tmp_path / "f.jsonl"
    log = RunLog(path, Failure)
    log.append(Failure(task="t", id="0", config_hash="h", compressor="c", reader="r", stage="compress", reason="x"))
    good = path.read_bytes()
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[:5]))  # the disk filled after 5 bytes
    with pytest.raises(DiskError, match=r"cannot write .*f\.jsonl: the disk is full"):
        log.append(Failure(task="t", id="1", config_hash="h", compressor="c", reader="r", stage="compress", reason="y"))
    monkeypatch.undo()
    assert path.read_bytes() == good
    with pytest.raises(ValueError, match="complete line"):
        append_line(path, b"no newline")


def test_write_atomic_replaces_whole_file(tmp_path):
    path = tmp_path / "scores.json"
    write_atomic(path, json.dumps({"a": 1}))
    write_atomic(path, json.dumps({"a": 2}))
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["scores.json"]


@pytest.mark.parametrize("name", ["built.jsonl", "built.jsonl.gz"])
def test_a_data_file_is_written_whole_or_not_at_all(tmp_path, name):
    """``ctxcomp build`` outputs: a failure halfway (a full disk, a bad record) leaves the old file, or none, never
    a truncated one that a later run would read as a complete data set."""
    import gzip

    from experiments.data.loaders import iter_records
    from experiments.data.store import write_jsonl

    def records(n, fail_at=None):
        for i in range(n):
            if i == fail_at:
                raise OSError(28, "No space left on device")
            yield {"id": i, "text": "x" * 1000}

    path = tmp_path / name
    with pytest.raises(DiskError, match="disk is full"):
        write_jsonl(records(500, fail_at=300), path)
    assert list(tmp_path.iterdir()) == []
    write_jsonl(records(5), path)
    with pytest.raises(DiskError):
        write_jsonl(records(500, fail_at=300), path)
    assert [r["id"] for _, r in iter_records(path)] == list(range(5))
    assert [p.name for p in tmp_path.iterdir()] == [name]
    if name.endswith(".gz"):
        with gzip.open(path, "rt") as fh:
            assert len(fh.read().splitlines()) == 5

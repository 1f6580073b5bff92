"""Run-directory logs of typed records: append, read without writing, repair only on demand, name bad lines."""
import json
import logging
import os

import pytest

from core.files import DiskError, append_line, write_atomic
from experiments.data.logs import RunLog
from experiments.data.records import Failure, Prediction, RunFileError


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
    for call in (RunLog(path, Prediction).read, RunLog(path, Prediction).repair, RunLog(path, Prediction).repair_keys):
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


def test_repair_by_keys_leaves_the_file_repair_by_records_leaves(tmp_path):
    """A run continuing a large directory parses keys only; the file it leaves is the one whole records leave."""
    lines = [json.dumps(pred(i % 4).as_dict()).encode() + b"\n" for i in range(7)]  # keys 0-3, three written twice
    torn = b"".join(lines) + b'{"task": "t", "id": "9", "pre'
    for repair, as_key in ((lambda log: log.repair(keep=lambda r: r.id != "2"), lambda r: r.key),
                           (lambda log: log.repair_keys(keep=lambda k: k[1] != "2"), lambda k: k)):
        path = tmp_path / "p.jsonl"
        path.write_bytes(torn)
        kept = [as_key(x) for x in repair(RunLog(path, Prediction))]
        assert kept == [("t", "3", "h"), ("t", "0", "h"), ("t", "1", "h")]  # the last line of each kept key
        assert path.read_bytes() == lines[3] + lines[4] + lines[5]
    path.write_bytes(torn)
    assert RunLog(path, Prediction).repair_keys() == [("t", str(i % 4), "h") for i in range(7)]
    assert path.read_bytes() == b"".join(lines)


def test_lines_the_standard_library_writes_and_orjson_refuses_still_read(tmp_path):
    path = tmp_path / "p.jsonl"
    record = {**pred(0).as_dict(), "meta": {"x": float("nan"), "big": 2 ** 70}}
    path.write_text(json.dumps(record) + "\n")  # NaN and a 71-bit integer: valid for json, not for orjson
    (back,) = RunLog(path, Prediction).read()
    assert back.meta["big"] == 2 ** 70 and back.meta["x"] != back.meta["x"]


def test_the_tail_repair_cuts_only_the_uncommitted_last_lines_reading_from_the_end(tmp_path, monkeypatch):
    """Traces are written a unit ahead of their predictions: after a kill the uncommitted ones are the last lines."""
    from experiments.data.records import Trace

    def trace(i):
        return Trace(task="t", id=str(i), config_hash="h", compressor="c", reader="r", trace={"ranking": [[f"c{i}", 1.0]]})

    path = tmp_path / "traces.jsonl"
    log = RunLog(path, Trace)
    log.extend([trace(i) for i in range(5000)])  # larger than the first span read from the end
    committed = path.read_bytes()
    log.extend([trace(i) for i in range(5000, 9000)])  # a unit whose predictions a kill stopped
    with open(path, "ab") as fh:
        fh.write(b'{"task": "t", "id": "90')  # and a torn line after it
    done = {("t", str(i), "h") for i in range(5000)}
    assert log.repair_tail(keep=lambda k: k in done) == 4000 and path.read_bytes() == committed
    assert log.repair_tail(keep=lambda k: k in done) == 0 and path.read_bytes() == committed  # nothing more to cut
    assert RunLog(path, Trace).repair_tail(keep=lambda k: False) == 5000 and path.read_bytes() == b""


def test_the_tail_repair_names_a_corrupt_line_by_its_number(tmp_path):
    from experiments.data.records import Trace

    path = tmp_path / "traces.jsonl"
    good = json.dumps(Trace(task="t", id="1", config_hash="h", compressor="c", reader="r").as_dict()).encode()
    path.write_bytes(good + b"\n" + b'{"task": "t"}\n' + good + b"\n")
    with pytest.raises(RunFileError, match=r"traces\.jsonl:2: missing field 'id'"):
        RunLog(path, Trace).repair_tail(keep=lambda k: False)
    path.write_bytes(good + b"\n" + b"garbage\n" + good.replace(b'"1"', b'"2"') + b"\n")
    with pytest.raises(RunFileError, match=r"traces\.jsonl:2: not a JSON record"):
        RunLog(path, Trace).repair_tail(keep=lambda k: k[1] == "1")
    path.write_bytes(good + b"\n" + b'{"task": "t", "id": "2", "conf\n')  # torn, though its newline reached the disk
    assert RunLog(path, Trace).repair_tail(keep=lambda k: True) == 1 and path.read_bytes() == good + b"\n"


@pytest.mark.parametrize("read_size, block", [(1 << 24, 4096), (700, 3), (97, 1)])
def test_reading_in_chunks_and_blocks_gives_what_reading_line_by_line_gives(tmp_path, monkeypatch, read_size, block):
    """The reader parses many lines per call and a large file a chunk at a time; whatever the chunk and block
    sizes, it returns the records, the torn tail and the error a plain line-by-line reading would."""
    from experiments.data import logs as store

    monkeypatch.setattr(store, "READ_SIZE", read_size)
    monkeypatch.setattr(store, "BLOCK", block)
    lines = [json.dumps(pred(i, text=f"answer {i} \u00e9\u4e2d\n").as_dict(), ensure_ascii=False).encode() + b"\n"
             for i in range(40)]
    path = tmp_path / "p.jsonl"
    path.write_bytes(b"".join(lines) + b'{"task": "t", "id": "torn", "pr')
    log = RunLog(path, Prediction)
    assert [r.id for r in log.read()] == [str(i) for i in range(40)]
    assert log.repair_keys() == [("t", str(i), "h") for i in range(40)] and path.read_bytes() == b"".join(lines)
    path.write_bytes(b"".join(lines[:25]) + b"{oops\n" + b"".join(lines[25:]))
    with pytest.raises(RunFileError, match=r"p\.jsonl:26: not a JSON record"):
        log.read()
    path.write_bytes(b"".join(lines) + b'{"task": "t", "id": "x"}\n')  # whole JSON, not a record: not torn
    with pytest.raises(RunFileError, match=r"p\.jsonl:41: missing field"):
        log.repair_keys()

def test_the_typed_decoder_and_the_dict_way_read_the_same_records_and_keys(tmp_path, monkeypatch):
    """Lines are decoded straight into records (msgspec) and, where that decoder is stricter than the records'
    own checks, the dict way reads them: either way a log gives the records a line-by-line reading gives."""
    from experiments.data import logs as store

    monkeypatch.setattr(store, "BLOCK", 3)
    rich = {**pred(1).as_dict(), "meta": {"gold_position": 3, "nested": [1, {"a": None}]}, "kept_chunks": ["c1", "c2"],
            "chunk_scores": [0.5, None], "answers": ["x", "y"], "score": 1, "field_from_a_newer_ctxcomp": {"k": 1}}
    lenient = {**pred(4).as_dict(), "tokens_in": 120.0}  # a float in an int field: msgspec refuses, the records take it
    lines = [json.dumps(pred(0).as_dict()), json.dumps(rich), json.dumps(pred(2).as_dict()),
             json.dumps(pred(3).as_dict()), json.dumps(lenient), json.dumps(pred(5).as_dict())]
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    log = RunLog(path, Prediction)
    typed, keys = log.read(), log.repair_keys()
    calls, typed_block = [], store._block
    monkeypatch.setattr(store, "_block", lambda *a: calls.append(1) or store._dict_block(*a))
    assert [r.as_dict() for r in typed] == [r.as_dict() for r in log.read()] and keys == log.repair_keys() and calls
    assert typed[1].meta == rich["meta"] and typed[1].chunk_scores == [0.5, None] and typed[1].score == 1
    assert typed[4].tokens_in == 120.0 and keys == [("t", str(i), "h") for i in range(6)]
    monkeypatch.setattr(store, "_block", typed_block)
    path.write_text("\n".join(lines[:4] + [json.dumps({**rich, "score": True})] + lines[5:]) + "\n", encoding="utf-8")
    with pytest.raises(RunFileError, match=r"p\.jsonl:5: field 'score' must be a number"):
        RunLog(path, Prediction).repair_keys()
    path.write_bytes(("\n".join(lines[:2]) + "\n").encode() + b'{"task": "\xff"}\n' + (lines[2] + "\n").encode())
    for read in (RunLog(path, Prediction).read, RunLog(path, Prediction).repair_keys):  # not UTF-8: named, not a crash
        with pytest.raises(RunFileError, match=r"p\.jsonl:3: not a JSON record"):
            read()


@pytest.mark.parametrize("name", ["built.jsonl", "built.jsonl.gz"])
def test_a_data_file_is_written_whole_or_not_at_all(tmp_path, name):
    """``ctxcomp build`` outputs: a failure halfway (a full disk, a bad record) leaves the old file, or none, never
    a truncated one that a later run would read as a complete data set."""
    import gzip

    from experiments.data.sources import iter_records
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


@pytest.mark.parametrize("middle, said", [(b"garbage", "traces.jsonl:2: not a JSON record"),
                                          (b"", "traces.jsonl:2: not a JSON record"),
                                          (b'{"trace": {}}', "traces.jsonl:2: missing field 'task'")])
def test_the_shape_check_finds_a_damaged_middle_line_without_parsing_the_others(tmp_path, middle, said):
    from experiments.data.records import Trace

    path = tmp_path / "traces.jsonl"
    good = json.dumps(Trace(task="t", id="1", config_hash="h", compressor="c", reader="r").as_dict()).encode() + b"\n"
    path.write_bytes(good + good + b'{"task": "t", "id": "2", "tr')  # a torn tail is the repair's, not an error
    RunLog(path, Trace).check_shape()
    path.write_bytes(good + middle + b"\n" + good)
    with pytest.raises(RunFileError, match=said):
        RunLog(path, Trace).check_shape()

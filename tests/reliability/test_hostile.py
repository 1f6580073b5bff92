"""The edges a hostile trial found: a full or read-only disk, files read while torn, bad values, two runs in one
folder, config strings as file names, keys in the wrong place, exit codes, and the small ones.

Each test here failed on the code before the fix it names (issue 16).
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from testkit.fake_openai import FakeOpenAIServer

EXTRACTIVE = {"name": "extractive"}


def _config(tmp_path: Path, rel, name: str = "c.yaml", **kw) -> Path:
    cfg = rel.synthetic_config(kw.pop("reader", EXTRACTIVE), n_qa=kw.pop("n_qa", 6), n_kv=kw.pop("n_kv", 4), **kw)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def _keys(path: Path) -> list[tuple]:
    return [(r["task"], r["id"], r["config_hash"]) for r in map(json.loads, path.read_bytes().splitlines())]


# -- 1. a full or read-only disk ------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path, rel):
    """A 2 MB tmpfs (root only; skipped where mounting is not allowed)."""
    mnt = tmp_path / "disk"
    if not rel.mount_tmpfs(mnt):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        rel.unmount(mnt)


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_the_resume_on_more_room_loses_and_repeats_nothing(tmp_path, rel, cli, small_disk):
    config = _config(tmp_path, rel, n_qa=40, n_kv=20)
    run_dir = small_disk / "run"
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (2 * 1024 * 1024 - 160 * 1024))  # ~160 KB left: the disk fills mid-run

    full = cli("run", config, "--out", run_dir)
    line = rel.assert_user_error(full, str(small_disk), "the disk is full")
    assert "again" in line

    filler.unlink()  # the disk grows
    again = cli("run", config, "--out", run_dir)
    assert again.returncode == 0, again.stderr
    keys = _keys(run_dir / "predictions.jsonl")
    assert len(keys) == len(set(keys)) == 60
    traces = (run_dir / "traces.jsonl").read_bytes().splitlines()
    assert len(traces) == len(set(traces)) == 60, "a trace line is duplicated or missing"
    from experiments.view.examples import show_example

    for _, example_id, _ in keys:  # `ctxcomp show` works on every example
        assert "prediction" in show_example(run_dir, example_id).lower()
    assert cli("show", run_dir, "--id", keys[0][1]).returncode == 0


@pytest.mark.slow
def test_a_read_only_folder_is_one_line_for_run_resume_report_and_judge(tmp_path, rel, cli, small_disk):
    config = _config(tmp_path, rel)
    run_dir = small_disk / "run"
    assert cli("run", config, "--out", run_dir).returncode == 0
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    for args in (("run", config, "--out", run_dir), ("run", "--resume", run_dir), ("report", run_dir),
                 ("judge", run_dir, "--judge", "extractive", "--protocol", "score")):
        rel.assert_user_error(cli(*args), "read-only")


# -- 2. reading never writes ------------------------------------------------------------------

@pytest.fixture
def finished_run(tmp_path, rel, cli) -> Path:
    run_dir = tmp_path / "run"
    done = cli("run", _config(tmp_path, rel), "--out", run_dir)
    assert done.returncode == 0, done.stderr
    return run_dir


def test_report_show_and_compare_never_modify_a_log_and_skip_a_torn_tail(finished_run, cli):
    preds = finished_run / "predictions.jsonl"
    example_id = json.loads(preds.read_bytes().splitlines()[0])["id"]
    with open(preds, "ab") as fh:
        fh.write(b'{"task": "nq_multidoc", "id": "torn-by-a-kil')  # a write cut off by a kill
    before = preds.read_bytes()
    for args in (("report", finished_run, "--no-plots"), ("show", finished_run, "--id", example_id),
                 ("compare", finished_run, finished_run)):
        result = cli(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert "torn last line" in result.stderr, (args, result.stderr)
        assert preds.read_bytes() == before, f"`ctxcomp {args[0]}` changed predictions.jsonl"


@pytest.mark.parametrize("bad, needle", [
    (b"garbage, not json\n", "not a JSON record"),
    (b"\n", "not a JSON record"),
    (b'{"task": "nq_multidoc", "id": "x"}\n', "missing field"),
], ids=["garbage", "blank-line", "missing-keys"])
def test_a_corrupt_line_in_the_middle_is_one_line_naming_file_line_and_field(finished_run, rel, cli, bad, needle):
    preds = finished_run / "predictions.jsonl"
    lines = preds.read_bytes().splitlines(keepends=True)
    preds.write_bytes(b"".join(lines[:2]) + bad + b"".join(lines[2:]))
    example_id = json.loads(lines[0])["id"]
    for args in (("report", finished_run), ("show", finished_run, "--id", example_id),
                 ("compare", finished_run, finished_run), ("run", "--resume", finished_run)):
        rel.assert_user_error(cli(*args), f"{preds}:3", needle)


# -- 3. values are checked before anything is written -----------------------------------------------

@pytest.mark.parametrize("compressor, reader, needles", [
    ({"name": "retrieval", "params": {"top_n": 0}}, EXTRACTIVE, ("top_n", "retrieval")),
    ({"name": "retrieval", "params": {"chunk_size": "big"}}, EXTRACTIVE, ("chunk_size", "retrieval")),
    ({"name": "retrieval", "params": {"retriever": {"name": "bm25", "params": {"k1": "abc"}}}}, EXTRACTIVE,
     ("k1", "bm25")),
    ("full", {"name": "openai", "params": {"model": "m", "base_url": "http://127.0.0.1:/v1"}}, ("base_url", "port")),
], ids=["top_n-0", "chunk_size-big", "k1-abc", "base_url-empty-port"])
def test_a_bad_value_is_one_line_before_any_file(tmp_path, rel, cli, compressor, reader, needles):
    cfg = rel.synthetic_config(reader, n_qa=2)
    cfg["compressors"] = [compressor]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    rel.assert_user_error(cli("run", path, "--out", tmp_path / "run"), *needles)
    assert not (tmp_path / "run").exists(), "a folder was made before the checks passed"


def test_a_folder_left_without_predictions_takes_the_corrected_config(tmp_path, rel, cli):
    run_dir = tmp_path / "run"
    first = _config(tmp_path, rel, "first.yaml", n_qa=3, n_kv=0)
    assert cli("run", first, "--out", run_dir).returncode == 0
    (run_dir / "predictions.jsonl").unlink()  # as if the run had died before its first prediction
    corrected = _config(tmp_path, rel, "corrected.yaml", n_qa=4, n_kv=0)
    result = cli("run", corrected, "--out", run_dir)
    assert result.returncode == 0, result.stderr
    assert "held another config but no predictions" in result.stderr
    assert len(_keys(run_dir / "predictions.jsonl")) == 4


# -- 4. one lock before any file -------------------------------------------------------------------

_START = multiprocessing.get_context("fork").Event()  # inherited by the forked racers


def _race(args) -> str:
    config, run_dir = args
    from core.errors import UserError
    from experiments.run.api import evaluate

    _START.wait(60)
    try:
        evaluate(config, run_dir, report=False, progress=False)
        return "ran"
    except UserError as err:
        return f"refused: {err}"


@pytest.mark.slow
def test_two_runs_of_different_configs_into_one_new_folder_leave_one_config_and_its_predictions(tmp_path, rel,
                                                                                              monkeypatch):
    monkeypatch.setenv("CTXCOMP_NO_PROGRESS", "1")
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))
    from experiments.run.api import resolve_config
    from experiments.run.grid import expand_grid

    configs = [rel.synthetic_config(EXTRACTIVE, n_qa=n, n_kv=0, name=f"race{n}") for n in (5, 6)]
    hashes = [{p.config_hash for p in expand_grid(resolve_config(c)[0])} for c in configs]
    ctx = multiprocessing.get_context("fork")
    outcomes = []
    for attempt in range(20):
        run_dir = tmp_path / f"race-{attempt}"
        _START.clear()
        with ctx.Pool(2) as pool:
            pending = pool.map_async(_race, [(c, run_dir) for c in configs], chunksize=1)
            time.sleep(0.05)
            _START.set()
            results = pending.get(timeout=120)
        ran = [i for i, r in enumerate(results) if r == "ran"]
        assert len(ran) == 1, results
        assert all(r.startswith("refused") for i, r in enumerate(results) if i not in ran), results
        held = yaml.safe_load((run_dir / "config.yaml").read_text())
        assert held["name"] == configs[ran[0]]["name"]
        assert {k[2] for k in _keys(run_dir / "predictions.jsonl")} == hashes[ran[0]]
        outcomes.append(ran[0])
    assert len(outcomes) == 20


# -- 5. nothing outside the run directory -------------------------------------------------------------

def test_labels_and_task_names_become_safe_file_names(tmp_path, rel, monkeypatch):
    monkeypatch.setenv("CTXCOMP_NO_PROGRESS", "1")
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))
    from experiments.run.api import evaluate
    from experiments.run.config import parse_config

    work = tmp_path / "work"
    run_dir = work / "deep" / "run"
    cfg = rel.synthetic_config(EXTRACTIVE, n_qa=4, n_kv=4)
    hostile = ["../../../escaped", "a/b/../../../../escaped2", "nul\x00byte", "x" * 300, "..", "<b>|bold|</b>"]
    cfg["tasks"][0]["label"] = hostile[0]
    cfg["tasks"][1]["label"] = hostile[1]
    cfg["compressors"] = [{"name": "full", "label": hostile[5]}, {"name": "truncate", "label": hostile[3],
                                                                  "params": {"max_tokens": 50}}]
    before = set(tmp_path.rglob("*"))
    evaluate(cfg, run_dir, progress=False)
    made = set(tmp_path.rglob("*")) - before
    outside = [p for p in made if run_dir not in p.parents and p != run_dir
               and tmp_path / "cache" not in p.parents and p != tmp_path / "cache" and p not in run_dir.parents]
    assert not outside, outside
    assert all(len(p.name) <= 80 for p in run_dir.rglob("*"))
    assert {p.parent for p in run_dir.rglob("position_*")} <= {run_dir / "plots"}
    md = (run_dir / "report.md").read_text()
    assert "&lt;b&gt;\\|bold\\|&lt;/b&gt;" in md and "<b>" not in md  # report tables escape | and HTML
    for name in hostile[2:5]:
        default = parse_config({**cfg, "name": name}, "<test>").default_dir
        assert default.parent == Path("runs") and default.name not in ("", ".", "..") and "\x00" not in str(default)


def test_a_key_file_inside_the_run_dir_and_a_key_in_a_url_are_refused(tmp_path, rel, cli):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "key.txt").write_text("sk-inside-the-run-0123456789")
    reader = {"name": "openai", "params": {"model": "m", "base_url": "http://127.0.0.1:9/v1",
                                           "api_key_file": str(run_dir / "key.txt")}}
    inside = _config(tmp_path, rel, "inside.yaml", reader=reader)
    rel.assert_user_error(cli("run", inside, "--out", run_dir), "api_key_file", "inside the run directory")
    secret = "sk-userinfo-0123456789abcdef"
    in_url = _config(tmp_path, rel, "url.yaml", reader={"name": "openai", "params": {
        "model": "m", "base_url": f"http://user:{secret}@127.0.0.1:9/v1"}})
    result = cli("run", in_url, "--out", tmp_path / "other")
    rel.assert_user_error(result, "base_url")
    assert secret not in result.stderr + result.stdout
    assert not (tmp_path / "other").exists()


# -- 6. a paid call is made once ---------------------------------------------------------------------

def test_each_paid_generation_is_cached_as_it_returns_not_when_its_batch_ends(tmp_path, rel):
    import threading

    from readers.base import GenerationRequest
    from readers.cache import CachedReader
    from readers.registry import make_reader

    release = threading.Event()

    def slow_last(prompt: str, body: dict) -> str:
        if prompt.endswith("#5"):
            release.wait(30)  # the last request of the batch hangs (a slow or dying server)
        return f"answer to {prompt}"

    with FakeOpenAIServer(responder=slow_last) as server:
        spec = rel.openai_reader(server.base_url, concurrency=2)
        reader = CachedReader(make_reader(spec["name"], **{**spec["params"], "timeout_s": 30.0}), tmp_path / "gen")
        requests = [GenerationRequest(prompt=f"question #{i}", max_new_tokens=8) for i in range(6)]
        worker = threading.Thread(target=reader.generate, args=(requests,))
        worker.start()
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and len(reader.store) < 5:
                time.sleep(0.01)
            assert len(reader.store) == 5, "the answers already returned were not in the cache while the batch ran"
        finally:
            release.set()
            worker.join(30)
        assert len(reader.store) == 6
        reader.close()


# -- 8. exit codes ------------------------------------------------------------------------------

def test_exit_codes_every_example_failed_some_failed_and_strict(tmp_path, rel, cli):
    with FakeOpenAIServer(fault_rate=1.0, faults=("500",)) as broken:
        config = _config(tmp_path, rel, "broken.yaml", reader=rel.openai_reader(broken.base_url, max_retries=0))
        result = cli("run", config, "--out", tmp_path / "broken")
    assert result.returncode == 1, result.stderr
    assert "every example failed" in result.stderr and "Traceback" not in result.stderr

    with FakeOpenAIServer(fault_rate=0.5, faults=("500",), seed=1) as flaky:
        config = _config(tmp_path, rel, "flaky.yaml", n_qa=12, reader=rel.openai_reader(flaky.base_url, max_retries=0))
        lenient = cli("run", config, "--out", tmp_path / "lenient")
        strict = cli("run", config, "--out", tmp_path / "strict", "--strict")
    assert lenient.returncode == 0 and "failed and are excluded" in lenient.stderr, lenient.stderr
    assert "failures.jsonl" in lenient.stderr
    assert strict.returncode == 1 and "--strict" in strict.stderr, strict.stderr


@pytest.mark.slow
def test_exit_codes_of_a_judge_where_every_judgement_failed_and_strict(finished_run, tmp_path, rel, cli):
    with FakeOpenAIServer(fault_rate=1.0, faults=("500",)) as broken:
        judge = tmp_path / "broken-judge.yaml"
        judge.write_text(yaml.safe_dump(rel.openai_reader(broken.base_url, max_retries=0)))
        result = cli("judge", finished_run, "--judge", judge, "--protocol", "score")
    assert result.returncode == 1, result.stderr
    assert "every judgement failed" in result.stderr and "Traceback" not in result.stderr

    rubric = lambda prompt, body: 'Fine. {"fluency": 1, "correctness": 3}'  # noqa: E731
    with FakeOpenAIServer(responder=rubric, fault_rate=0.5, faults=("500",), seed=3) as flaky:
        judge = tmp_path / "flaky-judge.yaml"
        judge.write_text(yaml.safe_dump(rel.openai_reader(flaky.base_url, max_retries=0)))
        lenient = cli("judge", finished_run, "--judge", judge, "--protocol", "score")
        strict = cli("judge", finished_run, "--judge", judge, "--protocol", "score", "--strict")
    assert lenient.returncode == 0 and " failed" in lenient.stderr, lenient.stderr
    assert strict.returncode == 1 and "--strict" in strict.stderr, strict.stderr


def _sigterm_when(proc: subprocess.Popen, ready) -> tuple[subprocess.Popen, str]:
    """SIGTERM ``proc`` once ``ready()`` holds (within two minutes); its stderr."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not ready():
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    return proc, err


@pytest.mark.slow
def test_sigterm_stops_a_run_like_ctrl_c(tmp_path, rel, cli):
    with FakeOpenAIServer(service_time_s=0.3) as slow:
        config = _config(tmp_path, rel, n_qa=40, n_kv=0, batch_size=2, reader=rel.openai_reader(slow.base_url))
        run_dir = tmp_path / "run"
        preds = run_dir / "predictions.jsonl"
        proc, err = _sigterm_when(cli.popen("run", config, "--out", run_dir),
                                  lambda: preds.exists() and preds.stat().st_size > 0)
    assert proc.returncode == 130, err
    assert "ctxcomp run --resume" in err and "Traceback" not in err
    assert not (run_dir / ".lock").exists()
    assert 0 < len(_keys(preds)) < 40


@pytest.mark.slow
def test_sigterm_stops_a_judge_like_ctrl_c(finished_run, tmp_path, rel, cli):
    with FakeOpenAIServer(service_time_s=0.3, responder=lambda prompt, body: "[[A]]") as slow:
        judge = tmp_path / "judge.yaml"
        judge.write_text(yaml.safe_dump(rel.openai_reader(slow.base_url, concurrency=1)))
        proc, err = _sigterm_when(cli.popen("judge", finished_run, "--judge", judge), lambda: slow.stats["requests"] >= 2)
    assert proc.returncode == 130, err
    assert "run the same command again" in err and "Traceback" not in err
    assert not (finished_run / ".lock").exists()


# -- 9. the small ones ----------------------------------------------------------------------------

def test_small_input_mistakes_are_one_line(tmp_path, rel, cli):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    for path, needle in ((empty, "holds no records"), (folder, "is a directory")):
        cfg = tmp_path / f"{path.stem}.yaml"
        cfg.write_text(yaml.safe_dump({"tasks": [{"name": "nq_multidoc", "path": str(path)}], "readers": ["extractive"]}))
        rel.assert_user_error(cli("run", cfg, "--out", tmp_path / f"run-{path.stem}"), str(path), needle)
    rel.assert_user_error(cli("build", "kv", "--n", "0", "--out", tmp_path / "kv.jsonl"), "--n")
    config = _config(tmp_path, rel)
    rel.assert_user_error(cli("run", config, "--set", "=3"), "--set", "key")
    rel.assert_user_error(cli("run", config, "--set", "tasks.0.limit=[1"), "--set", "not valid YAML")
    judge_file = tmp_path / "judge.yaml"
    judge_file.write_text("name: [openai\n")
    rel.assert_user_error(cli("judge", tmp_path, "--judge", judge_file), "judge.yaml")
    rel.assert_user_error(cli("run", "--bogus-option"), "--bogus-option")
    good = rel.BAD_INPUTS / "good.jsonl"
    rel.assert_user_error(cli("retrieve", good, good, "--out", tmp_path / "missing" / "hits.jsonl"), "does not exist")


def test_a_single_base_url_is_not_part_of_the_key_and_an_older_run_is_rekeyed(tmp_path, rel, cli):
    from experiments.run.api import resolve_config
    from experiments.run.grid import expand_grid, short_hash

    with FakeOpenAIServer() as a, FakeOpenAIServer() as b:
        on_a, on_b = (_config(tmp_path, rel, f"{s.port}.yaml", n_qa=4, n_kv=0, reader=rel.openai_reader(s.base_url))
                      for s in (a, b))
        hash_a, hash_b = ([p.config_hash for p in expand_grid(resolve_config(c)[0])] for c in (on_a, on_b))
        assert hash_a == hash_b
        run_dir = tmp_path / "run"
        assert cli("run", on_a, "--out", run_dir).returncode == 0
        # keyed with the server's address, as a run can hold it
        old = short_hash({"compressor": {"name": "full", "params": {}},
                          "reader": {"name": "openai", "params": yaml.safe_load(on_a.read_text())["readers"][0]["params"]}})
        for name in ("predictions.jsonl", "traces.jsonl", "grid.json"):
            path = run_dir / name
            path.write_text(path.read_text().replace(hash_a[0], old))
        served_before = b.stats["requests"]
        moved = cli("run", on_b, "--out", run_dir)  # the server moved to another port
        assert moved.returncode == 0, moved.stderr
        assert "nothing is asked again" in moved.stderr
        assert b.stats["requests"] == served_before
    assert {k[2] for k in _keys(run_dir / "predictions.jsonl")} == {hash_a[0]}
    assert len(_keys(run_dir / "predictions.jsonl")) == 4
    assert os.path.exists(run_dir / "report.md")

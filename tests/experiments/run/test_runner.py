"""The runner end to end with a real (model-free) baseline reader: grid, records, resume, dry run."""
import json

import pytest

from experiments.run.config import parse_config
from experiments.run.runner import Runner, RunDirError
from readers.registry import make_reader

CONFIG = {
    "name": "t",
    "tasks": [
        {"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 6, "num_docs": 5, "words_per_doc": 40}},
        {"name": "kv_retrieval", "synthetic": {"kind": "kv", "n": 4, "num_keys": 8}},
    ],
    "compressors": ["full", {"name": "retrieval", "params": {"retriever": "bm25", "top_n": [1, 2]}}],
    "readers": ["extractive"],
    "batch_size": 3,
}


class CountingFactory:
    """Builds real readers and counts the generate calls that reach them."""

    def __init__(self):
        self.prompts = []

    def __call__(self, name, **params):
        reader = make_reader(name, **params)
        inner = reader.generate

        def generate(requests):
            self.prompts += [r.prompt for r in requests]
            return inner(requests)

        reader.generate = generate
        return reader


def lines(run_dir):
    return [json.loads(l) for l in (run_dir / "predictions.jsonl").read_text().splitlines()]


def test_run_writes_one_line_per_example_and_config_and_resume_repeats_nothing(tmp_path):
    cfg = parse_config(CONFIG)
    factory = CountingFactory()
    stats = Runner.create(cfg, tmp_path / "run", progress=False, reader_factory=factory).run()
    recs = lines(tmp_path / "run")
    assert stats.predicted == len(recs) == (6 + 4) * 3
    assert len({(r["task"], r["id"], r["config_hash"]) for r in recs}) == len(recs)
    assert len(factory.prompts) == len(set(factory.prompts))  # identical prompts would be served by the cache
    for r in recs:
        assert 0.0 <= r["score"] <= 1.0 and r["prompt_hash"] and r["source"]
        assert (tmp_path / "run" / "prompts" / r["prompt_hash"][:2] / f"{r['prompt_hash']}.txt").is_file()
    retrieval = [r for r in recs if r["compressor"].startswith("retrieval") and r["task"] == "nq_multidoc"]
    assert all(len(r["kept_chunks"]) in (1, 2) and r["tokens_out"] < r["tokens_in"] for r in retrieval)

    again = CountingFactory()
    stats = Runner.resume(tmp_path / "run", progress=False, reader_factory=again).run()
    assert (stats.predicted, stats.already_done, again.prompts) == (0, len(recs), [])
    assert lines(tmp_path / "run") == recs


def test_a_partial_run_resumes_to_the_same_predictions(tmp_path):
    cfg = parse_config(CONFIG)
    Runner.create(cfg, tmp_path / "full", progress=False).run()
    complete = {(r["task"], r["id"], r["config_hash"]): r["prediction"] for r in lines(tmp_path / "full")}

    Runner.create(cfg, tmp_path / "part", progress=False).run()
    kept = (tmp_path / "part" / "predictions.jsonl").read_bytes().splitlines(keepends=True)[:7]
    (tmp_path / "part" / "predictions.jsonl").write_bytes(b"".join(kept) + b'{"task": "nq_mul')  # killed mid-write
    stats = Runner.resume(tmp_path / "part", progress=False).run()
    assert stats.already_done == 7
    resumed = {(r["task"], r["id"], r["config_hash"]): r["prediction"] for r in lines(tmp_path / "part")}
    assert resumed == complete and len(lines(tmp_path / "part")) == len(complete)


def test_dry_run_counts_reader_calls_after_cache_hits(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))
    cfg = parse_config(CONFIG)
    plan = Runner(cfg, tmp_path / "dry").plan()
    assert len(plan) == 3 * 2 and all(p.exact for p in plan)
    assert sum(p.pending for p in plan) == sum(p.reader_calls for p in plan) == 30
    assert all(p.prompt_tokens > 0 for p in plan)
    assert not (tmp_path / "dry").exists()

    # a run of the KV task alone fills the cache; a dry run of the whole grid then expects only the QA calls
    kv_only = parse_config({**CONFIG, "tasks": CONFIG["tasks"][1:]})
    Runner.create(kv_only, tmp_path / "kv", progress=False).run()
    plan = Runner(cfg, tmp_path / "dry").plan()
    by_task = {t: sum(p.reader_calls for p in plan if p.task == t) for t in ("nq_multidoc", "kv_retrieval")}
    assert by_task == {"nq_multidoc": 18, "kv_retrieval": 0}
    assert sum(p.cache_hits for p in plan) == 12


def test_create_refuses_to_overwrite_a_run(tmp_path):
    cfg = parse_config(CONFIG)
    Runner.create(cfg, tmp_path / "run", progress=False).run()
    with pytest.raises(RunDirError, match="--resume"):
        Runner.create(cfg, tmp_path / "run")


def test_a_second_writer_on_the_same_run_dir_is_refused(tmp_path):
    import fcntl

    cfg = parse_config(CONFIG)
    runner = Runner.create(cfg, tmp_path / "run", progress=False)
    with open(tmp_path / "run" / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another process holds the run
        with pytest.raises(RunDirError, match="another ctxcomp process"):
            runner.run()
    assert runner.run().predicted == 30

"""The runner end to end with a real (model-free) baseline reader: grid, records, resume, dry run."""
import json

import pytest

from compressors.base import CompressedContext, CompressionError, Compressor
from core.errors import UserError
from experiments.run.config import parse_config
from experiments.run.driver import RunDirError, Runner
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
    stats = Runner(cfg, tmp_path / "run", progress=False, reader_factory=factory).run()
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
    Runner(cfg, tmp_path / "full", progress=False).run()
    complete = {(r["task"], r["id"], r["config_hash"]): r["prediction"] for r in lines(tmp_path / "full")}

    Runner(cfg, tmp_path / "part", progress=False).run()
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
    Runner(kv_only, tmp_path / "kv", progress=False).run()
    plan = Runner(cfg, tmp_path / "dry").plan()
    by_task = {t: sum(p.reader_calls for p in plan if p.task == t) for t in ("nq_multidoc", "kv_retrieval")}
    assert by_task == {"nq_multidoc": 18, "kv_retrieval": 0}
    assert sum(p.cache_hits for p in plan) == 12


def test_a_folder_holding_another_configs_predictions_is_refused_and_the_same_config_continues(tmp_path):
    cfg = parse_config(CONFIG)
    Runner(cfg, tmp_path / "run", progress=False).run()
    other = parse_config({**CONFIG, "batch_size": 3, "compressors": ["full"]})
    with pytest.raises(RunDirError, match="holds a run of another config"):
        Runner(other, tmp_path / "run", progress=False).run()
    said = []
    again = Runner(cfg, tmp_path / "run", progress=False, notify=said.append).run()
    assert again.predicted == 0 and again.already_done == 30 and "continuing it" in said[0]


def test_a_missing_data_file_is_refused_before_anything_is_written(tmp_path):
    bad = parse_config({**CONFIG, "tasks": [{"name": "nq_multidoc", "path": str(tmp_path / "missing.jsonl")}]})
    with pytest.raises(UserError, match="missing.jsonl: file not found"):
        Runner(bad, tmp_path / "run", progress=False).run()
    assert not (tmp_path / "run").exists()


def test_a_folder_whose_run_failed_before_its_first_prediction_takes_the_corrected_config(tmp_path):
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question": "q?", "answers": ["a"], "ctxs": []}\nnot json\n', encoding="utf-8")
    bad = parse_config({**CONFIG, "tasks": [{"name": "nq_multidoc", "path": str(broken)}]})
    with pytest.raises(UserError, match="broken.jsonl"):
        Runner(bad, tmp_path / "run", progress=False).run()
    assert (tmp_path / "run" / "config.yaml").is_file() and not (tmp_path / "run" / "predictions.jsonl").exists()
    said = []
    assert Runner(parse_config(CONFIG), tmp_path / "run", progress=False, notify=said.append).run().predicted == 30
    assert "no predictions" in said[0]


def test_a_second_writer_on_the_same_run_dir_is_refused(tmp_path):
    import fcntl

    cfg = parse_config(CONFIG)
    runner = Runner(cfg, tmp_path / "run", progress=False)
    (tmp_path / "run").mkdir()
    with open(tmp_path / "run" / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another process holds the run
        with pytest.raises(RunDirError, match="another ctxcomp process"):
            runner.run()
    assert runner.run().predicted == 30


# -- failures are data, bugs are not ---------------------------------------------------------

HERE = "tests.experiments.run.test_runner"


class BuggyCompressor(Compressor):
    """Works for four examples, then hits a programming error (as a plugin with a bug would)."""

    calls = 0

    def compress(self, item):
        type(self).calls += 1
        if type(self).calls > 4:
            return item.contxt  # AttributeError: a typo, not a fault of the example
        return CompressedContext(text=item.context, tokens_in=1, tokens_out=1)


class PickyCompressor(Compressor):
    """Cannot compress examples whose id ends in 1: a known, recorded per-example failure."""

    @property
    def identity(self) -> str:
        return "picky(v=1)"

    def compress(self, item):
        if item.id.endswith("1"):
            raise CompressionError(f"example {item.id!r}: nothing to keep")
        return CompressedContext(text=item.context, passages=tuple(item.passages), tokens_in=1, tokens_out=1)


def _one_task(compressor, n=6, batch=2):
    return parse_config({"name": "t", "tasks": [CONFIG["tasks"][0] | {"synthetic": {"kind": "multidoc_qa", "n": n,
                                                                                    "num_docs": 3, "words_per_doc": 30}}],
                         "compressors": [compressor], "readers": ["extractive"], "batch_size": batch})


def test_a_programming_error_stops_the_run_after_writing_what_is_done(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))  # its compressions kept by no earlier run
    BuggyCompressor.calls = 0
    runner = Runner(_one_task(f"{HERE}:BuggyCompressor"), tmp_path / "run", progress=False)
    with pytest.raises(AttributeError, match="contxt"):
        runner.run()
    assert len(lines(tmp_path / "run")) == 4  # the two finished batches were written before the bug surfaced
    assert not (tmp_path / "run" / "failures.jsonl").exists()  # a bug is not recorded as an example failure
    assert not (tmp_path / "run" / ".lock").exists()


def test_a_compression_error_is_a_recorded_failure_and_the_plugin_identity_names_the_row(tmp_path):
    stats = Runner(_one_task(f"{HERE}:PickyCompressor", n=12), tmp_path / "run", progress=False).run()
    failures = [json.loads(l) for l in (tmp_path / "run" / "failures.jsonl").read_text().splitlines()]
    assert stats.failed == len(failures) == 2 and stats.predicted == 10
    assert all(f["stage"] == "compress" and "CompressionError: example" in f["reason"] for f in failures)
    assert {r["compressor"] for r in lines(tmp_path / "run")} == {"picky(v=1)"}


def test_every_prediction_has_its_trace_and_show_prints_it(tmp_path):
    from experiments.view.examples import show_example

    Runner(parse_config(CONFIG), tmp_path / "run", progress=False).run()
    recs = lines(tmp_path / "run")
    traces = {(t["task"], t["id"], t["config_hash"]): t for t in
              (json.loads(l) for l in (tmp_path / "run" / "traces.jsonl").read_text().splitlines())}
    assert {(r["task"], r["id"], r["config_hash"]) for r in recs} == set(traces)
    retrieval = next(r for r in recs if r["compressor_kind"] == "retrieval" and r["task"] == "nq_multidoc")
    ranking = traces[(retrieval["task"], retrieval["id"], retrieval["config_hash"])]["trace"]["ranking"]
    assert len(ranking) == 5 and [u for u, _ in ranking[: len(retrieval["kept_chunks"])]] == retrieval["kept_chunks"]
    assert [s for _, s in ranking] == sorted((s for _, s in ranking), reverse=True)  # the full ranking, scored
    text = show_example(tmp_path / "run", retrieval["id"], config_hash=retrieval["config_hash"][:6])
    for part in ("--- question ---", retrieval["query"], "--- trace ---", "ranking (5 units", "--- prompt",
                 "Document [1](Title:", "--- prediction ---", retrieval["prediction"], "litm_qa_em ="):
        assert part in text


def test_components_are_checked_before_any_reader_is_built(tmp_path):
    from core.errors import ParamError, UnknownComponentError

    built = []

    def factory(name, **params):
        built.append(name)
        return make_reader(name, **params)

    typo = {**CONFIG, "compressors": ["full", {"name": "retrieval", "params": {"retriever": "bm52"}}]}
    with pytest.raises(UnknownComponentError, match="Did you mean 'bm25'"):
        Runner(parse_config(typo), tmp_path / "a", reader_factory=factory)
    missing = {**CONFIG, "compressors": [{"name": "truncate"}]}
    with pytest.raises(ParamError, match="compressor 'truncate': give max_tokens, or put it on a budget axis"):
        Runner(parse_config(missing), tmp_path / "b", reader_factory=factory)
    bad_metric = {**CONFIG, "readers": [{"name": "hf", "params": {"modell": "x"}}]}
    with pytest.raises(ParamError, match="reader 'hf': unknown parameter 'modell'"):
        Runner(parse_config(bad_metric), tmp_path / "c", reader_factory=factory)
    assert built == [] and not (tmp_path / "a").exists()


def test_progress_moves_per_example_not_per_batch(tmp_path, monkeypatch):
    from experiments.run.worker import Worker, WorkUnit

    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))  # no cache hits: each example is read
    cfg = _one_task("full", n=8, batch=8)
    worker = Worker(cfg)
    ids = tuple(worker.examples(cfg.tasks[0]))
    ticks = []
    worker.process(WorkUnit(0, 0, ids), progress=ticks.append)
    assert ticks == [1] * 8  # one tick per example as the reader finishes it, not one tick of 8


def test_evaluate_runs_a_grid_from_python_and_resumes(tmp_path):
    from experiments import evaluate

    result = evaluate(CONFIG, tmp_path / "lib", progress=False)
    assert result.stats.predicted == 30 and len(result.cells) == 6
    assert (tmp_path / "lib" / "report.md").is_file()
    again = evaluate(CONFIG, tmp_path / "lib", progress=False)
    assert again.stats.predicted == 0 and [c.score for c in again.cells] == [c.score for c in result.cells]
    with pytest.raises(RunDirError, match="another config"):  # (batch_size is no part of a run's identity)
        evaluate({**CONFIG, "compressors": ["full"]}, tmp_path / "lib", progress=False)


def test_planned_contrasts_can_be_added_to_a_finished_run_without_rerunning_it(tmp_path):
    from experiments import evaluate

    evaluate(CONFIG, tmp_path / "run", progress=False)
    two, one = "retrieval(bm25, top2, order=score)", "retrieval(bm25, top1, order=score)"
    planned = {**CONFIG, "contrasts": [{"arm": two, "against": one}, {"arm": "nope", "against": one}]}
    again = evaluate(planned, tmp_path / "run", progress=False)
    assert again.stats.predicted == 0 and again.stats.model_calls == 0
    assert "contrasts" in (tmp_path / "run" / "config.yaml").read_text()
    report = (tmp_path / "run" / "report.md").read_text()
    assert f"| extractive | {two} - {one} |" in report and "not computed: contrast 'nope'" in report


def test_a_compressor_can_apply_to_some_tasks_only(tmp_path):
    from experiments.run.config import ConfigError

    cfg = {**CONFIG, "compressors": ["full", {"name": "retrieval", "params": {"top_n": 1}, "tasks": ["kv_retrieval"]}]}
    stats = Runner(parse_config(cfg), tmp_path / "run", progress=False).run()
    recs = lines(tmp_path / "run")
    assert stats.predicted == (6 + 4) + 4
    assert {r["task"] for r in recs if r["compressor_kind"] == "retrieval"} == {"kv_retrieval"}
    with pytest.raises(ConfigError, match=r"tasks \['kv'\] are not tasks of this config"):
        parse_config({**cfg, "compressors": [{"name": "full", "tasks": ["kv"]}]})


def test_a_bad_fleet_url_is_refused_before_anything_is_written(tmp_path):
    from core.errors import ParamError

    cfg = {**CONFIG, "readers": [{"name": "openai", "params": {"model": "m", "base_urls": ["http://a:1/v1", "gpu2:8000"]}}]}
    with pytest.raises(ParamError, match="gpu2:8000"):
        Runner(parse_config(cfg), tmp_path / "run")
    assert not (tmp_path / "run").exists()

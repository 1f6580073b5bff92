"""A task's `metric:`, and `ctxcomp rescore`: new scores beside the old ones, the same numbers for the same metric."""
import hashlib
import json

import pytest
from typer.testing import CliRunner

from experiments.cli.app import app
from experiments.run.config import ConfigError, parse_config
from experiments.run.driver import Runner

TASKS = [
    {"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 6, "num_docs": 4, "words_per_doc": 30}},
    {"name": "kv_retrieval", "synthetic": {"kind": "kv", "n": 4, "num_keys": 6}},
]
CONFIG = {"name": "rs", "tasks": TASKS, "readers": ["extractive"],
          "compressors": ["full", {"name": "retrieval", "params": {"retriever": "bm25", "top_n": 1}}]}


def run(tmp_path, config=CONFIG, name="run"):
    from experiments.report.write import write_report

    Runner(parse_config(config), tmp_path / name, progress=False).run()
    write_report(tmp_path / name, plots=False)
    return tmp_path / name


def digests(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "rescored" not in p.parts}


def rescore(*args):
    result = CliRunner().invoke(app, ["rescore", *map(str, args), "--no-plots", "--plain"])
    assert result.exit_code == 0, result.output
    return result.output


def test_rescoring_with_the_runs_own_metric_gives_its_numbers_byte_for_byte(tmp_path, monkeypatch):
    import readers.registry

    run_dir = run(tmp_path)
    before = digests(run_dir)
    monkeypatch.setattr(readers.registry, "make_reader", lambda *a, **k: pytest.fail("a model was asked"))
    said = rescore(run_dir)
    out = run_dir / "rescored" / "run-metrics"
    for name in ("scores.csv", "scores.json", "predictions.jsonl"):
        assert (out / name).read_bytes() == (run_dir / name).read_bytes(), name
    assert "0 item score(s) differ" in said and (out / "report.md").is_file()
    assert digests(run_dir) == before  # the run's own files are never written


def test_another_metric_for_one_task_goes_beside_the_old_scores(tmp_path):
    run_dir = run(tmp_path)
    before = digests(run_dir)
    rescore(run_dir, "--metric", "qa_f1", "--task", "nq_multidoc")
    out = run_dir / "rescored" / "qa_f1-nq_multidoc"
    cells = json.loads((out / "scores.json").read_text())["cells"]
    assert {c["task"] for c in cells} == {"nq_multidoc"} and {c["metric"] for c in cells} == {"qa_f1"}
    old = {c["config_hash"]: c["score"] for c in json.loads((run_dir / "scores.json").read_text())["cells"]
           if c["task"] == "nq_multidoc"}
    assert {c["config_hash"]: c["score"] for c in cells} != old
    assert json.loads((out / "rescore.json").read_text())["tasks"]["nq_multidoc"]["from"] == "litm_qa_em"
    assert digests(run_dir) == before
    bad = CliRunner().invoke(app, ["rescore", str(run_dir), "--metric", "qa_f2"])
    assert bad.exit_code == 2 and "unknown metric 'qa_f2'" in bad.output and "qa_f1" in bad.output


def test_a_classification_metric_gets_its_class_lists_from_the_tasks_data(tmp_path):
    classes = ["Abbreviation", "Entity", "Description"]
    rows = [{"input": f"What kind of thing is asked in question {i}?", "answers": [classes[i % 3]], "length": 10,
             "context": f"The kind of thing asked in question {i} is an {classes[i % 2]}.", "dataset": "trec",
             "language": "en", "all_classes": classes, "_id": f"t{i}"} for i in range(4)]
    data = tmp_path / "trec.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_dir = run(tmp_path, {"name": "trec", "tasks": [{"name": "trec", "path": str(data)}], "readers": ["extractive"]})
    assert {json.loads(line)["score"] for line in (run_dir / "predictions.jsonl").read_text().splitlines()} == {0.0, 1.0}
    rescore(run_dir)
    assert (run_dir / "rescored/run-metrics/scores.csv").read_bytes() == (run_dir / "scores.csv").read_bytes()


def test_a_task_takes_a_metric_checked_when_the_config_is_read(tmp_path):
    tasks = [{**TASKS[0], "metric": "qa_f1"}]
    run_dir = run(tmp_path, {**CONFIG, "tasks": tasks})
    assert {json.loads(line)["metric"] for line in (run_dir / "predictions.jsonl").read_text().splitlines()} == {"qa_f1"}
    with pytest.raises(ConfigError, match=r"tasks\.0\.metric: .*unknown metric 'qa_f2'.*qa_f1"):
        parse_config({**CONFIG, "tasks": [{**TASKS[0], "metric": "qa_f2"}]})

"""The command line as a user meets it: version, listings, plain tables, one-line user errors, bugs that stay bugs."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from typer.testing import CliRunner

from experiments.cli.app import app
from tests.support.in_process_cli import run_main

REPO = Path(__file__).resolve().parents[3]
CONFIG = {
    "name": "t",
    "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 4, "num_docs": 3, "words_per_doc": 30}}],
    "compressors": ["full", {"name": "retrieval", "params": {"retriever": "bm25", "top_n": 1}}],
    "readers": ["extractive"],
}
QUIET = {"CTXCOMP_NO_PROGRESS": "1", "HF_HUB_OFFLINE": "1"}


def _cli(*args, env=None, **kw):
    """A real process: for plugins found by entry points on its own PYTHONPATH, or that keep state in a class."""
    full_env = {**os.environ, "CTXCOMP_NO_PROGRESS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO),
                **(env or {})}
    return subprocess.run([sys.executable, "-m", "experiments.cli", *map(str, args)], cwd=REPO, env=full_env,
                          capture_output=True, text=True, **kw)


def test_version():
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.startswith("ctxcomp ") and res.output.strip() != "ctxcomp"


def test_list_shows_every_kind_with_parameters_and_defaults():
    res = CliRunner().invoke(app, ["list"])
    assert res.exit_code == 0, res.output
    for kind in ("tasks", "metrics", "compressors", "retrievers", "readers", "chunkers"):
        assert f"{kind}\n" in res.output
    assert "| truncate | Keep at most ``max_tokens`` of the context" in res.output
    assert "| guaranteed | max_tokens=None, policy='middle' |" in res.output  # the budget column, then parameters
    assert "| narrativeqa | longbench, single-doc qa | metric=qa_f1, max_new_tokens=128 |" in res.output
    assert "| leval_em | " in res.output and "L-Eval Evaluation/em.py" in res.output
    one = CliRunner().invoke(app, ["list", "retrievers"])
    assert "| bm25 |" in one.output and "tasks\n" not in one.output
    bad = CliRunner().invoke(app, ["list", "retreivers"])
    assert bad.exit_code == 2 and "unknown kind" in bad.output


def test_list_includes_plugins_registered_by_entry_points(tmp_path):
    dist = tmp_path / "ctxcomp_tfidf_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ctxcomp-tfidf-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ctxcomp.retrievers]\ntfidf = plugin_example:TfidfRetriever\n")
    plugin_dir = REPO / "tests" / "retrievers"
    res = _cli("list", "retrievers", env={"PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path), str(plugin_dir)])})
    assert res.returncode == 0, res.stderr
    assert "| tfidf | Ranks chunks by cosine similarity of TF-IDF vectors" in res.stdout
    assert "max_ngram=1, sublinear_tf=True" in res.stdout


def test_dry_run_prints_a_plain_markdown_table_when_not_a_terminal(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    res = CliRunner().invoke(app, ["run", str(path), "--dry-run", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    assert "| task | compressor | reader | config |" in res.output
    assert "| nq_multidoc | retrieval(bm25, top1, order=score) | extractive |" in res.output  # never cut to "multi…"
    assert "…" not in res.output


def test_user_errors_are_one_line_and_bugs_keep_their_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**CONFIG, "compressors": [{"name": "retrieval", "params": {"top_k": 3}}]}))
    res = run_main(["run", bad, "--out", tmp_path / "r1"], env=QUIET)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip() == ("error: compressor 'retrieval': unknown parameter 'top_k'; accepted: retriever, "
                                  "chunker, chunk_size, top_n, token_budget, order, separator, unit, longbench_compat")
    buggy = tmp_path / "buggy.yaml"
    six = {**CONFIG["tasks"][0], "synthetic": {**CONFIG["tasks"][0]["synthetic"], "n": 6}}
    buggy.write_text(yaml.safe_dump({**CONFIG, "tasks": [six], "batch_size": 2,
                                     "compressors": ["tests.experiments.run.test_runner:BuggyCompressor"]}))
    res = _cli("run", buggy, "--out", tmp_path / "r2")  # a fresh process: the plugin counts its calls per class
    assert res.returncode == 1 and "Traceback" in res.stderr and "AttributeError" in res.stderr
    assert len((tmp_path / "r2" / "predictions.jsonl").read_text().splitlines()) == 4  # what was done is kept


def _sigint_as_in_a_terminal() -> None:
    """A child inherits its parent thread's signal mask and ignored signals across exec; in a full pytest-xdist
    run something in the worker had SIGINT blocked, so the child never saw Ctrl-C and ran to the end (rc 0).
    Give the child the SIGINT a user's shell would."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_keeps_the_run_releases_the_lock_and_says_how_to_resume(tmp_path):
    from testkit.fake_openai import FakeOpenAIServer

    with FakeOpenAIServer(service_time_s=0.3, max_concurrency=1) as server:
        # 20 questions at 0.3 s each: ~6 s of run left after the first line, so a loaded machine still
        # delivers the interrupt mid-run
        tasks = [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 20, "num_docs": 3, "words_per_doc": 30}}]
        cfg = {**CONFIG, "tasks": tasks, "compressors": ["full"], "batch_size": 1,
               "readers": [{"name": "openai", "params": {"model": "m", "base_url": server.base_url, "concurrency": 1}}]}
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump(cfg))
        env = {**os.environ, "CTXCOMP_NO_PROGRESS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO),
               "CTXCOMP_CACHE_DIR": str(tmp_path / "cache")}
        proc = subprocess.Popen([sys.executable, "-m", "experiments.cli", "run", str(path), "--out", str(tmp_path / "r")],
                                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_sigint_as_in_a_terminal)
        preds = tmp_path / "r" / "predictions.jsonl"
        deadline = time.monotonic() + 60
        while (not preds.exists() or not preds.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert f"ctxcomp run --resume {tmp_path / 'r'}" in err and "Traceback" not in err
    assert not (tmp_path / "r" / ".lock").exists()
    kept = [json.loads(line) for line in preds.read_text().splitlines()]  # whole lines only
    assert 1 <= len(kept) < 20


def test_show_prints_one_example(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    assert CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "r"), "--no-report"]).exit_code == 0
    first = json.loads((tmp_path / "r" / "predictions.jsonl").read_text().splitlines()[0])
    res = CliRunner().invoke(app, ["show", str(tmp_path / "r"), "--id", first["id"]])
    assert res.exit_code == 0 and res.output.count(f"example {first['id']}") == 2  # full and retrieval
    missing = CliRunner().invoke(app, ["show", str(tmp_path / "r"), "--id", "nope"])
    assert missing.exit_code == 2 and "no prediction or failure for example id 'nope'" in missing.output
    # an id without its task's prefix (natural_question-17-1 for leval_natural_question-17-1), and a typo
    short = CliRunner().invoke(app, ["show", str(tmp_path / "r"), "--id", first["id"][3:]])
    assert short.exit_code == 2 and f"did you mean {first['id']!r}?" in short.output
    typo = CliRunner().invoke(app, ["show", str(tmp_path / "r"), "--id", first["id"][:-1] + "x" + first["id"][-1]])
    assert typo.exit_code == 2 and repr(first["id"]) in typo.output.split("did you mean", 1)[1]


def test_a_metric_plugin_registered_by_entry_point_scores_a_file(tmp_path):
    (tmp_path / "mymetrics.py").write_text(
        "from experiments.scoring import metric\n\n\n"
        "@metric('exact_lower', reference='test plugin')\n"
        "def exact_lower(prediction, ground_truth, *, all_classes=()):\n"
        "    return float(prediction.strip().lower() == ground_truth.strip().lower())\n")
    dist = tmp_path / "mymetrics-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mymetrics\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ctxcomp.metrics]\nexact_lower = mymetrics:exact_lower\n")
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"pred": " PARIS", "answers": ["paris"]}\n{"pred": "rome", "answers": ["Paris"]}\n')
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)])}
    res = _cli("score", preds, "--dataset", "my_eval", "--metric", "exact_lower", env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "50.0"
    listed = _cli("list", "metrics", env=env)
    assert "| exact_lower |" in listed.stdout and "test plugin" in listed.stdout


def test_running_a_config_again_continues_it_and_another_config_is_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    first = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "r"), "--no-report"])
    assert first.exit_code == 0 and "done: 8 predicted" in first.output
    again = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "r"), "--no-report"])
    assert again.exit_code == 0 and "done: 0 predicted, 8 already done" in again.output
    assert "holds a run of this config; continuing it" in again.output
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({**CONFIG, "compressors": ["full"]}))  # (batch_size is no part of its identity)
    refused = CliRunner().invoke(app, ["run", str(other), "--out", str(tmp_path / "r")])
    assert refused.exit_code == 2 and "another config" in refused.output
    assert "continuing it" not in refused.output  # never announced before the config was compared


def test_failures_a_resume_would_repeat_get_no_resume_advice(tmp_path):
    # a budget below every chunk: the compressor refuses each example, and would again on every resume
    cfg = {**CONFIG, "compressors": [{"name": "retrieval", "params": {"retriever": "bm25", "chunk_size": 30}}],
           "budget": [3]}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = run_main(["run", path, "--out", tmp_path / "r"], env={**QUIET, "CTXCOMP_CACHE_DIR": str(tmp_path / "cache")})
    failures = (tmp_path / "r" / "failures.jsonl").read_text()
    assert "smaller than the best chunk" in failures, res.stderr
    assert "4 example(s) failed" in res.stderr and "which a resume repeats: change the config" in res.stderr
    assert "--resume" not in res.stderr


def test_resume_advice_names_only_the_failures_a_resume_may_fix():
    from experiments.run.driver import RunStats

    stats = RunStats(failed=5, failures_by_reason={"CompressionError": 2, "TransientError": 2, "RequestRejected": 1})
    assert stats.failed_for_good() == 3
    assert RunStats(failed=2, failures_by_reason={"TransientError": 2}).failed_for_good() == 0

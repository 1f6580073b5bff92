"""The dry run in seconds: no model loads, exact counts where no model decides, bounds where one does, one line
per reader whose window cuts `full`, and one line (never a traceback) when something goes wrong."""
from collections import defaultdict

import yaml
from typer.testing import CliRunner

from experiments.cli.app import app
from experiments.data.store import RunDir
from experiments.run.config import parse_config
from experiments.run.driver import Runner
from experiments.run.estimate import estimate

TASKS = [
    {"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 5, "num_docs": 5, "words_per_doc": 60}},
    {"name": "kv_retrieval", "synthetic": {"kind": "kv", "n": 3, "num_keys": 8}},
]
EXACT = ["full", {"name": "truncate", "params": {"policy": "middle"}},
         {"name": "retrieval", "params": {"retriever": "bm25", "top_n": [1, 2], "order": ["score", "document"]}}]
BOUNDED = [{"name": "summarize", "params": {"chunk_size": 60, "max_new_tokens": 40,
                                            "summarizer": "tests.support.first_words:FirstWords"}}]
CONFIG = {"name": "dry", "tasks": TASKS, "compressors": EXACT + BOUNDED, "readers": ["extractive"], "budget": [150]}


def rows_by_key(rows):
    return {(r.task, r.config_hash): r for r in rows}


def test_the_fast_estimate_counts_what_the_run_reads_and_bounds_what_a_model_decides(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))  # the run below is the first to read these
    cfg = parse_config(CONFIG)
    runner = Runner(cfg, tmp_path / "run", progress=False)
    fast = rows_by_key(estimate(runner.config, runner.grid, set()).rows)
    exact = rows_by_key(runner.plan())  # --dry-run=exact, which runs every compressor that calls no model
    runner.run()  # the extractive reader (and summarizer) calls no model: the run itself is the reference
    read, summaries = defaultdict(int), defaultdict(int)
    for p in RunDir(tmp_path / "run").predictions.read():
        read[(p.task, p.config_hash)] += p.reader_tokens_in
        summaries[(p.task, p.config_hash)] += p.compress_calls
    assert fast.keys() == exact.keys() == read.keys() and len(fast) == 2 * (1 + 1 + 4 + 1)
    for key, row in fast.items():
        assert row.reader_calls == row.pending == exact[key].reader_calls
        if row.exact:
            assert row.prompt_tokens == exact[key].prompt_tokens == read[key], row
        else:  # summaries: a bound, said so
            assert row.basis.startswith("bound") and row.compressor.startswith("summarize")
            assert row.prompt_tokens >= read[key] and row.summarizer_calls >= summaries[key] > 0
            assert exact[key].summarizer_calls == row.summarizer_calls  # both count what the compressor's sizing names
    assert sum(r.exact for r in fast.values()) == 2 * 6


def test_no_model_loads_and_a_dense_retriever_is_a_bound(tmp_path, monkeypatch):
    import readers.registry
    from retrievers.sentence_transformers import SentenceTransformerEncoder

    monkeypatch.setattr(readers.registry, "make_reader", lambda *a, **k: (_ for _ in ()).throw(AssertionError("built")))
    monkeypatch.setattr(SentenceTransformerEncoder, "load", lambda self: (_ for _ in ()).throw(AssertionError("load")))
    dense = {"name": "retrieval", "params": {"retriever": {"name": "sentence-transformers",
                                                           "params": {"model": "BAAI/bge-large-en-v1.5"}}, "top_n": 2}}
    cfg = parse_config({**CONFIG, "compressors": ["full", dense], "budget": None})
    plan = estimate(cfg, Runner(cfg, tmp_path / "r", progress=False).grid, set())
    bounded = [r for r in plan.rows if not r.exact]
    assert len(bounded) == 2 and all("longest units" in r.basis for r in bounded)
    assert all(r.compressor == "retrieval(bge-large-en-v1.5, top2, order=score)" for r in bounded)
    full = {r.task: r.prompt_tokens for r in plan.rows if r.exact}
    assert all(0 < r.prompt_tokens < full[r.task] for r in bounded)


def test_the_cli_prints_calls_tokens_basis_and_one_warning_per_reader_whose_window_cuts_full(tmp_path):
    reader = {"name": "openai", "label": "small-window",
              "params": {"model": "m", "base_url": "http://127.0.0.1:9/v1", "max_context": 200}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "readers": ["extractive", reader]}))
    res = CliRunner().invoke(app, ["run", str(path), "--dry-run", "--out", str(tmp_path / "r"), "--plain"])
    assert res.exit_code == 0, res.output
    assert "| reader calls | summarizer calls | prompt tokens | estimate |" in res.output
    assert "| 1,976 | run here |" in res.output and "bound: summaries at most max_new_tokens per chunk" in res.output
    assert "reader calls: 112; summarizer calls: at most 84" in res.output
    assert "reader small-window: tokens counted in LongBench words; window 192 tokens" in res.output
    warnings = [line for line in res.output.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: reader small-window cuts the full context of task {task} on {n} of {n} example(s) (100%): its "
        f"window saw {seen} of {whole} context tokens on average, so `full` is not the full context for this reader"
        for task, n, seen, whole in (("nq_multidoc", 5, "61", "365"), ("kv_retrieval", 3, "69", "80"))]
    assert not (tmp_path / "r").exists()
    exact = CliRunner().invoke(app, ["run", str(path), "--dry-run=exact", "--out", str(tmp_path / "r"), "--plain"])
    assert exact.exit_code == 0 and "| cache hits |" in exact.output, exact.output
    bad = CliRunner().invoke(app, ["run", str(path), "--dry-run=later"])
    assert bad.exit_code == 2 and "--dry-run takes no value or =exact" in bad.output


class Broken:
    """A plugin compressor that calls no model and fails on every example: a bug of its own."""

    calls_model = False
    budget_support = "none"
    label = "broken"

    def __init__(self, tokenizer=None):
        pass

    @classmethod
    def check_budget(cls, params, budgeted, *, what=""):
        pass

    def warm_up(self):
        pass

    def compress(self, item):
        raise TypeError("an unexpected None")


def test_a_dry_run_that_fails_says_so_in_one_line(tmp_path, monkeypatch):
    from compressors.registry import COMPRESSORS

    monkeypatch.setattr(COMPRESSORS, "get", lambda name, _get=COMPRESSORS.get: Broken if name == "broken" else _get(name))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "compressors": ["full", "broken"], "budget": None}))
    res = CliRunner().invoke(app, ["run", str(path), "--dry-run", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert res.output.strip().splitlines()[-1].startswith(
        "error: the dry run could not estimate this grid: TypeError: an unexpected None")


def test_a_row_of_more_examples_than_the_sample_is_counted_on_an_even_sample_and_says_so(tmp_path, monkeypatch):
    import experiments.run.estimate as fast_dry_run

    cfg = parse_config({**CONFIG, "compressors": ["full"], "budget": None})
    grid = Runner(cfg, tmp_path / "r", progress=False).grid
    whole = {r.task: r for r in estimate(cfg, grid, set()).rows}
    monkeypatch.setattr(fast_dry_run, "EXACT_SAMPLE", 2)
    rows = {r.task: r for r in estimate(cfg, grid, set()).rows}
    qa, kv = rows["nq_multidoc"], rows["kv_retrieval"]
    assert qa.sampled and not qa.exact and qa.basis.endswith("scaled from 2 of 5 examples")
    assert qa.tokens_text.startswith("about ") and qa.reader_calls == 5
    assert abs(qa.prompt_tokens - whole["nq_multidoc"].prompt_tokens) < 0.2 * whole["nq_multidoc"].prompt_tokens
    assert kv.sampled and kv.basis.endswith("scaled from 2 of 3 examples")

"""The shipped study and ablation configs run end to end (a small slice, the extractive reader), and a re-run rewrites
identical tables from cached generations."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from experiments.report.write import write_report
from experiments.run.config import parse_config
from experiments.run.driver import Runner
from tests.support.tiny_lm import build_tiny_lm

CONFIGS = Path(__file__).resolve().parents[3] / "experiments" / "configs"


def _slice(name: str, limit: int) -> dict:
    """The shipped config with small limits; its data names resolve in the data directory (tests/conftest.py)."""
    data = yaml.safe_load((CONFIGS / name).read_text(encoding="utf-8"))
    for task in data["tasks"]:
        assert "data" in task or "generate" in task, \
            f"{name}: task {task['name']} should name its data (`data: NAME`) or generate it, not give a path"
        task["limit"] = min(task.get("limit") or limit, limit)
        if "generate" in task:  # SmolLM2's tokenizer would load the model; word counts make the same kind of data
            task["generate"] = {**task["generate"], "tokenizer": "words"}
        if "open_domain" in task:  # encoding the whole 2,600-passage corpus with MiniLM takes minutes on CPU
            task["open_domain"]["retriever"] = "bm25"
    data["readers"] = ["extractive"]
    return data


def _run(cfg: dict, out: Path):
    runner = Runner.resume(out, progress=False) if (out / "config.yaml").exists() else \
        Runner(parse_config(cfg), out, progress=False)
    try:
        return runner.run()
    finally:
        runner.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["study_cpu.yaml", "study_curve.yaml", "retrievers_ablation.yaml", "length_grid.yaml"])
def test_study_config_runs_end_to_end_and_reruns_identically(name, shared_data, tmp_path):
    cfg = _slice(name, limit=2)
    out = tmp_path / "study"
    first = _run(cfg, out)
    assert first.predicted > 0
    md, _ = write_report(out, plots=False)
    tables = (out / "scores.csv").read_text()
    second = _run(cfg, out)
    assert (second.predicted, second.model_calls) == (0, 0)
    md2, _ = write_report(out, plots=False)
    assert (out / "scores.csv").read_text() == tables and md2 == md
    if name == "study_curve.yaml":
        assert (out / "curve.csv").is_file()
    elif name == "length_grid.yaml":  # every task at 2k, 4k, 8k and 16k tokens, each arm with its intervals
        assert "Score by context length" in md and "Compressed minus full context at each length" in md
        header = (out / "tables" / "score_by_length.csv").read_text().splitlines()[0]
        assert header.endswith("2k,4k,8k,16k")
    else:
        assert "Accuracy by gold/key position" in md


@pytest.mark.slow
def test_the_budget_sweep_runs_end_to_end_and_its_report_has_every_tradeoff_table(shared_data, tmp_path):
    """budget_sweep.yaml on a 2-example slice with the extractive reader. Two stand-ins keep it to CI's minutes:
    summaries are query-focused (the extractive reader cannot write generic ones; the budget path is the same),
    and LongLLMLingua's LM is a tiny random Llama built here (its compressions are meaningless; the sweep's
    plumbing is what runs)."""
    cfg = _slice("budget_sweep.yaml", limit=2)
    text = [line for name in ("leval/news_summ.jsonl", "leval/gov_report_summ.jsonl")
            for line in (shared_data / name).read_text(encoding="utf-8").splitlines()]
    lm = build_tiny_lm(tmp_path / "lm", text, vocab_size=8000)  # tokens about words: fewer LM steps per context
    for comp in cfg["compressors"]:
        if isinstance(comp, dict) and comp["name"] == "summarize":
            comp["params"]["query_focused"] = True
        if isinstance(comp, dict) and comp["name"] == "longllmlingua":
            comp["params"] = {"model": lm, "device": "cpu"}
    out = tmp_path / "sweep"
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models gain nothing from threads, and lose much when the cores are busy
    try:
        first = _run(cfg, out)
    finally:
        torch.set_num_threads(threads)
    assert first.predicted > 0
    md, plots = write_report(out, plots=True)
    for title in ("Requested vs achieved", "The cost account", "Break-even", "The Pareto frontier",
                  "How much can go: non-inferiority against full", "The smallest non-inferior budget",
                  "Document order minus score order at equal budgets", "Chunks kept and score along each retrieval"):
        assert f"## {title}" in md, title
    assert "p Holm (family of" in md and "verdict (margin 5, one-sided α 0.025)" in md
    assert any(p.name == "tradeoff_extractive.png" for p in plots)
    for name in ("budget", "cost", "break_even", "frontier", "noninferiority", "smallest_noninferior", "order", "chunks"):
        assert (out / "tables" / f"{name}.csv").is_file(), name
    budgets = {line.split(" @")[-1] for line in (out / "scores.csv").read_text().splitlines() if " @" in line}
    assert {"256", "512", "1024", "2048"} <= {b.split(",")[0] for b in budgets}
    tables = (out / "scores.csv").read_text()
    second = _run(cfg, out)
    assert (second.predicted, second.model_calls) == (0, 0)
    write_report(out, plots=False)
    assert (out / "scores.csv").read_text() == tables

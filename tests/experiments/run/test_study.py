"""The shipped study and ablation configs run end to end (a small slice, the extractive reader), and a re-run rewrites
identical tables from cached generations."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from experiments.report.write import write_report
from experiments.run.config import parse_config
from experiments.run.driver import Runner

CONFIGS = Path(__file__).resolve().parents[3] / "experiments" / "configs"


def _slice(name: str, limit: int) -> dict:
    """The shipped config with small limits; its data names resolve in the data directory (tests/conftest.py)."""
    data = yaml.safe_load((CONFIGS / name).read_text(encoding="utf-8"))
    for task in data["tasks"]:
        assert "data" in task or "ruler" in task, \
            f"{name}: task {task['name']} should name its data (`data: NAME`) or generate it, not give a path"
        task["limit"] = min(task.get("limit") or limit, limit)
        if "ruler" in task:  # SmolLM2's tokenizer would load the model; word counts make the same kind of data
            task["ruler"] = {**task["ruler"], "tokenizer": "words"}
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

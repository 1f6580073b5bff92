"""The matched-budget ablation (experiments/configs/compressors_matched.yaml) holds what issue 49 asks of it: every
compressor that runs offline here, at the same two budgets, on a QA, a summarization and a Lost in the Middle
task, read by SmolLM2 and the extractive reader. Its fast dry run (no model loads) counts the grid the findings report."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml

from compressors.registry import COMPRESSORS
from experiments.run.config import parse_config
from experiments.run.driver import Runner
from experiments.run.estimate import estimate

CONFIG = Path(__file__).resolve().parents[3] / "experiments" / "configs" / "compressors_matched.yaml"
# registry names the ablation leaves out, each with the reason its header comment and docs/findings.md give
LEFT_OUT = {
    "llmlingua2": "its published token classifiers are hub downloads",
    "recomp_abstractive": "its published T5 summarizers are hub downloads",
    "summarize": "the reader under evaluation writes its summaries, and the extractive reader cannot summarize",
    "top_k": "keeps the first k passages as a corpus retriever ranked them; the L-Eval tasks have no passages",
}
BUDGETS = (256, 512)
READERS = ("smollm2", "extractive")


def test_every_offline_compressor_runs_at_both_budgets_for_both_readers(shared_data, tmp_path):
    raw = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    names = {c if isinstance(c, str) else c["name"] for c in raw["compressors"]}
    assert names | set(LEFT_OUT) == set(COMPRESSORS.names()) and not names & set(LEFT_OUT)
    assert tuple(raw["budget"]) == BUDGETS
    assert {t["data"] for t in raw["tasks"]} == {"leval/financial_qa", "leval/news_summ",
                                                 "lost_in_the_middle/nq-open-oracle"}

    cfg = parse_config(raw)
    runner = Runner(cfg, tmp_path / "run", progress=False)
    try:
        rows = estimate(runner.config, runner.grid, set()).rows
    finally:
        runner.close()
    # one question of each of 6 financial_qa documents, 6 documents to summarize and 16 LitM questions at 2 gold
    # positions: 44 examples a grid point
    examples = {r.task: r.examples for r in rows}
    assert examples == {"financial_qa": 6, "news_summ": 6, "litm_10docs": 32}
    points = Counter((r.compressor.split(" @")[0].split("(")[0], r.reader) for r in rows)
    for reader in READERS:
        assert points[("full", reader)] == len(examples)  # full runs once, at its own size
        for name in names - {"full"}:
            assert points[(name, reader)] == len(BUDGETS) * len(examples), (name, reader)
    budgets = Counter(r.compressor.rsplit(" @", 1)[1] for r in rows if " @" in r.compressor)
    assert set(budgets) == {str(b) for b in BUDGETS}
    assert sum(r.reader_calls for r in rows) == len(READERS) * (1 + len(BUDGETS) * (len(names) - 1)) * 44 == 1144

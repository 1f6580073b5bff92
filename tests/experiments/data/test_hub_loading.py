"""`load_hf` reads the newer benchmarks through `datasets` (here from a local folder in the hub's layout, offline)."""
from __future__ import annotations

import json

from experiments.tasks.loading import load_hf


def test_longbench_v2_and_infinitebench_through_datasets(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    lb = tmp_path / "LongBench-v2"
    lb.mkdir()
    record = {"_id": "a1", "domain": "d", "sub_domain": "s", "difficulty": "easy", "length": "short", "question": "Q?",
              "choice_A": "w", "choice_B": "x", "choice_C": "y", "choice_D": "z", "answer": "C", "context": "Some text."}
    (lb / "train.jsonl").write_text(json.dumps(record) + "\n")
    (ex,) = load_hf(str(lb), split="train", family="longbench_v2", task="longbench_v2")
    assert (ex.id, ex.answers, ex.source) == ("a1", ("C",), f"hf:{lb}[train]:1")
    ib = tmp_path / "InfiniteBench"
    ib.mkdir()
    rows = [{"id": 0, "context": "Book.", "input": "Who?", "answer": ["Ann"], "options": ["Ann", "Bo", "Cy", "Di"]},
            {"id": 1, "context": "Book two.", "input": "Where?", "answer": ["Bo"], "options": ["Ann", "Bo", "Cy", "Di"]}]
    (ib / "longbook_choice_eng.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    examples = load_hf(str(ib), split="train", family="infinitebench", task="infinitebench_en_mc")
    assert [e.answers for e in examples] == [("Ann", "A"), ("Bo", "B")]

"""The newer benchmarks end to end: RULER-style tasks generated in the run with the score-by-length report, LongBench
v2's two-step CoT and RAG format through a scripted OpenAI-compatible reader, HELMET's rubric through the judge."""
from __future__ import annotations

import csv
import json

import pytest

from experiments.judge.judging import judge_run
from experiments.report.judged import judged_cells
from experiments.report.write import write_report
from experiments.run.config import parse_config
from experiments.run.driver import Runner
from testkit.fake_openai import FakeOpenAIServer


def _run(config: dict, out):
    runner = Runner(parse_config(config), out, progress=False)
    try:
        runner.run()
    finally:
        runner.close()
    return out


def test_ruler_tasks_in_a_run_give_the_effective_length_tables(tmp_path):
    ruler = {"lengths": [512, 1024], "n": 6, "seed": 2}
    config = {"tasks": [{"name": "ruler_niah_single", "generate": ruler}, {"name": "ruler_niah_multikey", "generate": ruler},
                        {"name": "ruler_vt", "generate": ruler}],
              "compressors": ["full", {"name": "retrieval", "params": {"chunk_size": 40, "token_budget": 96}}],
              "readers": ["extractive"]}
    out = _run(config, tmp_path / "run")
    md, plots = write_report(out)
    lines = (out / "tables" / "score_by_length.csv").read_text().splitlines()
    assert lines[0] == "task,reader,compressor,512,1k" and len(lines) == 1 + 6
    assert all("(n=6)" in line for line in lines[1:])
    deltas = (out / "tables" / "length_deltas.csv").read_text().splitlines()
    assert len(deltas) == 1 + 3 + 1 and all("- full" in line for line in deltas[1:])
    # the two needle tasks pooled, paired on (task, example): 12 pairs per length
    assert deltas[-1].startswith("needle retrieval (2 tasks),") and deltas[-1].count("(n=12)") == 2
    # and every length pooled, paired on (task, length, example): 24 pairs, each task's row 12
    rows = list(csv.reader(deltas))
    assert rows[0][-1] == "all lengths" and [row[-1].rsplit(" ", 1)[-1] for row in rows[1:]] == ["(n=12)"] * 3 + ["(n=24)"]
    # the very pairs of the scores table's cell (a task) or its category average: the same interval, not a second one
    scores = list(csv.reader((out / "tables" / "scores.csv").read_text().splitlines()))
    arm = next(row for row in scores[1:] if row[1] != "full")
    printed = {column.split(" (", 1)[0]: cell.split(" (", 1)[1].rstrip(")") for column, cell in zip(scores[0], arm)
               if " (" in cell}
    pooled = {row[0].split(" (", 1)[0]: row[-1].rsplit(" (n=", 1)[0] for row in rows[1:]}
    assert pooled == {task: printed[task] for task in ("ruler_niah_single", "ruler_niah_multikey", "ruler_vt")} | {
        "needle retrieval": printed["avg needle retrieval"]}
    assert all("[" in interval for interval in pooled.values())
    assert "Score by context length" in md and any(p.name == "score_by_length.png" for p in plots)
    # the same lengths are not drawn a second time, without intervals, as one line per (reader, arm, task)
    assert not any(p.name.startswith("length_buckets") for p in plots)
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert {p["meta"]["length_bucket"] for p in preds} == {512, 1024}


RECORD = {"_id": "q1", "domain": "Single-Document QA", "sub_domain": "Financial", "difficulty": "easy",
          "length": "short", "question": "Which year did the firm list?", "choice_A": "1999", "choice_B": "2001",
          "choice_C": "2003", "choice_D": "2005", "answer": "B",
          "context": "The firm was founded long ago. " * 30 + "The firm listed in 2001. " + "Revenue grew. " * 30}


def scripted(prompt: str, body: dict) -> str:
    """Reasoning for the first CoT request; an answer for the second; a plain answer to the 0-shot prompts."""
    if "Let\u2019s think step by step: " in prompt and "Based on the above" in prompt:
        return "The correct answer is (B)" if "listed in 2001" in prompt else "The correct answer is (A)"
    if prompt.endswith("Let\u2019s think step by step:"):
        return "The text says the firm listed in 2001."
    return "The correct answer is (B)" if "Retrieved chunk" in prompt else "I am not sure."


def test_longbench_v2_cot_two_steps_and_rag_format(tmp_path):
    data = tmp_path / "data.json"
    data.write_text(json.dumps([RECORD, {**RECORD, "_id": "q2", "difficulty": "hard", "length": "long"}]))
    with FakeOpenAIServer(responder=scripted, models=("m",)) as server:
        reader = {"name": "openai", "params": {"model": "m", "base_url": server.base_url, "timeout_s": 2}}
        config = {"tasks": [{"name": "longbench_v2_cot", "path": str(data)},
                            {"name": "longbench_v2", "path": str(data), "chunks": {"size": 12}}],
                  "compressors": ["full", {"name": "retrieval", "params": {"top_n": 2, "order": "score"},
                                           "tasks": ["longbench_v2"]}],
                  "readers": [reader]}
        out = _run(config, tmp_path / "run")
    preds = {(p["task"], p["compressor"], p["id"]): p for p in map(json.loads, (out / "predictions.jsonl").open())}
    cot = preds[("longbench_v2_cot", "full", "q1")]
    assert cot["prediction"] == "The correct answer is (B)" and cot["score"] == 1.0
    traces = [json.loads(line) for line in (out / "traces.jsonl").open()]
    assert any(t["trace"].get("first_answer") == "The text says the firm listed in 2001." for t in traces)
    rag = next(p for key, p in preds.items() if key[0] == "longbench_v2" and key[1] != "full")
    prompt = next((out / "prompts").rglob(f"{rag['prompt_hash']}.txt")).read_text()
    assert "Please read the following retrieved text chunks" in prompt and "Retrieved chunk 2: " in prompt
    assert rag["score"] == 1.0 and preds[("longbench_v2", "full", "q1")]["score"] == 0.0
    md, _ = write_report(out, plots=False)
    assert "LongBench v2 (result.py)" in md
    table = (out / "tables" / "longbench_v2.csv").read_text()
    assert "longbench_v2_cot,m,full,100.0,100.0,100.0,100.0,—,100.0,2" in table.replace('"', "")


def helmet_judge(prompt: str, body: dict) -> str:
    if "evaluate the fluency" in prompt:
        return 'Fine. {"fluency": 1}'
    if "Key points:\n1. p1\n2. p2" in prompt:  # the data's own key points, numbered
        return 'Only the first is there. {"recall": 1}'
    if 'Expert summary: "Long summary."' in prompt:  # HELMET's legal precision prompt quotes the texts
        return '{"precision": 1, "sentence_count": 2}'
    return "no idea"


def test_helmet_summaries_judged_with_its_rubric(tmp_path):
    path = tmp_path / "lexsum.jsonl"
    path.write_text(json.dumps({"id": "c1", "sources": ["The court entered a decree. The case closed."],
                                "summary/short": "A decree was entered.", "summary/long": "Long summary.",
                                "summary/short_keypoints": ["p1", "p2"]}) + "\n")
    out = _run({"tasks": [{"name": "helmet_multi_lexsum", "path": str(path)}], "readers": ["extractive"]},
               tmp_path / "run")
    with FakeOpenAIServer(responder=helmet_judge, models=("judge",)) as server:
        judge = {"name": "openai", "params": {"model": "judge", "base_url": server.base_url, "timeout_s": 2,
                                              "max_context": 32768}}  # HELMET's requests and 4,096 new tokens
        stats = judge_run(out, judge, protocol="score", progress=False)
    (cell,) = judged_cells(out)
    assert stats.judged == 1 and cell.value == pytest.approx(50.0)  # fluency 1 x F1(recall 1/2, precision 1/2)

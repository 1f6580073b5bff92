"""``ctxcomp chunk`` and ``ctxcomp retrieve`` through typer, on tiny files."""
from __future__ import annotations

import gzip
import json

import typer
from typer.testing import CliRunner

from experiments.cli.retrieve import chunk, retrieve

app = typer.Typer()
app.command("chunk")(chunk)
app.command("retrieve")(retrieve)
runner = CliRunner()


def test_chunk_prints_offsets(tmp_path):
    f = tmp_path / "doc.txt"
    f.write_text("A b c. D e!?F g", encoding="utf-8")
    res = runner.invoke(app, ["chunk", str(f), "--size", "3"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(r["text"], r["start"], r["end"]) for r in rows] == [("A b c. ", 0, 7), ("D e!?", 7, 12), ("F g", 12, 15)]
    res = runner.invoke(app, ["chunk", str(f), "--size", "3", "--compat"])
    assert json.loads(res.stdout.splitlines()[1])["text"] == "D e! ?"


def test_chunk_errors_exit_2(tmp_path):
    res = runner.invoke(app, ["chunk", str(tmp_path / "missing.txt")])
    assert res.exit_code == 2
    (tmp_path / "e.txt").write_text("  ")
    res = runner.invoke(app, ["chunk", str(tmp_path / "e.txt")])
    assert res.exit_code == 2 and "empty" in res.output


def write_jsonl(path, rows, opener=open):
    with opener(path, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def test_retrieve_corpus_and_queries(tmp_path):
    write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "the cat sat on the mat"},
                                       {"id": "b", "text": "paris is the capital of france", "title": "Paris"},
                                       {"id": "c", "text": "dogs bark at night"}])  # 3 docs: Okapi idf > 0
    write_jsonl(tmp_path / "q.jsonl", [{"id": "q1", "query": "capital of france", "answers": ["Paris"]},
                                       {"id": "q2", "query": "where did the cat sit", "answers": ["sofa"]}])
    res = runner.invoke(app, ["retrieve", str(tmp_path / "c.jsonl"), str(tmp_path / "q.jsonl"), "-k", "1",
                              "--out", str(tmp_path / "run.jsonl"), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["recall@1"] == 0.5 and summary["mrr"] == 0.5 and summary["n"] == 2
    run = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert run[0]["hits"][0]["id"] == "b" and run[0]["hits"][0]["has_answer"] is True


def test_retrieve_litm_file_dedups_passages(tmp_path):
    ctx = [{"title": "Paris", "text": "paris is the capital of france"}, {"title": "Cat", "text": "the cat sat"},
           {"title": "Dog", "text": "dogs bark"}]
    write_jsonl(tmp_path / "l.jsonl.gz", [{"question": "capital of france?", "answers": ["Paris"], "ctxs": ctx},
                                          {"question": "what sat?", "answers": ["cat"], "ctxs": ctx[::-1]}], gzip.open)
    res = runner.invoke(app, ["retrieve", "--litm", str(tmp_path / "l.jsonl.gz"), "-k", "5"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 2 and len(rows[0]["hits"]) == 3  # three unique passages
    assert rows[0]["hits"][0]["title"] == "Paris" and rows[1]["hits"][0]["title"] == "Cat"


def test_retrieve_bad_input_names_file_and_line(tmp_path):
    write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "x"}, {"id": "b"}])
    write_jsonl(tmp_path / "q.jsonl", [{"id": "q", "query": "x"}])
    res = runner.invoke(app, ["retrieve", str(tmp_path / "c.jsonl"), str(tmp_path / "q.jsonl")])
    assert res.exit_code == 2 and "c.jsonl:2" in res.output and "'text'" in res.output
    res = runner.invoke(app, ["retrieve", str(tmp_path / "c.jsonl")])
    assert res.exit_code == 2


def test_retrieve_json_reports_recall_only_up_to_the_k_asked(tmp_path):
    # "capital" ranks the Lyon document first; the answer "Paris" is only in the second hit: -k 1 gives recall@1 = 0
    # and no recall@5 (that would look past the k asked for); -k 2 finds it and still reports no recall@5 or @20
    write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "lyon capital capital of gastronomy"},
                                       {"id": "b", "text": "paris is a capital"},
                                       {"id": "c", "text": "dogs bark at night"},
                                       {"id": "d", "text": "the cat sat on the mat"},
                                       {"id": "e", "text": "rain falls in spring"},
                                       {"id": "f", "text": "a river runs to the sea"}])  # "capital" in 2 of 6: idf > 0
    write_jsonl(tmp_path / "q.jsonl", [{"id": "q1", "query": "capital", "answers": ["Paris"]}])
    summaries = {}
    for k in (1, 2, 5):
        res = runner.invoke(app, ["retrieve", str(tmp_path / "c.jsonl"), str(tmp_path / "q.jsonl"), "-k", str(k),
                                  "--out", str(tmp_path / f"run{k}.jsonl"), "--json"])
        assert res.exit_code == 0, res.output
        summaries[k] = json.loads(res.stdout.strip().splitlines()[-1])
    assert summaries[1]["recall@1"] == summaries[1]["recall@k"] == 0.0
    assert summaries[2]["recall@k"] == 1.0 and summaries[5]["recall@5"] == 1.0
    assert [sorted(key for key in s if key.startswith("recall@")) for s in summaries.values()] == [
        ["recall@1", "recall@k"], ["recall@1", "recall@k"], ["recall@1", "recall@5", "recall@k"]]
    run = [json.loads(line) for line in (tmp_path / "run1.jsonl").read_text().splitlines()]
    assert [h["id"] for h in run[0]["hits"]] == ["a"]


def test_k_is_spelt_three_ways(tmp_path):
    write_jsonl(tmp_path / "c.jsonl", [{"id": str(i), "text": f"doc number {i}"} for i in range(5)])
    write_jsonl(tmp_path / "q.jsonl", [{"id": "q", "query": "doc number 3"}])
    outs = []
    for flag in ("-k", "--k", "--top-k"):
        res = runner.invoke(app, ["retrieve", str(tmp_path / "c.jsonl"), str(tmp_path / "q.jsonl"), flag, "2"])
        assert res.exit_code == 0, res.output
        outs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    assert outs[0] == outs[1] == outs[2] and len(outs[0]["hits"]) == 2


def test_limit_limits_queries_never_the_corpus(tmp_path):
    """Found as a user: --limit N also cut the corpus to the first N records' passages, inflating recall."""
    ctx = [{"title": f"T{i}", "text": f"passage {i} about topic {i}"} for i in range(6)]
    records = [{"question": f"topic {i}?", "answers": [f"topic {i}"], "ctxs": [ctx[i]]} for i in range(6)]
    # the first question's best BM25 match is passage 5, which only the last record holds
    records[0] = {"question": "topic 5 passage 5", "answers": ["nothing"], "ctxs": [ctx[0]]}
    write_jsonl(tmp_path / "l.jsonl", records)
    res = runner.invoke(app, ["retrieve", "--litm", str(tmp_path / "l.jsonl"), "--limit", "1", "-k", "1"])
    assert res.exit_code == 0, res.output
    (row,) = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert row["hits"][0]["title"] == "T5"  # found in a record past the limit: the corpus is whole
    assert "indexing 6 passages" in res.output


def test_retriever_params_reach_the_retriever_and_typos_are_one_line(tmp_path):
    write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "x y"}])
    write_jsonl(tmp_path / "q.jsonl", [{"id": "q", "query": "x"}])
    res = runner.invoke(app, ["retrieve", str(tmp_path / "c.jsonl"), str(tmp_path / "q.jsonl"),
                              "--retriever-param", "k1=0.9", "--retriever-param", "b=0.4"])
    assert res.exit_code == 0, res.output
    bad = runner.invoke(app, ["retrieve", str(tmp_path / "c.jsonl"), str(tmp_path / "q.jsonl"),
                              "--retriever-param", "k3=1"])
    assert bad.exit_code == 2 and "retriever 'bm25': unknown parameter 'k3'" in bad.output

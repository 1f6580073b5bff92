import json

from experiments.scoring import length_bucket
from experiments.report import compare_runs, compute_cells, score_table, write_report
from experiments.data.store import JsonlLog


def rec(task, id_, comp, h, score, *, length=100, meta=None, reader="r", tin=100, tout=25):
    return {
        "task": task, "id": id_, "config_hash": h, "compressor": comp, "reader": reader, "metric": "qa_f1",
        "score": score, "length": length, "tokens_in": tin, "tokens_out": tout, "reader_tokens_in": tout + 10,
        "reader_tokens_out": 3, "latency_s": 0.5, "compress_s": 0.01, "cost_usd": 0.001, "cached": False,
        "meta": meta or {},
    }


def test_cell_score_is_100_x_mean_rounded_and_delta_is_against_full_of_same_reader():
    preds = [
        rec("hotpotqa", "a", "full", "F", 1.0, tout=100), rec("hotpotqa", "b", "full", "F", 0.0, tout=100),
        rec("hotpotqa", "c", "full", "F", 0.5, tout=100),
        rec("hotpotqa", "a", "retrieval(bm25, 200x7)", "R", 1.0), rec("hotpotqa", "b", "retrieval(bm25, 200x7)", "R", 1 / 3),
        rec("hotpotqa", "c", "retrieval(bm25, 200x7)", "R", 0.0),
    ]
    cells = {c.compressor: c for c in compute_cells(preds)}
    assert cells["full"].score == 50.0
    assert cells["retrieval(bm25, 200x7)"].score == 44.44  # 100 * (4/3) / 3 = 44.444...
    assert cells["retrieval(bm25, 200x7)"].delta_vs_full == -5.56
    assert cells["full"].delta_vs_full is None
    assert cells["retrieval(bm25, 200x7)"].ratio == 4.0  # 300 tokens in / 75 out


def test_failures_are_counted_not_scored_and_disappear_once_predicted():
    preds = [rec("hotpotqa", "a", "full", "F", 1.0)]
    fails = [{"task": "hotpotqa", "id": "b", "config_hash": "F", "compressor": "full", "reader": "r", "reason": "HTTP 503"}]
    (cell,) = compute_cells(preds, fails)
    assert (cell.score, cell.n, cell.n_failed) == (100.0, 1, 1)
    (cell,) = compute_cells(preds + [rec("hotpotqa", "b", "full", "F", 0.0)], fails)
    assert (cell.score, cell.n, cell.n_failed) == (50.0, 2, 0)


def test_longbench_e_buckets_and_positions():
    assert [length_bucket(n) for n in (0, 3999, 4000, 7999, 8000)] == ["0-4k", "0-4k", "4-8k", "4-8k", "8k+"]
    preds = [rec("hotpotqa", str(i), "full", "F", s, length=n) for i, (s, n) in enumerate([(1, 100), (0, 5000), (1, 9000), (0, 9500)])]
    (cell,) = compute_cells(preds)
    assert cell.buckets == {"0-4k": 100.0, "4-8k": 0.0, "8k+": 50.0}
    from experiments.protocols import litm
    from experiments.data.synthetic import make_multidoc_qa

    (ex,) = make_multidoc_qa(1, num_docs=10, words_per_doc=30)
    variants = [litm.with_gold_at(ex, 0, 10), litm.with_gold_at(ex, 9, 10), litm.closed_book(ex), litm.oracle(ex)]
    sweep = [rec("nq_multidoc", v.id, "full", "F", score, meta=v.meta) for v, score in zip(variants, (1.0, 0.0, 1.0, 0.0))]
    (cell,) = compute_cells(sweep)
    # the oracle's single document sits at position 0, but it is a setting, not a point of the sweep
    assert cell.by_position == {"0": 100.0, "9": 0.0, "closed_book": 100.0, "oracle": 0.0}


def test_table_layout_rows_reader_x_compressor_columns_tasks_with_averages():
    preds = [rec("hotpotqa", "a", "full", "F", 1.0), rec("gov_report", "a", "full", "F", 0.5),
             rec("hotpotqa", "a", "retrieval", "R", 0.0), rec("gov_report", "a", "retrieval", "R", 0.5)]
    header, body = score_table(compute_cells(preds))
    assert header[:4] == ["reader", "compressor", "gov_report", "hotpotqa"] or header[:4] == ["reader", "compressor", "hotpotqa", "gov_report"]
    assert header[-1] == "avg"
    assert body[0][:2] == ["r", "full"] and body[0][-1] == "75.00"
    assert body[1][:2] == ["r", "retrieval"] and body[1][-1] == "25.00 (-50.00)"


def test_write_report_and_compare(tmp_path):
    for name, score in (("a", 1.0), ("b", 0.0)):
        run = tmp_path / name
        run.mkdir()
        JsonlLog(run / "predictions.jsonl").append(rec("hotpotqa", "x", "full", "F", score))
    md, plots = write_report(tmp_path / "a", plots=False)
    assert "| r | full | 100.00 |" in md
    assert json.loads((tmp_path / "a" / "scores.json").read_text())["cells"][0]["score"] == 100.0
    header, body = compare_runs(tmp_path / "a", tmp_path / "b")
    assert body == [["hotpotqa", "r", "full", "100.00", "0.00", "-100.00", "1", "1"]]


def test_a_relabelled_full_context_is_still_the_baseline_and_nan_is_null_in_json(tmp_path):
    preds = [dict(rec("hotpotqa", "a", "whole document", "F", 1.0), compressor_kind="full"),
             dict(rec("hotpotqa", "a", "bm25 top-3", "R", 0.0), compressor_kind="retrieval")]
    fails = [{"task": "gov_report", "id": "z", "config_hash": "R", "compressor": "bm25 top-3", "reader": "r", "reason": "x"}]
    cells = {(c.task, c.compressor): c for c in compute_cells(preds, fails)}
    assert cells[("hotpotqa", "bm25 top-3")].delta_vs_full == -100.0
    header, body = score_table(list(cells.values()))
    assert body[0][1] == "whole document"
    run = tmp_path / "run"
    run.mkdir()
    for r in preds:
        JsonlLog(run / "predictions.jsonl").append(r)
    for f in fails:
        JsonlLog(run / "failures.jsonl").append(f)
    write_report(run, plots=False)
    data = json.loads((run / "scores.json").read_text())  # strict JSON: no NaN
    assert {c["task"]: c["score"] for c in data["cells"]}["gov_report"] is None

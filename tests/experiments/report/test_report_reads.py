"""The report reads right (issue 37): an average says which tasks it leaves out and agrees with the tasks it covers,
resume advice only for failures a resume can fix, n with its documents, one n in the summary when the cells agree,
and no average column that repeats another."""
from __future__ import annotations

from experiments.data.records import Failure, Prediction
from experiments.data.store import RunDir
from experiments.report.cells import compute_cells, item_scores, load_run
from experiments.report.summary import report_tables, resume_advice, summary_lines
from experiments.report.tables import efficiency_table, score_table


def rec(task, id_, comp, h, score, *, cluster="", kind=""):
    return Prediction(task=task, id=id_, config_hash=h, compressor=comp, compressor_kind=kind or comp, reader="r",
                      prediction="", metric="qa_f1", score=score, cluster=cluster)


def failure(task, id_, comp, h, reason):
    return Failure(task=task, id=id_, config_hash=h, compressor=comp, compressor_kind=comp, reader="r",
                   stage="compress", reason=reason)


REFUSED = "CompressionError: example 'q1': budget=50 is smaller than the best chunk (80 tokens); give a larger budget"
TRANSIENT = "TransientError: 503 Service Unavailable after 5 retries"


def _summary(tmp_path, preds, fails=()):
    run = tmp_path / "run"
    run.mkdir(parents=True)
    files = RunDir(run)
    for p in preds:
        files.predictions.append(p)
    for f in fails:
        files.failures.append(f)
    data = load_run(run)
    return dict(summary_lines(data, report_tables(data)))


def test_an_average_over_the_one_task_an_arm_scored_names_the_other_and_agrees_with_that_task():
    """The trial: budget 50 fails on all of t2 and all but one example of t1.  The average gave the arm's one-task
    score minus full's two-task average (-25.00, beside n=1 of a paired delta) while t1 gave -50.00, also beside
    n=1: now both give the paired difference of the one example both scored, and the average names t2."""
    preds = [rec("t1", f"q{i}", "full", "F", 1.0 if i < 6 else 0.0) for i in range(12)]
    preds += [rec("t2", f"q{i}", "full", "F", 0.0) for i in range(12)]
    preds += [rec("t1", "q0", "retrieval", "R", 0.0)]
    fails = [failure("t1", f"q{i}", "retrieval", "R", REFUSED) for i in range(1, 12)]
    fails += [failure("t2", f"q{i}", "retrieval", "R", REFUSED) for i in range(12)]
    header, body = score_table(compute_cells(preds, fails), item_scores(preds))
    row = dict(zip(header, next(r for r in body if r[1] == "retrieval")))
    assert row["t1 (qa_f1)"] == "0.00 (-100.00, n=1)"  # q0: 0.0 against full's 1.0
    assert row["t2 (qa_f1)"] == "—"
    assert row["avg"] == "0.00 (-100.00, n=1) (over 1 task; no score on t2)"
    full = dict(zip(header, body[0]))
    assert full["avg"] == "25.00" and full["n (per task)"] == "12"
    assert row["n (per task)"] == "1 / 0"


def test_an_unpaired_average_is_never_taken_against_an_average_of_other_tasks():
    """Without item scores only an unpaired difference is possible; it is given only where both rows average the
    same tasks."""
    preds = [rec(t, "a", "full", "F", 1.0) for t in ("t1", "t2")] + [rec("t1", "a", "summ", "S", 0.5)]
    header, body = score_table(compute_cells(preds))
    row = dict(zip(header, next(r for r in body if r[1] == "summ")))
    assert row["avg"] == "50.00 (over 1 task; no score on t2)"


def test_the_resume_advice_is_given_only_for_failures_a_resume_can_fix(tmp_path):
    preds = [rec("t1", f"q{i}", "full", "F", 1.0) for i in range(4)] + [rec("t1", "q0", "retrieval", "R", 1.0)]
    refused = _summary(tmp_path / "a", preds, [failure("t1", f"q{i}", "retrieval", "R", REFUSED) for i in (1, 2, 3)])
    assert "--resume" not in refused["Failed"]
    assert refused["Failed"] == ("3 example(s) failed and are excluded from the scores (`failures.jsonl`): 3 of them "
                                 "were refused by their compressor or rejected by the server, which a resume repeats: "
                                 "change the config (e.g. a larger budget).")
    mixed = _summary(tmp_path / "b", preds, [failure("t1", "q1", "retrieval", "R", REFUSED),
                                             failure("t1", "q2", "retrieval", "R", TRANSIENT),
                                             failure("t1", "q2", "retrieval", "R", TRANSIENT)])  # q2 failed twice
    assert mixed["Failed"].startswith("2 example(s) failed")
    assert mixed["Failed"].endswith("1 of them were refused by their compressor or rejected by the server, which a "
                                    "resume repeats: change the config (e.g. a larger budget); retry the other 1 with "
                                    "`ctxcomp run --resume`.")
    transient = _summary(tmp_path / "c", preds, [failure("t1", "q1", "retrieval", "R", TRANSIENT)])
    assert transient["Failed"].endswith(": retry with `ctxcomp run --resume`.")


def test_the_console_and_the_report_give_the_same_advice():
    assert resume_advice(2, 0, "X") == "retry with X"
    assert resume_advice(2, 2, "X").endswith("change the config (e.g. a larger budget)") and "X" not in \
        resume_advice(2, 2, "X")


def test_n_is_given_with_its_documents_in_the_scores_and_efficiency_tables():
    preds = [rec("t1", f"q{i}", comp, h, 1.0, cluster=f"d{i % 4}") for i in range(12) for comp, h in
             (("full", "F"), ("retrieval", "R"))]
    preds += [rec("t2", f"q{i}", comp, h, 1.0) for i in range(6) for comp, h in (("full", "F"), ("retrieval", "R"))]
    cells = compute_cells(preds)
    header, body = score_table(cells, item_scores(preds))
    assert header[-1] == "n (per task)" and [row[-1] for row in body] == ["12 (4 docs) / 6"] * 2
    header, body = score_table([c for c in cells if c.task == "t1"])
    assert header[-1] == "n" and [row[-1] for row in body] == ["12 (4 docs)"] * 2
    header, body = efficiency_table(cells)
    assert [row[header.index("n")] for row in body] == ["12 (4 docs)"] * 2 + ["6"] * 2


def test_the_summary_gives_one_n_when_every_cell_has_the_same(tmp_path):
    preds = [rec("t1", f"q{i}", comp, h, 1.0) for i in range(12) for comp, h in (("full", "F"), ("retrieval", "R"))]
    assert "n = 12 examples per cell;" in _summary(tmp_path / "a", preds)["Run"]
    assert "n = 6-12 examples per cell;" in _summary(tmp_path / "b", preds + [
        rec("t2", f"q{i}", "full", "F", 1.0) for i in range(6)])["Run"]


def test_a_category_average_that_covers_every_task_is_not_shown_twice():
    both = [rec(t, "a", comp, h, 1.0) for t in ("hotpotqa", "2wikimqa") for comp, h in (("full", "F"), ("x", "X"))]
    header, _ = score_table(compute_cells(both))
    assert [h for h in header if h.startswith("avg")] == ["avg"]
    three = both + [rec("narrativeqa", "a", comp, h, 1.0) for comp, h in (("full", "F"), ("x", "X"))]
    header, _ = score_table(compute_cells(three))
    assert [h for h in header if h.startswith("avg")] == ["avg multi-doc qa", "avg"]

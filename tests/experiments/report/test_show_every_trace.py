"""``ctxcomp show`` and the view's data on every shipped compressor's trace, and the reader's own truncation shown
wherever results are read (show, view, tables, report.md, the report command's warnings)."""
from __future__ import annotations

import csv
import io
import json

from typer.testing import CliRunner

from experiments.cli.app import app
from experiments.cli.view import load_contexts
from experiments.data.records import Prediction
from experiments.report.cells import load_run
from experiments.report.tables import efficiency_table
from experiments.report.truncation import full_context_cuts, truncation_warnings
from experiments.view.page import build_view
from tests.support.view_run import lines

KINDS = {"full", "truncate", "retrieval", "summarize", "longllmlingua", "top_k"}


def _by_example(run, name: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in lines(run, name):
        out.setdefault(r["id"], []).append(r)
    return out


def test_show_prints_every_example_of_a_run_with_every_compressor(all_arms_run):
    preds, traces = _by_example(all_arms_run, "predictions.jsonl"), _by_example(all_arms_run, "traces.jsonl")
    failures = _by_example(all_arms_run, "failures.jsonl") if (all_arms_run / "failures.jsonl").exists() else {}
    assert {r["compressor_kind"] for rs in preds.values() for r in rs} == KINDS
    runner = CliRunner()
    for ex_id, recs in preds.items():
        result = runner.invoke(app, ["show", str(all_arms_run), "--id", ex_id])
        assert result.exit_code == 0, result.output
        out = result.output
        assert out.count("=== nq_multidoc |") == len(recs) + len(failures.get(ex_id, []))
        for trace in traces[ex_id]:
            ranking = trace["trace"].get("ranking")
            if trace["compressor_kind"] == "longllmlingua":  # document indices, best first, no score
                assert ranking and all(isinstance(i, int) for i in ranking)
                shown = [f"  {rank:>3}.   document {doc}" for rank, doc in enumerate(ranking, start=1)]
                assert "\n".join(shown) in out
            elif ranking:  # [unit, score] pairs; the kept ones starred
                unit, score = ranking[0]
                star = "*" if unit in trace["kept_chunks"] else " "
                assert f"  1. {star} {unit}" + (f"  {score:.4f}" if score is not None else "") in out
    kinds_with_summaries = {t["compressor_kind"] for ts in traces.values() for t in ts if t["trace"].get("summaries")}
    assert kinds_with_summaries == {"summarize"}


def test_the_view_holds_every_arm_and_reads_longllmlinguas_ranking(all_arms_run):
    meta, blocks = build_view(all_arms_run, contexts=load_contexts)
    preds = _by_example(all_arms_run, "predictions.jsonl")
    traces = {(t["id"], t["config_hash"]): t for t in lines(all_arms_run, "traces.jsonl")}
    task = blocks[meta["tasks"][0]["block"]]
    assert {ex["id"] for ex in task["examples"]} == set(preds)
    lingua = 0
    for ex in task["examples"]:
        block = blocks[ex["block"]]
        scored = [a for a in block["arms"] if "failure" not in a]
        assert len(scored) == len(preds[ex["id"]])
        for arm in scored:
            if arm["kind"] != "longllmlingua":
                continue
            ranking = block["rankings"][arm["ranking"]]
            trace = traces[(ex["id"], meta["cells"][arm["c"]]["hash"])]
            assert [u for u, *_ in ranking] == [f"document {i}" for i in trace["trace"]["ranking"]]
            assert "ranking" not in arm["trace"] and arm["kept"] and not arm["kept_all"]
            lingua += 1
    assert lingua == len(preds)


def test_show_view_and_tables_say_where_the_readers_window_cut(cut_run):
    preds = lines(cut_run, "predictions.jsonl")
    assert {p["compressor_kind"]: p["truncated"] for p in preds} == {"full": True, "retrieval": False}
    full_id = preds[0]["id"]
    out = CliRunner().invoke(app, ["show", str(cut_run), "--id", full_id]).output
    assert out.count("cut by the reader's window") == 1  # the full arm's prompt, not the retrieval arm's
    full = next(p for p in preds if p["id"] == full_id and p["compressor_kind"] == "full")
    assert f"it saw {full['tokens_seen']} of the {full['tokens_out']} context tokens" in out

    meta, blocks = build_view(cut_run, contexts=load_contexts)
    warnings = [text for topic, text in meta["summary"] if topic == "Warning"]  # the view opens with report.md's summary
    assert len(warnings) == 1 and "reader tiny cuts the full context of task nq_multidoc" in warnings[0]
    rows = blocks[meta["tasks"][0]["block"]]["rows"]
    assert sorted(meta["cells"][r["c"]]["arm"] for r in rows if r.get("t")) == ["full"] * 4
    arms = [a for b in blocks.values() for a in b.get("arms", [])]
    assert {(a["kind"], a["truncated"], a["tokens_seen"] < a["tokens_out"]) for a in arms} == \
        {("full", True, True), ("retrieval", False, False)}

    data = load_run(cut_run)
    header, body = efficiency_table(data.cells)
    cut = {row[2]: (row[header.index("reader cut %")], float(row[header.index("ctx tokens seen")]),
                    float(row[header.index("ctx tokens out")])) for row in body}
    full_row = cut.pop("full")
    assert full_row[0] == "100" and full_row[1] < full_row[2]
    ((pct, seen, kept),) = cut.values()
    assert pct == "0" and seen == kept


def test_the_report_warns_once_per_reader_and_task_whose_window_cuts_full(cut_run):
    result = CliRunner().invoke(app, ["report", str(cut_run), "--no-plots", "--no-view"])
    assert result.exit_code == 0, result.output
    warning = "reader tiny cuts the full context of task nq_multidoc on 4 of 4 example(s) (100%)"
    assert result.stderr.count(warning) == 1
    md = (cut_run / "report.md").read_text(encoding="utf-8")
    assert md.count(warning) == 1
    assert md.index(warning) < md.index("## Scores")  # said before the tables, not after them
    assert "[reader cut 100%]" in md  # the full row's score cell
    scores = list(csv.DictReader(io.StringIO((cut_run / "scores.csv").read_text(encoding="utf-8"))))
    assert {r["compressor"].split("(")[0]: r["reader_cut_pct"] for r in scores} == {"full": "100.00", "retrieval": "0.00"}
    assert all(float(r["tokens_seen"]) > 0 for r in scores)
    cells = json.loads((cut_run / "scores.json").read_text(encoding="utf-8"))["cells"]
    assert sorted(c["reader_cut_pct"] for c in cells) == [0.0, 100.0]


def _pred(i: int, reader: str, kind: str, truncated: bool, seen: int | None) -> Prediction:
    return Prediction(task="t", id=f"e{i}", config_hash=kind, compressor=f"my {kind}", compressor_kind=kind,
                      reader=reader, prediction="", metric="em", score=0.0, tokens_out=100, truncated=truncated,
                      tokens_seen=seen)


def test_the_share_of_full_examples_a_reader_cuts_counts_only_the_full_arm():
    preds = [_pred(i, "small", "full", i < 3, 40 if i < 3 else None) for i in range(4)]
    preds += [_pred(i, "big", "full", False, None) for i in range(4)]
    preds += [_pred(i, "big", "retrieval", True, 10) for i in range(4)]  # a compressed arm cut: not a `full` warning
    cuts = {c.reader: c for c in full_context_cuts(preds)}
    assert (cuts["small"].n_cut, cuts["small"].n, cuts["small"].share) == (3, 4, 0.75)
    assert cuts["small"].tokens_seen == (3 * 40 + 100) / 4 and cuts["small"].tokens_kept == 100
    assert cuts["big"].n_cut == 0
    (line,) = truncation_warnings(preds)
    assert line.startswith("reader small cuts the full context of task t on 3 of 4 example(s) (75%)")


def test_a_kept_fragment_found_nowhere_does_not_stop_the_alignment():
    from compressors.spans import align_kept_text

    # LongLLMLingua drops sub-word tokens: "zzqx" is in no context word, and the words after it still align
    assert align_kept_text("alpha beta gamma delta", "zzqx beta delta") == ((6, 10), (17, 22))

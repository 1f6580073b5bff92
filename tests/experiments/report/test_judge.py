"""LLM judge against a local fake server whose verdicts are scripted: rates, strict parsing, faults, resume."""
from __future__ import annotations

import json
import re

import pytest
import yaml
from typer.testing import CliRunner

from experiments.judge.judging import judge_run
from experiments.judge.protocols import parse_keypoints, parse_scores, parse_verdict
from experiments.report.judged import judged_cells
from experiments.run.config import parse_config
from experiments.run.driver import Runner
from testkit.fake_openai import FakeOpenAIServer, prompt_of

QA = {"name": "j", "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 10, "num_docs": 3,
                                                                    "words_per_doc": 30, "seed": 4}}],
      "compressors": ["full", {"name": "retrieval", "params": {"top_n": 1}}], "readers": ["extractive"]}


def _answers(prompt: str) -> dict:
    grab = lambda a, b: re.search(re.escape(a) + r"\n(.*?)\n" + re.escape(b), prompt, re.S)  # noqa: E731
    return {"reference": grab("[Reference answer]", "[End of reference answer]").group(1),
            "a": grab("[Assistant A's answer]", "[End of assistant A's answer]").group(1),
            "b": grab("[Assistant B's answer]", "[End of assistant B's answer]").group(1)}


def scripted_pairwise(prompt: str, body: dict) -> str:
    """The judge prefers the answer that contains the reference; malformed on purpose for two questions."""
    if "[Reference answer]" not in prompt:
        return "nothing to judge"
    ans = _answers(prompt)
    if "Quastin" in prompt:  # never in this data: a marker we do not use
        return ""
    if "Trading Company" in prompt:  # questions of this kind get an answer without a verdict
        return "Both answers have merit."
    a, b = ans["reference"] in ans["a"], ans["reference"] in ans["b"]
    verdict = "C" if a == b else ("A" if a else "B")
    return f"Reasoning in a few words. [[{verdict}]]"


def _run(tmp_path, config=QA):
    out = tmp_path / "run"
    runner = Runner(parse_config(config), out, progress=False)
    runner.run()
    runner.close()
    return out


def _judge(server, **params):
    return {"name": "openai", "params": {"model": "judge-model", "base_url": server.base_url, "timeout_s": 2,
                                         "retry": {"max_retries": 2, "backoff_base_s": 0.01, "backoff_max_s": 0.02},
                                         **params}}


def test_strict_parsers():
    assert parse_verdict("thinking... [[B]]") == "B"
    for bad, match in (("A is better", "no verdict"), ("[[A]] no, [[B]]", "conflicting")):
        with pytest.raises(ValueError, match=match):
            parse_verdict(bad)
    assert parse_scores('so {"fluency": 1, "correctness": 2}', {"fluency": (0, 1), "correctness": (0, 3)}) == \
        {"fluency": 1, "correctness": 2}
    for bad, match in (('{"fluency": 1}', "correctness"), ('{"fluency": 1, "correctness": 5}', "outside"),
                       ('{"fluency": true, "correctness": 1}', "not an integer"), ("no json", "no JSON")):
        with pytest.raises(ValueError, match=match):
            parse_scores(bad, {"fluency": (0, 1), "correctness": (0, 3)})
    assert parse_keypoints("Key points:\n1. One.\n2) Two.\n") == ["One.", "Two."]


def test_pairwise_win_rate_both_orders_failures_left_out_and_resume(tmp_path):
    run = _run(tmp_path)
    preds = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    with FakeOpenAIServer(responder=scripted_pairwise, models=("judge-model",)) as server:
        stats = judge_run(run, _judge(server), protocol="pairwise", against="arm:full", progress=False)
        requests = server.stats["requests"]
        again = judge_run(run, _judge(server), protocol="pairwise", against="arm:full", progress=False)
        asked_again = server.stats["requests"] - requests
    retrieval = [p for p in preds if p["compressor_kind"] == "retrieval"]
    full = {p["id"]: p["prediction"] for p in preds if p["compressor_kind"] == "full"}
    malformed = [p for p in retrieval if "Trading Company" in p["query"] or "Trading Company" in p["prediction"]
                 or "Trading Company" in full[p["id"]]]
    assert stats.judged == len(retrieval) - len(malformed) and stats.failed == len(malformed) > 0
    # a re-run asks nothing the judge answered usably; unparseable answers were not cached as final: asked again
    assert asked_again == 2 * len(malformed)
    assert (again.judged, again.failed, again.already_done) == (0, len(malformed), len(retrieval) - len(malformed))
    # expected win-rate of retrieval vs full from the scripted rule, computed here from the predictions
    expected = []
    for p in retrieval:
        if p in malformed:
            continue
        mine, theirs = p["answers"][0] in p["prediction"], p["answers"][0] in full[p["id"]]
        expected.append(0.5 if mine == theirs else float(mine))  # both orders agree under this judge
    (cell,) = judged_cells(run)
    assert cell.compressor.startswith("retrieval") and cell.n == len(expected) and cell.n_failed == len(malformed)
    assert cell.value == pytest.approx(100 * sum(expected) / len(expected), abs=0.01)
    assert cell.ci95[0] <= cell.value <= cell.ci95[1]
    failed = [json.loads(line) for line in (run / "judgements.jsonl").read_text().splitlines()
              if json.loads(line)["status"] == "failed"]
    assert all("no verdict" in f["reason"] and f["value"] is None for f in failed)


def test_an_unreachable_judge_is_a_failed_judgement_never_a_tie(tmp_path):
    run = _run(tmp_path)
    with FakeOpenAIServer(fault_rate=1.0, faults=("500",), models=("judge-model",)) as server:
        stats = judge_run(run, _judge(server), protocol="pairwise", progress=False)
    assert stats.judged == 0 and stats.failed == 20
    lines = [json.loads(line) for line in (run / "judgements.jsonl").read_text().splitlines()]
    assert all(r["status"] == "failed" and "HTTP 500" in r["reason"] for r in lines)
    assert all(c.n == 0 and c.n_failed == 10 for c in judged_cells(run))


def scripted_rubric(prompt: str, body: dict) -> str:
    if prompt.startswith("Below is an expert-written summary"):
        return "1. The agency reviewed grants.\n2. It found gaps."
    if '{"recall": N}' in prompt:
        return 'Point 1 is present. {"recall": 1}'
    if '"sentence_count"' in prompt:
        return 'Sentence 1 supported. {"precision": 1, "sentence_count": 2}'
    if "Correct answers:" in prompt:
        answer = re.search(r"Question: (.*)\nCorrect answers: (.*)\nAnswer: (.*)", prompt, re.S)
        if "River" in answer.group(1):
            return "unsure"  # malformed for one kind of question
        answer = re.search(r"Correct answers: (.*)\nAnswer: (.*)", prompt, re.S)
        return '{"fluency": 1, "correctness": %d}' % (3 if answer.group(1).split("; ")[0] in answer.group(2) else 0)
    return "?"


def test_score_protocol_for_qa_and_summaries(tmp_path):
    doc = "The agency reviewed grants in 2019. It found gaps in oversight. Officials agreed to act."
    leval = tmp_path / "gov_report_summ.jsonl"
    leval.write_text(json.dumps({"input": doc, "instructions": ["Write a summary."], "outputs": ["Grants were reviewed."],
                                 "evaluation": "LLM", "source": "x"}) + "\n")
    config = {**QA, "tasks": QA["tasks"] + [{"name": "gov_report_summ", "path": str(leval)}], "compressors": ["full"]}
    run = _run(tmp_path, config)
    preds = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    with FakeOpenAIServer(responder=scripted_rubric, models=("judge-model",)) as server:
        stats = judge_run(run, _judge(server), protocol="score", progress=False)
    cells = {c.task: c for c in judged_cells(run)}
    summary = cells["gov_report_summ"]
    assert summary.n == 1 and summary.value == pytest.approx(100 * 0.5)  # recall 1/2, precision 1/2 -> F1 0.5
    qa = [p for p in preds if p["task"] == "nq_multidoc"]
    river = [p for p in qa if "River" in p["query"]]
    scored = [1.0 if p["answers"][0] in p["prediction"] else 0.0 for p in qa if p not in river]
    assert cells["nq_multidoc"].n == len(scored) and cells["nq_multidoc"].n_failed == len(river) > 0
    assert cells["nq_multidoc"].value == pytest.approx(100 * sum(scored) / len(scored), abs=0.01)
    assert stats.failed == len(river)


def test_judge_command_writes_the_report_columns(tmp_path):
    from experiments.cli.app import app

    run = _run(tmp_path)
    with FakeOpenAIServer(responder=scripted_pairwise, models=("judge-model",)) as server:
        spec = tmp_path / "judge.yaml"
        spec.write_text(yaml.safe_dump(_judge(server)))
        res = CliRunner().invoke(app, ["judge", str(run), "--judge", str(spec), "--protocol", "pairwise"])
        assert res.exit_code == 0, res.output
        bad = CliRunner().invoke(app, ["judge", str(run), "--judge", "opnai"])
        assert bad.exit_code == 2 and "Did you mean 'openai'" in bad.output
    assert "| task | reader | compressor | protocol | against | judge |" in res.output
    assert "## Judged evaluation" in (run / "report.md").read_text()
    cells = json.loads((run / "scores.json").read_text())["cells"]
    assert all(c["judged"] and c["judged"][0]["protocol"] == "pairwise" for c in cells)


def one_order_unusable(prompt: str, body: dict) -> str:
    """Order 1 (the prediction as A) always gets a verdict; order 2 (the reference as A) gets none when the
    reference has an even number of characters."""
    ans = _answers(prompt)
    if ans["a"] == ans["reference"]:
        return "I cannot decide." if len(ans["reference"]) % 2 == 0 else "[[A]]"
    return "[[B]]"


def test_a_pairwise_judgement_with_one_order_fails_unless_single_order_is_asked_and_the_report_counts_it(
        tmp_path, monkeypatch):
    from experiments.cli.app import app

    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))  # no verdicts cached by the tests above

    run = _run(tmp_path)
    preds = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    one_order = sum(len(p["answers"][0]) % 2 == 0 for p in preds)
    assert 0 < one_order < len(preds)
    with FakeOpenAIServer(responder=one_order_unusable, models=("judge-model",)) as server:
        strict = judge_run(run, _judge(server), protocol="pairwise", progress=False)
        assert (strict.judged, strict.failed) == (len(preds) - one_order, one_order)
        assert all(c.n_one_order == 0 for c in judged_cells(run))
        asked = server.stats["requests"]
        spec = tmp_path / "judge.yaml"
        spec.write_text(yaml.safe_dump(_judge(server)))
        res = CliRunner().invoke(app, ["judge", str(run), "--judge", str(spec), "--single-order"])
        assert res.exit_code == 0, res.output
        # only the unusable orders are asked again; the usable ones come from the generation cache
        assert server.stats["requests"] - asked == one_order
    cells = judged_cells(run)
    assert sum(c.n_one_order for c in cells) == one_order and sum(c.n_failed for c in cells) == 0
    assert sum(c.n for c in cells) == len(preds)
    assert "one order only" in (run / "report.md").read_text() and "one order only" in res.output
    scores = json.loads((run / "scores.json").read_text())["cells"]
    assert sum(j["n_one_order"] for c in scores for j in c["judged"]) == one_order


LEXSUM = [{"id": name.lower(), "sources": [f"The {name} court entered a decree. The {name} case closed."],
           "summary/short": f"{name} decree.", "summary/long": f"{name} long summary.",
           "summary/short_keypoints": [f"{name} p1", f"{name} p2"]} for name in ("Alpha", "Beta", "Gamma", "Delta")]


def helmet_rubric(prompt: str, body: dict) -> str:
    """Alpha: recall 1/2, precision 1/2. Beta: a recall above its 2 key points (HELMET scores it). Gamma: a
    precision that is not a number (HELMET stops). Delta: a precision without JSON."""
    if "evaluate the fluency" in prompt:
        return 'Coherent. {"fluency": 1}'
    if "Key points:\n1. Alpha p1" in prompt:
        return 'Point 1 only. {"recall": 1}'
    if "Key points:\n1. Beta p1" in prompt:
        return 'All of them and more. {"recall": 3}'
    if "\nKey points:\n1. " in prompt.split("Now, read")[-1]:
        return '{"recall": 2}'
    if 'Expert summary: "Gamma long summary."' in prompt:
        return '{"precision": "one", "sentence_count": 2}'
    if 'Expert summary: "Delta long summary."' in prompt:
        return "Half of it is supported."
    return 'One of two. {"precision": 1, "sentence_count": 2}'


def test_helmet_rubric_with_its_examples_and_the_failures_helmet_would_score_counted(tmp_path, monkeypatch):
    from experiments.report.judged import judged_table

    monkeypatch.setenv("CTXCOMP_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "lexsum.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in LEXSUM))
    run = _run(tmp_path, {"name": "h", "tasks": [{"name": "helmet_multi_lexsum", "path": str(path)}],
                          "compressors": ["full"], "readers": ["extractive"]})
    bodies = []
    with FakeOpenAIServer(responder=lambda p, b: bodies.append(b) or helmet_rubric(p, b),
                          models=("judge-model",)) as server:
        stats = judge_run(run, _judge(server, max_context=32768), protocol="score", progress=False)
        asked = [prompt_of(b) for b in bodies]
        assert len(asked) == 12 and all(b["max_tokens"] == 4096 for b in bodies)  # eval_gpt4_summ.py's 4096
        assert sum("Example 1:" in p for p in asked) == 8 and sum("  - Examples:" in p for p in asked) == 4
        bodies.clear()
        bare = judge_run(run, _judge(server, max_context=32768), protocol="score", helmet_examples=False,
                         progress=False)
        assert len(bodies) == 12 and not any("Example" in prompt_of(b) for b in bodies)
        # a window that cuts HELMET's request (recall: ~1.6k tokens beside 4,096 new ones) gives no judgement
        cut = judge_run(run, _judge(server, max_context=5000), protocol="score", progress=False)
        assert (cut.judged, cut.failed) == (0, 4)
    assert (stats.judged, stats.failed) == (1, 3) and (bare.judged, bare.failed) == (1, 3)
    cells = {(c.protocol, "max_context=5000" in c.judge): c for c in judged_cells(run)}
    assert set(cells) == {("score", False), ("score-no-examples", False), ("score", True)}
    assert "window cut the request" in next(r["reason"] for r in map(json.loads, (run / "judgements.jsonl").open())
                                            if "max_context=5000" in r["judge"])
    cell = cells[("score", False)]
    assert (cell.n, cell.n_failed, cell.n_helmet_scores) == (1, 3, 1) and cell.value == pytest.approx(50.0)
    header, body = judged_table([cell])
    assert header[-1] == "failed, HELMET scores" and body[0][-1] == "1"
    lines = {r["id"]: r for r in map(json.loads, (run / "judgements.jsonl").read_text().splitlines())
             if r["protocol"] == "score" and "max_context=32768" in r["judge"]}
    beta = lines["beta"]
    assert beta["status"] == "failed" and "recall: field 'recall' = 3 is outside 0..2" in beta["reason"]
    # HELMET's check_metrics: recall 3/2 = 1.5, precision 1/2 -> f1 = 2 * 1.5 * 0.5 / 2 = 0.75
    assert beta["parts"]["helmet_scores"] is True and beta["parts"]["helmet"]["f1"] == pytest.approx(0.75)
    assert lines["gamma"]["parts"] == {"helmet_scores": False} and "not an integer" in lines["gamma"]["reason"]
    assert "no JSON object" in lines["delta"]["reason"] and not lines["delta"]["parts"].get("helmet_scores")
    from experiments.report.write import write_report

    write_report(run, plots=False)
    scores = json.loads((run / "scores.json").read_text())["cells"]
    assert sorted((j["protocol"], j["n_helmet_scores"]) for c in scores for j in c["judged"]) == \
        [("score", 0), ("score", 1), ("score-no-examples", 1)]

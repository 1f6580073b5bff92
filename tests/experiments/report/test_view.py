"""``ctxcomp view`` without a browser: the embedded data, its escaping, the kept spans and the CLI."""
import base64
import hashlib
import html
import json
import re
import shutil

import pytest
from typer.testing import CliRunner

from compressors.spans import align_kept_text
from experiments.cli.app import app
from experiments.cli.view import load_contexts
from experiments.view.examples import encode_prompt
from experiments.view.page import build_view, embed_json, render_html, write_view
from tests.support.view_run import PAYLOAD, examples, kept_texts, lines, make_run

BLOCK = re.compile(r'<script type="application/json" id="([^"]+)">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("view") / "run")


def _blocks(page: str) -> dict:
    return {name: json.loads(text) for name, text in BLOCK.findall(page)}


def test_embedded_json_cannot_close_its_script_element_and_reads_back_the_same():
    value = {"p": PAYLOAD, "nested": ["</SCRIPT >", "<!--", "a & b > c"], "nan": float("nan")}
    text = embed_json(value)
    assert not set("<>&") & set(text)
    assert "\\u003c/script\\u003e" in text
    assert json.loads(text) == {**value, "nan": None}
    page = render_html({"run": "</title><script>x</script>", "tasks": []}, {"task-0": {"rows": [PAYLOAD]}})
    assert page.count("</script>") == 3  # the two data blocks and the page's one script, nothing from the data
    assert "<title>ctxcomp view: &lt;/title&gt;&lt;script&gt;" in page
    assert _blocks(page)["task-0"] == {"rows": [PAYLOAD]}


def test_the_page_is_self_contained_and_its_script_is_the_only_one_allowed(run):
    page = write_view(run, contexts=load_contexts).read_text(encoding="utf-8")
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # no CDN, no network
    csp = re.search(r'Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp
    script = re.search(r"<script>(.*)</script>", page, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in csp
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "document.write" not in script
    assert PAYLOAD not in page and html.escape(PAYLOAD) not in page  # the payload is only in escaped JSON


def test_overview_is_the_reports_numbers_and_examples_are_loaded_per_task(run):
    from experiments.report.cells import load_run
    from experiments.report.tables import score_table

    meta, blocks = build_view(run, contexts=load_contexts)
    data = load_run(run)
    scores = next(t for t in meta["tables"] if t["name"] == "scores")
    assert (scores["header"], scores["body"]) == tuple(map(list, score_table(data.cells, data.items())))
    for row, cells in zip(scores["body"], scores["cells"]):
        for text, ci in zip(row, cells):
            if ci is not None:
                assert text.startswith(f"{meta['cells'][ci]['score']:.2f}")
    assert {p["name"] for p in meta["plots"]} == {"delta_vs_full", "position_nq_multidoc"}
    assert set(meta["manifest"]) >= {"config.yaml", "grid.json", "stats.json"}
    (task,) = meta["tasks"]
    rows = blocks[task["block"]]["rows"]
    assert len(rows) == len(lines(run, "predictions.jsonl")) == task["n_rows"]
    lost = [r for r in rows if r["v"] == "lost"]
    assert lost and sum(c["lost"] for c in meta["cells"]) == len(lost)
    assert all(r["d"] < 0 for r in lost)


def test_kept_spans_are_the_trace_kept_chunks_and_prompts_rebuild(run):
    meta, blocks = build_view(run, contexts=load_contexts)
    exs = examples()
    traces = {(t["id"], t["config_hash"]): t for t in lines(run, "traces.jsonl")}
    preds = {(p["id"], p["config_hash"]): p for p in lines(run, "predictions.jsonl")}
    task = blocks[meta["tasks"][0]["block"]]
    checked = 0
    for ex in task["examples"]:
        block = blocks[ex["block"]]
        assert block["context"] == exs[ex["id"]].context
        for arm in block["arms"]:
            cell = meta["cells"][arm["c"]]
            trace = traces[(ex["id"], cell["hash"])]
            if arm["kind"] == "retrieval":
                spans = [block["context"][s:e].strip() for s, e, _ in arm["kept"]]
                assert spans == kept_texts(exs[ex["id"]], trace["kept_chunks"]) and spans
                ranking = block["rankings"][arm["ranking"]]
                assert [ex["id"] + u if u.startswith("#") else u for u, *_ in ranking] == \
                    [u for u, _ in trace["trace"]["ranking"]]
                assert [s for _, s, _ in ranking] == [round(s, 4) for _, s in trace["trace"]["ranking"]]
                assert arm["first_answer_rank"] == 1 + [b for *_, b in ranking].index(1)
                checked += 1
            pieces = arm["prompt"]
            prompt = "".join(p if isinstance(p, str) else block["context"][p[0]:p[1]] for p in pieces)
            h = preds[(ex["id"], cell["hash"])]["prompt_hash"]
            assert prompt == (run / "prompts" / h[:2] / f"{h}.txt").read_text(encoding="utf-8")
            if arm["kind"] == "full":
                assert any(isinstance(p, list) for p in pieces)  # the context is referenced, not repeated
    assert checked == 10


def test_prompt_encoding_and_word_alignment():
    context = "alpha beta gamma delta " * 10
    prompt = "Q: x\n" + context + "\nA:"
    pieces = encode_prompt(prompt, context, [])
    assert pieces[0] == "Q: x\n" and isinstance(pieces[1], list)
    assert "".join(p if isinstance(p, str) else context[p[0]:p[1]] for p in pieces) == prompt
    assert encode_prompt("short", "", []) == ["short"]
    spans = align_kept_text("one two three four five", "two four five")
    assert spans == ((4, 7), (14, 23))


def test_view_and_report_commands_write_the_page(run, tmp_path):
    out = tmp_path / "v.html"
    result = CliRunner().invoke(app, ["view", str(run), "--against", str(run), "--out", str(out)])
    assert result.exit_code == 0, result.output
    meta = _blocks(out.read_text(encoding="utf-8"))["meta"]
    assert meta["against"] == run.name and any(t["name"] == "compare" for t in meta["tables"])
    assert {c["run"] for c in meta["cells"]} == {"", "B"}
    (run / "view.html").unlink(missing_ok=True)
    result = CliRunner().invoke(app, ["report", str(run), "--no-plots", "--no-view"])
    assert result.exit_code == 0 and not (run / "view.html").exists()
    result = CliRunner().invoke(app, ["report", str(run), "--no-plots"])
    assert result.exit_code == 0 and (run / "view.html").is_file()
    missing = CliRunner().invoke(app, ["view", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "error:" in missing.output


def test_a_view_against_another_run_is_written_beside_the_runs_own_page(run, tmp_path_factory):
    other = tmp_path_factory.mktemp("other") / "baseline"
    shutil.copytree(run, other)
    own = run / "view.html"
    own.write_text("the run's own page", encoding="utf-8")
    result = CliRunner().invoke(app, ["view", str(run), "--against", str(other)])
    assert result.exit_code == 0, result.output
    beside = run / "view-against-baseline.html"
    assert f"wrote {beside}" in result.output and _blocks(beside.read_text(encoding="utf-8"))["meta"]["against"]
    assert own.read_text(encoding="utf-8") == "the run's own page"  # not overwritten

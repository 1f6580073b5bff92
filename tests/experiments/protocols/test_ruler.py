"""RULER-style generation: target lengths in a tokenizer's tokens, seeded, the needles where the answers say, RULER's
wording; `ctxcomp build ruler` writes files the ordinary loader reads by path; HELMET's RAG and summarization files."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from typer.testing import CliRunner

from experiments.cli.app import app
from experiments.data.synthetic import make_multidoc_qa
from experiments.tasks import build_prompt, get_task
from experiments.tasks.loading import DataError, load_examples
from experiments.tasks.ruler.generate import NOISE, generate, token_counter

COUNT = token_counter("words")
QA = make_multidoc_qa(60, num_docs=4, words_per_doc=40, seed=1)


@pytest.mark.parametrize("task", ["niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery", "vt", "cwe",
                                  "fwe", "qa"])
def test_every_task_fits_its_target_length_and_is_seeded(task):
    records = generate(task, [1024, 2048], 2, count=COUNT, seed=3, qa_examples=QA)
    again = generate(task, [1024, 2048], 2, count=COUNT, seed=3, qa_examples=QA)
    assert records == again and records != generate(task, [1024, 2048], 2, count=COUNT, seed=4, qa_examples=QA)
    for r in records:
        # RULER's length: the prompt's tokens plus the tokens to generate, never above the target
        assert r["length"] == COUNT(r["input"] + r["answer_prefix"]) + get_task(f"ruler_{task}").max_new_tokens
        assert r["length"] <= r["max_length"]
        # not a short haystack (QA grows by whole documents, 5 at a time below 4k tokens, as RULER)
        assert r["length"] >= 0.6 * r["max_length"], (task, r["length"], r["max_length"])
        assert r["context"] in r["input"] and r["outputs"]


def test_needles_hold_the_answers_and_use_rulers_wording():
    single = generate("niah_single", [1024], 3, count=COUNT, seed=0)
    for r in single:
        (value,) = r["outputs"]
        assert f"One of the special magic numbers for {r['query']} is: {value}." in r["context"]
        assert r["input"].startswith("A special magic number is hidden within the following text.")
        assert r["answer_prefix"] == f" The special magic number for {r['query']} mentioned in the provided text is"
    multi = generate("niah_multivalue", [1024], 1, count=COUNT, seed=0)[0]
    assert len(multi["outputs"]) == 4 and multi["input"].startswith("Some special magic numbers are hidden")
    assert all(f"for {multi['query']} is: {v}." in multi["context"] for v in multi["outputs"])
    keys = generate("niah_multikey", [1024], 1, count=COUNT, seed=0)[0]
    assert len(re.findall(r"One of the special magic numbers for [\w-]+ is: \d{7}\.", keys["context"])) == 4


def test_variable_tracking_common_and_frequent_words():
    vt = generate("vt", [1024], 1, count=COUNT, seed=0)[0]
    names = vt["outputs"]
    assert f"VAR {names[0]} = {vt['query']}" in vt["context"] and len(names) == 5
    assert all(f"VAR {b} = VAR {a}" in vt["context"] for a, b in zip(names, names[1:]))
    assert NOISE in vt["context"]
    cwe = generate("cwe", [4096], 1, count=COUNT, seed=0)[0]
    counts = Counter(re.findall(r"\d+\. (\w+)", cwe["context"]))
    assert all(counts[w] == 30 for w in cwe["outputs"]) and max(c for w, c in counts.items() if w not in cwe["outputs"]) == 3
    fwe = generate("fwe", [2048], 1, count=COUNT, seed=0)[0]
    ranked = [w for w, _ in Counter(fwe["context"].split()).most_common(4)]
    assert ranked[0] == "..." and ranked[1:] == fwe["outputs"]


def test_qa_pads_the_gold_passage_with_other_questions_passages():
    r = generate("qa", [2048], 1, count=COUNT, seed=0, qa_examples=QA)[0]
    gold = next(p for p in QA[0].passages if p.is_gold)
    assert r["query"] == QA[0].query and r["outputs"] == list(QA[0].answers)
    assert f"Document {r['gold_position'] + 1}:\n{gold.title}\n{gold.text}" in r["context"]


def test_built_files_load_by_path_and_prompt_like_ruler(tmp_path):
    source = tmp_path / "qa.jsonl"
    source.write_text("".join(json.dumps({"question": ex.query, "answers": list(ex.answers), "ctxs": [
        {"title": p.title, "text": p.text, "isgold": p.is_gold, "hasanswer": p.has_answer} for p in ex.passages]}) + "\n"
                              for ex in QA))
    result = CliRunner().invoke(app, ["build", "ruler", "--tasks", "niah_single,qa", "--lengths", "512,1024", "--n", "2",
                                      "--qa-source", str(source), "--out", str(tmp_path / "ruler")])
    assert result.exit_code == 0, result.output
    examples = load_examples(tmp_path / "ruler" / "ruler_niah_single.jsonl")  # the family is read from the fields
    assert [ex.meta["length_bucket"] for ex in examples] == [512, 512, 1024, 1024]
    record = json.loads((tmp_path / "ruler" / "ruler_niah_single.jsonl").read_text().splitlines()[0])
    prompt = build_prompt(get_task("ruler_niah_single"), examples[0].context, examples[0])
    assert prompt == record["input"] + record["answer_prefix"]  # the template RULER's base model sees
    assert examples[0].query.startswith("What is the special magic number for")
    missing = CliRunner().invoke(app, ["build", "ruler", "--tasks", "qa", "--out", str(tmp_path / "x")])
    assert missing.exit_code == 2 and "--qa-source" in missing.output


def test_helmet_rag_items_keep_passages_and_the_gold_position(tmp_path):
    path = tmp_path / "nq-dev-multikilt_1000_k3_dep6.jsonl"
    ctxs = [{"id": "d1", "title": "A", "text": "Alpha text."}, {"id": "d2", "title": "B", "text": "Beta is 7.",
                                                                   "has_answer": True}, {"title": "C", "text": "Gamma."}]
    path.write_text(json.dumps({"question": "What is beta?", "answers": ["7"], "ctxs": ctxs}) + "\n"
                    + json.dumps({"question": "Broken", "answers": ["x"], "ctxs": [{"title": "no text"}]}) + "\n")
    with pytest.raises(DataError, match=r"k3_dep6.jsonl:2: field 'ctxs\[0\].text'"):
        load_examples(path, "helmet_rag", "helmet_nq")
    path.write_text(path.read_text().splitlines()[0] + "\n")
    (ex,) = load_examples(path, "helmet_rag", "helmet_nq")
    assert [p.doc_id for p in ex.passages] == ["d1", "d2", "helmet_nq-1-doc2"] and ex.meta["gold_position"] == 1
    assert [p.is_gold for p in ex.passages] == [False, True, False]
    from experiments.protocols.litm import position_sweep  # the position tools move the gold passage

    moved = position_sweep([ex], [0, 2], 3)
    assert [m.passages[m.meta["gold_position"]].doc_id for m in moved] == ["d2", "d2"]
    prompt = build_prompt(get_task("helmet_nq"), ex.context, ex)
    assert prompt == ("Use the given documents to write a concise and short answer to the question. Write your answer "
                      "in the following format:\nAnswer: [answer]\n\nDocument (Title: A): Alpha text.\n\nDocument "
                      "(Title: B): Beta is 7.\n\nDocument (Title: C): Gamma.\n\nQuestion: What is beta?\nAnswer:")


def test_helmet_summarization_records_carry_key_points(tmp_path):
    path = tmp_path / "lexsum.jsonl"
    path.write_text(json.dumps({"id": "c1", "sources": ["Complaint text.", "Order text."], "summary/short": "Short.",
                                "summary/long": "Long summary.", "summary/short_keypoints": ["p1", "p2"]}) + "\n")
    (ex,) = load_examples(path, "helmet_summ", "helmet_multi_lexsum")
    assert ex.context == "Complaint text.\n\nOrder text." and ex.answers == ("Short.",)
    assert json.loads(ex.meta["keypoints"]) == ["p1", "p2"] and ex.meta["expert_summary"] == "Long summary."


def test_fit_finds_the_size_rulers_binary_search_finds_with_fewer_counts(monkeypatch):
    """The largest haystack whose first sample fits, as RULER's plain binary search (written out here) finds it."""
    from experiments.tasks.ruler import generate as ruler

    counts, made = [], []
    real_fit = ruler.Generator.fit

    def fit(self, max_length):
        counts.clear()
        size = real_fit(self, max_length)
        made.append((self, max_length, size, len(counts)))
        return size

    def counting(text):
        counts.append(1)
        return len(text.split())

    monkeypatch.setattr(ruler.Generator, "fit", fit)
    for task, max_length in (("niah_single", 1024), ("vt", 4096), ("cwe", 2048), ("niah_multivalue", 8192)):
        ruler.generate(task, [max_length], 1, count=counting, seed=0)
    ours = theirs = 0
    for gen, max_length, fast, used in made:
        draw = f"{gen.seed}:{gen.task}:{max_length}:fit"
        fits = lambda size: gen.length(gen.sample(size, ruler._Draw(draw), max_length)) <= max_length  # noqa: E731
        counts.clear()
        step = gen._step(max_length)
        lo, hi, best = step, 2 * step, None
        while fits(hi):
            lo, hi = hi, 2 * hi
        while lo <= hi:
            mid = (lo + hi) // 2
            if fits(mid):
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        assert fast == best, (gen.task, max_length)
        # at most one count more where tokens do not grow with the size (the search then starts from the bottom)
        assert used <= len(counts) + 1, (gen.task, used, len(counts))
        ours, theirs = ours + used, theirs + len(counts)
    assert ours < 0.75 * theirs, (ours, theirs)


def test_a_generate_section_is_checked_by_rulers_model_and_names_its_files(tmp_path):
    """RULER's `GenerateParams` checks a task's `generate:` when the config is read; the QA file it names goes in the
    run's list of data files (their sha256s in the manifest)."""
    from experiments.run.config import ConfigError, parse_config
    from experiments.run.driver import data_files

    def config(section: dict):
        return parse_config({"tasks": [{"name": "ruler_qa", "generate": section}], "readers": ["extractive"],
                             "compressors": ["full"]})

    with pytest.raises(ConfigError, match=r"tasks\.0\.generate\.lengths\.0: Input should be greater than or equal to 256"):
        config({"lengths": [100]})
    with pytest.raises(ConfigError, match=r"tasks\.0\.generate\.haystack: .*'essay' or 'noise'"):
        config({"lengths": [1024], "haystack": "sand"})
    qa = tmp_path / "qa.jsonl"
    qa.write_text("{}\n", encoding="utf-8")
    assert data_files(config({"lengths": [1024], "qa_source": str(qa)})) == [str(qa)]

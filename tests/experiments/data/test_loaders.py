"""Loaders on the real shared files and on broken input (errors must name file, line and field)."""
from __future__ import annotations

import gzip
import json

import pytest

from experiments.tasks.litm import load_litm_kv, load_litm_qa
from experiments.tasks.loading import DataError, load_examples


def test_leval_real_files_expand_one_example_per_instruction(shared_data):
    counts = {"financial_qa": 68, "natural_question": 109, "gov_report_summ": 14, "news_summ": 12}
    for name, expected in counts.items():
        examples = load_examples(shared_data / "leval" / f"{name}.jsonl")
        assert len(examples) == expected
        assert examples[0].task == f"leval_{name}"
        assert examples[0].id == f"leval_{name}-1-0"
        assert examples[0].source.endswith(f"{name}.jsonl:1")
    nq = load_examples(shared_data / "leval" / "natural_question.jsonl", "leval", "leval_natural_question")
    assert nq[0].query == "when did season 2 of handmaid's tale start"
    assert nq[0].answers == ("April 25 , 2018",)
    assert nq[1].context == nq[0].context and nq[1].id == "leval_natural_question-1-1"


def test_leval_keeps_the_reference_word_count_for_the_length_instruction(shared_data):
    examples = load_examples(shared_data / "leval" / "natural_question.jsonl", "leval")
    # "April 25 , 2018" is four whitespace-separated words, as turbo16k-test.py counts them (len(out.split()))
    assert examples[0].query == "when did season 2 of handmaid's tale start"
    assert examples[0].meta["reference_words"] == 4


def test_litm_qa_real_file(shared_data):
    examples = load_litm_qa(shared_data / "lost_in_the_middle" / "nq-open-oracle.jsonl.gz")
    assert len(examples) == 2655
    first = examples[0]
    assert first.answers == ("Wilhelm Conrad Röntgen",) and first.id == "nq_multidoc-1"
    assert first.context.startswith("Document [1](Title: List of Nobel laureates in Physics) The first Nobel Prize")
    assert all(sum(p.is_gold for p in ex.passages) == 1 for ex in examples)
    assert first.passages[0].has_answer


def test_litm_kv_real_file(shared_data):
    examples = load_litm_kv(shared_data / "lost_in_the_middle" / "kv-retrieval-75_keys.jsonl.gz")
    assert len(examples) == 500
    for ex in examples[:20]:
        assert len(ex.passages) == 75
        parsed = json.loads(ex.context)  # LITM's rendering is a valid JSON object
        assert parsed == dict(ex.meta["ordered_kv_records"])
        assert parsed[ex.query] == ex.answers[0]
        assert ex.passages[ex.meta["key_index"]].text == f'"{ex.query}": "{ex.answers[0]}"'
    assert examples[0].context.startswith('{"a54e2eed-e625-4570-9f74-3624e77d6684": "d1ff29be-4e2a-4208-a182-0cea716be3d4",\n "')


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


LB = {"input": "首都是哪里？", "context": "北京是中国的首都。", "answers": ["北京"], "length": 9, "dataset": "multifieldqa_zh",
      "language": "zh", "all_classes": None, "_id": "abc123"}


def test_longbench_jsonl_json_array_and_gzip(tmp_path):
    jsonl = _write(tmp_path / "m.jsonl", [json.dumps(LB, ensure_ascii=False)])
    (ex,) = load_examples(jsonl, "longbench")
    assert (ex.id, ex.task, ex.lang, ex.length, ex.answers, ex.source) == (
        "abc123", "multifieldqa_zh", "zh", 9, ("北京",), f"{jsonl}:1")
    array = tmp_path / "m.json"
    array.write_text(json.dumps([LB, LB], ensure_ascii=False), encoding="utf-8")
    assert len(load_examples(array)) == 2
    gz = tmp_path / "m.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps(LB) + "\n" + json.dumps(LB) + "\n")
    assert len(load_examples(gz, "longbench", "multifieldqa_zh", limit=1)) == 1


def test_m4le_record(tmp_path):
    record = {"instruction": "Which paragraph mentions X?", "input": "one two three", "answers": ["2"],
              "input_length": 3, "total_length": 10, "length_bucket": 1000}
    (ex,) = load_examples(_write(tmp_path / "m4.jsonl", [json.dumps(record)]), "m4le")
    assert (ex.id, ex.length, ex.meta["length_bucket"]) == ("m4le-1", 3, 1000)
    assert load_examples(tmp_path / "m4.jsonl")[0].task == "m4le"


def test_bad_json_at_line_3_names_the_line(tmp_path):
    path = _write(tmp_path / "bad.jsonl", [json.dumps(LB), json.dumps(LB), '{"input": "x", '])
    with pytest.raises(DataError, match=r"bad\.jsonl:3:"):
        load_examples(path)


def test_missing_field_names_line_and_field(tmp_path):
    record = {"answers": ["x"], "ctxs": [{"title": "t", "text": "x"}]}
    good = {"question": "q", **record}
    path = _write(tmp_path / "qa.jsonl", [json.dumps(good), json.dumps(record | {"question": None})])
    with pytest.raises(DataError) as info:
        load_examples(path, "litm_qa")
    assert ":2:" in str(info.value) and "'question'" in str(info.value)


def test_wrong_type_names_the_field(tmp_path):
    path = _write(tmp_path / "lb.jsonl", [json.dumps(LB | {"answers": "北京"})])
    with pytest.raises(DataError, match=r"lb\.jsonl:1: field 'answers'"):
        load_examples(path, "longbench")
    path = _write(tmp_path / "kv.jsonl", [json.dumps({"ordered_kv_records": [["k"]], "key": "k", "value": "v"})])
    with pytest.raises(DataError, match=r"ordered_kv_records\[0\]"):
        load_litm_kv(path)


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"ordered_kv_records": [["a", "1"], ["b", "2"]], "key": "c", "value": "1"}, "key"),
        ({"ordered_kv_records": [["a", "1"], ["b", "2"]], "key": "a", "value": "2"}, "value"),
        ({"ordered_kv_records": [["a", "1"], ["a", "2"]], "key": "a", "value": "1"}, "ordered_kv_records"),
    ],
)
def test_kv_record_whose_key_cannot_be_answered_is_refused(tmp_path, record, field):
    # a key missing from the object, a value that is not the key's, or a repeated key: the paper's prompt builder refuses all three
    good = {"ordered_kv_records": [["a", "1"], ["b", "2"]], "key": "b", "value": "2"}
    path = _write(tmp_path / "kv.jsonl", [json.dumps(good), json.dumps(record)])
    with pytest.raises(DataError, match=rf"kv.jsonl:2: field '{field}'"):
        load_litm_kv(path)


def test_non_utf8_bytes_name_the_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(LB).encode() + b"\n" + '{"input": "caf\xe9"}'.encode("latin-1") + b"\n")
    with pytest.raises(DataError, match=r"latin1\.jsonl:2: not valid UTF-8"):
        load_examples(path)


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(DataError, match="cannot tell the benchmark"):
        load_examples(_write(tmp_path / "x.jsonl", ['{"foo": 1}']))
    with pytest.raises(DataError, match="file not found"):
        load_examples(tmp_path / "nope.jsonl")

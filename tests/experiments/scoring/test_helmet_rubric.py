"""HELMET's summarization rubric (scripts/eval_gpt4_summ.py): the judge's requests byte for byte, with and without
its few-shot examples, HELMET's reading of the judge's JSON and what check_metrics computes from it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.data.sources import Where
from experiments.judge.protocols import prompt
from experiments.tasks.helmet.metrics import helmet_json, helmet_reading, rubric_prompts
from experiments.tasks.helmet.records import summ as helmet_summ

FIXTURE = json.loads((Path(__file__).parents[2] / "reference" / "helmet" / "judge_requests.json")
                     .read_text(encoding="utf-8"))
KINDS = ("fluency", "recall", "precision")
RECORDS = {"helmet_book": FIXTURE["infbench_record"], "helmet_legal": FIXTURE["multi_lexsum_record"]}


def _requests(rubric: str, examples: bool = True) -> dict[str, str]:
    ex = helmet_summ(RECORDS[rubric], Where("records.jsonl", 1), "helmet_summ")[0]
    return dict(zip(KINDS, rubric_prompts(prompt, rubric, FIXTURE["output"], ex.meta, ex.answers,
                                          examples=examples)))


@pytest.mark.parametrize("rubric", ["helmet_book", "helmet_legal"])
@pytest.mark.parametrize("kind", KINDS)
def test_requests_equal_helmets_byte_for_byte(rubric, kind):
    # the fixture holds HELMET's prompt strings .format()-ed as check_metrics does (see its "about")
    assert _requests(rubric)[kind] == FIXTURE["requests"][rubric][kind]


def _cut(text: str, start: str, end: str) -> str:
    """``text`` without the part from ``start`` up to (not including) the next ``end``."""
    i = text.index(start)
    return text[:i] + text[text.index(end, i):]


@pytest.mark.parametrize("rubric", ["helmet_book", "helmet_legal"])
def test_without_examples_only_the_examples_go(rubric):
    helmet, ours = FIXTURE["requests"][rubric], _requests(rubric, examples=False)
    fluency = _cut(_cut(helmet["fluency"], "\n  - Examples:", "\n\n- Score 1"), "\n  - Examples:", "\n\nNow, read")
    assert ours == {"fluency": fluency, "recall": _cut(helmet["recall"], "- Examples: use", "\nNow, read"),
                    "precision": _cut(helmet["precision"], "- Examples: use", "\nNow, read")}
    assert not any("Example" in text for text in ours.values())


def test_helmet_reads_the_last_lazy_json_object_else_the_fenced_block():
    assert helmet_json('Point 1 is there. {"recall": 1}') == {"recall": 1}
    assert helmet_json('{"recall": 1} then {"recall": 2}') == {"recall": 2}
    assert helmet_json('Output: {"supported_key_points": [2, 4],\n "recall": 2}') == \
        {"supported_key_points": [2, 4], "recall": 2}
    # the shortest {...} of a nested object does not parse, and there is no ```json block: HELMET reads nothing
    assert helmet_json('{"scores": {"recall": 2}}') is None
    assert helmet_json('```json\n{"a": {"recall": 3}}\n``` and {oops}') == {"a": {"recall": 3}}
    assert helmet_json("no braces here") is None


def test_what_check_metrics_computes_without_checking():
    # a recall above the number of key points, a precision above the sentence count, a fluency of 2: all scored
    assert helmet_reading({"fluency": 1}, {"recall": 5}, {"precision": 1, "sentence_count": 2}, 4) == \
        pytest.approx({"fluency": 1, "recall": 1.25, "precision": 0.5, "f1": 2 * 1.25 * 0.5 / 1.75})
    assert helmet_reading({"fluency": 2}, {"recall": 2.5}, {"precision": 3, "sentence_count": 2}, 5)["f1"] == \
        pytest.approx(2 * 2 * 0.5 * 1.5 / 2.0)
    # recall is not read without key points, precision not unless sentence_count > 0
    assert helmet_reading({"fluency": 1}, {}, {"sentence_count": 0}, 0) == \
        {"fluency": 1, "recall": 0.0, "precision": 0.0, "f1": 0.0}
    # a field it reads missing or not a number: check_metrics stops (KeyError, TypeError), no score
    assert helmet_reading({}, {"recall": 1}, {"precision": 1, "sentence_count": 1}, 2) is None
    assert helmet_reading({"fluency": "yes"}, {"recall": 1}, {"precision": 1, "sentence_count": 1}, 2) is None
    assert helmet_reading({"fluency": 1}, {"recall": 1}, {"precision": 1}, 2) is None


def test_book_recall_follows_helmets_current_text_not_its_first_commits_typo():
    # HELMET's first commit (985b73b) has "Smyrna ot America"; every commit from f4744f0 on has "Smyrna to America"
    recall = FIXTURE["requests"]["helmet_book"]["recall"]
    assert "escape from Smyrna to America so key point 5" in recall and "Smyrna ot" not in recall
    assert _requests("helmet_book")["recall"] == recall

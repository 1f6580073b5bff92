"""LongBench v2 parity: its prompt files byte for byte, pred.py's prompt filling, extract_answer and judge, and
result.py's table (plain and compensated), on hand-made records in the published schema."""
from __future__ import annotations

import hashlib
from importlib.resources import files

import pytest

from compressors.base import CompressedContext
from experiments.data.sources import DataError, Where
from experiments.scoring.registry import score_item
from experiments.tasks import build_followup_request, build_prompt, get_task
from experiments.tasks.longbench_v2.metrics import extract_answer, results_table
from experiments.tasks.longbench_v2.records import convert as longbench_v2
from indexes.types import Passage

CHOICES = "What is the correct answer to this question: $Q$\nChoices:\n(A) $C_A$\n(B) $C_B$\n(C) $C_C$\n(D) $C_D$\n\n"
FORMAT = 'Format your response as follows: "The correct answer is (insert answer here)".'
# The reference text as read from THUDM/LongBench prompts/ (commits 072a5a7 and c5ea10b), with its lengths.
REFERENCE = {
    "0shot.txt": ("Please read the following text and answer the question below.\n\n<text>\n$DOC$\n</text>\n\n"
                  + CHOICES + FORMAT, 262),
    "0shot_cot.txt": ("Please read the following text and answer the questions below.\n\n<text>\n$DOC$\n</text>\n\n"
                      + CHOICES + "Let\u2019s think step by step:", 210),
    "0shot_cot_ans.txt": ("Please read the following text and answer the questions below.\n\nThe text is too long and "
                          "omitted here.\n\n" + CHOICES + "Let\u2019s think step by step: $COT$\n\nBased on the above, "
                          "what is the single, most likely answer choice? " + FORMAT, 381),
    "0shot_rag.txt": ("Please read the following retrieved text chunks and answer the question below.\n\n<text>\n$DOC$\n"
                      "</text>\n\n" + CHOICES + FORMAT, 279),
    "0shot_no_context.txt": (CHOICES + "What is the single, most likely answer choice? " + FORMAT, 224),
}
RECORD = {"_id": "66f36490821e116aacb2cc22", "domain": "Single-Document QA", "sub_domain": "Financial",
          "difficulty": "hard", "length": "short", "question": "  Which year did the firm list?  ",
          "choice_A": " 1999", "choice_B": "2001 ", "choice_C": "2003", "choice_D": "2005", "answer": "B",
          "context": "\n The firm listed in 2001. Revenue grew. \n"}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_prompt_files_are_the_released_ones_byte_for_byte(name):
    text, length = REFERENCE[name]
    ours = (files("experiments.tasks") / "longbench_v2" / name).read_bytes()
    assert ours == text.encode("utf-8") and len(text) == length
    assert hashlib.sha256(ours).hexdigest() == hashlib.sha256(text.encode()).hexdigest()


def _example():
    return longbench_v2(RECORD, Where("data.json", 1), "longbench_v2")[0]


def test_prompt_is_filled_as_pred_py_does():
    ex = _example()
    prompt = build_prompt(get_task("longbench_v2"), ex.context, ex)
    expected = REFERENCE["0shot.txt"][0].replace("$DOC$", RECORD["context"].strip()).replace(
        "$Q$", RECORD["question"].strip()).replace("$C_A$", "1999").replace("$C_B$", "2001").replace(
        "$C_C$", "2003").replace("$C_D$", "2005")
    assert prompt == expected
    none = build_prompt(get_task("longbench_v2_no_context"), ex.context, ex)
    assert "The firm listed" not in none and none.startswith("What is the correct answer to this question: Which")


def test_kept_chunks_are_shown_as_retrieved_chunks_in_document_order():
    """pred.py --rag: retrieved chunks sorted by c_idx, 'Retrieved chunk i: content' joined by blank lines."""
    from dataclasses import replace

    passages = tuple(Passage(text=t, doc_id=f"{RECORD['_id']}#c{i}") for i, t in enumerate(["first.", "second.", "third."]))
    ex = replace(_example(), passages=passages)
    kept = CompressedContext(text="third.\n\nfirst.", kept_chunks=("c2", "c0"), passages=(passages[2], passages[0]))
    prompt = build_prompt(get_task("longbench_v2"), kept, ex)
    assert prompt.startswith("Please read the following retrieved text chunks")
    assert "<text>\nRetrieved chunk 1: first.\n\nRetrieved chunk 2: third.\n</text>" in prompt
    full = CompressedContext(text=ex.context, passages=passages)  # the full arm keeps no chunks: 0-shot prompt
    assert build_prompt(get_task("longbench_v2"), full, ex).startswith("Please read the following text and")


def test_cot_second_request_carries_the_stripped_reasoning():
    ex = _example()
    spec = get_task("longbench_v2_cot")
    assert spec.max_new_tokens == 1024 and build_followup_request(get_task("longbench_v2"), "x", ex) is None
    request = build_followup_request(spec, "  The firm listed in 2001.\n", ex)
    assert request.max_new_tokens == 128
    assert "Let\u2019s think step by step: The firm listed in 2001.\n\nBased on the above" in request.prompt
    assert "$DOC$" not in request.prompt and "The text is too long and omitted here." in request.prompt


@pytest.mark.parametrize("response, letter", [
    ("The correct answer is (B)", "B"),
    ("**The correct answer is (C)**", "C"),        # every * is dropped first
    ("The correct answer is D.", "D"),             # the second pattern
    ("The correct answer is A, no wait: The correct answer is (B)", "B"),  # the parenthesised pattern wins
    ("The correct answer is (E)", None),
    ("the correct answer is (A)", None),           # case-sensitive, as the regexes
    ("Answer: B", None),
])
def test_extract_answer_two_patterns(response, letter):
    assert extract_answer(response) == letter


def test_judge_and_compensated():
    assert score_item("The correct answer is (B)", ["B"], metric="longbench_v2_acc").value == 1.0
    assert score_item("I cannot tell", ["B"], metric="longbench_v2_acc").value == 0.0
    assert score_item("I cannot tell", ["B"], metric="longbench_v2_acc_compensated").value == 0.25
    assert score_item("The correct answer is (A)", ["B"], metric="longbench_v2_acc_compensated").value == 0.0


def test_results_table_follows_result_py():
    # (judge, difficulty, length): easy 2/3, hard ("hard" and anything else) 1/3; short 1/2, medium 1/2, long 1/2
    items = [(1.0, "easy", "short"), (1.0, "easy", "medium"), (0.0, "easy", "long"), (1.0, "hard", "long"),
             (0.0, "hard", "short"), (0.0, "unknown", "medium")]
    assert results_table(items) == {"Overall": 50.0, "Easy": 66.7, "Hard": 33.3, "Short": 50.0, "Medium": 50.0,
                                    "Long": 50.0}
    # compensated: no answer counts 0.25 -> easy (1 + 1 + 0.25) / 3 = 75.0
    assert results_table([(1.0, "easy", "short"), (1.0, "easy", "short"), (0.25, "easy", "huge")])["Easy"] == 75.0
    assert results_table([(1.0, "easy", "short")])["Hard"] != results_table([(1.0, "easy", "short")])["Hard"]  # NaN


def test_loader_fields_and_errors():
    ex = _example()
    assert (ex.id, ex.answers, ex.meta["difficulty"], ex.meta["length_bucket"]) == (RECORD["_id"], ("B",), "hard", "short")
    with pytest.raises(DataError, match=r"data.json:3: field 'answer'"):
        longbench_v2({**RECORD, "answer": "E"}, Where("data.json", 3), None)
    with pytest.raises(DataError, match=r"data.json:4: field 'choice_C': missing"):
        longbench_v2({k: v for k, v in RECORD.items() if k != "choice_C"}, Where("data.json", 4), None)

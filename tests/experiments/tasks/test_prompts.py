"""Prompts against the references' own expected strings (LITM's tests/test_prompting.py, LongBench, L-Eval)."""
from __future__ import annotations

import pytest

from compressors.base import CompressedContext
from experiments.data.records import Example
from experiments.scoring import item_score
from experiments.tasks import TASKS, PromptOptions, build_prompt, build_request, get_task
from experiments.tasks.litm import load_litm_qa
from indexes.types import Passage

LITM_QA = (
    "Write a high-quality answer for the given question using only "
    "the provided search results (some of which might be irrelevant)."
)
DOCS = (Passage("first doc text", "first doc"), Passage("second doc text", "second doc"))
DOC_LINES = "Document [1](Title: first doc) first doc text\nDocument [2](Title: second doc) second doc text"


def ex(query: str, context: str = "", answers=("a",), **meta) -> Example:
    return Example(id="x", task="t", query=query, context=context, answers=tuple(answers), meta=meta)


def test_litm_qa_prompt_and_query_aware_variant_equal_the_papers_gold_prompts():
    # nelson-liu/lost-in-the-middle tests/test_prompting.py: test_get_qa_prompt(_query_aware_contextualization)
    ctx = CompressedContext(text="ignored when passages are kept", passages=DOCS)
    task = TASKS.get("nq_multidoc")
    assert build_prompt(task, ctx, ex("test question")) == f"{LITM_QA}\n\n{DOC_LINES}\n\nQuestion: test question\nAnswer:"
    assert build_prompt(task, ctx, ex("test question"), PromptOptions(query_aware=True)) == (
        f"{LITM_QA}\n\nQuestion: test question\n\n{DOC_LINES}\n\nQuestion: test question\nAnswer:"
    )


def test_litm_qa_falls_back_to_plain_text():
    assert build_prompt(TASKS.get("nq_multidoc"), "some text", ex("q")) == f"{LITM_QA}\n\nsome text\n\nQuestion: q\nAnswer:"


def test_litm_kv_prompt_and_query_aware_variant_equal_the_papers_gold_prompts():
    # tests/test_prompting.py: test_get_kv_retrieval_prompt(_with_query_aware_contextualization)
    pairs = tuple(Passage(f'"test key{i}": "test value{i}"') for i in (1, 2, 3))
    ctx = CompressedContext(text="", passages=pairs)
    data = '{"test key1": "test value1",\n "test key2": "test value2",\n "test key3": "test value3"}'
    head = "Extract the value corresponding to the specified key in the JSON object below."
    assert build_prompt(TASKS.get("kv_retrieval"), ctx, ex("test key2")) == (
        f'{head}\n\nJSON data:\n{data}\n\nKey: "test key2"\nCorresponding value:'
    )
    assert build_prompt(TASKS.get("kv_retrieval"), ctx, ex("test key2"), PromptOptions(query_aware=True)) == (
        f'{head}\n\nKey: "test key2"\n\nJSON data:\n{data}\n\nKey: "test key2"\nCorresponding value:'
    )


def test_litm_closed_book_uses_the_bare_question_prompt():
    # tests/test_prompting.py: test_get_closedbook_qa_prompt
    assert build_prompt(get_task("nq_multidoc"), CompressedContext(text=""), ex("test question")) == (
        "Question: test question\nAnswer:")


def test_longbench_context_with_braces_is_inserted_verbatim():
    context = "def f(x):\n    return {x: '{input}'}\n\\1 {context}"
    prompt = build_prompt(TASKS.get("lcc"), CompressedContext(text=context), ex(""))
    assert prompt == "Please complete the code given below. \n" + context + "Next line of code:\n"
    zh = build_prompt(TASKS.get("multifieldqa_zh"), "北京是首都。", ex("首都是哪里？"))
    assert zh.endswith("问题：首都是哪里？\n回答：") and "\n\n北京是首都。\n\n" in zh


def test_narrativeqa_prompt_keeps_the_released_typo_by_default():
    prompt = build_prompt(get_task("narrativeqa"), "STORY", ex("Who?"))
    assert prompt.startswith("You are given a story, which can be either a novel or a movie script, and a question. "
                             "Answer the question asconcisely as you can")


def test_leval_open_ended_request_is_the_turbo16k_baselines_messages():
    """turbo16k-test.py: system message = get_sys_prompt(...); user = "Document is as follows. {doc} Instruction:
    {inst} " + "The suggested output length is around {len(out.split())} words. Output: "."""
    spec = get_task("financial_qa")
    example = ex("What happened?", "DOC", answers=("one two three four",), reference_words=4)
    request = build_request(spec, "DOC", example)
    assert request.system == ("Now you are given a very long document. Please follow the instruction after this "
                              "document. These instructions may include summarizing a document, answering questions "
                              "based on the document, or writing a required paragraph. ")
    assert request.prompt == ("Document is as follows. DOC Instruction: What happened? The suggested output length "
                              "is around 4 words. Output: ")
    assert request.max_new_tokens == 512
    off = build_request(spec, "DOC", example, PromptOptions(length_instruction=False))
    assert off.prompt == "Document is as follows. DOC Instruction: What happened? Output: "


def test_leval_closed_ended_request_has_no_length_sentence():
    request = build_request(get_task("quality"), "DOC", ex("Which option?"))
    assert request.prompt == ("Document is as follows. DOC Question: Which option? \nPlease directly give answer "
                              "without any additional output or explanation\n Answer: ")
    assert request.system.startswith("Now you are given a very long document. Please follow the instruction based")


def test_litm_prompt_from_real_example(shared_data):
    example = load_litm_qa(shared_data / "lost_in_the_middle" / "nq-open-oracle.jsonl.gz")[0]
    kept = CompressedContext(text=example.context, passages=example.passages)
    first = example.passages[0]
    assert build_prompt(TASKS.get("nq_multidoc"), kept, example) == (
        f"{LITM_QA}\n\nDocument [1](Title: {first.title}) {first.text}\n\nQuestion: {example.query}\nAnswer:"
    )
    assert first.title == "List of Nobel laureates in Physics"


@pytest.mark.parametrize("prediction, answers, expected", [
    ("I am not sure.\nParis", ["Paris"], 0.0),  # evaluate_qa_responses.py: model_answer.split("\n")[0].strip()
    ("  The answer is Paris.  \nmore", ["paris"], 1.0),
    ("\nParis", ["Paris"], 0.0),  # the first line is empty; LongBench's rule would skip it
])
def test_nq_multidoc_scores_as_the_papers_qa_script(prediction, answers, expected):
    spec = get_task("nq_multidoc")
    assert item_score(prediction, answers, metric=spec.metric, first_line_only=spec.first_line_only) == expected


def test_kv_retrieval_scores_as_the_papers_kv_script():
    # evaluate_kv_responses.py: value.lower() in model_answer.lower(), whole answer, no normalisation
    spec, value = get_task("kv_retrieval"), "9f1c2b3a-77de-4e51-8a0b-1c2d3e4f5a6b"
    assert item_score("The value is:\n" + value.upper(), [value], metric=spec.metric) == 1.0
    assert item_score(value.replace("-", ""), [value], metric=spec.metric) == 0.0  # SQuAD normalisation would match

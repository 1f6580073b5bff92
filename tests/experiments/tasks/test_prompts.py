"""Prompts against the references' own expected strings (LITM's prompting tests, LongBench's templates)."""
from __future__ import annotations

from compressors.base import CompressedContext
from experiments.data.loaders import load_litm_qa
from experiments.tasks.prompts import build_prompt
from experiments.tasks import TASKS
from indexes.types import Passage

LITM_QA = (
    "Write a high-quality answer for the given question using only "
    "the provided search results (some of which might be irrelevant)."
)
DOCS = (Passage("first doc text", "first doc"), Passage("second doc text", "second doc"))
DOC_LINES = "Document [1](Title: first doc) first doc text\nDocument [2](Title: second doc) second doc text"


def test_litm_qa_prompt_and_query_aware_variant():
    ctx = CompressedContext(text="ignored when passages are kept", passages=DOCS)
    task = TASKS["nq_multidoc"]
    assert build_prompt(task, ctx, "test question") == f"{LITM_QA}\n\n{DOC_LINES}\n\nQuestion: test question\nAnswer:"
    assert build_prompt(task, ctx, "test question", query_aware=True) == (
        f"{LITM_QA}\n\nQuestion: test question\n\n{DOC_LINES}\n\nQuestion: test question\nAnswer:"
    )


def test_litm_qa_falls_back_to_plain_text():
    assert build_prompt(TASKS["nq_multidoc"], "some text", "q") == f"{LITM_QA}\n\nsome text\n\nQuestion: q\nAnswer:"


def test_litm_kv_prompt_and_query_aware_variant():
    pairs = tuple(Passage(f'"test key{i}": "test value{i}"') for i in (1, 2, 3))
    ctx = CompressedContext(text="", passages=pairs)
    data = '{"test key1": "test value1",\n "test key2": "test value2",\n "test key3": "test value3"}'
    head = "Extract the value corresponding to the specified key in the JSON object below."
    assert build_prompt(TASKS["kv_retrieval"], ctx, "test key2") == (
        f'{head}\n\nJSON data:\n{data}\n\nKey: "test key2"\nCorresponding value:'
    )
    assert build_prompt(TASKS["kv_retrieval"], ctx, "test key2", query_aware=True) == (
        f'{head}\n\nKey: "test key2"\n\nJSON data:\n{data}\n\nKey: "test key2"\nCorresponding value:'
    )


def test_longbench_context_with_braces_is_inserted_verbatim():
    context = "def f(x):\n    return {x: '{input}'}\n\\1 {context}"
    prompt = build_prompt(TASKS["lcc"], CompressedContext(text=context), "")
    assert prompt == "Please complete the code given below. \n" + context + "Next line of code:\n"
    zh = build_prompt(TASKS["multifieldqa_zh"], "北京是首都。", "首都是哪里？")
    assert zh.endswith("问题：首都是哪里？\n回答：") and "\n\n北京是首都。\n\n" in zh


def test_leval_prompt_document_then_instruction():
    prompt = build_prompt(TASKS["leval_financial_qa"], "DOC", "What happened?")
    assert prompt.startswith("Now you are given a very long document.")
    assert prompt.endswith("Document is as follows. DOC Instruction: What happened? Output: ")


def test_litm_prompt_from_real_example_uses_loader_rendering(shared_data):
    example = load_litm_qa(shared_data / "lost_in_the_middle" / "nq-open-oracle.jsonl.gz")[0]
    kept = CompressedContext(text=example.context, passages=example.passages)
    assert build_prompt(TASKS["nq_multidoc"], kept, example.query) == build_prompt(
        TASKS["nq_multidoc"], example.context, example.query
    )
    assert build_prompt(TASKS["nq_multidoc"], kept, example.query).startswith(
        f"{LITM_QA}\n\nDocument [1](Title: List of Nobel laureates in Physics) The first Nobel Prize in Physics"
    )


def test_litm_closed_book_uses_the_bare_question_prompt():
    from compressors.base import CompressedContext
    from experiments.tasks.prompts import build_prompt
    from experiments.tasks import get_task

    assert build_prompt(get_task("nq_multidoc"), CompressedContext(text=""), "who wrote hamlet") == "Question: who wrote hamlet\nAnswer:"


def test_litm_tasks_score_as_the_papers_evaluation_scripts():
    from experiments.scoring import item_score
    from experiments.tasks import get_task

    def score(task, prediction, answers):
        spec = get_task(task)
        return item_score(prediction, answers, metric=spec.metric, first_line_only=spec.first_line_only)

    # evaluate_qa_responses.py: model_answer.split("\n")[0].strip(), then best_subspan_em
    assert score("nq_multidoc", "I am not sure.\nParis", ["Paris"]) == 0.0
    assert score("nq_multidoc", "  The answer is Paris.  \nmore", ["paris"]) == 1.0
    assert score("nq_multidoc", "\nParis", ["Paris"]) == 0.0  # the first line is empty; LongBench's rule would skip it
    # evaluate_kv_responses.py: value.lower() in model_answer.lower(), whole answer, no normalisation
    value = "9f1c2b3a-77de-4e51-8a0b-1c2d3e4f5a6b"
    assert score("kv_retrieval", "The value is:\n" + value.upper(), [value]) == 1.0
    assert score("kv_retrieval", value.replace("-", ""), [value]) == 0.0  # SQuAD normalisation would match

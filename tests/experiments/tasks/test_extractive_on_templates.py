"""The extractive baseline finds the question in the prompt of every shipped task family."""
from __future__ import annotations

import pytest

from compressors.base import CompressedContext
from experiments.data.records import Example
from experiments.tasks import TASKS, build_request, get_task
from indexes.types import Passage
from readers.extractive import ExtractiveReader, split_prompt

QUESTION = "Which harbour did the captain Velmora sail from?"
EVIDENCE = "The captain Velmora sailed from the harbour of Quastin in spring."
FILLER = ("The weather was mild that year. Merchants sold salt and wool in the market. "
          "Several books about the town were published later.")
CONTEXT = f"{FILLER} {EVIDENCE} {FILLER}"

# one task per prompt template shipped: LongBench (each template), L-Eval (open, exam, bare), LITM, M4LE
TEMPLATE_TASKS = sorted({
    *(name for name, spec in TASKS.items() if spec.family == "longbench" and "{input}" in spec.prompt
      and spec.category not in ("few-shot", "code", "synthetic")),
    "leval_financial_qa", "leval_quality", "leval_gsm100", "nq_multidoc", "m4le",
})


def _example(name: str) -> Example:
    passages = (Passage(FILLER, "Town"), Passage(EVIDENCE, "Velmora"), Passage(FILLER, "Market"))
    query = f"Read the passages below and answer the question. Only give the answer.\nQuestion: {QUESTION}" \
        if name == "m4le" else QUESTION
    return Example(id="x", task=name, query=query, context=CONTEXT, answers=("Quastin",), passages=passages,
                   meta={"reference_words": 5})


@pytest.mark.parametrize("name", TEMPLATE_TASKS)
def test_the_question_is_found_and_the_evidence_sentence_returned(name):
    spec = get_task(name)
    example = _example(name)
    context = CompressedContext(text=example.context, passages=example.passages if spec.family == "litm_qa" else ())
    request = build_request(spec, context, example)
    question, _ = split_prompt(request.prompt)
    assert question.startswith(QUESTION), (name, question)
    answer = ExtractiveReader().generate([request])[0].text
    assert "Quastin" in answer, (name, answer)


def test_leval_questions_differ_so_answers_differ():
    """On L-Eval the baseline reads `Instruction:`, so it answers each question of one document differently."""
    spec = get_task("financial_qa")
    context = "Revenue grew to 12 billion dollars. The chief executive is Ada Brook. Costs fell by 3 percent."
    answers = []
    for q in ("How much did revenue grow to?", "Who is the chief executive?", "By how much did costs fall?"):
        request = build_request(spec, context, Example("x", "t", q, context, ("",), meta={"reference_words": 5}))
        answers.append(ExtractiveReader().generate([request])[0].text)
    assert answers == ["Revenue grew to 12 billion dollars.", "The chief executive is Ada Brook.",
                       "Costs fell by 3 percent."]


def test_rulers_single_needle_is_found_at_2k_and_8k_tokens(tmp_path):
    """The template's own sentence ("A special magic number is hidden within the following text.") is instruction,
    not context: read end to end (config, prompt, cached reader), the baseline answers with the needle."""
    from experiments import evaluate

    config = {"name": "niah", "tasks": [{"name": "ruler_niah_single", "generate": {"lengths": [2048, 8192], "n": 3}}],
              "readers": ["extractive"]}
    result = evaluate(config, tmp_path / "run", report=False, progress=False)
    preds = result.data.predictions
    assert sorted(p.meta["length_bucket"] for p in preds) == [2048] * 3 + [8192] * 3
    for p in preds:
        (value,) = p.answers
        assert p.prediction == f"One of the special magic numbers for {p.query.split(' for ')[1].split()[0]} is: {value}."
        assert p.score == 1.0

"""∞Bench, HELMET and RULER scoring against each reference's definition, on hand-made predictions."""
from __future__ import annotations

import math

import pytest

from experiments.data.sources import DataError, Where
from experiments.scoring.registry import aggregate, score_item
from experiments.tasks import build_prompt, get_task
from experiments.tasks.helmet.metrics import parse_output, rouge_lsum, rubric_score
from experiments.tasks.helmet.records import popqa_threshold
from experiments.tasks.helmet.records import rag as helmet_rag
from experiments.tasks.infinitebench.records import convert as infinitebench
from experiments.tasks.ruler.metrics import postprocess_pred


def _score(prediction, answers, metric):
    return score_item(prediction, answers, metric=metric).value


# -- ∞Bench (src/compute_scores.py) ----------------------------------------------------------------------------------

def test_en_qa_f1_squad_normalisation_max_over_labels():
    # "The Old Man" -> "old man"; prediction "an old man!" -> "old man": F1 1.0 against the second label
    assert _score("an old man!", ["the sea", "The Old Man"], "infinitebench_qa_f1") == 1.0
    # tokens {old, man, sea} vs {old, man}: precision 2/3, recall 1 -> F1 0.8
    assert _score("old man sea", ["old man"], "infinitebench_qa_f1") == pytest.approx(0.8)


def test_zh_qa_is_character_f1_after_normalisation():
    # normalize_zh_answer drops punctuation and spaces; characters are the tokens: 北京市 vs 北京 -> P 2/3, R 1
    assert _score("北京市。", ["北 京"], "infinitebench_qa_f1_zh") == pytest.approx(0.8)
    assert _score("上海", ["北京"], "infinitebench_qa_f1_zh") == 0.0


@pytest.mark.parametrize("prediction, expected", [
    ("B", 1.0), ("  B) Paris", 1.0), ("A", 0.0),              # first character A-D decides
    ("Paris", 1.0),                                            # the whole prediction equals the option text
    ("I think the answer is: B.", 1.0),                        # the text after "answer is:" starts with the label
    ("I think the answer is: C and B", 0.0),                   # only the first prefix found is tried
    ("my guess. B is right", 1.0),                             # the first word that is a substring of "ABCD"
    ("no letter here", 0.0), ("", 0.0),
])
def test_en_mc_answer_extraction(prediction, expected):
    record = {"id": 3, "context": "A long book.", "input": "Where?", "answer": ["Paris"],
              "options": ["Rome", "Paris", "Oslo", "Bern"]}
    ex = infinitebench(record, Where("choice.jsonl", 1), "infinitebench_en_mc")[0]
    assert ex.answers == ("Paris", "B")  # get_answer: [option text, letter]
    assert _score(prediction, ex.answers, "infinitebench_choice") == expected


def test_en_mc_prompt_and_loader_errors():
    record = {"id": 3, "context": "A long book.", "input": "Where?", "answer": ["Paris"],
              "options": ["Rome", "Paris", "Oslo", "Bern"]}
    ex = infinitebench(record, Where("choice.jsonl", 1), "infinitebench_en_mc")[0]
    prompt = build_prompt(get_task("infinitebench_en_mc"), ex.context, ex)
    assert prompt == ("Read the book and answer the question.\n\nA long book.\n\nQuestion: Where?\n\nOnly one of the "
                      "following options is correct, tell me the answer using one single letter (A, B, C, or D). "
                      "Don't say anything else.\nA. Rome\nB. Paris\nC. Oslo\nD. Bern")
    with pytest.raises(DataError, match=r"choice.jsonl:7: field 'answer'"):
        infinitebench({**record, "answer": ["Lima"]}, Where("choice.jsonl", 7), None)


def test_en_sum_rouge_lsum_uses_lines_as_sentences():
    # rougeLsum unions LCS over sentences (lines): the two lines cover the one reference sentence
    assert _score("the cat sat\non the mat", ["the cat sat on the mat"], "infinitebench_rouge_lsum") == pytest.approx(1.0)
    # reference 4 tokens, prediction 2 of them: P 1, R 0.5 -> 0.667
    assert _score("cat mat", ["the cat the mat"], "infinitebench_rouge_lsum") == pytest.approx(2 / 3)


# -- HELMET (utils.py, data.py, scripts/eval_gpt4_summ.py) -----------------------------------------------------------

def test_helmet_substring_exact_match_raw_or_parsed():
    assert _score("Answer: The Eiffel Tower, in Paris.", ["eiffel tower"], "helmet_substring_em") == 1.0
    assert _score("It is in France", ["Paris"], "helmet_substring_em") == 0.0
    assert _score("so the answer is Rome. Yes", ["Rome"], "helmet_substring_em") == 1.0
    # eval.py scores a completion after its prompt's "Answer:": "Answer: Me" holds the answer "Answer me"
    assert _score(" Me", ["Answer me"], "helmet_substring_em") == 1.0


@pytest.mark.parametrize("output, prefix, parsed", [
    ("The answer is\nO'Neill", "Answer:", "The answer is"),        # no "Answer:": the first line, as HELMET
    ("Answer: Paris, France", "Answer:", "Paris, France"),           # the rest of the line after the prefix
    ("so the answer is Rome. Yes", "Answer:", "so the answer is Rome. Yes"),
    ("I think\nanswer: answer: Rome\nmore", "Answer:", "Rome"),      # anywhere, any case; a repeated prefix goes
    ("Paris\nmore", "Answer:", "Paris"),
    ("\nParis", "Answer:", ""),                                       # the first line is empty
    ("Here it is.\nSummary: A decree.\nMore.", "Summary:", "A decree."),
])
def test_helmet_parse_output_has_helmets_two_patterns(output, prefix, parsed):
    # HELMET utils.py parse_output: (?:{prefix})(.*)(?:\n|$) case-insensitive, else (?:^)(.*)(?:\n|$)
    assert parse_output(output, prefix) == parsed


def test_helmet_rouge_lsum_is_the_raw_or_the_parsed_output_by_each_tasks_rule():
    # rouge_score rougeLsum, Porter stemmer, lines as sentences; reference: 6 tokens, one sentence
    ref = "the cat sat on the mat"
    opens_with_it = "the cat sat on the mat\nthen it left"  # raw: R 6/6, P 6/9 -> F 0.8; parsed (first line): 1.0
    assert rouge_lsum(opens_with_it, ref) == pytest.approx(0.8)
    assert _score(opens_with_it, [ref], "helmet_rouge_lsum") == pytest.approx(1.0)
    assert _score(opens_with_it, [ref], "helmet_rouge_lsum_multi_lexsum") == pytest.approx(1.0)
    # raw: R 6/6, P 6/11 -> F 12/17. ∞Bench parses after "Answer:", else the first line ("Here is my summary.",
    # F 0): the raw output's 12/17 stands. Multi-LexSum parses after "Summary:": the reference itself, 1.0
    after_summary = "Here is my summary.\nSummary: the cat sat on the mat"
    assert _score(after_summary, [ref], "helmet_rouge_lsum") == pytest.approx(12 / 17)
    assert _score(after_summary, [ref], "helmet_rouge_lsum_multi_lexsum") == pytest.approx(1.0)
    assert get_task("helmet_infbench_sum").metric == "helmet_rouge_lsum"
    assert get_task("helmet_multi_lexsum").metric == "helmet_rouge_lsum_multi_lexsum"


def test_helmet_rouge_lsum_stems_as_helmet_does():
    # HELMET's scorer uses the Porter stemmer: "cats sitting" matches "cat sits"; ∞Bench's (no stemmer) does not
    assert _score("cats sitting", ["cat sits"], "helmet_rouge_lsum") == pytest.approx(1.0)
    assert _score("cats sitting", ["cat sits"], "infinitebench_rouge_lsum") == 0.0


def _popqa(s_pop):
    record = {"question": "Who?", "answers": ["Ann"], "ctxs": [{"title": "T", "text": "Ann.", "has_answer": True}]}
    return {**record, "s_pop": s_pop} if s_pop is not None else record


@pytest.mark.parametrize("task, kept", [
    ("helmet_popqa", [999]),                  # HELMET kilt_popqa_3: log10(s_pop) < 3
    ("helmet_popqa_4", [999, 1000, 5000]),    # the threshold ends the task's name, as HELMET's dataset name
    ("helmet_popqa_2.5", []),
    ("helmet_popqa_inf", [999, 1000, 5000, 10 ** 9]),
    ("helmet_nq", [999, 1000, 5000, 10 ** 9]),  # not PopQA: s_pop is not read
])
def test_helmet_popqa_keeps_the_less_popular_questions(task, kept):
    s_pops = [999, 1000, 5000, 10 ** 9]
    examples = [ex for i, s in enumerate(s_pops) for ex in helmet_rag(_popqa(s), Where("popqa.jsonl", i + 1), task)]
    assert [s_pops[int(ex.source.split(":")[1]) - 1] for ex in examples] == kept
    assert popqa_threshold(task) == ({"helmet_popqa": 3.0, "helmet_popqa_4": 4.0, "helmet_popqa_2.5": 2.5,
                                      "helmet_popqa_inf": math.inf}.get(task))


def test_helmet_popqa_needs_a_positive_s_pop():
    with pytest.raises(DataError, match=r"popqa.jsonl:3: field 's_pop'.*missing"):
        helmet_rag(_popqa(None), Where("popqa.jsonl", 3), "helmet_popqa")
    with pytest.raises(DataError, match=r"popqa.jsonl:4: field 's_pop'.*positive"):
        helmet_rag(_popqa(0), Where("popqa.jsonl", 4), "helmet_popqa")


def test_helmet_rubric_arithmetic():
    # recall 3/4, precision 2/4 -> F1 0.6, times fluency
    assert rubric_score(1, 3, 4, 2, 4)["f1"] == pytest.approx(0.6)
    assert rubric_score(0, 3, 4, 2, 4)["f1"] == 0.0
    assert rubric_score(1, 0, 0, 0, 0) == {"fluency": 1, "recall": 0.0, "precision": 0.0, "f1": 0.0}


# -- RULER (scripts/eval/synthetic/constants.py, scripts/eval/evaluate.py) ------------------------------------------

def test_ruler_string_match_all_and_part():
    refs = ["1234567", "7654321", "1111111", "2222222"]
    assert _score("Values: 1234567 and 7654321", refs, "ruler_match_all") == 0.5   # share of references found
    assert _score("Values: 1234567 and 7654321", refs, "ruler_match_part") == 1.0  # any reference found
    assert _score("nothing", refs, "ruler_match_part") == 0.0
    assert _score("ABCDE fghij", ["abcde", "FGHIJ"], "ruler_match_all") == 1.0       # case-insensitive
    assert postprocess_pred("  a\x01b\tc \n") == "a\nb\nc"                          # control chars -> newlines
    assert aggregate("ruler_match_all", [0.5, 1.0, 0.0]) == 50.0                    # round(100 * mean, 2)

"""Task specs against the references' own files and scripts (LongBench config/, eval.py, pred.py; L-Eval)."""
from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import pytest

from core.errors import UnknownComponentError, UserError
from experiments.scoring import METRICS
from experiments.tasks import TASKS, TaskSpec, get_task

REFERENCE = Path(__file__).resolve().parents[2] / "reference" / "longbench"
PACKAGED = files("experiments.tasks") / "longbench"

# LongBench's eval.py: dataset2metric (the released mapping, written out here as the reference states it)
EVAL_PY_METRICS = {
    "narrativeqa": "qa_f1", "qasper": "qa_f1", "multifieldqa_en": "qa_f1", "multifieldqa_zh": "qa_f1_zh",
    "hotpotqa": "qa_f1", "2wikimqa": "qa_f1", "musique": "qa_f1", "dureader": "rouge_l_zh", "gov_report": "rouge_l",
    "qmsum": "rouge_l", "multi_news": "rouge_l", "vcsum": "rouge_l_zh", "trec": "classification",
    "triviaqa": "qa_f1", "samsum": "rouge_l", "lsht": "classification", "passage_retrieval_en": "retrieval",
    "passage_count": "count", "passage_retrieval_zh": "retrieval_zh", "lcc": "code_sim", "repobench-p": "code_sim",
}
# eval.py scores only the first line for these; pred.py skips the chat template for these
EVAL_PY_FIRST_LINE = {"trec", "triviaqa", "samsum", "lsht"}
PRED_PY_NO_CHAT = {"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"}
# the unmerged upstream fix (THUDM/LongBench config/dataset2prompt.json at 8ae23fd)
FIXED_NARRATIVEQA = (
    "You are given a story, which can be either a novel or a movie script, and a question. Answer the question as "
    "concisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nStory: {context}\n\n"
    "Now, answer the question based on the story as concisely as you can, using a single phrase if possible. Do not "
    "provide any explanation.\n\nQuestion: {input}\n\nAnswer:"
)


@pytest.mark.parametrize("name", ["dataset2prompt.json", "dataset2maxlen.json"])
def test_packaged_longbench_config_is_the_released_file_byte_for_byte(name):
    assert (PACKAGED / name).read_bytes() == (REFERENCE / name).read_bytes()


def test_specs_carry_the_released_prompts_and_limits_typos_included():
    prompts = json.loads((REFERENCE / "dataset2prompt.json").read_text(encoding="utf-8"))
    maxlen = json.loads((REFERENCE / "dataset2maxlen.json").read_text(encoding="utf-8"))
    longbench = {name: spec for name, spec in TASKS.items() if spec.family == "longbench"}
    assert set(longbench) == set(prompts) == set(maxlen) == set(EVAL_PY_METRICS)
    for name, spec in longbench.items():
        assert spec.prompt == prompts[name] and spec.max_new_tokens == maxlen[name]
    assert TASKS.get("narrativeqa").prompt.count("asconcisely") == 2


def test_prompt_fixes_are_opt_in_and_equal_the_upstream_fix():
    spec = get_task("narrativeqa")
    assert spec.with_fixes().prompt == FIXED_NARRATIVEQA
    assert spec.prompt != FIXED_NARRATIVEQA
    assert get_task("qasper").with_fixes().prompt == get_task("qasper").prompt  # nothing to fix there


def test_metrics_first_line_and_chat_follow_eval_py_and_pred_py():
    longbench = {name: spec for name, spec in TASKS.items() if spec.family == "longbench"}
    assert {n: s.metric for n, s in longbench.items()} == EVAL_PY_METRICS
    assert {n for n, s in longbench.items() if s.first_line_only} == EVAL_PY_FIRST_LINE
    assert {n for n, s in longbench.items() if s.chat is False} == PRED_PY_NO_CHAT
    assert all(spec.metric in METRICS for _, spec in TASKS.items())


def test_leval_sends_the_baselines_system_prompt_and_length_instruction():
    # Baselines/LEval_config.py get_sys_prompt and turbo16k-test.py
    fin = get_task("financial_qa")
    assert fin.system.startswith("Now you are given a very long document. Please follow the instruction after")
    assert fin.prompt == "Document is as follows. {context} Instruction: {input} Output: "
    assert fin.length_instruction and fin.length_sentence == "The suggested output length is around {n} words."
    coursera = get_task("coursera")
    assert "there could be a sinlge correct option or multiple" in coursera.system  # typo as released
    assert not coursera.length_instruction and coursera.metric == "leval_em"
    assert get_task("gsm100").prompt == "{context}\n\n{input}"


def test_get_task_accepts_longbench_e_bare_leval_names_and_task_files(tmp_path):
    for name in ("qasper", "hotpotqa", "lcc"):
        assert get_task(f"{name}_e") is TASKS.get(name)
    assert get_task("financial_qa").name == "leval_financial_qa"
    assert get_task("gov_report").family == "longbench"  # LongBench wins a bare-name clash
    assert get_task("gov_report_summ").metric == "leval_rouge_l"
    task_file = tmp_path / "my_task.yaml"
    task_file.write_text("name: my_task\nfamily: litm_qa\ncategory: multi-doc qa\nlang: en\nmetric: best_subspan_em\n"
                         "max_new_tokens: 20\nprompt: '{search_results} Q: {question} A:'\n", encoding="utf-8")
    spec = get_task(str(task_file))
    assert isinstance(spec, TaskSpec) and spec.metric == "best_subspan_em" and spec.source == str(task_file)
    task_file.write_text("name: x\ncolour: red\n", encoding="utf-8")
    with pytest.raises(UserError, match="unknown key colour"):
        get_task(str(task_file))


def test_unknown_task_suggests_close_names():
    with pytest.raises(UnknownComponentError, match="hotpotqa"):
        get_task("hotpotq")


def test_a_task_typo_suggests_and_lists_the_names_configs_use():
    with pytest.raises(UnknownComponentError) as err:
        get_task("natural_questoin")
    message = str(err.value)
    assert "Did you mean 'natural_question'" in message
    known = message.split("Known", 1)[1]
    assert ", natural_question," in known and ", leval_natural_question," in known  # configs write the first
    assert get_task("natural_question") is get_task("leval_natural_question")

"""Task specs against LongBench's released configuration (dataset2maxlen, eval.py, pred.py)."""
from __future__ import annotations

import pytest

from experiments.scoring import METRICS
from experiments.tasks import LONGBENCH_E, TASKS, get_task

LONGBENCH = [
    "narrativeqa", "qasper", "multifieldqa_en", "multifieldqa_zh", "hotpotqa", "2wikimqa", "musique", "dureader",
    "gov_report", "qmsum", "multi_news", "vcsum", "trec", "triviaqa", "samsum", "lsht", "passage_count",
    "passage_retrieval_en", "passage_retrieval_zh", "lcc", "repobench-p",
]


def test_all_21_longbench_datasets_with_known_metrics():
    longbench = [name for name, spec in TASKS.items() if spec.family == "longbench"]
    assert sorted(longbench) == sorted(LONGBENCH)
    assert all(spec.metric in METRICS for spec in TASKS.values())


@pytest.mark.parametrize(
    "name, max_new, metric, category, lang",
    [
        ("narrativeqa", 128, "qa_f1", "single-doc qa", "en"),
        ("multifieldqa_zh", 64, "qa_f1_zh", "single-doc qa", "zh"),
        ("hotpotqa", 32, "qa_f1", "multi-doc qa", "en"),
        ("dureader", 128, "rouge_l_zh", "multi-doc qa", "zh"),
        ("gov_report", 512, "rouge_l", "summarization", "en"),
        ("samsum", 128, "rouge_l", "few-shot", "en"),
        ("lsht", 64, "classification", "few-shot", "zh"),
        ("passage_retrieval_zh", 32, "retrieval_zh", "synthetic", "zh"),
        ("repobench-p", 64, "code_sim", "code", "code"),
    ],
)
def test_longbench_spec_values(name, max_new, metric, category, lang):
    spec = TASKS[name]
    assert (spec.max_new_tokens, spec.metric, spec.category, spec.lang) == (max_new, metric, category, lang)


def test_first_line_and_completion_style_sets():
    # LongBench's eval.py for these four; Lost in the Middle's metrics make their own cut
    assert {n for n, s in TASKS.items() if s.first_line_only} == {"trec", "triviaqa", "samsum", "lsht"}
    assert {n for n, s in TASKS.items() if s.chat is False} == {"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"}


def test_qa_prompts_state_the_instruction_before_and_after_the_context():
    prompt = TASKS["hotpotqa"].prompt
    instruction = "Answer the question based on the given passages."
    assert prompt.index(instruction) < prompt.index("{context}") < prompt.rindex(instruction) < prompt.index("{input}")


def test_get_task_accepts_longbench_e_and_bare_leval_names():
    assert len(LONGBENCH_E) == 13
    assert all(get_task(f"{name}_e") is TASKS[name] for name in LONGBENCH_E)
    assert get_task("financial_qa").name == "leval_financial_qa"
    assert get_task("gov_report").family == "longbench"  # LongBench wins a bare-name clash
    assert get_task("gov_report_summ").metric == "leval_rouge_l"
    assert get_task("leval_quality").metric == "leval_em"


def test_litm_specs():
    assert (TASKS["nq_multidoc"].metric, TASKS["nq_multidoc"].max_new_tokens) == ("litm_qa_em", 100)
    assert (TASKS["kv_retrieval"].family, TASKS["kv_retrieval"].max_new_tokens) == ("litm_kv", 100)


def test_unknown_task_suggests_close_names():
    with pytest.raises(KeyError) as info:
        get_task("hotpotq")
    assert "hotpotqa" in str(info.value)

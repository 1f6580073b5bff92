"""ctxcomp's prompt and scoring versions (core.versions) are bumped whenever prompt building or scoring changes.

Each version records, per task, a digest of the requests ctxcomp builds for a fixed set of examples (every
option and variant its family takes), and per metric a digest of the scores it gives a fixed set of predictions.
A change that alters a digest fails here until the version is bumped and the new digests recorded under it, so
no generation cached under the old prompts (or scored under the old rules) is taken for a new one.

To record: run this file; the failure prints the table to paste as ``PROMPTS[N]`` / ``SCORES[N]``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

from compressors.base import CompressedContext
from core.registry import OWN_PACKAGES
from core.versions import PROMPT_VERSION, SCORING_VERSION
from experiments.data.records import Example
from experiments.tasks.prompts import PromptOptions, build_followup_request, build_request
from indexes.types import Passage

PROMPTS: dict[int, dict[str, str]] = {
    1: {
        "2wikimqa": "5778e442e17a2f8d",
        "dureader": "56a9be460fa70498",
        "gov_report": "63a8701d1bb37ea7",
        "helmet_hotpotqa": "435dfd4fa6173d93",
        "helmet_infbench_sum": "cbc33cb6440c8147",
        "helmet_multi_lexsum": "21165616fc7fe59d",
        "helmet_nq": "435dfd4fa6173d93",
        "helmet_popqa": "435dfd4fa6173d93",
        "helmet_triviaqa": "435dfd4fa6173d93",
        "hotpotqa": "5778e442e17a2f8d",
        "infinitebench_en_mc": "8097336fe4d7e5ad",
        "infinitebench_en_qa": "427f1c7c2b560d0f",
        "infinitebench_en_sum": "189e3b9b3ac85989",
        "infinitebench_zh_qa": "9727b453f38356c7",
        "kv_retrieval": "13928a87df2d117b",
        "lcc": "a636ce54d8ae642d",
        "leval_codeU": "f65e3a3ae6740a3e",
        "leval_coursera": "b655c6b4daaa5d46",
        "leval_financial_qa": "20d07e846f68a954",
        "leval_gov_report_summ": "20d07e846f68a954",
        "leval_gsm100": "2898aee381409069",
        "leval_legal_contract_qa": "20d07e846f68a954",
        "leval_meeting_summ": "20d07e846f68a954",
        "leval_multidoc_qa": "20d07e846f68a954",
        "leval_narrative_qa": "20d07e846f68a954",
        "leval_natural_question": "20d07e846f68a954",
        "leval_news_summ": "20d07e846f68a954",
        "leval_paper_assistant": "20d07e846f68a954",
        "leval_patent_summ": "20d07e846f68a954",
        "leval_quality": "4f7e948aad0974b5",
        "leval_review_summ": "20d07e846f68a954",
        "leval_sci_fi": "c800c1ec7b501c9c",
        "leval_scientific_qa": "20d07e846f68a954",
        "leval_topic_retrieval_longchat": "cb2f24a138b33216",
        "leval_tpo": "4f7e948aad0974b5",
        "leval_tv_show_summ": "20d07e846f68a954",
        "longbench_v2": "7a4ba9433398d03f",
        "longbench_v2_cot": "da741999d929da6e",
        "longbench_v2_no_context": "e707c0710c8f07df",
        "lsht": "74fba067e7dfbbcd",
        "m4le": "23df482ede360120",
        "multi_news": "990ddac305f66607",
        "multifieldqa_en": "bfcc6c788985b269",
        "multifieldqa_zh": "ea161dc3d5821b21",
        "musique": "5778e442e17a2f8d",
        "narrativeqa": "95fc839c6f41fbc2",
        "nq_multidoc": "dad27f6466e7fcdd",
        "passage_count": "2365c4bbbfa6c68a",
        "passage_retrieval_en": "dd7dfcc4fd64e2a2",
        "passage_retrieval_zh": "4e74f9b7531a3642",
        "qasper": "2183eb84eb25ec03",
        "qmsum": "1067f66456a7c5e2",
        "repobench-p": "c63e9d6adec1aa40",
        "ruler_cwe": "4dddc06a0e16f81f",
        "ruler_fwe": "b03fb75ec8e6f6e6",
        "ruler_niah_multikey": "c083e60a6067cac4",
        "ruler_niah_multiquery": "c083e60a6067cac4",
        "ruler_niah_multivalue": "c083e60a6067cac4",
        "ruler_niah_single": "c083e60a6067cac4",
        "ruler_qa": "abc33fcffb88d2da",
        "ruler_vt": "c9a4b66d067614e2",
        "samsum": "df0a44d42cd112e8",
        "trec": "8af47b03ab1233a0",
        "triviaqa": "7488851ee1adf66b",
        "vcsum": "4c3c0f05c1e97b9e",
    },
}

SCORES: dict[int, dict[str, str]] = {
    1: {
        "best_subspan_em": "da57084e04f9c3aa",
        "classification": "77a80b406cd273a9",
        "code_sim": "f5571be69f5d516c",
        "code_sim_levenshtein": "f091c1103897391a",
        "count": "bac8cff20b02f307",
        "helmet_rouge_lsum": "41a0318d44e73b0f",
        "helmet_rouge_lsum_multi_lexsum": "848b15cbb146d07e",
        "helmet_substring_em": "da57084e04f9c3aa",
        "infinitebench_choice": "f27f0097ffca9df6",
        "infinitebench_qa_f1": "41a942174e373882",
        "infinitebench_qa_f1_zh": "6ab2003fd90a75b4",
        "infinitebench_rouge_lsum": "73f424ba2ee99d41",
        "leval_em": "3b7e03c095a65472",
        "leval_em_first_line": "3b7e03c095a65472",
        "leval_f1": "41a942174e373882",
        "leval_rouge_1": "cac1ef922ae3a271",
        "leval_rouge_2": "b0bdcd0f1377f279",
        "leval_rouge_gm": "87a40e1192ee3466",
        "leval_rouge_l": "73f424ba2ee99d41",
        "litm_kv_accuracy": "b3a8d77790b80f32",
        "litm_qa_em": "70883f623689d2a8",
        "longbench_v2_acc": "8e3f492cfece4007",
        "longbench_v2_acc_compensated": "871ebfaa1e56f542",
        "qa_f1": "41a942174e373882",
        "qa_f1_zh": "fbcab65de862908b",
        "retrieval": "e6389cd2e777bed8",
        "retrieval_zh": "05126699f53db8ec",
        "rouge_l": "254db835c6b950db",
        "rouge_l_zh": "6ae5f91954463688",
        "ruler_match_all": "118e9582fc7601f7",
        "ruler_match_part": "b3a8d77790b80f32",
    },
}

PASSAGES = (Passage("Paris is the capital of France. {braces} stay.", "France", "d0", is_gold=True),
            Passage("Berlin is the capital of Germany.", "Germany", "d1"),
            Passage("The Loire is the longest river in France.", "Loire", "d2"))
META = {"reference_words": 7, "choice_A": "Paris", "choice_B": "Lyon", "choice_C": "Nice", "choice_D": "Lille",
        "OPTION_A": "Paris", "OPTION_B": "Lyon", "query": "the capital", "type_needle_v": "city", "num_v": "1",
        "singular": True}


def _examples() -> list[Example]:
    context = "\n\n".join(p.text for p in PASSAGES)
    return [Example("e1", "t", "What is the capital of France? $Q$ {input}", context, ("Paris", "the city of Paris"),
                    passages=PASSAGES, meta=dict(META)),
            Example("e2", "t", "请问法国的首都是哪里？", "巴黎是法国的首都。" * 3, ("巴黎",), lang="zh", meta=dict(META))]


def _contexts(ex: Example) -> list[CompressedContext | str]:
    kept = ex.passages[:2]
    return [ex.context, "",
            CompressedContext(text="\n\n".join(p.text for p in kept), passages=kept,
                              kept_chunks=tuple(p.doc_id for p in kept), tokens_in=30, tokens_out=20)]


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]


def prompt_digests() -> dict[str, str]:
    """Per built-in task: a digest of every request built for the fixed examples, contexts and options."""
    from experiments.tasks import TASKS

    out = {}
    for name in TASKS.names():
        if TASKS.is_plugin(name):
            continue
        spec = TASKS.get(name)
        requests = []
        for ex in _examples():
            for context in _contexts(ex):
                for options in (PromptOptions(), PromptOptions(query_aware=True),
                                PromptOptions(length_instruction=bool(spec.length_sentence), max_new_tokens=5)):
                    r = build_request(spec, context, ex, options)
                    requests.append([r.prompt, r.max_new_tokens, r.chat, r.system, list(r.stop)])
            follow = build_followup_request(spec, "Because Paris. The answer is (A)", ex)
            if follow is not None:
                requests.append([follow.prompt, follow.max_new_tokens, follow.chat, follow.system])
        out[name if spec.prompt_version == 1 else f"{name}@{spec.prompt_version}"] = _digest(requests)
    return out


PREDICTIONS = ["Paragraph 1", "Answer: Paris", "Summary: Paris is the capital.\nIt is large.", "The answer is (B)",
               "Paris", "paris.", "The answer is Paris, the city of Paris.", "Lyon", "", "\nParis\nmore lines",
               "The correct answer is (A)", "巴黎", "A", "def f():\n    return 1", "Paris Lyon Nice"]
ANSWERS = [("Paris",), ("Paris", "the city of Paris"), ("巴黎",), ("A",), ("def f():\n    return 2",),
           ("Paris Lyon",), ("Paragraph 1",), ("段落1",)]


def score_digests() -> dict[str, str]:
    """Per built-in metric: a digest of the item scores (and parts) for every fixed prediction x answers."""
    from experiments.scoring import METRICS
    from experiments.scoring.registry import score_item

    out = {}
    for name in METRICS.names():
        metric = METRICS.get(name)
        if (getattr(metric, "__module__", "") or "").split(".")[0] not in OWN_PACKAGES and METRICS.is_plugin(name):
            continue
        scores = []
        for prediction in PREDICTIONS:
            for answers in ANSWERS:
                for first_line_only in (False, True):
                    try:
                        s = score_item(prediction, answers, metric=name, all_classes=("Paris", "Lyon"),
                                       first_line_only=first_line_only)
                    except ValueError as err:  # an answer of a shape the metric refuses (retrieval's "Paragraph N")
                        scores.append(type(err).__name__)
                        continue
                    scores.append([round(s.value, 9), {k: round(v, 9) for k, v in sorted(s.parts.items())}])
        out[name] = _digest(scores)
    return out


def _check(constant: str, version: int, table_name: str, recorded: dict[int, dict[str, str]],
           now: dict[str, str]) -> None:
    table = json.dumps(now, indent=4, sort_keys=True)
    assert version in recorded and recorded[version], (
        f"core.versions.{constant} = {version} has no recorded digests; record these as "
        f"{table_name}[{version}] in {__file__}:\n{table}")
    mine = recorded[version]
    changed = sorted(k for k in mine if k in now and now[k] != mine[k])
    assert not changed, (
        f"the output of {', '.join(changed)} changed without a version bump: "
        + ("bump the task's `prompt_version` (its benchmark's tasks.yaml; recorded as task@N) where only its own "
           "prompts changed, else " if constant == "PROMPT_VERSION" else "")
        + f"bump core.versions.{constant} to {version + 1} and record these as {table_name}[{version + 1}] in {__file__} (every cached generation "
        f"is then asked again, which is the point):\n{table}")
    new = sorted(set(now) - set(mine))
    assert not new, (f"new entries {', '.join(new)}: add their digests to {table_name}[{version}] (no bump: "
                     "nothing cached changes):\n" + json.dumps({k: now[k] for k in new}, indent=4))


def test_prompt_building_is_recorded_under_its_version():
    _check("PROMPT_VERSION", PROMPT_VERSION, "PROMPTS", PROMPTS, prompt_digests())


def test_scoring_is_recorded_under_its_version():
    _check("SCORING_VERSION", SCORING_VERSION, "SCORES", SCORES, score_digests())


def test_a_task_prompt_version_keys_only_that_tasks_generations(monkeypatch):
    """Bumping one task's ``prompt_version`` changes the cache keys of its requests only; a task at version 1 keeps
    the key it had before tasks had versions (a request without one)."""
    from experiments.tasks import TASKS
    from readers.cache import generation_key

    ex = _examples()[0]
    bumped = dataclasses.replace(TASKS.get("hotpotqa"), prompt_version=2)
    monkeypatch.setitem(TASKS._entries, "hotpotqa", bumped)
    keys = {}
    for name in ("hotpotqa", "qasper"):
        request = build_request(TASKS.get(name), "Paris is in France.", ex)
        unversioned = dataclasses.replace(request, prompt_version=1)
        keys[name] = generation_key("reader", request, "prompt=1") != generation_key("reader", unversioned, "prompt=1")
    assert keys == {"hotpotqa": True, "qasper": False}
    assert "hotpotqa@2" in prompt_digests() and "hotpotqa" not in prompt_digests()


def test_a_prompt_change_is_caught(monkeypatch):
    """The digests see a one-character change in a template."""
    from experiments.tasks import TASKS

    before = prompt_digests()
    spec = TASKS.get("hotpotqa")
    monkeypatch.setitem(TASKS._entries, "hotpotqa", dataclasses.replace(spec, prompt=spec.prompt.replace("Answer", "answer", 1)))
    after = prompt_digests()
    assert [k for k in before if before[k] != after[k]] == ["hotpotqa"]


def test_a_scoring_change_is_caught(monkeypatch):
    """The digests see a metric that rounds its scores once more."""
    from experiments.scoring import METRICS

    before = score_digests()
    metric = METRICS.get("qa_f1")
    monkeypatch.setitem(METRICS._entries, "qa_f1", dataclasses.replace(
        metric, score=lambda p, g, all_classes=(): round(metric.score(p, g, all_classes=all_classes), 1)))
    after = score_digests()
    assert [k for k in before if before[k] != after[k]] == ["qa_f1"]


@pytest.mark.parametrize("field", ["prompt", "scoring"])
def test_every_generation_key_names_the_versions_and_the_backend(field, monkeypatch):
    import core.versions as versions
    from readers.base import GenerationRequest
    from readers.cache import generation_key, key_versions
    from readers.extractive import ExtractiveReader

    reader = ExtractiveReader()
    request = GenerationRequest("Question: who? Answer:", 8)
    tag = key_versions(reader)
    assert tag == f"prompt={PROMPT_VERSION},scoring={SCORING_VERSION}"
    before = generation_key(reader.identity, request, tag)
    monkeypatch.setattr(versions, f"{field.upper()}_VERSION", 99)
    assert generation_key(reader.identity, request, key_versions(reader)) != before


def test_a_transformers_reader_keys_torch_and_transformers_and_an_encoder_its_stack():
    from core.versions import package_version
    from indexes.cache import text_key
    from readers.cache import key_versions
    from readers.hf import HFReader

    reader = HFReader.__new__(HFReader)  # the key's versions come from the class, not from loaded weights
    tag = key_versions(reader)
    assert f"torch={package_version('torch')}" in tag and f"transformers={package_version('transformers')}" in tag
    local = text_key("sentence-transformers/all-MiniLM-L6-v2|doc", "a text")
    assert f"sentence-transformers={package_version('sentence-transformers')}" in local
    assert "torch=" not in text_key("openai:text-embedding-3-small|doc", "a text")  # the model id is its version

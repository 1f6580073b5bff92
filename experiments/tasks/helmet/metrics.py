"""HELMET's automatic metrics and the arithmetic of its summarization rubric, as princeton-nlp/HELMET computes them.

- ``utils.py``: ``parse_output``, ``substring_exact_match_score``, ``calculate_metrics`` (``rougeLsum_f1``);
- ``data.py``: the ``post_process`` of each loader, which scores the raw output and the output as
  ``parse_output`` reads it and keeps the better of the two, metric by metric. The KILT RAG tasks and ∞Bench
  Sum use ``default_post_process`` (``parse_output`` after ``Answer:``); Multi-LexSum uses
  ``load_multi_lexsum``'s own ``post_process`` (after ``Summary:``);
- ``scripts/eval_gpt4_summ.py``: the judge's three requests per summary (``check_metrics``), how it reads the
  judge's JSON (``parse_json``) and how it combines the three numbers.
"""
from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Sequence

from experiments.scoring.registry import metric
from experiments.tasks.prompts import fill_template
from indexes.text import normalize_answer

ANSWER_PREFIX = "Answer:"    # data.py default_post_process: parse_output(prediction)
SUMMARY_PREFIX = "Summary:"  # data.py load_multi_lexsum post_process: parse_output(prediction, system_template)
_FIRST_LINE = re.compile(r"(?:^)(.*)(?:\n|$)")


def parse_output(output: str, prefix: str = ANSWER_PREFIX) -> str | None:
    """HELMET ``utils.py`` ``parse_output``: the rest of the line after the first ``prefix`` (case-insensitive),
    else the first line; stripped, with a repeated leading ``prefix`` removed.

    HELMET puts ``prefix`` into its pattern unescaped; both prefixes it passes here (``Answer:``,
    ``Summary:``) hold no pattern characters, so escaping it changes nothing.  None is unreachable (the
    first-line pattern always matches) but kept, as HELMET's callers test for it.
    """
    after_prefix = re.compile(f"(?:{re.escape(prefix)})(.*)(?:\\n|$)", flags=re.IGNORECASE)
    for pattern in (after_prefix, _FIRST_LINE):
        match = pattern.search(output)
        if match is not None:
            repeated = re.compile("^" + re.escape(prefix), flags=re.IGNORECASE)
            return repeated.sub("", match[1].strip()).strip()
    return None


def raw_or_parsed(score: Callable[[str, str], float], prediction: str, ground_truth: str,
                  prefix: str = ANSWER_PREFIX) -> float:
    """HELMET ``data.py`` ``post_process``: the score of the raw output or of ``parse_output(output, prefix)``,
    whichever is higher."""
    raw = score(prediction, ground_truth)
    parsed = parse_output(prediction, prefix)
    return raw if parsed is None else max(raw, score(parsed, ground_truth))


def substring_exact_match(prediction: str, ground_truth: str) -> float:
    """HELMET ``substring_exact_match_score``: the normalised answer is a substring of the normalised prediction."""
    return float(normalize_answer(ground_truth) in normalize_answer(prediction))


@metric("helmet_substring_em", reference="HELMET utils.py substring_exact_match_score via data.py default_post_process")
def helmet_substring_em(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """HELMET's RAG score: substring exact match of the raw output or of ``parse_output`` of it, whichever is higher.

    The KILT RAG prompts are completed without a chat template, so HELMET's ``eval.py`` ``run_test`` puts the
    prompt's ``Answer:`` back before the completion first (``system_template + output``); so does this.
    """
    return raw_or_parsed(substring_exact_match, ANSWER_PREFIX + prediction, ground_truth)


@functools.lru_cache(maxsize=None)
def _lsum():
    from rouge_score import rouge_scorer  # lazy

    return rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=True)


def rouge_lsum(prediction: str, ground_truth: str) -> float:
    """HELMET ``calculate_metrics``' ``rougeLsum_f1`` for one reference: rouge_score's ``rougeLsum`` F-measure
    with the Porter stemmer and the default tokenizer, lines as sentences."""
    return float(_lsum().score(ground_truth, prediction)["rougeLsum"].fmeasure)


@metric("helmet_rouge_lsum", reference="HELMET utils.py calculate_metrics rougeLsum_f1 via data.py default_post_process")
def helmet_rouge_lsum(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """HELMET's ∞Bench Sum ROUGE-Lsum: the raw output's or the one parsed after ``Answer:``, whichever is higher.

    ``parse_output`` falls back to the first line, so in practice a summary scores on its first line too.
    HELMET's headline summary score is the judge's; this is the automatic one beside it.
    """
    return raw_or_parsed(rouge_lsum, prediction, ground_truth, ANSWER_PREFIX)


@metric("helmet_rouge_lsum_multi_lexsum",
        reference="HELMET utils.py calculate_metrics rougeLsum_f1 via data.py load_multi_lexsum post_process")
def helmet_rouge_lsum_multi_lexsum(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """HELMET's Multi-LexSum ROUGE-Lsum: the raw output's or the one parsed after ``Summary:``, whichever is higher.

    ``parse_output`` falls back to the first line when the output holds no ``Summary:``.
    """
    return raw_or_parsed(rouge_lsum, prediction, ground_truth, SUMMARY_PREFIX)


# -- the summarization rubric (scripts/eval_gpt4_summ.py) -----------------------------------------------------------

# the judge's request templates of each rubric, files of experiments/judge/prompts/: HELMET's prompt strings
# (book: ∞Bench Sum, *_book; legal: Multi-LexSum) with their few-shot examples between the markers below
RUBRICS = {
    "helmet_book": {"fluency": "helmet_fluency_book", "recall": "helmet_recall_book",
                    "precision": "helmet_precision_book"},
    "helmet_legal": {"fluency": "helmet_fluency_legal", "recall": "helmet_recall_legal",
                     "precision": "helmet_precision_legal"},
}
EXAMPLES = re.compile(r"<<examples>>(.*?)<</examples>>", flags=re.DOTALL)
HELMET_JUDGE_MAX_NEW_TOKENS = 4096  # eval_gpt4_summ.py: OpenAIModel(..., generation_max_length=4096)


def with_examples(template: str, examples: bool = True) -> str:
    """A rubric template with its few-shot examples (HELMET's text exactly) or without them (ours)."""
    return EXAMPLES.sub(lambda m: m[1] if examples else "", template)


def keypoints(meta: Mapping[str, Any]) -> list[str]:
    """A record's key points (HELMET's key-point files, carried as a JSON list in ``meta["keypoints"]``)."""
    return json.loads(meta.get("keypoints") or "[]")


def rubric_prompts(read: Callable[[str], str], rubric: str, prediction: str, meta: Mapping[str, Any],
                   answers: Sequence[str], *, examples: bool = True) -> list[str]:
    """The fluency, recall and precision requests for one summary, as ``check_metrics`` builds them: the output
    stripped, key points numbered ``1. ...``, the expert summary from ``meta`` (Multi-LexSum's ``summary/long``;
    ∞Bench's reference, HELMET's ``d["answer"][0]``)."""
    names, summary = RUBRICS[rubric], prediction.strip()
    expert = meta.get("expert_summary") or (answers[0] if answers else "")
    numbered = "\n".join(f"{i}. {p}" for i, p in enumerate(keypoints(meta), 1))
    template = lambda kind: with_examples(read(names[kind]), examples)  # noqa: E731
    return [fill_template(template("fluency"), text=summary),
            fill_template(template("recall"), keypoints=numbered, summary=summary),
            fill_template(template("precision"), expert_summary=expert, summary=summary)]


_JSON_LAZY = re.compile(r"\{.*?\}", flags=re.DOTALL)
_JSON_FENCED = re.compile(r"(?:```json)(.+)(?:```)", flags=re.DOTALL)


def helmet_json(text: str) -> Any:
    """HELMET ``parse_json`` (the 2025 version): the last ``{...}`` (shortest, across lines) that parses, else
    what sits between the first ```` ```json ```` and the last ```` ``` ````; None when neither parses."""
    matches = _JSON_LAZY.findall(text)
    if not matches:
        return None
    for candidate in (matches[-1], *_JSON_FENCED.findall(text)[-1:]):
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    return None


def rubric_score(fluency: float, recall: float, n_keypoints: int, precision: float,
                 sentence_count: float) -> dict[str, float]:
    """HELMET ``check_metrics``: recall = found / key points (0 without key points), precision = supported /
    sentences (0 unless sentences > 0), and ``f1 = fluency * 2 * recall * precision / (recall + precision)``
    (0 unless recall + precision > 0); ``f1`` is the item's score."""
    rec = recall / n_keypoints if n_keypoints > 0 else 0.0
    prec = precision / sentence_count if sentence_count > 0 else 0.0
    f1 = fluency * 2 * rec * prec / (rec + prec) if rec + prec > 0 else 0.0
    return {"fluency": fluency, "recall": rec, "precision": prec, "f1": f1}


def _number(data: Any, key: str) -> float | None:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, (int, float)) and not math.isnan(value) else None


def helmet_reading(fluency: Any, recall: Any, precision: Any, n_keypoints: int) -> dict[str, float] | None:
    """What ``check_metrics`` computes from the three parsed judge outputs, checking nothing: None where it
    would stop (a field it reads is missing or not a number), else :func:`rubric_score` of the raw numbers --
    a recall above the number of key points, a negative count or a fluency of 2 included.  HELMET reads
    ``recall`` only when there are key points and ``precision`` only when ``sentence_count`` > 0."""
    f, count = _number(fluency, "fluency"), _number(precision, "sentence_count")
    r = _number(recall, "recall") if n_keypoints > 0 else 0
    p = _number(precision, "precision") if count is not None and count > 0 else 0
    if f is None or r is None or count is None or p is None:
        return None
    return rubric_score(f, r, n_keypoints, p, count)

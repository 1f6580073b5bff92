"""HELMET's RAG metric (princeton-nlp/HELMET ``utils.py`` ``substring_exact_match_score``, ``parse_output``;
``data.py`` ``default_post_process``) and the arithmetic of its summarization rubric
(``scripts/eval_gpt4_summ.py``).

HELMET scores its KILT RAG tasks (NQ, TriviaQA, HotpotQA, PopQA) by substring exact match: the
SQuAD-normalised answer occurs in the SQuAD-normalised output.  ``default_post_process`` scores the raw
output and the output parsed after ``Answer:`` and keeps the better of the two.
"""
from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Sequence

from experiments.scoring.registry import metric
from experiments.tasks.prompts import fill_template
from indexes.text import normalize_answer

_PARSERS = (
    re.compile(r"(?:\b(?:the\s+)?answer(?:\s+\w+)*\s*[:\-]?\s*)([^\.,\n]+)", flags=re.IGNORECASE),
    re.compile(r"(?:Answer:)(.*)(?:\n|$)", flags=re.IGNORECASE),
    re.compile(r"(?:^)(.*)(?:\n|$)"),
)
_PREFIX = re.compile(r"^" + re.escape("Answer:"), flags=re.IGNORECASE)


def parse_output(output: str) -> str | None:
    """HELMET ``parse_output(output, prefix="Answer:")``: the first capture of three patterns in turn (an
    "answer ..." phrase up to ``.``, ``,`` or a newline; the text after ``Answer:``; the first line), stripped
    and with a repeated leading ``Answer:`` removed."""
    for pattern in _PARSERS:
        match = pattern.search(output)
        if match is not None:
            return _PREFIX.sub("", match[1].strip()).strip()
    return None


def substring_exact_match(prediction: str, ground_truth: str) -> float:
    """HELMET ``substring_exact_match_score``: the normalised answer is a substring of the normalised prediction."""
    return float(normalize_answer(ground_truth) in normalize_answer(prediction))


@metric("helmet_substring_em", reference="HELMET utils.py substring_exact_match_score via data.py default_post_process")
def helmet_substring_em(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """HELMET's RAG score: substring exact match of the raw output or of ``parse_output`` of it, whichever is higher."""
    parsed = parse_output(prediction)
    raw = substring_exact_match(prediction, ground_truth)
    return raw if parsed is None else max(raw, substring_exact_match(parsed, ground_truth))


@functools.lru_cache(maxsize=None)
def _lsum():
    from rouge_score import rouge_scorer  # lazy

    return rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=True)


@metric("helmet_rouge_lsum", reference="HELMET utils.py calculate_metrics rougeLsum_f1")
def helmet_rouge_lsum(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """HELMET ``calculate_metrics``' ``rougeLsum_f1``: rouge_score with the Porter stemmer, lines as sentences, best
    reference (HELMET's headline summary score is the judge's; this is the automatic one it reports beside it)."""
    return float(_lsum().score(ground_truth, prediction)["rougeLsum"].fmeasure)


# -- the summarization rubric (scripts/eval_gpt4_summ.py check_metrics) -----------------------------------------------

# the wording that differs between HELMET's book prompts (∞Bench En.Sum) and legal prompts (Multi-LexSum)
RUBRIC_DOMAINS = {
    "helmet_book": {"domain": "a novel. It should discuss the plots and characters of the story",
                    "details": "dates, entity names, or the location",
                    "extra": " It is also not supported if it introduces new information not present in the expert "
                             "summary, such as additional analysis or commentary on the story."},
    "helmet_legal": {"domain": "a civil lawsuit. The summary is based on a set of legal documents, and it should "
                               "contain a short description of the background, the parties involved, and the "
                               "outcomes of the case",
                     "details": "dates, entity names, or the names of laws and previous court cases", "extra": ""},
}


def rubric_score(fluency: int, recall: int, n_keypoints: int, precision: int, sentence_count: int) -> dict[str, float]:
    """HELMET ``check_metrics``: recall = found / key points (0 without key points), precision = supported /
    sentences (0 without sentences), and ``f1 = fluency * 2 * recall * precision / (recall + precision)`` (0 when
    both are 0); ``f1`` is the item's score."""
    rec = recall / n_keypoints if n_keypoints > 0 else 0.0
    prec = precision / sentence_count if sentence_count > 0 else 0.0
    f1 = fluency * 2 * rec * prec / (rec + prec) if rec + prec > 0 else 0.0
    return {"fluency": fluency, "recall": rec, "precision": prec, "f1": f1}


def keypoints(meta: Mapping[str, Any]) -> list[str]:
    """A record's key points (HELMET's key-point files, carried as a JSON list in ``meta["keypoints"]``)."""
    return json.loads(meta.get("keypoints") or "[]")


def rubric_prompts(read: Callable[[str], str], rubric: str, prediction: str, meta: Mapping[str, Any],
                   answers: Sequence[str]) -> list[str]:
    """The fluency, recall and precision requests for one summary, as ``check_metrics`` builds them: the summary
    stripped, key points numbered ``1. ...``, the expert summary from ``meta`` (else the reference)."""
    words, summary = RUBRIC_DOMAINS[rubric], prediction.strip()
    expert = meta.get("expert_summary") or (answers[0] if answers else "")
    numbered = "\n".join(f"{i}. {p}" for i, p in enumerate(keypoints(meta), 1))
    return [fill_template(read("helmet_fluency"), text=summary),
            fill_template(read("helmet_recall"), domain=words["domain"], summary=summary, keypoints=numbered),
            fill_template(read("helmet_precision"), expert_summary=expert, summary=summary, **words)]

"""LongBench's metrics (THUDM/LongBench ``metrics.py``), number for number.

Each docstring names the function of the reference it follows; deliberate
departures are listed in ``docs/metrics.md``.
"""
from __future__ import annotations

import difflib
import re
import string
from collections import Counter
from typing import Sequence

from experiments.scoring.registry import metric
from indexes.text import normalize_answer

# LongBench's normalize_zh_answer removes ASCII punctuation plus this set.
_ZH_PUNCT = frozenset(
    string.punctuation
    + "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏."
)
_NUMBER = re.compile(r"\d+")


def _jieba_words(text: str) -> list[str]:
    """Chinese words by jieba's default (accurate) mode, as LongBench segments them."""
    import jieba  # lazy: jieba builds its dictionary on first use

    return list(jieba.cut(text, cut_all=False))


def _token_f1(prediction_tokens: Sequence[str], ground_truth_tokens: Sequence[str]) -> float:
    """Bag-of-tokens F1 (SQuAD); 0 when nothing overlaps, so empty inputs score 0."""
    overlap = sum((Counter(prediction_tokens) & Counter(ground_truth_tokens)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(prediction_tokens)
    recall = overlap / len(ground_truth_tokens)
    return 2 * precision * recall / (precision + recall)


def _normalize_zh(text: str) -> str:
    """LongBench's normalize_zh_answer: lowercase, drop Chinese+ASCII punctuation and all whitespace."""
    return "".join(ch for ch in text.lower() if ch not in _ZH_PUNCT and not ch.isspace())


def _fraction_of_numbers_equal(prediction: str, target: str) -> float:
    numbers = _NUMBER.findall(prediction)
    if not numbers:
        return 0.0
    return sum(number == target for number in numbers) / len(numbers)


def _fuzzywuzzy_ratio(a: str, b: str) -> int:
    """fuzzywuzzy ``fuzz.ratio`` as installed by LongBench's requirements (no python-Levenshtein).

    That build scores with difflib's SequenceMatcher and rounds with
    ``int(round(100 * ratio))``; identical strings are 100 and an empty
    string against a non-empty one is 0.  rapidfuzz uses the Indel distance
    instead and disagrees on about a third of real code-line pairs, so it is
    only offered as ``code_sim_levenshtein``.
    """
    if a == b:
        return 100
    if not a or not b:
        return 0
    return int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))


def _first_code_line(prediction: str) -> str:
    """LongBench code_sim: the first line with no backtick, '#' or '//' (else the empty string)."""
    for line in prediction.lstrip("\n").split("\n"):
        if "`" not in line and "#" not in line and "//" not in line:
            return line
    return ""


def _rouge_package_l_f(prediction: str, ground_truth: str) -> float:
    from rouge import Rouge  # lazy; the `rouge` package (pltrdy), as LongBench uses

    try:
        scores = Rouge().get_scores([prediction], [ground_truth], avg=True)
    except (ValueError, RecursionError):  # empty hypothesis/reference; very long texts
        return 0.0
    return float(scores["rouge-l"]["f"])


@metric("qa_f1", reference="LongBench metrics.py qa_f1_score")
def qa_f1(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """LongBench ``qa_f1_score``: SQuAD-normalised word F1."""
    return _token_f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


@metric("qa_f1_zh", reference="LongBench metrics.py qa_f1_zh_score")
def qa_f1_zh(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """LongBench ``qa_f1_zh_score``: jieba words, each normalised, empty ones dropped, then F1."""

    def words(text: str) -> list[str]:
        return [w for w in (_normalize_zh(t) for t in _jieba_words(text)) if w]

    return _token_f1(words(prediction), words(ground_truth))


@metric("rouge_l", reference="LongBench metrics.py rouge_score")
def rouge_l(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """LongBench ``rouge_score``: the ``rouge`` package's ROUGE-L F; 0 when it raises (empty text)."""
    return _rouge_package_l_f(prediction, ground_truth)


@metric("rouge_l_zh", reference="LongBench metrics.py rouge_zh_score")
def rouge_l_zh(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """LongBench ``rouge_zh_score``: jieba-segment, join words with spaces, then ``rouge_l``."""
    return _rouge_package_l_f(" ".join(_jieba_words(prediction)), " ".join(_jieba_words(ground_truth)))


@metric("classification", reference="LongBench metrics.py classification_score", uses_classes=True)
def classification(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """LongBench ``classification_score`` (trec, lsht), quirks included.

    Classes named in the prediction are collected; a collected class that is a
    strict substring of the ground truth is dropped, but, as in the reference
    (which removes from the list it is iterating over), the class right after
    each dropped one is not examined.  The score is 1/len(collected) when the
    ground truth was collected, else 0.  The reference's difflib fallback is
    unreachable (it tests ``list != 0``), so it is not reproduced.
    """
    matched = [name for name in all_classes if name in prediction]
    i = 0
    while i < len(matched):
        if matched[i] in ground_truth and matched[i] != ground_truth:
            del matched[i]  # the next element slides into i and is skipped, as in the reference
        i += 1
    return 1.0 / len(matched) if ground_truth in matched else 0.0


def _paragraph(ground_truth: str, label: str, task: str) -> str:
    """N of the first "<label>N" in the answer (the passage the retrieval tasks ask for)."""
    found = re.findall(re.escape(label) + r"(\d+)", ground_truth)
    if not found:
        raise ValueError(f"{task} answer has no '{label}N': {ground_truth!r}")
    return found[0]


@metric("retrieval", reference="LongBench metrics.py retrieval_score")
def retrieval(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """LongBench ``retrieval_score`` (passage_retrieval_en): share of numbers in the prediction equal to N of "Paragraph N"."""
    return _fraction_of_numbers_equal(prediction, _paragraph(ground_truth, "Paragraph ", "passage_retrieval_en"))


@metric("retrieval_zh", reference="LongBench metrics.py retrieval_zh_score")
def retrieval_zh(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """LongBench ``retrieval_zh_score`` (passage_retrieval_zh): as ``retrieval`` with "段落N"."""
    return _fraction_of_numbers_equal(prediction, _paragraph(ground_truth, "段落", "passage_retrieval_zh"))


@metric("count", reference="LongBench metrics.py count_score")
def count(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """LongBench ``count_score`` (passage_count): share of numbers in the prediction equal to the answer."""
    return _fraction_of_numbers_equal(prediction, str(ground_truth))


@metric("code_sim", reference="LongBench metrics.py code_sim_score")
def code_sim(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """LongBench ``code_sim_score`` (lcc, repobench-p): fuzzywuzzy ratio of the first non-comment line / 100."""
    return _fuzzywuzzy_ratio(_first_code_line(prediction), ground_truth) / 100


@metric("code_sim_levenshtein", reference="fuzzywuzzy with python-Levenshtein")
def code_sim_levenshtein(prediction: str, ground_truth: str, *, all_classes: Sequence[str] = ()) -> float:
    """``code_sim`` as fuzzywuzzy computes it when python-Levenshtein is installed (Indel ratio, rounded)."""
    from rapidfuzz import fuzz

    line = _first_code_line(prediction)
    if line == ground_truth:
        return 1.0
    if not line or not ground_truth:
        return 0.0
    return int(round(fuzz.ratio(line, ground_truth))) / 100

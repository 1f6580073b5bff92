"""Metrics against values worked out by hand from the reference definitions (LongBench, LITM, L-Eval)."""
from __future__ import annotations

import glob
import math
import sysconfig
from pathlib import Path

import pytest

import experiments.scoring as scoring
from experiments.scoring import METRICS


class _Metrics:
    """The registered metrics by attribute (``m.qa_f1``), plus the scoring module's functions."""

    def __getattr__(self, name):
        return METRICS.get(name) if name in METRICS else getattr(scoring, name)


m = _Metrics()


def test_qa_f1_squad_normalisation_and_token_counts():
    # pred tokens after normalisation: eiffel tower is in paris france (6); gold: paris (1)
    # P = 1/6, R = 1, F1 = 2 * (1/6) / (7/6) = 2/7
    assert m.qa_f1("The Eiffel Tower is in Paris, France.", "Paris") == pytest.approx(2 / 7)
    # real NQ answer (nq-open-oracle line 1): P = 2/2, R = 2/3, F1 = 0.8
    assert m.qa_f1("Wilhelm Röntgen", "Wilhelm Conrad Röntgen") == pytest.approx(0.8)
    assert m.qa_f1("", "Paris") == 0.0
    assert m.qa_f1("London", "Paris") == 0.0


def test_qa_f1_zh_uses_jieba_words_and_drops_chinese_punctuation():
    # jieba: 我 / 爱 / 北京 against 北京 -> P = 1/3, R = 1, F1 = 0.5
    assert m.qa_f1_zh("我爱北京", "北京") == pytest.approx(0.5)
    # the full stop is a punctuation token, removed before counting
    assert m.qa_f1_zh("北京。", "北京") == 1.0


def test_rouge_l_is_the_rouge_package_lcs_f():
    # LCS(the cat sat, the cat was sitting) = 2; P = 2/3, R = 2/4, F = 4/7
    assert m.rouge_l("the cat sat", "the cat was sitting") == pytest.approx(4 / 7, abs=1e-6)
    assert m.rouge_l("", "the cat") == 0.0  # the package raises on an empty hypothesis; LongBench scores 0


def test_rouge_l_zh_segments_with_jieba_first():
    # 我 爱 北京 vs 我 爱 上海: LCS = 2 of 3 words each -> F = 2/3
    assert m.rouge_l_zh("我爱北京", "我爱上海") == pytest.approx(2 / 3, abs=1e-6)


def test_classification_partial_credit_and_reference_quirk():
    classes = ("Animal", "Abbreviation", "Human being")
    assert m.classification("Type: Animal", "Animal", all_classes=classes) == 1.0
    assert m.classification("Animal or Abbreviation", "Animal", all_classes=classes) == 0.5
    assert m.classification("no idea", "Animal", all_classes=classes) == 0.0
    # collected [a, b, ab]; "a" is a strict substring of "ab" and is dropped, and the
    # reference's remove-while-iterating then skips "b": [b, ab] -> 1/2
    assert m.classification("ab", "ab", all_classes=("a", "b", "ab")) == 0.5


def test_retrieval_and_count_fraction_of_numbers():
    assert m.retrieval("Paragraph 3", "Paragraph 3") == 1.0
    assert m.retrieval("Paragraph 3 or Paragraph 12", "Paragraph 3") == 0.5
    assert m.retrieval("I do not know", "Paragraph 3") == 0.0
    assert m.retrieval_zh("答案是段落5，不是段落15", "段落5") == 0.5
    assert m.count("There are 12 unique paragraphs out of 30", "12") == 0.5
    with pytest.raises(ValueError):
        m.retrieval("Paragraph 1", "no paragraph here")


def test_code_sim_first_non_comment_line_and_difflib_ratio():
    assert m.code_sim("```python\n    return x + 1\n```", "    return x + 1") == 1.0
    assert m.code_sim("# helper\nfoo()", "foo()") == 1.0
    # SequenceMatcher(abcd, abce): one block "abc" -> 2*3/8 = 0.75
    assert m.code_sim("abcd", "abce") == 0.75
    assert m.code_sim("// only comments", "foo()") == 0.0


def _real_code_lines() -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    lines: list[str] = []
    for name in sorted(glob.glob(str(root / "json" / "*.py"))):
        lines += [
            line for line in Path(name).read_text().split("\n")
            if line.strip() and not any(mark in line for mark in ("#", "`", "//"))  # lines code_sim keeps whole
        ]
    return lines


def test_code_sim_matches_fuzzywuzzy_on_real_code_lines_and_rapidfuzz_does_not():
    fuzz = pytest.importorskip("fuzzywuzzy.fuzz")
    lines = _real_code_lines()
    assert len(lines) > 100
    pairs = list(zip(lines, lines[1:])) + [(line, line[: len(line) // 2] + "x" + line[len(line) // 2 :]) for line in lines]
    disagreements = 0
    for prediction, truth in pairs:
        assert m.code_sim(prediction, truth) == fuzz.ratio(prediction, truth) / 100, (prediction, truth)
        disagreements += m.code_sim_levenshtein(prediction, truth) != m.code_sim(prediction, truth)
    assert disagreements > 0  # why code_sim does not use rapidfuzz


def test_best_subspan_em():
    assert m.best_subspan_em("The answer is Wilhelm Conrad Röntgen.", "Wilhelm Conrad Röntgen") == 1.0
    assert m.best_subspan_em("Röntgen", "Wilhelm Conrad Röntgen") == 0.0


def test_litm_qa_em_cuts_at_the_first_newline_without_skipping_leading_ones():
    # evaluate_qa_responses.py: prediction.split("\n")[0].strip()
    assert m.litm_qa_em("  Wilhelm Conrad Röntgen\nexplanation", "wilhelm conrad röntgen") == 1.0
    assert m.litm_qa_em("I think\nWilhelm Conrad Röntgen", "Wilhelm Conrad Röntgen") == 0.0
    assert m.litm_qa_em("\nWilhelm Conrad Röntgen", "Wilhelm Conrad Röntgen") == 0.0


def test_litm_kv_accuracy_is_a_lowercase_substring_of_the_whole_answer():
    # evaluate_kv_responses.py: value.lower() in model_answer.lower()
    value = "0b9e4c1a-5f3d-4e2b-9a87-6c5d4e3f2a10"
    assert m.litm_kv_accuracy(f"Sure.\nThe value is \"{value.upper()}\".", value) == 1.0
    assert m.litm_kv_accuracy(value.replace("-", " "), value) == 0.0
    assert m.litm_kv_accuracy(value[:-1], value) == 0.0


def test_leval_rouge_scores():
    pred, gold = "the cat sat on the mat", "the cat lay on the mat"
    assert m.leval_rouge_1(pred, gold) == pytest.approx(5 / 6)  # 5 shared unigrams of 6
    assert m.leval_rouge_2(pred, gold) == pytest.approx(3 / 5)  # the-cat, on-the, the-mat of 5 bigrams
    assert m.leval_rouge_l(pred, gold) == pytest.approx(5 / 6)  # LCS the cat on the mat


def test_leval_f1_on_a_real_natural_question_answer():
    # gold "April 25 , 2018" -> april 25 2018; pred -> it started on april 25 2018: P = 3/6, R = 1
    assert m.leval_f1("It started on April 25, 2018.", "April 25 , 2018") == pytest.approx(2 / 3)


def test_leval_em_options_numbers_and_text():
    assert m.leval_em("A", "A") == 1.0
    assert m.leval_em("A", "AB") == 0.25
    assert m.leval_em("C", "AB") == 0.0
    assert m.leval_em("42.0", "42") == 1.0
    assert m.leval_em("The statement is true", "True") == 1.0


def test_item_score_takes_max_over_answers_and_first_line():
    assert m.item_score("Rome", ["Berlin", "Rome"], metric="qa_f1") == 1.0
    assert m.item_score("\n\nParis\nLondon is big", ["Paris"], metric="qa_f1", first_line_only=True) == 1.0
    # whole prediction: paris london is big (4 tokens) vs paris -> 2 * (1/4) / (5/4) = 0.4
    assert m.item_score("\n\nParis\nLondon is big", ["Paris"], metric="qa_f1") == pytest.approx(0.4)
    assert m.item_score("anything", [], metric="qa_f1") == 0.0


def test_score_predictions_rounds_100_times_mean_to_two_decimals():
    result = m.score_predictions(["Paris", "London", "x"], [["Paris"], ["Berlin"], ["y"]], metric="qa_f1")
    assert result.score == 33.33
    assert result.per_item == (1.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        m.score_predictions(["a"], [], metric="qa_f1")


def test_score_by_length_buckets_and_empty_bucket_is_nan():
    preds = ["Paris", "x", "Paris", "Paris"]
    answers = [["Paris"]] * 4
    buckets = m.score_by_length(preds, answers, [3999, 100, 4000, 7999], metric="qa_f1")
    assert buckets["0-4k"] == 50.0 and buckets["4-8k"] == 100.0
    assert math.isnan(buckets["8k+"])
    assert m.length_bucket(8000) == "8k+"


def test_get_metric_suggests_close_names():
    with pytest.raises(KeyError, match="qa_f1"):
        m.get_metric("qa_f2")
    assert m.get_metric("rouge_l") is m.rouge_l


def test_leval_em_searches_the_whole_prediction_as_em_py_does_today():
    """L-Eval's em.py before October 2023 looked only at the first line longer than one character; today it
    searches the whole prediction.  The first-line rule stays available under its own name."""
    pred = "Sure, here it is.\nThe first topic is Space exploration"
    assert m.leval_em(pred, "space exploration") == 1.0
    assert m.leval_em_first_line(pred, "space exploration") == 0.0
    assert m.leval_em_first_line("a\nThe first topic is Space exploration", "space exploration") == 1.0  # 'a' is too short


def test_leval_rouge_gm_is_the_geometric_mean_of_the_dataset_means():
    """auto_eval.py: geometric_mean = (mean R-1 * mean R-2 * mean R-L) ** (1/3), on the 0-100 scale."""
    preds = ["the cat sat on the mat", "a dog ran in the park today", "nothing in common"]
    golds = ["the cat lay on the mat", "the dog ran in a park", "completely different words"]
    parts = {k: [getattr(m, f"leval_rouge_{s}")(p, g) for p, g in zip(preds, golds)] for k, s in
             (("r1", "1"), ("r2", "2"), ("rl", "l"))}
    means = {k: sum(v) / len(v) for k, v in parts.items()}
    expected = round(100 * (means["r1"] * means["r2"] * means["rl"]) ** (1 / 3), 2)
    result = m.score_predictions(preds, [[g] for g in golds], metric="leval_rouge_gm")
    assert result.score == expected
    assert result.score != round(100 * sum(result.per_item) / 3, 2)  # not the mean of per-item means


def test_a_metric_plugin_is_one_decorated_function(monkeypatch):
    # registered in a copy of the registry, so tests that digest every metric (test_versions) never see it
    monkeypatch.setattr(METRICS, "_entries", dict(METRICS._entries))

    @scoring.metric("test_exact_lower", reference="a test")
    def exact_lower(prediction, ground_truth, *, all_classes=()):
        return float(prediction.strip().lower() == ground_truth.lower())

    assert m.get_metric("test_exact_lower") is exact_lower
    assert m.score_predictions([" PARIS", "rome"], [["paris"], ["Paris"]], metric="test_exact_lower").score == 50.0
    assert "test_exact_lower" in METRICS.names()

"""Plots: each writes a valid PNG and SVG with the requested content."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from experiments.report.curve import CurveRow
from experiments.report.plots import (
    plot_curve,
    plot_delta_forest,
    plot_length_buckets,
    plot_position,
    plot_score_by_length,
)
from experiments.report.plots.curves import tick_labels

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _check(paths, tmp_path, stem):
    assert [p.name for p in paths] == [f"{stem}.png", f"{stem}.svg"]
    png, svg = paths
    assert png.read_bytes()[:8] == PNG_MAGIC
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    return svg.read_text()


def test_plot_curve_with_bands_and_the_saturation_mark(tmp_path):
    rows = [CurveRow("nq", "smollm2", k, r, (r - 5, r + 5), a, (a - 8, a + 8), 30, 0)
            for k, r, a in [(1, 40.0, 20.0), (5, 70.0, 30.0), (20, 90.0, 31.0)]]
    rows.append(CurveRow("nq", "smollm2", 50, None, None, None, None, 0, 30, "all 30 examples failed"))
    svg = _check(plot_curve(rows, tmp_path / "curve.png", saturation={"smollm2": 5}), tmp_path, "curve")
    assert "retriever recall@k" in svg and "smollm2 accuracy" in svg and "smollm2 saturates (k=5)" in svg


def test_the_curve_labels_no_two_ks_on_top_of_each_other(tmp_path):
    """k = 30, 40, 50 sit closer on a log axis than their labels are wide: one of them goes unlabelled."""
    ks = [1, 2, 3, 5, 10, 20, 30, 40, 50]
    rows = [CurveRow("nq", "extractive", k, 50.0 + k / 2, (40.0, 60.0), 40.0, (30.0, 50.0), 30, 0) for k in ks]
    svg = _check(plot_curve(rows, tmp_path / "c.png"), tmp_path, "c")
    labels = re.findall(r"<!-- (\d+) -->", svg)  # the x ticks' texts, then the y axis's (0, 20, ..., 100)
    assert labels[:labels.index("0")] == ["1", "2", "3", "5", "10", "20", "30", "50"]
    assert tick_labels([1, 2, 5, 10, 20, 50]) == ["1", "2", "5", "10", "20", "50"]
    assert tick_labels([1, 10, 45, 50]) == ["1", "10", "", "50"]  # the largest k keeps its label


def test_plot_position_with_reference_lines(tmp_path):
    acc = {"reader-a": {0: 0.6, 4: 0.5, 9: 0.55}, "reader-b": {0: 0.4, 4: 0.3, 9: 0.45}}
    svg = _check(plot_position(acc, tmp_path / "pos.png", closed_book={"reader-a": 0.35},
                               oracle={"reader-a": 0.8}), tmp_path, "pos")
    assert "reader-a closed-book" in svg and "reader-a oracle" in svg and "reader-b" in svg


def test_plot_delta_forest_and_length_buckets(tmp_path):
    deltas = {"smollm2": {"bm25-200x7": {"hotpotqa": -3.1, "qasper": 1.2}, "minilm-500x3": {"hotpotqa": -1.0}},
              "extractive": {"bm25-200x7": {"hotpotqa": 0.0, "qasper": float("nan")}}}
    svg = _check(plot_delta_forest(deltas, tmp_path / "delta.png",
                                   {"smollm2": {"bm25-200x7": {"hotpotqa": (-6.0, -0.5)}}}), tmp_path, "delta")
    assert "hotpotqa" in svg and "minilm-500x3" in svg and "extractive" in svg
    assert svg.count(">n/a<") + svg.count("n/a") >= 2  # missing on qasper for minilm (smollm2) and bm25 (extractive)
    scores = {"full": {"0-4k": 30.0, "4-8k": 25.0, "8k+": 20.0}, "bm25": {"0-4k": 28.0, "8k+": 22.0}}
    svg = _check(plot_length_buckets(scores, tmp_path / "len.png"), tmp_path, "len")
    assert "8k+" in svg
    svg = _check(plot_length_buckets({"full": {"16384": 10.0, "2048": 30.0, "4096": 20.0}}, tmp_path / "tok.png"),
                 tmp_path, "tok")
    assert svg.index("<!-- 2048 -->") < svg.index("<!-- 4096 -->") < svg.index("<!-- 16384 -->")  # increasing


def test_score_by_length_names_every_arm_in_full(tmp_path):
    """Two budgets of one retriever differ only at the end of their names, and an arm drawn only in a later
    panel still needs its legend entry."""
    line = (["2k", "4k"], [50.0, 40.0], [30.0, 20.0], [70.0, 60.0])
    long_a = "retrieval(minilm, 64x any, <=256 tokens, order=document)"
    long_b = "retrieval(minilm, 64x any, <=512 tokens, order=document)"
    series = {"smollm2": {"ruler_niah_single": {"full": line, long_a: line},
                          "ruler_vt": {"full": line, long_b: line, "summarize(query-focused)": line}}}
    svg = _check(plot_score_by_length(series, tmp_path / "sbl.png"), tmp_path, "sbl")
    assert long_a.replace("<", "&lt;") in svg and long_b.replace("<", "&lt;") in svg
    assert "summarize(query-focused)" in svg and "context tokens" in svg


def test_cjk_task_and_arm_names_are_drawn_with_a_font_that_has_their_glyphs(tmp_path):
    """LongBench has six Chinese tasks: a task or arm named in Chinese (or Japanese, Korean) must not become boxes."""
    import warnings

    from experiments.report.plots import cjk_family

    assert cjk_family() is not None, "the CJK font package (a dependency) is not installed"
    deltas = {"阅读器": {"检索压缩": {"多文档问答": -4.0, "摘要": 1.5}, "요약": {"多文档问答": 2.0, "摘要": -1.0}}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paths = plot_delta_forest(deltas, tmp_path / "cjk.png")
        plot_position({"長い文脈": {0: 0.5, 4: 0.4}}, tmp_path / "cjk_pos.png", title="位置 (位置)")
    missing = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    assert not missing, missing[:3]
    assert paths[0].read_bytes()[:8] == PNG_MAGIC
    # a missing glyph is drawn as the same box whatever the character: two characters must draw differently
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    prop = FontProperties(family=["sans-serif", cjk_family()])
    shapes = [TextPath((0, 0), ch, prop=prop).vertices.tolist() for ch in "检索"]
    assert shapes[0] and shapes[0] != shapes[1]

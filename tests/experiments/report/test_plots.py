"""Plots: each writes a valid PNG and SVG with the requested content."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from experiments.curve import CurveRow
from experiments.report.plots import plot_curve, plot_delta_bars, plot_length_buckets, plot_position

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _check(paths, tmp_path, stem):
    assert [p.name for p in paths] == [f"{stem}.png", f"{stem}.svg"]
    png, svg = paths
    assert png.read_bytes()[:8] == PNG_MAGIC
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    return svg.read_text()


def test_plot_curve_rows_and_dicts(tmp_path):
    rows = [CurveRow("smollm2", k, r, a, 30) for k, r, a in [(1, 0.4, 0.2), (5, 0.7, 0.3), (20, 0.9, 0.31)]]
    svg = _check(plot_curve(rows, tmp_path / "curve.png"), tmp_path, "curve")
    assert "retriever recall@k" in svg and "smollm2 accuracy" in svg
    dict_rows = [{"reader": "x", "k": "1", "recall": "0.5", "accuracy": "0.25", "n": "3"}]
    _check(plot_curve(dict_rows, tmp_path / "from_csv.png"), tmp_path, "from_csv")


def test_plot_position_with_reference_lines(tmp_path):
    acc = {"reader-a": {0: 0.6, 4: 0.5, 9: 0.55}, "reader-b": {0: 0.4, 4: 0.3, 9: 0.45}}
    svg = _check(plot_position(acc, tmp_path / "pos.png", closed_book={"reader-a": 0.35},
                               oracle={"reader-a": 0.8}), tmp_path, "pos")
    assert "reader-a closed-book" in svg and "reader-a oracle" in svg and "reader-b" in svg


def test_plot_delta_bars_and_length_buckets(tmp_path):
    deltas = {"bm25-200x7": {"hotpotqa": -3.1, "qasper": 1.2}, "minilm-500x3": {"hotpotqa": -1.0}}
    svg = _check(plot_delta_bars(deltas, tmp_path / "delta.png"), tmp_path, "delta")
    assert "hotpotqa" in svg and "minilm-500x3" in svg
    scores = {"full": {"0-4k": 30.0, "4-8k": 25.0, "8k+": 20.0}, "bm25": {"0-4k": 28.0, "8k+": 22.0}}
    svg = _check(plot_length_buckets(scores, tmp_path / "len.png"), tmp_path, "len")
    assert "8k+" in svg

"""The report's tables as LaTeX for a paper: a booktabs ``tables/<name>.tex`` beside every ``tables/<name>.csv``,
row for row and cell for cell the same, LaTeX's special characters escaped."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from experiments.report.tables import latex_cell, latex_table

SPECIAL = "a_b %c &d #e $f {g} ~h ^i \\j"
ESCAPED = r"a\_b \%c \&d \#e \$f \{g\} \textasciitilde{}h \textasciicircum{}i \textbackslash{}j"
_UNESCAPE = re.compile(r"\\textbackslash\{\}|\\textasciitilde\{\}|\\textasciicircum\{\}|\\([_%&#${}])")


def _unescape(text: str) -> str:
    return _UNESCAPE.sub(lambda m: m.group(1) or {"\\textbackslash{}": "\\", "\\textasciitilde{}": "~",
                                                   "\\textasciicircum{}": "^"}[m.group()], text)


def _rows(tex: str) -> tuple[list[str], list[list[str]]]:
    """(header, body) of a booktabs table: the line between \\toprule and \\midrule, those before \\bottomrule."""
    lines = tex.splitlines()
    top, mid, bottom = lines.index("\\toprule"), lines.index("\\midrule"), lines.index("\\bottomrule")
    assert mid == top + 2

    def cells(line: str) -> list[str]:
        assert line.endswith(" \\\\")
        return [_unescape(c) for c in line[: -len(" \\\\")].split(" & ")]

    return cells(lines[top + 1]), [cells(line) for line in lines[mid + 1: bottom]]


def test_every_special_character_is_escaped_once():
    assert latex_cell(SPECIAL) == ESCAPED and _unescape(ESCAPED) == SPECIAL
    tex = latex_table(["arm_name", "Δ [95% CI]", "n"], [[SPECIAL, "+2.50 [-1.00, 6.00]", "12"]], caption="x & y",
                      label="my_table")
    assert "\\begin{tabular}{lrr}" in tex and "\\caption{x \\& y}" in tex and "\\label{tab:my-table}" in tex
    assert _rows(tex) == (["arm_name", "Δ [95% CI]", "n"], [[SPECIAL, "+2.50 [-1.00, 6.00]", "12"]])


@pytest.fixture(scope="module")
def reported(tmp_path_factory) -> Path:
    from experiments import evaluate

    run = tmp_path_factory.mktemp("latex") / "run"
    evaluate({"name": "latex", "readers": ["extractive"],
              "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 8, "num_docs": 4,
                                                               "words_per_doc": 30}}],
              "compressors": ["full", {"name": "truncate", "params": {"policy": "right"}, "budget": [8, 30]},
                              {"name": "retrieval", "params": {"top_n": 1}, "label": "top_1 50% & more"}]},
             run, progress=False, plots=False)
    return run


def test_each_csv_table_has_its_latex_twin_with_the_same_rows(reported):
    csvs = sorted((reported / "tables").glob("*.csv"))
    assert {p.stem for p in csvs} >= {"scores", "efficiency"}, [p.stem for p in csvs]
    for path in csvs:
        header, *body = list(csv.reader(path.open(encoding="utf-8")))
        tex = path.with_suffix(".tex").read_text(encoding="utf-8")
        assert "\\toprule" in tex and "\\bottomrule" in tex
        flat = [[cell.replace("\n", " ").replace("\r", " ") for cell in row] for row in [header, *body]]
        assert _rows(tex) == (flat[0], flat[1:]), path.name
    scores = (reported / "tables" / "scores.tex").read_text(encoding="utf-8")
    assert "top\\_1 50\\% \\& more" in scores and "nq\\_multidoc" in scores

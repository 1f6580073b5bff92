"""A count of cells names the ones it leaves out: "the interval excludes 0 in 0 of 12 compressed cells" on a
grid of 24 compressed cells hid the 12 that had no interval (issue 50)."""
from __future__ import annotations

from experiments.data.records import Prediction
from experiments.report.summary import against_full
from tests.experiments.report.test_tradeoff import point, write_run


def test_the_count_of_cells_against_full_names_those_without_an_interval_and_why(tmp_path):
    # task "long": 8 questions, the arm loses every one (an interval that excludes 0); task "short": 3 questions,
    # below the 5 pairs an interval needs
    preds = [Prediction(task=task, id=f"{task}{i}", config_hash=h, compressor=label, compressor_kind=kind,
                        reader="r", prediction="", metric="litm_qa_em", score=score)
             for task, n in (("long", 8), ("short", 3)) for i in range(n)
             for h, label, kind, score in (("F", "full", "full", 1.0), ("C", "truncate", "truncate", 0.0))]
    data = write_run(tmp_path / "run", preds, [point("F", "full"), point("C", "truncate")])
    text = against_full(data.cells)
    assert text.startswith("the paired 95% interval excludes 0 in 1 of 1 compressed cells with one: better in 0, "
                           "worse in 1")
    assert text.endswith("1 of the 2 compressed cells have no interval: 1 have fewer than 5 pairs")

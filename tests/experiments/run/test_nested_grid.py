"""Lists inside nested sections expand into the grid; a list that is one value does not; shipped hashes hold."""
import json
from pathlib import Path

import pytest

from core.errors import ParamError
from experiments.run.config import ConfigError, load_config, parse_config
from experiments.run.driver import Runner
from experiments.run.grid import expand_grid
from experiments.run.plan import check_components

REPO = Path(__file__).resolve().parents[3]
TASKS = [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 3, "num_docs": 4, "words_per_doc": 30}}]


def grid(compressor, readers=("extractive",)):
    cfg = parse_config({"tasks": TASKS, "compressors": [compressor], "readers": list(readers)})
    points = expand_grid(cfg)
    check_components(cfg, points)
    return points


def test_every_shipped_config_keeps_its_config_hashes():
    """Cached generations and resumed runs are keyed by these hashes (recorded before nested lists expanded)."""
    recorded = json.loads((REPO / "tests/experiments/run/shipped_config_hashes.json").read_text())
    assert len(recorded) == 13  # the configs shipped when nested lists began to expand (a new one has no old keys)
    for stem, hashes in recorded.items():
        path = REPO / "experiments/configs" / f"{stem}.yaml"
        assert [p.config_hash for p in expand_grid(load_config(path))] == hashes, stem


def test_a_list_in_a_retrievers_params_is_a_grid_axis_named_in_the_row_label(tmp_path):
    section = {"name": "retrieval", "params": {"retriever": {"name": "bm25", "params": {"k1": [1.2, 2.0]}},
                                               "top_n": 2}}
    points = grid(section)
    assert [p.compressor.params["retriever"] for p in points] == [
        {"name": "bm25", "params": {"k1": 1.2}}, {"name": "bm25", "params": {"k1": 2.0}}]
    assert len({p.config_hash for p in points}) == 2
    cfg = parse_config({"tasks": TASKS, "compressors": [section], "readers": ["extractive"]})
    Runner(cfg, tmp_path / "run", progress=False).run()
    rows = {json.loads(line)["compressor"] for line in (tmp_path / "run/predictions.jsonl").read_text().splitlines()}
    assert rows == {"retrieval(bm25, top2, order=score) [retriever.k1=1.2]",
                    "retrieval(bm25, top2, order=score) [retriever.k1=2.0]"}


def test_zip_pairs_lists_at_the_same_depth():
    points = grid({"name": "retrieval", "params": {"retriever": {
        "name": "bm25", "params": {"k1": [1.2, 2.0], "b": [0.5, 0.75]}, "zip": ["k1", "b"]}}})
    assert [p.compressor.params["retriever"]["params"] for p in points] == [{"k1": 1.2, "b": 0.5}, {"k1": 2.0, "b": 0.75}]
    assert points[1].axes == ("retriever.k1=2.0", "retriever.b=0.75")
    with pytest.raises(ConfigError, match="zip key 'c'"):
        grid({"name": "retrieval", "params": {"retriever": {"name": "bm25", "params": {"k1": [1.2]}, "zip": ["c"]}}})


def test_hybrid_stages_expand_and_its_list_of_retrievers_stays_one_value():
    points = grid({"name": "retrieval", "params": {"retriever": {"name": "hybrid", "params": {
        "retrievers": ["bm25", {"name": "bm25", "params": {"k1": [1.0, 1.5]}}], "weights": [[1, 1], [2, 1]]}}}})
    hybrid = [p.compressor.params["retriever"]["params"] for p in points]
    assert len(points) == 4 and all(len(h["retrievers"]) == 2 and h["retrievers"][0] == "bm25" for h in hybrid)
    assert {(h["retrievers"][1]["params"]["k1"], tuple(h["weights"])) for h in hybrid} == {
        (1.0, (1, 1)), (1.0, (2, 1)), (1.5, (1, 1)), (1.5, (2, 1))}


def test_rerank_stages_and_summarizer_params_expand():
    points = grid({"name": "retrieval", "params": {"retriever": {"name": "rerank", "params": {
        "first": {"name": "bm25", "params": {"k1": [1.0, 1.5]}}, "second": ["minilm", "contriever"]}}}})
    assert [p.axes for p in points][:2] == [("retriever.first.k1=1.0", "retriever.second=minilm"),
                                            ("retriever.first.k1=1.0", "retriever.second=contriever")]
    assert len(points) == 4
    summaries = grid({"name": "summarize", "params": {"summarizer": {"name": "extractive", "params": {
        "question_markers": [["Question:"], ["Q:"]]}}}})
    assert [p.compressor.params["summarizer"]["params"]["question_markers"] for p in summaries] == [["Question:"], ["Q:"]]


def test_a_reader_parameter_that_takes_a_list_is_one_value():
    (point,) = grid("full", readers=[{"name": "extractive", "params": {"question_markers": ["Q:", "Question:"]}}])
    assert point.reader.params == {"question_markers": ["Q:", "Question:"]}


def test_a_nested_list_of_the_wrong_type_is_one_line_naming_the_parameter():
    with pytest.raises(ParamError, match=r"retriever 'bm25': k1 must be a number >= 0, got 'high'"):
        grid({"name": "retrieval", "params": {"retriever": {"name": "bm25", "params": {"k1": [1.2, "high"]}}}})
    with pytest.raises(ParamError, match="retrievers must be a list of component sections, got str"):
        grid({"name": "retrieval", "params": {"retriever": {"name": "hybrid", "params": {"retrievers": "bm25"}}}})
    with pytest.raises(ConfigError, match=r"params.retriever.k1 is an empty list"):
        grid({"name": "retrieval", "params": {"retriever": {"name": "bm25", "params": {"k1": []}}}})

"""``ctxcomp show`` prints the settings a prediction was made with, not the defaults a budget axis left
unapplied (it printed ``top_n=3`` for a retrieval arm on a budget axis, where the budget alone set the count)."""
from __future__ import annotations

from experiments.view.examples import show_example


def test_show_prints_the_budget_that_was_applied_and_not_the_default_top_n(tmp_path):
    from experiments import evaluate

    config = {"name": "show", "readers": ["extractive"], "budget": [40],
              "compressors": ["full", {"name": "retrieval", "params": {"retriever": "bm25", "unit": "chunk",
                                                                       "chunk_size": 20}},
                              {"name": "retrieval", "label": "capped", "params": {
                                  "retriever": "bm25", "unit": "chunk", "chunk_size": 20, "top_n": 1}}],
              "tasks": [{"name": "nq_multidoc", "synthetic": {"kind": "multidoc_qa", "n": 1, "num_docs": 4,
                                                               "words_per_doc": 30}}]}
    result = evaluate(config, tmp_path / "run", report=False, progress=False)
    example = next(p.id for p in result.data.predictions)
    blocks = [b for b in show_example(tmp_path / "run", example).split("=== ") if "retrieval(" in b or "capped" in b]
    identities = [line for b in blocks for line in b.splitlines() if line.startswith("compressor: retrieval(")]
    assert len(identities) == 2, identities
    assert any(",budget=40," in i and "top_n" not in i for i in identities)  # the budget alone set the count
    assert any(",top_n=1,budget=40," in i for i in identities)  # a top_n given still caps it

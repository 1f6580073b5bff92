"""M4LE builder: lengths near the target, relevant passages spread over positions, answers consistent."""
from __future__ import annotations

import json

import pytest

from experiments.data.records import Example
from experiments.data.store import write_jsonl
from experiments.data.synthetic import make_multidoc_qa
from experiments.tasks.m4le.build import build_m4le, spread_positions

ORACLE = "lost_in_the_middle/nq-open-oracle.jsonl.gz"


def _short_examples(n: int = 60) -> list[Example]:
    """Gold-only short examples from the synthetic generator (each passage is ~50 words)."""
    from dataclasses import replace

    out = []
    for ex in make_multidoc_qa(n, num_docs=2, words_per_doc=50, seed=5):
        gold = tuple(p for p in ex.passages if p.is_gold)
        out.append(replace(ex, passages=gold, meta={"label": ex.query.split()[-2]}))
    return out


def test_spread_positions_hand_cases():
    assert [spread_positions(i, 5, 10, 1) for i in range(5)] == [[0], [2], [4], [7], [9]]
    # three strata of 9 passages: [0-2], [3-5], [6-8]
    assert spread_positions(0, 3, 9, 3) == [0, 3, 6]
    assert spread_positions(2, 3, 9, 3) == [2, 5, 8]
    assert spread_positions(0, 1, 9, 1) == [4]


def test_single_span_records():
    records = build_m4le(_short_examples(), target_words=1000, ability="explicit_single", n_instances=6, seed=1)
    assert len(records) == 6
    for r in records:
        assert set(r) >= {"instruction", "input", "answers", "input_length", "total_length", "length_bucket"}
        assert abs(r["total_length"] - 1000) / 1000 < 0.25
        (ident,) = r["relevant"]
        assert f"about Passage {ident}." in r["instruction"]
        block = r["input"].split(f"Passage {ident} (Title:")[1].split("\n\nPassage ")[0]
        assert r["answers"][0] in block  # the asked passage holds the answer
    firsts = [r["relevant"][0] for r in records]
    n_passages = records[0]["input"].count("\n\nPassage ") + 1
    assert firsts[0] == 1 and firsts[-1] == n_passages and firsts == sorted(firsts)


def test_multi_span_and_global():
    ex = _short_examples()
    multi = build_m4le(ex, target_words=1000, ability="semantic_multi", n_instances=3)
    assert all(len(r["relevant"]) == 3 for r in multi)
    assert multi[0]["answers"] == [", ".join(map(str, multi[0]["relevant"]))]
    explicit = build_m4le(ex, target_words=1000, ability="explicit_multi", n_instances=2)
    assert explicit[0]["answers"][0].count("\n") == 2
    glob = build_m4le(ex, target_words=1000, ability="global", n_instances=2)
    assert glob[0]["answers"] == [str(len(glob[0]["relevant"]))]
    with pytest.raises(ValueError):
        build_m4le(ex, target_words=1000, ability="sideways", n_instances=1)
    with pytest.raises(ValueError):
        build_m4le(ex, target_words=100_000, ability="semantic_single", n_instances=1)


def test_real_nq_buckets_and_reload(shared_data, tmp_path):
    from experiments.tasks.litm import load_litm_qa
    from experiments.tasks.loading import load_examples

    examples = load_litm_qa(shared_data / ORACLE)
    for target in (1000, 4000):
        records = build_m4le(examples, target_words=target, ability="semantic_single", n_instances=5)
        lengths = [r["total_length"] for r in records]
        assert all(abs(n - target) / target < 0.2 for n in lengths), lengths
        assert all(r["length_bucket"] == target for r in records)
    path = write_jsonl(records, tmp_path / "m4le.jsonl")
    assert json.loads(path.read_text().splitlines()[0])["instruction"] == records[0]["instruction"]
    loaded = load_examples(path, "m4le")
    assert len(loaded) == 5 and loaded[0].context == records[0]["input"]

"""Key-value retrieval generation: reproducible UUIDs, key placement, same flow as the published files."""
from __future__ import annotations

import json
import uuid

import pytest

from experiments.protocols import kv

KV_FILE = "lost_in_the_middle/kv-retrieval-75_keys.jsonl.gz"


def test_generation_is_reproducible_and_seed_dependent():
    a = kv.generate_kv_examples(3, 10, seed=7)
    b = kv.generate_kv_examples(3, 10, seed=7)
    c = kv.generate_kv_examples(3, 10, seed=8)
    assert [e.context for e in a] == [e.context for e in b]
    assert a[0].context != c[0].context
    keys = [k for e in a for k, _ in e.meta["ordered_kv_records"]]
    assert all(uuid.UUID(k).version == 4 for k in keys)
    assert len(set(keys)) == len(keys)


def test_positions_sweep_places_key_and_answer():
    examples = kv.generate_kv_examples(2, 6, positions=[0, 5], seed=1)
    assert [kv.key_position(e) for e in examples] == [0, 0, 5, 5]
    for ex in examples:
        pairs = dict(ex.meta["ordered_kv_records"])
        assert ex.answers == (pairs[ex.query],)
        assert ex.task == "kv_retrieval"
    # the sweep moves the same records: only the order changes
    assert sorted(map(tuple, examples[0].meta["ordered_kv_records"])) == sorted(
        map(tuple, examples[2].meta["ordered_kv_records"]))
    first_line = examples[0].context.split("\n")[0]
    assert first_line == f'{{"{examples[0].query}": "{examples[0].answers[0]}",'
    assert examples[2].context.endswith(f'"{examples[2].query}": "{examples[2].answers[0]}"}}')


def test_with_key_at_rejects_out_of_range():
    ex = kv.generate_kv_examples(1, 4)[0]
    with pytest.raises(ValueError):
        kv.with_key_at(ex, 4)


def test_generated_file_reads_back_identically(tmp_path):
    from experiments.data.loaders import load_litm_kv
    from experiments.data.store import write_jsonl

    records = kv.generate_kv_records(3, 8, seed=2)
    path = write_jsonl(records, tmp_path / "kv.jsonl")
    loaded = load_litm_kv(path)
    generated = kv.generate_kv_examples(3, 8, seed=2)
    for a, b in zip(loaded, generated):
        assert (a.context, a.query, a.answers) == (b.context, b.query, b.answers)
        assert [p.text for p in a.passages] == [p.text for p in b.passages]


def test_published_records_against_the_raw_file(shared_data):
    """The loader and the key sweep, checked against the published file read with gzip and json alone."""
    import gzip

    from experiments.data.loaders import load_litm_kv

    with gzip.open(shared_data / KV_FILE, "rt", encoding="utf-8") as handle:
        raw = [json.loads(line) for _, line in zip(range(5), handle)]
    loaded = load_litm_kv(shared_data / KV_FILE)[:5]
    for record, ex in zip(raw, loaded):
        assert (ex.query, ex.answers) == (record["key"], (record["value"],))
        # LITM's prompt renders the records as one JSON object in their published order
        assert list(json.loads(ex.context).items()) == [tuple(pair) for pair in record["ordered_kv_records"]]
        moved = kv.with_key_at(ex, 0)
        order = [k for k, _ in json.loads(moved.context).items()]
        others = [k for k, _ in record["ordered_kv_records"] if k != record["key"]]
        assert order == [record["key"], *others]  # the key first, the other 74 keep their published order
        assert json.loads(moved.context)[record["key"]] == record["value"]

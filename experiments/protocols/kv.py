"""Lost in the Middle key-value retrieval: fresh data and key-position sweeps.

The paper's task is a JSON object of ``num_keys`` UUID pairs and the request
to return the value of one key, whose position is swept.  Generated examples
carry the same fields as the published ``kv-retrieval-*_keys`` files and are
built by the same record-to-example function as the loader, so generated and
published data flow through the pipe identically.
"""
from __future__ import annotations

import random
from dataclasses import replace
from typing import Any, Sequence

from core.errors import UserError
from core.memory import no_cycle_collection
from experiments.data.records import Example, swept_id
from experiments.tasks.litm.records import litm_kv_example

# the bits ``uuid.UUID(int=..., version=4)`` sets: the version nibble to 4, the variant's two top bits to 10
_V4_KEEP = ~((0xF000 << 64) | (0xC000 << 48))
_V4_SET = (4 << 76) | (0x8000 << 48)


def _uuid(rng: random.Random) -> str:
    """A version-4 UUID drawn from ``rng`` (``uuid.uuid4`` itself cannot be seeded).

    The string ``str(uuid.UUID(int=rng.getrandbits(128), version=4))``, formatted here without making the
    ``UUID`` object, which doubled the time (a key-value dry run makes 215,000).
    """
    digits = f"{rng.getrandbits(128) & _V4_KEEP | _V4_SET:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def litm_kv_record(records: Sequence[Sequence[str]], key: str) -> dict[str, Any]:
    """One line of a published KV file: ``ordered_kv_records``, ``key``, ``value``."""
    values = {k: v for k, v in records}
    if key not in values:
        raise UserError(f"key {key!r} is not among the {len(records)} records")
    return {"ordered_kv_records": [list(r) for r in records], "key": key, "value": values[key]}


def kv_example(record: dict[str, Any], example_id: str, source: str = "", length: int | None = None) -> Example:
    """An ``Example`` from a published-format record, built by the loader's own function."""
    return litm_kv_example(record, example_id, source, length)


def key_position(example: Example) -> int:
    """0-based position of the queried key among the example's records."""
    keys = [k for k, _ in example.meta["ordered_kv_records"]]
    return keys.index(example.query)


def move_key(record: dict[str, Any], position: int) -> dict[str, Any]:
    """A published-format record with the queried pair moved to 0-based ``position``, the others in order.

    This is how the paper's sweep places the key (``gold_index``) in a
    record whose key sits at a random position.
    """
    records = [tuple(r) for r in record["ordered_kv_records"]]
    if not 0 <= position < len(records):
        raise UserError(f"key position {position} is outside 0..{len(records) - 1}")
    target = [r for r in records if r[0] == record["key"]]
    if not target:
        raise UserError(f"queried key {record['key']!r} is not among the records")
    others = [r for r in records if r[0] != record["key"]]
    others.insert(position, target[0])
    return litm_kv_record(others, record["key"])


def with_key_at(example: Example, position: int) -> Example:
    """The same records with the queried pair moved to 0-based ``position`` (the others keep their order)."""
    records = example.meta.get("ordered_kv_records")
    if not records:
        raise UserError(f"example {example.id!r} has no ordered_kv_records; is it a key-value example?")
    moved = kv_example(move_key(litm_kv_record(records, example.query), position),
                       swept_id(example.id, "key", position), example.source, length=example.length)
    return replace(moved, meta={**example.meta, **moved.meta, "key_position": position, "num_keys": len(records)})


def key_position_sweep(examples: Sequence[Example], positions: Sequence[int]) -> list[Example]:
    """Every example with the key at every position, position-major (made in bulk, ``no_cycle_collection``)."""
    with no_cycle_collection():
        return [with_key_at(ex, p) for p in positions for ex in examples]


def generate_kv_records(n: int, num_keys: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` published-format records of ``num_keys`` fresh UUID pairs, queried key at a random position."""
    if n < 0 or num_keys < 1:
        raise UserError(f"need n >= 0 and num_keys >= 1, got n={n}, num_keys={num_keys}")
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        records = [(_uuid(rng), _uuid(rng)) for _ in range(num_keys)]
        key = records[rng.randrange(num_keys)][0]
        out.append(litm_kv_record(records, key))
    return out


def generate_kv_examples(
    n: int, num_keys: int, *, positions: Sequence[int] | None = None, seed: int = 0
) -> list[Example]:
    """``n`` fresh key-value examples, reproducible from ``seed``.

    Without ``positions`` each example's key sits at a random position (as in
    the published files); with ``positions`` every example appears once per
    position (position-major), which is the paper's sweep.
    """
    with no_cycle_collection():  # made in bulk
        base = [
            replace(ex, meta={**ex.meta, "key_position": key_position(ex), "num_keys": num_keys})
            for ex in (
                kv_example(record, f"kv{num_keys}-s{seed}-{i}", f"generated:seed={seed}:{i}")
                for i, record in enumerate(generate_kv_records(n, num_keys, seed=seed))
            )
        ]
    if positions is None:
        return base
    return key_position_sweep(base, positions)

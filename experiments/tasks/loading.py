"""Read benchmark files into ``Example`` records, failing loudly on bad input.

Every error names the file, the 1-based line (record index for ``.json``
arrays) and the field, so a broken line in a 2,000-line file is found at once.
The shape of a record (its family) and how it becomes examples belong to the benchmark that reads it
(``experiments.tasks.<benchmark>``, found through :mod:`experiments.tasks.benchmark`); this module only walks
files and hub datasets.
"""
from __future__ import annotations

from pathlib import Path

from core.errors import UserError
from experiments.data.records import Example
from experiments.data.sources import DataError, Where, iter_records
from experiments.tasks.benchmark import detect_family, record_format


def _family_of(record: dict, where: Where) -> str:
    try:
        family = detect_family(record)
    except UserError as err:
        raise where.error(None, str(err)) from None
    if family is None:
        raise where.error(None, f"cannot tell the benchmark from the fields {sorted(record)}; pass a task")
    return family


def load_examples(
    path: str | Path, family: str | None = None, task: str | None = None, *, limit: int | None = None
) -> list[Example]:
    """Load any supported file as ``Example`` records named ``task``.

    ``family`` (one a benchmark reads: :func:`~experiments.tasks.benchmark.families`) fixes the format; without it the
    format comes from the first record's fields.  ``limit`` keeps the first
    ``limit`` examples.
    """
    if limit is not None and limit < 0:
        raise UserError(f"limit must be >= 0, got {limit}")
    path = Path(path)
    examples: list[Example] = []
    fmt = record_format(family) if family is not None else None
    for where, record in iter_records(path):
        if limit is not None and len(examples) >= limit:
            break
        fmt = fmt or record_format(_family_of(record, where))  # the first record's fields decide for the file
        examples.extend(fmt.convert(record, where, task or fmt.default_task(path.name.split(".")[0])))
    if not examples and limit != 0:
        raise DataError(str(path), None, None, "holds no records (the file is empty or only blank lines)")
    return examples[:limit] if limit is not None else examples


def examples_from_records(records: list[dict], family: str, task: str, source: str) -> list[Example]:
    """Records made in memory (a generator's) read by the family's converter, exactly as from a file;
    ``source`` names them in errors and in each example's ``source`` (``source:index``)."""
    examples: list[Example] = []
    for index, record in enumerate(records):
        examples.extend(record_format(family).convert(record, Where(f"{source}:{index}", None), task))
    return examples


def load_hf(dataset_id: str, name: str | None = None, split: str = "test", *, family: str | None = None,
            task: str | None = None) -> list[Example]:
    """Load from the Hugging Face hub (e.g. ``THUDM/LongBench``, ``hotpotqa``); needs network or a local cache."""
    from datasets import load_dataset

    hub_features = record_format(family).hub_features if family is not None else None
    features = hub_features() if hub_features is not None else None
    rows = load_dataset(dataset_id, name, split=split, **({"features": features} if features is not None else {}))
    examples: list[Example] = []
    label = f"hf:{dataset_id}" + (f"/{name}" if name else "") + f"[{split}]"
    for index, row in enumerate(rows, start=1):
        record, where = dict(row), Where(label, index)
        examples.extend(record_format(family or _family_of(record, where)).convert(record, where, task))
    return examples

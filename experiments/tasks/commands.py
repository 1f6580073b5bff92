"""What benchmarks' ``ctxcomp build`` commands (a folder's ``commands.py``) and the CLI read their options with: a
file option that also takes a data name, and comma-separated integers."""
from __future__ import annotations

from pathlib import Path

from core.errors import UserError


def data_path(value: Path | None) -> Path | None:
    """A file option's value (``--litm``, ``--source``): a path that exists, else a data name from ``ctxcomp data
    list`` as its file in the data directory (one line naming ``ctxcomp data get`` when it is not fetched), else the
    path as given, whose reader then says it is missing."""
    if value is None or value.exists():
        return value
    from experiments.data.catalog import catalog, local_file

    return local_file(str(value)) if str(value) in catalog() else value


def parse_ints(text: str, option: str) -> list[int]:
    """``"1,2,5"`` -> ``[1, 2, 5]``; a clear error naming the option otherwise."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"{option} expects comma-separated integers, got {text!r}") from None
    if not values:
        raise UserError(f"{option} is empty")
    return values

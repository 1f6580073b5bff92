"""The one progress bar: tqdm on stderr, off when asked (``progress=False``) or when ``CTXCOMP_NO_PROGRESS`` is set."""
from __future__ import annotations

import os
import sys
from typing import Any


def progress_enabled(enabled: bool = True) -> bool:
    """Whether a bar should show: the caller wants one and the environment does not forbid it."""
    return enabled and not os.environ.get("CTXCOMP_NO_PROGRESS")


def progress_bar(total: int | None, desc: str, *, unit: str = "ex", enabled: bool = True, leave: bool = True,
                 position: int | None = None) -> Any:
    """A tqdm bar on stderr (``disable`` when :func:`progress_enabled` says no); use it as a context manager."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=leave, position=position,
                disable=not progress_enabled(enabled))


__all__ = ["progress_bar", "progress_enabled"]

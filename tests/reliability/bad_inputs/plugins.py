"""Plugins that cannot be used, for the hostile sweep: one refuses its parameter in ``__init__``, one misses an
abstract method.  Named by import path (``tests.reliability.bad_inputs.plugins:Picky``) from a config."""
from __future__ import annotations

from retrievers.base import Retriever


class Picky(Retriever):
    """Refuses a depth below 2 the way a plugin does: a ValueError in its constructor."""

    def __init__(self, *, depth: int = 1) -> None:
        if depth < 2:
            raise ValueError(f"depth must be at least 2, got {depth}")
        self.depth = depth

    def index(self, chunks):
        return self

    def search(self, queries, k):
        return [[] for _ in queries]


class Half(Retriever):
    """Defines ``index`` and forgets ``search``."""

    def index(self, chunks):
        return self

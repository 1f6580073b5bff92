"""Indexing a large corpus shows a bar that counts passages (per batch for dense encoders), whatever the number
of queries: one query over a million passages must not look hung (issue 16, item 9)."""
from __future__ import annotations

import numpy as np
import pytest
import tqdm.auto

from core.progress import LARGE_CORPUS
from indexes.types import Chunk
from retrievers.bm25 import BM25Retriever
from retrievers.dense import encode_sorted


@pytest.fixture
def bars(monkeypatch):
    """Every bar drawn, as (description, passages counted, total, shown) when it closes: the real tqdm, watched."""
    closed: list[tuple[str, int, int, bool]] = []

    class Watched(tqdm.auto.tqdm):
        def __init__(self, *args, **kwargs):
            self._label = kwargs.get("desc")
            super().__init__(*args, **kwargs)

        def close(self):
            if not getattr(self, "_watched", False):
                self._watched = True
                closed.append((self._label, self.n, self.total, not self.disable))
            super().close()

    monkeypatch.setattr(tqdm.auto, "tqdm", Watched)
    monkeypatch.delenv("CTXCOMP_NO_PROGRESS", raising=False)
    return closed


def test_bm25_indexing_counts_every_passage_with_one_query(bars):
    n = LARGE_CORPUS + 123
    chunks = [Chunk(f"c{i}", f"d{i}", 0, 0, 12, f"passage {i} w{i % 97}") for i in range(n)]
    (hits,) = BM25Retriever().index(chunks).search(["passage w5"], k=1)
    assert hits
    assert ("bm25: tokenize", n, n, True) in bars


def test_dense_encoding_counts_passages_per_batch_not_batches(bars):
    n, batch = LARGE_CORPUS + 77, 64
    out = encode_sorted([f"text {i}" for i in range(n)], batch, lambda texts: np.ones((len(texts), 4)))
    assert out.shape == (n, 4)
    assert ("encode", n, n, True) in bars


def test_a_small_corpus_draws_no_bar(bars):
    encode_sorted([f"text {i}" for i in range(50)], 8, lambda texts: np.ones((len(texts), 4)))
    assert all(not shown for _, _, _, shown in bars)

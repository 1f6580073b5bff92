"""BM25Corpus's two scorers, bm25s's compiled one (numba) and MaxScore in numpy, give the same rows and scores
as bm25s's full score vector: its float32 scores bit for bit, ties at the k-th place to the lower rows."""
from __future__ import annotations

import numpy as np
import pytest

from retrievers.bm25_corpus import BM25Corpus, build_bm25


def test_the_compiled_scorer_keeps_the_lower_rows_of_a_tie_even_past_what_it_asked_bm25s_for(tmp_path):
    """Passages of one to three words from eight: most scores tie with dozens of others, so the tie at the k-th
    place often runs past the k + 16 rows asked of bm25s (those queries are asked again for more rows, never
    scored as a whole vector in numpy) and sometimes does not; one batch of queries gives what each alone does."""
    pytest.importorskip("numba")
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(8)]
    texts = [" ".join(rng.choice(words, size=rng.integers(1, 4))) for _ in range(3000)]
    folder = build_bm25(tmp_path / "ix", lambda: [texts], n=len(texts), analyzer="words", source="ties")
    compiled, maxscore = BM25Corpus(folder, compiled=True), BM25Corpus(folder, compiled=False)
    score_all = compiled.engine.get_scores_from_ids
    compiled.engine.get_scores_from_ids = None  # the numpy full vector is not how ties are settled
    asked = []  # (queries, rows) of each call to bm25s
    retrieve = compiled.engine.retrieve
    compiled.engine.retrieve = lambda qs, **kw: asked.append((len(qs), kw["k"])) or retrieve(qs, **kw)
    checked = again = 0
    for _ in range(60):
        ids = compiled.query_ids(" ".join(rng.choice(words + ["zzz"], size=rng.integers(1, 4))))
        k = int(rng.choice([1, 5, 20, 200]))
        full = score_all(ids)
        want = np.lexsort((np.arange(len(full)), -full))[:k]
        want = want[full[want] > 0]
        for index in (compiled, maxscore):
            got = index.top(ids, k)
            np.testing.assert_array_equal(got.rows, want)
            np.testing.assert_array_equal(got.scores, full[want])
        checked += len(want)
        again += sum(rows > k + 16 for _, rows in asked)
        asked.clear()
    assert checked > 2000
    assert 0 < again < 60  # asked again for more rows: needed, and not for every query
    queries = [" ".join(rng.choice(words, size=3)) for _ in range(30)] + ["zzz", "w1"]
    for threads in (1, 2):
        asked.clear()
        batch, alone = compiled.search(queries, 10, threads=threads), maxscore.search(queries, 10)
        assert all(map(np.array_equal, batch[1], alone[1])) and all(map(np.array_equal, batch[0], alone[0]))
        assert sum(n for n, rows in asked if rows == 10 + 16) == len(queries) - 1  # in `threads` calls
        assert len([rows for _, rows in asked if rows == 10 + 16]) == threads


def test_the_compiled_scorer_is_the_default_from_its_size_up(tmp_path, monkeypatch):
    """bm25s compiles on a process's first query (seconds): a small corpus keeps MaxScore unless asked."""
    pytest.importorskip("numba")
    from retrievers import bm25_corpus

    texts = ["w1 w2", "w2 w3", "w3 w4"]
    folder = build_bm25(tmp_path / "ix", lambda: [texts], n=len(texts), analyzer="words", source="small")
    assert not BM25Corpus(folder).compiled and BM25Corpus(folder, compiled=True).compiled
    monkeypatch.setattr(bm25_corpus, "COMPILED_FROM", len(texts))
    assert BM25Corpus(folder).compiled and not BM25Corpus(folder, compiled=False).compiled

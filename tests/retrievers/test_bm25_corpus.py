"""Block-max MaxScore over a built BM25 folder: it skips blocks of postings, yet gives bm25s's full-vector top-k
(float32 scores bit for bit, ties to the lower row)."""
from __future__ import annotations

import numpy as np

from retrievers.bm25_corpus import BLOCK, BM25Corpus, build_bm25


def _top_k_of_full_vector(index: BM25Corpus, ids: list[int], k: int) -> np.ndarray:
    full = index.engine.get_scores_from_ids(ids)
    want = np.lexsort((np.arange(len(full)), -full))[:k]
    return want[full[want] > 0]


def test_block_max_skips_blocks_yet_ranks_as_bm25s_full_score_vector(tmp_path):
    """Long passages hold common words once (low scores); here and there a short passage holds one of them
    once or twice (high scores, many exact ties), and a few long ones hold a rare word.  Most blocks of a common word's
    postings hold only low scores and are skipped; the few holding a short passage are read.  A bound taken
    from another block or another term skips some of those, and rows of the exact top-k go missing."""
    rng = np.random.default_rng(5)
    common = [f"w{i}" for i in range(6)]
    share = [1, 0.8, 0.6, 0.4, 0.25, 0.15]  # of the long passages holding each: the common words' idf differ
    filler = [f"f{i}" for i in range(300)]
    texts = []
    for _ in range(12000):
        if rng.random() < 0.006:
            texts.append(" ".join([str(rng.choice(common))] * int(rng.integers(1, 3))))
        else:
            words = list(rng.choice(filler, size=60)) + [w for w, p in zip(common, share) if rng.random() < p]
            words += ["rare"] if rng.random() < 0.003 else []
            texts.append(" ".join(words))
    index = BM25Corpus(build_bm25(tmp_path / "ix", lambda: [texts], n=len(texts), analyzer="words", source="skew"))
    skipped = checked = 0
    for q in range(200):
        words = list(rng.choice(common, size=rng.integers(2, 5), replace=False)) + (["rare"] if q % 2 else [])
        ids = index.query_ids(" ".join(words))
        k = int(rng.choice([1, 5, 20, 40]))
        want = _top_k_of_full_vector(index, ids, k)
        got = index.top(ids, k)
        np.testing.assert_array_equal(got.rows, want)
        np.testing.assert_array_equal(got.scores, index.engine.get_scores_from_ids(ids)[want])
        skipped += got.blocks_skipped
        checked += len(want)
    assert checked > 800 and skipped > 300


def test_block_maxima_are_computed_for_a_folder_built_without_them(tmp_path):
    """A folder from before block maxima gets them computed from its scores on load, the same as a build's."""
    rng = np.random.default_rng(6)
    texts = [" ".join(rng.choice([f"w{i}" for i in range(50)], size=20)) for _ in range(3 * BLOCK * 5)]
    folder = build_bm25(tmp_path / "ix", lambda: [texts], n=len(texts), analyzer="words", source="x")
    built = np.load(folder / f"blockmax{BLOCK}.ctxcomp.npy")
    (folder / f"blockmax{BLOCK}.ctxcomp.npy").unlink()
    index = BM25Corpus(folder)
    np.testing.assert_array_equal(index.blockmax, built)
    t = index.vocab["w3"]
    column = index.data[index.indptr[t]:index.indptr[t + 1]]
    want = [column[i:i + BLOCK].max() for i in range(0, len(column), BLOCK)]
    np.testing.assert_array_equal(index.blockmax[index.first_block[t]:index.first_block[t + 1]], want)

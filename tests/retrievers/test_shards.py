"""Encoding a corpus into embedding shards: whole shards only, resume after SIGKILL, FAISS loads them.

The encoder is a feature-hashing one (``HashDense`` below, a ``DenseRetriever``
plugin by import path), so expected vectors are computed independently of the
shard code and a test runs in milliseconds.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

from core.errors import UserError
from indexes.types import Chunk
from retrievers.dense import DenseRetriever
from retrievers.shards import MANIFEST, ShardStore, encode_corpus, fingerprint
from testkit.fake_openai import hashed_embedding
from tests.support.kill import kill_after_shards

REPO = Path(__file__).resolve().parents[3]
PLUGIN = "tests.retrievers.test_shards:HashDense"


class HashEncoder:
    """Signed feature hashing of words, L2-normalised; ``delay_s`` per text makes a slow encoder."""

    def __init__(self, dim: int = 32, delay_s: float = 0.0) -> None:
        self.model_id = f"hash-{dim}"
        self.dim, self.delay_s = dim, delay_s
        self.texts = 0

    def _encode(self, texts):
        if self.delay_s:
            time.sleep(self.delay_s * len(texts))
        self.texts += len(texts)
        return np.array([hashed_embedding(t, self.dim) for t in texts], dtype=np.float32)

    encode_queries = encode_documents = _encode


class HashDense(DenseRetriever):
    def __init__(self, dim: int = 32, delay_s: float = 0.0, use_title: bool = True) -> None:
        super().__init__(HashEncoder(dim, delay_s), use_title=use_title, use_cache=False)


def corpus(n: int) -> list[Chunk]:
    """Passages with titles; passage i is about topic i % 17 and names its own number."""
    return [Chunk(f"p{i}#0", f"p{i}", 0, 0, 0, f"passage {i} on topic t{i % 17} mentions w{i * 7 % 101} and n{i}",
                  f"Title {i % 13}") for i in range(n)]


def expected_vectors(chunks: list[Chunk], dim: int = 32) -> np.ndarray:
    return np.array([hashed_embedding(f"{c.title} {c.text}", dim) for c in chunks], dtype=np.float32)


def test_shards_hold_the_corpus_in_order_and_a_second_call_encodes_nothing(tmp_path):
    chunks = corpus(230)
    retriever = HashDense()
    written = []
    store = encode_corpus(chunks, retriever, tmp_path / "emb", shard_size=50, on_shard=written.append)
    assert written == [0, 1, 2, 3, 4] and store.shards == 5 and store.bounds(4) == (200, 230)
    assert [store.read(i).shape for i in range(5)] == [(50, 32)] * 4 + [(30, 32)]
    assert np.array_equal(store.vectors(), expected_vectors(chunks))
    assert retriever.encoder.texts == 230

    again = HashDense()
    encode_corpus(chunks, again, tmp_path / "emb", shard_size=50, on_shard=written.append)
    assert again.encoder.texts == 0 and written == [0, 1, 2, 3, 4]
    assert ShardStore.load(tmp_path / "emb").manifest["dim"] == 32


def test_a_killed_encode_resumes_from_its_last_whole_shard(tmp_path):
    folder = tmp_path / "emb"
    script = (f"from retrievers.shards import encode_corpus\n"
              f"from tests.retrievers.test_shards import corpus\n"
              f"encode_corpus(corpus(400), {{'name': {PLUGIN!r}, 'params': {{'delay_s': 0.004}}}}, {str(folder)!r}, "
              f"shard_size=40)\n")
    kill_after_shards([sys.executable, "-c", script], folder)

    survivors = sorted(folder.glob("shard-*.npy"))
    assert 3 <= len(survivors) < 10
    before = {p.name: p.stat().st_mtime_ns for p in survivors}
    retriever = HashDense()
    written = []
    store = encode_corpus(corpus(400), retriever, folder, shard_size=40, on_shard=written.append)
    assert written == list(range(len(survivors), 10))  # only what was missing, in order
    assert retriever.encoder.texts == 40 * (10 - len(survivors))
    assert {p.name: p.stat().st_mtime_ns for p in survivors} == before  # whole shards were kept as they were
    assert not list(folder.glob(".*.tmp"))  # a half-written shard of the killed process is cleared away
    assert np.array_equal(store.vectors(), expected_vectors(corpus(400)))


def test_a_torn_shard_is_encoded_again(tmp_path):
    chunks = corpus(100)
    store = encode_corpus(chunks, HashDense(), tmp_path / "emb", shard_size=40)
    data = store.path(1).read_bytes()
    store.path(1).write_bytes(data[: len(data) // 2])  # as if a copy had been cut short
    assert store.missing() == [1]
    with pytest.raises(UserError, match="1 of 3 shard"):
        ShardStore.load(tmp_path / "emb")
    again = HashDense()
    encode_corpus(chunks, again, tmp_path / "emb", shard_size=40)
    assert again.encoder.texts == 40 and np.array_equal(store.vectors(), expected_vectors(chunks))


def test_another_corpus_or_encoder_is_refused_not_mixed(tmp_path):
    encode_corpus(corpus(60), HashDense(), tmp_path / "emb", shard_size=25)
    with pytest.raises(UserError, match="another corpus or encoder .*count, fingerprint"):
        encode_corpus(corpus(61), HashDense(), tmp_path / "emb", shard_size=25)
    with pytest.raises(UserError, match="model_id"):
        encode_corpus(corpus(60), HashDense(dim=16), tmp_path / "emb", shard_size=25)
    with pytest.raises(UserError, match="use_title"):
        encode_corpus(corpus(60), HashDense(use_title=False), tmp_path / "emb", shard_size=25)
    with pytest.raises(UserError, match="not dense"):
        encode_corpus(corpus(60), "bm25", tmp_path / "other", shard_size=25)
    assert fingerprint(["ab", "c"]) != fingerprint(["a", "bc"])
    assert (tmp_path / "emb" / MANIFEST).is_file()


def test_the_faiss_index_loaded_from_shards_ranks_as_the_dense_retriever_does(tmp_path):
    chunks = corpus(300)
    store = encode_corpus(chunks, HashDense(dim=512), tmp_path / "emb", shard_size=64)
    index = store.to_index("flat")
    queries = ["topic t3 mentions w21", "passage 250 n250", "Title 7 topic t11"]
    qvecs = np.array([hashed_embedding(q, 512) for q in queries], dtype=np.float32)
    from_shards = [[int(i) for i, _ in row] for row in index.search(qvecs, 5)]
    direct = HashDense(dim=512).index(chunks).search(queries, 5)
    assert from_shards == [[int(h.chunk.doc_id[1:]) for h in hits] for hits in direct]
    assert from_shards[1][0] == 250

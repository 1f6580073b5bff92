"""OpenAI embeddings against a real local OpenAI-compatible server, with injected faults."""
from __future__ import annotations

import numpy as np
import pytest

from core.errors import UserError
from indexes.cache import EmbeddingCache
from indexes.chunking import passages_to_chunks
from indexes.types import Passage
from retrievers.dense import DenseRetriever
from retrievers.openai_embeddings import EmbeddingRequestError, OpenAIEmbeddingEncoder

fake_server = pytest.importorskip("testkit.fake_openai")

PASSAGES = ["the cat sat on the mat", "paris is the capital of france", "dogs bark at night"]
SECRET = "sk-test-secret-123"


def encoder(server, **kw):
    kw.setdefault("sleep", lambda s: None)
    return OpenAIEmbeddingEncoder("text-embedding-3-small", base_url=server.base_url, batch_size=2, **kw)


def test_vectors_match_the_server_and_order_is_kept(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with fake_server.FakeOpenAIServer(embedding_dim=64) as server:
        enc = encoder(server)
        got = enc.encode_documents(PASSAGES)
    expected = np.array([fake_server.hashed_embedding(t, 64) for t in PASSAGES], dtype=np.float32)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert enc.requests == 2  # 3 texts in batches of 2
    assert SECRET not in repr(vars(enc))


def test_retries_through_faults_and_caches(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    faults = ("429", "429_retry_after", "500", "502", "503", "drop", "malformed_json", "empty_choices")
    with fake_server.FakeOpenAIServer(fault_rate=0.5, faults=faults, seed=3) as server:
        enc = encoder(server, retry={"max_retries": 12})
        cache = EmbeddingCache(tmp_path)
        r = DenseRetriever(enc, cache=cache).index(passages_to_chunks([Passage(t) for t in PASSAGES]))
        (hits,) = r.search(["capital of france"], 1)
        assert hits[0].chunk.chunk_id == "p1#0"
        assert enc.retries > 0 and server.stats["faults_injected"]
        before = server.stats["requests"]
        again = DenseRetriever(encoder(server), cache=cache).index(passages_to_chunks([Passage(t) for t in PASSAGES]))
        assert again.search(["capital of france"], 1) == [hits]
        assert again.encoder_calls == 0 and server.stats["requests"] == before


def test_gives_up_with_a_clear_error_and_no_key_leak(monkeypatch):
    monkeypatch.setenv("MY_KEY", SECRET)
    with fake_server.FakeOpenAIServer(fault_rate=1.0, faults=("500",)) as server:
        enc = encoder(server, api_key_env="MY_KEY", retry={"max_retries": 2})
        with pytest.raises(EmbeddingRequestError, match="after 3 attempts") as info:
            enc.encode_documents(["hello"])
    assert SECRET not in str(info.value) and enc.requests == 3


def test_missing_key_for_the_real_api_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        OpenAIEmbeddingEncoder().encode_documents(["x"])


class _BrokenClient:
    """A client whose call raises what a programming error raises: a bug, never a transient fault."""

    calls = 0

    def post(self, path, body):
        type(self).calls += 1
        raise TypeError("post() got an unexpected keyword argument")


def test_a_programming_error_is_not_retried(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    enc = OpenAIEmbeddingEncoder("text-embedding-3-small", base_url="http://127.0.0.1:9/v1", sleep=lambda s: None)
    enc._client = _BrokenClient()
    with pytest.raises(TypeError):
        enc.encode_documents(["hello"])
    assert _BrokenClient.calls == 1 and enc.retries == 0


def test_retry_after_as_an_http_date_is_obeyed_up_to_the_cap(monkeypatch):
    import email.utils
    import time as _time

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    waits = []
    with fake_server.FakeOpenAIServer(fault_rate=1.0, faults=("429_retry_after",)) as server:
        server.retry_after_value = email.utils.formatdate(_time.time() + 60, usegmt=True)
        enc = encoder(server, retry={"max_retries": 1, "retry_after_max_s": 2.0}, sleep=waits.append)
        with pytest.raises(EmbeddingRequestError):
            enc.encode_documents(["hello"])
    assert len(waits) == 1 and 1.9 <= waits[0] <= 2.0  # the date asked for ~60 s; the cap says 2

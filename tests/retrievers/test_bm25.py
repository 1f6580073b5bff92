"""BM25 scores against hand-computed values of each engine's formula; tokens; edge cases."""
from __future__ import annotations

import math

import pytest

from core.errors import ParamError
from indexes.chunking import passages_to_chunks
from indexes.types import Passage
from retrievers.bm25 import BM25Retriever, detect_lang, tokenize
from retrievers.registry import make_retriever

# 4 documents, lengths 2, 3, 2, 4 -> avgdl 2.75; k1 = 1.5, b = 0.75.
DOCS = ["cat sat", "dog sat mat", "bird flew", "fish swam deep water"]


def corpus(texts):
    return passages_to_chunks([Passage(t) for t in texts])


def norm(dl):
    return 1.5 * (0.25 + 0.75 * dl / 2.75)


def test_rank_bm25_engine_matches_okapi_by_hand():
    r = BM25Retriever(backend="rank_bm25").index(corpus(DOCS))
    # "cat": df 1 -> idf log((4-1+.5)/(1+.5)); "sat": df 2 -> log(2.5/2.5) = 0.
    (hits,) = r.search(["Cat, sat!"], 4)
    assert hits[0].chunk.text == "cat sat"
    assert hits[0].score == pytest.approx(math.log(3.5 / 1.5) * 2.5 / (1 + norm(2)), rel=1e-6)
    assert all(h.score == 0 for h in hits[1:])
    # shorter document wins for the same tf and idf
    (hits,) = r.search(["dog fish"], 2)
    assert [h.chunk.text for h in hits] == ["dog sat mat", "fish swam deep water"]
    assert hits[0].score == pytest.approx(math.log(3.5 / 1.5) * 2.5 / (1 + norm(3)), rel=1e-6)
    assert hits[1].score == pytest.approx(math.log(3.5 / 1.5) * 2.5 / (1 + norm(4)), rel=1e-6)
    assert [h.rank for h in hits] == [0, 1]


def test_bm25s_engine_matches_lucene_by_hand():
    r = BM25Retriever(backend="bm25s").index(corpus(DOCS))
    (hits,) = r.search(["cat sat"], 2)
    cat, sat = math.log(1 + 3.5 / 1.5), math.log(1 + 2.5 / 2.5)
    assert [h.chunk.text for h in hits] == ["cat sat", "dog sat mat"]
    assert hits[0].score == pytest.approx((cat + sat) / (1 + norm(2)), rel=1e-5)
    assert hits[1].score == pytest.approx(sat / (1 + norm(3)), rel=1e-5)


def test_longbench_compat_scores_characters():
    docs = ["ab", "cd", "ef", "gh"]
    # rank_bm25 on raw strings: terms are characters; "a" has df 1, every dl = avgdl = 2.
    (hits,) = BM25Retriever(longbench_compat=True).index(corpus(docs)).search(["a"], 1)
    assert hits[0].chunk.text == "ab"
    assert hits[0].score == pytest.approx(math.log(3.5 / 1.5) * 2.5 / (1 + 1.5), rel=1e-6)
    # with word tokens "a" is not a term of "ab"
    (hits,) = BM25Retriever().index(corpus(docs)).search(["a"], 1)
    assert hits[0].score == 0


def test_chinese_goes_through_jieba():
    docs = ["北京是中国的首都，也是一座历史名城。", "上海是一个大城市，经济发达。", "苹果和香蕉都很好吃。"]
    assert detect_lang(docs) == "zh" and detect_lang(DOCS) == "en"
    assert "北京" in tokenize("我爱北京天安门", "zh") and "，" not in tokenize("你好，世界", "zh")
    r = BM25Retriever().index(corpus(docs))
    (hits,) = r.search(["中国的首都是哪里？"], 3)
    assert hits[0].chunk.text.startswith("北京")
    assert "zh" in r.identity
    (hits,) = r.search(["香蕉"], 1)
    assert hits[0].chunk.text.startswith("苹果")


def test_queries_or_corpus_without_tokens_give_zero_scores_in_corpus_order():
    r = BM25Retriever().index(corpus(DOCS))
    (hits,) = r.search(["?!"], 3)
    assert [h.chunk.chunk_id for h in hits] == ["p0#0", "p1#0", "p2#0"] and all(h.score == 0 for h in hits)
    for backend in ("rank_bm25", "bm25s"):
        r = BM25Retriever(backend=backend).index(corpus(["...", "!!"]))
        (hits,) = r.search(["cat"], 5)
        assert [h.chunk.text for h in hits] == ["...", "!!"] and all(h.score == 0 for h in hits)


def test_auto_backend_and_bad_arguments():
    r = BM25Retriever().index(corpus(DOCS))
    assert "engine=rank_bm25" in r.identity
    with pytest.raises(ParamError, match="retriever 'bm25': backend must be 'auto', 'rank_bm25' or 'bm25s', got 'lucene'"):
        make_retriever("bm25", backend="lucene")
    with pytest.raises(ParamError, match="retriever 'bm25': k1 must be a number >= 0, got 'abc'"):
        make_retriever("bm25", k1="abc")
    with pytest.raises(ValueError):
        BM25Retriever(longbench_compat=True, backend="bm25s")
    with pytest.raises(ValueError):
        r.search("a single string", 3)
    assert BM25Retriever().index([]).search(["x"], 3) == [[]]


def test_zero_score_ties_fill_in_corpus_order_on_large_corpora():
    # 40 chunks: only p20 and p39 contain query words, so the rest tie at 0 and
    # the best 4 are p20, p39 (p20 scores higher: "cat" twice) then p0, p1.
    texts = [f"filler {i}" for i in range(40)]
    texts[20], texts[39] = "cat cat", "cat dog"
    r = BM25Retriever().index(corpus(texts))
    (hits,) = r.search(["cat"], 4)
    assert [h.chunk.chunk_id for h in hits] == ["p20#0", "p39#0", "p0#0", "p1#0"]
    assert hits[0].score > hits[1].score > 0 == hits[2].score == hits[3].score


def test_english_analyzer_is_pyserinis_stopwords_possessive_and_original_porter():
    from retrievers.bm25 import analyze

    # Lucene's 33 stopwords go ("the", "in", "of", "is"), "who" stays (not among them); the possessive goes before
    # stemming; the original Porter algorithm ("generously" -> "gener"; nltk's own extensions give "generous")
    assert analyze("Who sang the Song of Obama's Presidents in the United States? It is generously",
                   "en", "english") == ["who", "sang", "song", "obama", "presid", "unit", "state", "gener"]
    assert analyze("Obama's running", "en", "words") == tokenize("Obama's running", "en") == ["obama", "s", "running"]
    with pytest.raises(ParamError, match="analyzer 'english' for lang 'zh'"):
        analyze("猫", "zh", "english")
    with pytest.raises(ParamError, match="analyzer 'snowball'"):
        BM25Retriever(analyzer="snowball", lang="en").index(corpus(DOCS))


def test_english_analyzer_retriever_matches_stems_and_says_so_in_its_identity():
    docs = ["the cats were running home", "a dog ran", "of the the the"]
    words = BM25Retriever(backend="bm25s", lang="en").index(corpus(docs))
    english = BM25Retriever(backend="bm25s", lang="en", analyzer="english").index(corpus(docs))
    # "cat running" meets "cats ... running" only once stemmed; a stopwords-only query matches nothing
    assert words.scores("cat")[0] == 0 and english.scores("cat")[0] > 0
    assert english.scores("the of").tolist() == [0, 0, 0] and words.scores("the of")[2] > 0
    assert "tokens=en-english" in english.identity and "tokens=en," in words.identity

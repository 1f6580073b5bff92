"""A complete third-party retriever in one file: TF-IDF cosine similarity with scikit-learn.

This file is the example of docs/plugins.md and is loaded by the tests through
its import path, exactly as a config would name it (``plugin_example:TfidfRetriever``).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from indexes.types import Chunk
from retrievers.base import Hit, Retriever, titled_text


class TfidfRetriever(Retriever):
    """Ranks chunks by cosine similarity of TF-IDF vectors (word n-grams up to ``max_ngram``) of title and text."""

    def __init__(self, *, max_ngram: int = 1, sublinear_tf: bool = True, use_title: bool = True) -> None:
        self.max_ngram = max_ngram
        self.sublinear_tf = sublinear_tf
        self.use_title = use_title
        self._chunks: list[Chunk] = []

    @property
    def identity(self) -> str:
        return f"tfidf(ngram<={self.max_ngram},sublinear={self.sublinear_tf},title={self.use_title})"

    def index(self, chunks: Sequence[Chunk]) -> TfidfRetriever:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self._chunks = list(chunks)
        self._vectorizer = TfidfVectorizer(ngram_range=(1, self.max_ngram), sublinear_tf=self.sublinear_tf)
        self._matrix = self._vectorizer.fit_transform([titled_text(c, self.use_title) for c in self._chunks])
        return self

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.check_search(queries, k)
        scores = (self._vectorizer.transform(list(queries)) @ self._matrix.T).toarray()
        results = []
        for row in scores:
            best = np.argsort(-row, kind="stable")[:k]
            results.append([Hit(self._chunks[i], float(row[i]), rank) for rank, i in enumerate(best)])
        return results

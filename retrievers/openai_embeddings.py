"""OpenAI embeddings (text-embedding-ada-002, text-embedding-3-small/large) or any compatible server.

Requests go through the project's one OpenAI-compatible client
(``core.openai_client``) and its one failure rule, batched and retried
through the one ``core.retry.RetryPolicy`` on 429, 408/409, 5xx, timeouts,
dropped connections and malformed replies (``Retry-After`` obeyed, in seconds
or as a date, up to ``retry_after_max_s``).  A batch that still fails raises
:class:`EmbeddingRequestError` (a ``TransientError``: the runner records the
example as failed) instead of returning anything partial; a batch the server
rejects (400, 413) raises ``RequestRejected`` (also an example failure); a
refused key, model or route (401, 403, 404) stops the run with one line.
The key is read from the environment or a key file and never stored in a
repr, logged or put in an error message.  Embeddings are cached by the dense
retriever's cache.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

import numpy as np
from pydantic import PositiveFloat, PositiveInt

from core.errors import TransientError
from core.openai_client import OPENAI_BASE_URL, OpenAIClient, ServerFault, check_urls, read_api_key
from core.retry import RetryPolicy, Transient
from indexes.cache import EmbeddingCache
from retrievers.dense import DenseRetriever, encode_sorted


class EmbeddingRequestError(TransientError):
    """An embeddings request still failed after every retry."""


class OpenAIEmbeddingEncoder:
    """Embeds texts with ``POST /embeddings``; both roles use the same model."""

    def __init__(
        self,
        model: str = "text-embedding-ada-002",
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        api_key_file: str | os.PathLike | None = None,
        batch_size: int = 256,
        retry: RetryPolicy | dict | None = None,
        timeout_s: float = 60.0,
        dimensions: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.base_url = check_urls([base_url], what="openai embeddings", field="base_url")[0] if base_url else None
        self.model_id = f"openai:{model}" + (f"@{base_url}" if base_url else "") + (f":d{dimensions}" if dimensions else "")
        self.api_key_env, self.api_key_file = api_key_env, api_key_file
        self.batch_size, self.timeout_s = batch_size, timeout_s
        self.retry = RetryPolicy.of(retry)
        self.dimensions = dimensions
        self._sleep = sleep
        self._client: OpenAIClient | None = None
        self.requests = 0
        self.retries = 0

    def _get_client(self) -> OpenAIClient:
        if self._client is None:
            key = read_api_key(self.api_key_env, self.api_key_file, required=self.base_url is None,
                               what="openai embeddings")
            self._client = OpenAIClient(self.base_url or OPENAI_BASE_URL, key, timeout_s=self.timeout_s)
        return self._client

    def _attempt(self, texts: list[str]) -> np.ndarray:
        """One request; a fault goes up as the one client's failure rule says."""
        body: dict = {"model": self.model, "input": texts}
        if self.dimensions:
            body["dimensions"] = self.dimensions
        client = self._get_client()
        self.requests += 1
        data = client.post("embeddings", body).get("data")
        try:
            rows = sorted(data, key=lambda d: d["index"])
            vectors = np.asarray([r["embedding"] for r in rows], dtype=np.float32)
        except (TypeError, KeyError, ValueError):
            raise ServerFault("an embeddings reply without data[i].index and .embedding") from None
        if len(rows) != len(texts) or vectors.ndim != 2:
            raise Transient(f"server returned {len(rows)} embeddings for {len(texts)} inputs")
        return vectors

    def _request(self, texts: list[str]) -> np.ndarray:
        def on_retry(attempt: int, reason: str, wait: float) -> None:
            self.retries += 1

        try:
            vectors, _ = self.retry.call(lambda: self._attempt(texts), sleep=self._sleep, on_retry=on_retry)
        except TransientError as err:
            raise EmbeddingRequestError(f"embeddings request to {self.model} failed: {err}") from None
        return vectors

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        # The API rejects empty strings; a single space embeds "nothing" the same way.
        return encode_sorted([t if t.strip() else " " for t in texts], self.batch_size, self._request)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode_documents(texts)


class OpenAIEmbeddingRetriever(DenseRetriever):
    """Dense retrieval with OpenAI (or compatible) embeddings; the key comes from ``api_key_env`` or ``api_key_file``."""

    color = "#e377c2"

    def __init__(
        self,
        *,
        model: str = "text-embedding-ada-002",
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        api_key_file: str | None = None,
        batch_size: PositiveInt = 256,
        retry: RetryPolicy | dict | None = None,
        timeout_s: PositiveFloat = 60.0,
        dimensions: PositiveInt | None = None,
        index_kind: str = "flat",
        cache: EmbeddingCache | None = None,
        use_cache: bool = True,
        use_title: bool = True,
    ) -> None:
        encoder = OpenAIEmbeddingEncoder(
            model, base_url=base_url, api_key_env=api_key_env, api_key_file=api_key_file, batch_size=batch_size,
            retry=retry, timeout_s=timeout_s, dimensions=dimensions,
        )
        super().__init__(encoder, index_kind=index_kind, cache=cache, use_cache=use_cache, use_title=use_title)

    @classmethod
    def check_config(cls, **params: object) -> None:
        """The server URL, checked before anything is built (a key in its user-info is refused)."""
        if params.get("base_url") is not None:
            check_urls([params["base_url"]], what="openai embeddings", field="base_url")


__all__ = ["EmbeddingRequestError", "OpenAIEmbeddingEncoder", "OpenAIEmbeddingRetriever"]

"""OpenAI embeddings (text-embedding-ada-002, text-embedding-3-small/large) or any compatible server.

The API key is read from the environment when the client is built and is
never stored on this object, logged or put in an error message.  Requests are
batched and retried through the project's one ``core.retry.RetryPolicy``
on 429, 408/409, 5xx, timeouts, dropped connections and malformed replies
(``Retry-After`` obeyed, in seconds or as a date, up to ``retry_after_max_s``);
a batch that still fails raises :class:`EmbeddingRequestError` (a
``TransientError``: the runner records the example as failed) instead of
returning anything partial.  A request the server refuses for good (a bad key,
a bad model name) raises ``UserError``; anything else is a bug and propagates.
Embeddings are cached by the dense retriever's cache.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from pydantic import PositiveFloat, PositiveInt

from core.errors import TransientError, UserError
from core.retry import RetryPolicy, Transient, parse_retry_after
from indexes.cache import EmbeddingCache
from retrievers.dense import DenseRetriever, encode_sorted

OPENAI_EMBEDDING_MODELS = ("text-embedding-ada-002", "text-embedding-3-small", "text-embedding-3-large")


class EmbeddingRequestError(TransientError):
    """An embeddings request still failed after every retry."""


def _as_transient(err: Exception) -> Transient | None:
    """The retryable form of an ``openai`` client error, or ``None`` when retrying cannot help."""
    import openai

    if isinstance(err, openai.RateLimitError):
        return Transient(f"HTTP 429: {err}", parse_retry_after(getattr(err.response, "headers", None)))
    if isinstance(err, (openai.APITimeoutError, openai.APIConnectionError)):
        return Transient(f"{type(err).__name__}: {err}")
    if isinstance(err, openai.APIStatusError) and (err.status_code in (408, 409) or err.status_code >= 500):
        return Transient(f"HTTP {err.status_code}: {err}")
    if isinstance(err, openai.APIResponseValidationError):  # a 200 with a torn body
        return Transient(f"malformed response: {err}")
    return None


class OpenAIEmbeddingEncoder:
    """Embeds texts through ``client.embeddings.create``; both roles use the same model."""

    def __init__(
        self,
        model: str = "text-embedding-ada-002",
        *,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        batch_size: int = 256,
        retry: RetryPolicy | dict | None = None,
        timeout_s: float = 60.0,
        dimensions: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.model_id = f"openai:{model}" + (f"@{base_url}" if base_url else "") + (f":d{dimensions}" if dimensions else "")
        self.api_key_env = api_key_env
        self.batch_size, self.timeout_s = batch_size, timeout_s
        self.retry = RetryPolicy.of(retry)
        self.dimensions = dimensions
        self._sleep = sleep
        self._client: Any = None
        self.requests = 0
        self.retries = 0

    def _get_client(self) -> Any:
        if self._client is None:
            import openai

            key = os.environ.get(self.api_key_env)
            if not key:
                if self.base_url is None:
                    raise UserError(f"set the environment variable {self.api_key_env} to use OpenAI embeddings")
                key = "EMPTY"  # local OpenAI-compatible servers (vLLM, ...) usually take any key
            self._client = openai.OpenAI(api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout_s)
        return self._client

    def _attempt(self, texts: list[str]) -> np.ndarray:
        """One request; retryable faults become ``Transient``, a refusal ``UserError``."""
        import openai

        extra = {"dimensions": self.dimensions} if self.dimensions else {}
        self.requests += 1
        try:
            reply = self._get_client().embeddings.create(model=self.model, input=texts, **extra)
        except openai.OpenAIError as err:
            transient = _as_transient(err)
            if transient is None:
                raise UserError(f"embeddings request to {self.model} was refused: {err}") from None
            raise transient from None
        rows = sorted(reply.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise Transient(f"server returned {len(rows)} embeddings for {len(texts)} inputs")
        return np.asarray([r.embedding for r in rows], dtype=np.float32)

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
    """Dense retrieval with OpenAI (or compatible) embeddings; the key comes from ``api_key_env``."""

    def __init__(
        self,
        *,
        model: str = "text-embedding-ada-002",
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
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
            model, base_url=base_url, api_key_env=api_key_env, batch_size=batch_size,
            retry=retry, timeout_s=timeout_s, dimensions=dimensions,
        )
        super().__init__(encoder, index_kind=index_kind, cache=cache, use_cache=use_cache, use_title=use_title)

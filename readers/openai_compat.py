"""A reader for any OpenAI-compatible HTTP server: OpenAI itself, vLLM, llama.cpp's server, TGI, ...

Requests go through the project's one OpenAI-compatible client
(``core.openai_client``) and its one failure rule, retried through the one
``core.retry.RetryPolicy``: exponential backoff with full jitter on 429
(``retry-after-ms`` / ``Retry-After`` in seconds or as an HTTP date, obeyed up
to ``retry_after_max_s``), 408/409, 5xx, timeouts, connection errors,
malformed JSON and empty ``choices``.  After the last try the generation
carries ``error`` and empty text -- a failure is never returned as an empty
prediction.  A request the server rejects (400, 413, 422) fails that example
at once; a refused key, model or route (401, 403, 404) stops the run.

The API key comes only from the environment (``api_key_env``) or a file
(``api_key_file``); it never appears in ``identity``, ``repr``, logs or error
messages (see ``core.openai_client.redact``).

``base_urls=[...]`` spreads requests over a fleet of servers that serve the
same model (``readers.fleet``): each request goes to the server with the
fewest requests in flight; a server that keeps refusing connections, timing
out or answering 5xx is ejected for ``cooldown_s`` and probed (``GET /models``)
before it gets traffic again.  One attempt of the retry policy tries each
admitted server at most once, so a request fails only when every server
failed it within the retry budget.  The URLs are not part of ``identity``:
the same model behind any server shares the generation cache.

``endpoint='chat'`` sends the prompt as one user message (after a system
message when the request has one; remote chat models have no raw-completion
mode, so ``GenerationRequest.chat=False`` does not change it);
``endpoint='completions'`` sends the raw prompt, e.g. to a base model served by vLLM.
"""
from __future__ import annotations

import json
import logging
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, Sequence

from pydantic import NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt

from core.errors import ParamError, RequestRejected, TransientError, UserError
from core.openai_client import OPENAI_BASE_URL, OpenAIClient, ServerFault, check_urls, read_api_key, redact
from core.retry import RetryPolicy, Transient
from readers.base import Generation, GenerationRequest, Reader, Tokenizer, TruncationPolicy
from readers.fleet import Fleet, Server
from readers.tokenizers import TiktokenTokenizer, WordTokenizer, load_tokenizer
from readers.truncation import cut_at_stop, prompt_budget, truncate_text

log = logging.getLogger(__name__)

# Context windows of common OpenAI models (prompt + completion tokens), used when max_context is not given.
KNOWN_CONTEXT = {
    "gpt-3.5-turbo-16k": 16385, "gpt-3.5-turbo": 16385, "gpt-4o-mini": 128000, "gpt-4o": 128000,
    "gpt-4-turbo": 128000, "gpt-4-32k": 32768, "gpt-4": 8192, "gpt-4.1": 1047576,
}
DEFAULT_CONTEXT = 4096


def known_context(model: str) -> int:
    """The window of a model by name (``KNOWN_CONTEXT``, a name's known prefix), else ``DEFAULT_CONTEXT``."""
    return KNOWN_CONTEXT.get(model) or next((n for name, n in KNOWN_CONTEXT.items() if model.startswith(name)),
                                            DEFAULT_CONTEXT)


def _tokenizer_for(spec: Any, model: str, official: bool) -> Tokenizer:
    """How a reader counts: its ``tokenizer`` spec; without one, tiktoken for OpenAI's own API (words when
    tiktoken cannot load offline), else LongBench words."""
    if spec is None and official:
        try:
            return TiktokenTokenizer(model)
        except Exception as err:  # offline without TIKTOKEN_CACHE_DIR, or an unknown model
            log.warning("tiktoken unavailable for %s (%s); counting LongBench words", model, err)
            return WordTokenizer()
    return load_tokenizer(spec)


class OpenAICompatReader(Reader):
    """Chat or completion requests to an OpenAI-compatible server, ``concurrency`` at a time, results in input order.

    ``retry`` is a ``RetryPolicy`` or its settings (``{max_retries: 6, backoff_base_s: 0.5,
    backoff_max_s: 30, retry_after_max_s: 300}``).  ``base_url`` names one server, ``base_urls`` a fleet
    (not both); ``concurrency`` is per server.  ``eject_after`` consecutive health faults eject a fleet
    server for ``cooldown_s`` seconds.  ``extra_body``: fields added to every request body, for a server's own
    decoding settings (llama.cpp's ``repeat_penalty``, vLLM's ``top_k``); they change outputs, so they are
    part of ``identity``.
    """

    # For the run config (experiments/run/config.py): a parameter whose list value is one value, not a grid
    # axis; and parameters that say where requests go, not what the model answers, which a grid point's
    # hash can leave out so a fleet that moves to other hosts keeps its predictions' keys.
    literal_lists: tuple[str, ...] = ("base_urls",)
    operational: tuple[str, ...] = ("base_url", "base_urls", "eject_after", "cooldown_s")

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        base_urls: Sequence[str] | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        api_key_file: str | os.PathLike | None = None,
        endpoint: Literal["chat", "completions"] = "chat",
        concurrency: PositiveInt = 8,
        retry: RetryPolicy | dict | None = None,
        timeout_s: PositiveFloat = 60.0,
        max_context: PositiveInt | None = None,
        tokenizer: Any = None,
        truncation: TruncationPolicy = "middle",
        price_in_per_1k: NonNegativeFloat = 0.0,
        price_out_per_1k: NonNegativeFloat = 0.0,
        chat_overhead_tokens: NonNegativeInt = 8,
        eject_after: PositiveInt = 3,
        cooldown_s: NonNegativeFloat = 30.0,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.extra_body = dict(extra_body or {})
        clash = sorted(set(self.extra_body) & {"model", "messages", "prompt", "max_tokens", "temperature", "stop", "stream"})
        if clash:
            raise ParamError(f"openai: extra_body may not set {', '.join(clash)} (the reader sets them)")
        self.base_urls = self._check_urls(base_url, base_urls)
        self.base_url = self.base_urls[0]  # the first server (one-server readers have only this one)
        self.endpoint = endpoint
        self.concurrency = concurrency
        self.retry = RetryPolicy.of(retry)
        self.timeout_s = timeout_s
        self.truncation = truncation
        self.price_in_per_1k, self.price_out_per_1k = price_in_per_1k, price_out_per_1k
        # Tokens the server's chat format wraps around one user message (OpenAI: 7); without this room a
        # prompt truncated to exactly max_context - max_new_tokens is rejected with HTTP 400.
        self.chat_overhead_tokens = chat_overhead_tokens if endpoint == "chat" else 0
        self._key = read_api_key(api_key_env, api_key_file, required=self._official)
        self._max_context = max_context
        self._tokenizer_spec = tokenizer
        self._tokenizer_obj: Tokenizer | None = None
        connections = concurrency * len(self.base_urls)
        self._clients = {url: OpenAIClient(url, self._key, timeout_s=timeout_s, connections=connections)
                         for url in self.base_urls}
        self._rng = random.Random()
        self._sleep = time.sleep  # a seam for tests that record waits
        self.fleet = Fleet(self.base_urls, probe=lambda url: self._clients[url].healthy(), eject_after=eject_after,
                           cooldown_s=cooldown_s)

    @classmethod
    def check_config(cls, **params: Any) -> None:
        """What the registry's value check cannot see: the server URLs, so a run refuses a bad one before it
        writes or loads anything.  Raises ``ParamError``; reads no key, opens no connection."""
        cls._check_urls(params.get("base_url"), params.get("base_urls"))

    @staticmethod
    def _check_urls(base_url: str | None, base_urls: Sequence[str] | None) -> list[str]:
        """One server (``base_url``, else ``$OPENAI_BASE_URL``, else OpenAI's) or a fleet (``base_urls``)."""
        if base_urls is not None:
            if base_url is not None:
                raise ParamError("openai: give base_url (one server) or base_urls (a fleet), not both")
            if isinstance(base_urls, str) or not isinstance(base_urls, Sequence):
                raise ParamError(f"openai: base_urls must be a list of server URLs, got {type(base_urls).__name__}")
            if any(not isinstance(u, str) for u in base_urls):
                raise ParamError("openai: base_urls must be a flat list of server URLs (base_urls: [URL, ...]); "
                                 f"got {list(base_urls)!r}")
            if not base_urls:
                raise ParamError("openai: base_urls is empty; give at least one server URL")
            return check_urls(list(base_urls))
        url = base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
        return check_urls([url], field="base_url")

    @property
    def _official(self) -> bool:
        """Whether every server is OpenAI's own API (a key is required; tiktoken counts tokens)."""
        return all(u == OPENAI_BASE_URL for u in self.base_urls)

    # -- Reader surface ---------------------------------------------------
    @property
    def max_context(self) -> int:  # type: ignore[override]
        if self._max_context is None:
            self._max_context = known_context(self.model)
        return self._max_context

    @property
    def tokenizer(self) -> Tokenizer:  # type: ignore[override]
        if self._tokenizer_obj is None:
            self._tokenizer_obj = _tokenizer_for(self._tokenizer_spec, self.model, self._official)
        return self._tokenizer_obj

    @classmethod
    def sizing(cls, model: str, *, base_url: str | None = None, base_urls: Sequence[str] | None = None,
               max_context: int | None = None, tokenizer: Any = None, truncation: str = "middle",
               chat_overhead_tokens: int = 8, endpoint: str = "chat", **_: Any) -> Any:
        """Its tokenizer and window as a request would count them, without a key or a connection
        (``readers.sizing``); the chat format's few tokens come off the window."""
        from readers.sizing import ReaderSizing, from_tokenizer_file

        overhead = chat_overhead_tokens if endpoint == "chat" else 0
        window = (max_context or known_context(model)) - overhead
        if isinstance(tokenizer, str) and tokenizer != "words" and not tokenizer.startswith("tiktoken:"):
            return from_tokenizer_file(tokenizer, max_context=window, label=model, truncation=truncation)
        official = all(url == OPENAI_BASE_URL for url in cls._check_urls(base_url, base_urls))
        counted = _tokenizer_for(tokenizer, model, official)
        basis = "LongBench words" if isinstance(counted, WordTokenizer) else f"tiktoken ({counted.name})"
        return ReaderSizing(counted, window, model, basis, True, truncation)

    @property
    def identity(self) -> str:
        """The model and what changes its output -- not the server URLs, so every server of a fleet (or a
        re-deployed one) shares the generation cache.  Without a tokenizer spec the counting rule differs
        between OpenAI's API (tiktoken) and other servers (words), and truncation with it, so it is named."""
        spec = self._tokenizer_spec
        tok = spec if isinstance(spec, str) else type(spec).__name__ if spec is not None else (
            "tiktoken-auto" if self._official else "None")
        extra = f":extra_body={json.dumps(self.extra_body, sort_keys=True)}" if self.extra_body else ""
        return (f"openai-compat:{self.endpoint}:{self.model}:max_context={self.max_context}"
                f":truncation={self.truncation}:tokenizer={tok}:chat_overhead={self.chat_overhead_tokens}{extra}")

    @property
    def label(self) -> str:
        return self.model

    def __repr__(self) -> str:
        where = f"base_url={self.base_url!r}" if len(self.base_urls) == 1 else f"base_urls={self.base_urls!r}"
        return f"OpenAICompatReader(model={self.model!r}, {where}, endpoint={self.endpoint!r})"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        if not requests:
            return []
        workers = min(self.concurrency * len(self.base_urls), len(requests))

        def one(i: int) -> Generation:  # a paid answer reaches the cache as soon as it exists
            return self._finished(i, self._generate_one(requests[i]))

        if workers == 1:
            return [one(i) for i in range(len(requests))]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(one, range(len(requests))))

    def close(self) -> None:
        self.fleet.wait_for_probes(timeout_s=min(self.timeout_s, 5.0))
        for client in self._clients.values():
            client.close()

    # -- one request ------------------------------------------------------

    def _body(self, req: GenerationRequest, prompt: str) -> dict:
        body: dict[str, Any] = {**self.extra_body, "model": self.model, "max_tokens": req.max_new_tokens,
                                "temperature": req.temperature}
        if self.endpoint == "chat":
            system = [{"role": "system", "content": req.system}] if req.system else []
            body["messages"] = [*system, {"role": "user", "content": prompt}]
        else:
            body["prompt"] = f"{req.system or ''}{prompt}"
        if req.stop:
            body["stop"] = list(req.stop[:4])  # the API accepts at most 4; the rest are cut client-side
        return body

    def prompt_overhead(self, request: GenerationRequest) -> int:
        """The chat envelope allowance plus the system message, both held back from the prompt's budget."""
        return self.chat_overhead_tokens + (self.count_tokens(request.system) if request.system else 0)

    def _generate_one(self, req: GenerationRequest) -> Generation:
        start = time.perf_counter()
        budget = prompt_budget(self.max_context - self.prompt_overhead(req), req.max_new_tokens)
        prompt, truncated = truncate_text(req.prompt, self.tokenizer, budget, self.truncation)
        body = self._body(req, prompt)

        def on_retry(attempt: int, reason: str, wait: float) -> None:
            log.info("retrying %s request after %s (attempt %d, waiting %.2fs)", self.model, reason, attempt + 1, wait)

        failed = [0]  # failed HTTP calls of this request, failovers within an attempt included
        try:
            (text, usage), _ = self.retry.call(lambda: self._attempt_fleet(body, failed), sleep=self._sleep,
                                               rng=self._rng, on_retry=on_retry)
        except TransientError as failure:
            self._advance(1)
            return Generation(text="", latency_s=time.perf_counter() - start, truncated=truncated,
                              error=str(failure), retries=max(failed[0] - 1, 0))
        except RequestRejected as failure:
            self._advance(1)
            return Generation(text="", latency_s=time.perf_counter() - start, truncated=truncated, error=str(failure),
                              retries=max(failed[0] - 1, 0))
        retries = failed[0]
        text = cut_at_stop(text, req.stop)
        tokens_in = usage.get("prompt_tokens") or self.count_tokens(prompt)
        tokens_out = usage.get("completion_tokens") or self.count_tokens(text)
        cost = tokens_in / 1000 * self.price_in_per_1k + tokens_out / 1000 * self.price_out_per_1k
        self._advance(1)
        return Generation(text=text, tokens_in=tokens_in, tokens_out=tokens_out,
                          latency_s=time.perf_counter() - start, truncated=truncated, cost_usd=cost,
                          retries=retries, meta={"usage": usage} if usage else {})

    def _attempt_fleet(self, body: dict, failed: list[int]) -> tuple[str, dict]:
        """One attempt of the retry policy: each admitted server at most once, least in flight first.

        Raises ``Transient`` only when every server it tried failed (the reason names each of them and
        obeys the longest ``Retry-After`` any of them asked for); ``RequestRejected`` and ``ServerRefused``
        pass through at once.
        """
        tried: list[Server] = []
        faults: list[tuple[str, Transient]] = []
        while (server := self.fleet.acquire(exclude=tried)) is not None:
            tried.append(server)
            try:
                result = self._attempt(server.url, body)
            except Transient as fault:
                failed[0] += 1
                self.fleet.release(server, ok=False, health_fault=isinstance(fault, ServerFault), reason=fault.reason)
                faults.append((server.url, fault))
                continue
            except (RequestRejected, UserError):
                failed[0] += 1
                self.fleet.release(server, ok=True)  # the server answered; the request or the setup is what is wrong
                raise
            except BaseException:
                self.fleet.release(server, ok=False)
                raise
            self.fleet.release(server, ok=True)
            return result
        if len(faults) == 1 and len(self.fleet) == 1:
            raise faults[0][1]
        hints = [f.retry_after for _, f in faults if f.retry_after is not None]
        head = f"all {len(faults)} servers failed" if len(faults) == len(self.fleet) else (
            f"{len(faults)} of {len(self.fleet)} servers tried (the others are ejected), all failed")
        reason = f"{head}: " + "; ".join(f"{url}: {f.reason}" for url, f in faults)
        raise Transient(reason, max(hints) if hints else None)

    def _attempt(self, base_url: str, body: dict) -> tuple[str, dict]:
        """One HTTP call to one server; (text, usage), or the client's classified fault."""
        payload = self._clients[base_url].post("chat/completions" if self.endpoint == "chat" else "completions", body)
        choices = payload.get("choices")
        if not choices:
            raise ServerFault("response has no choices")
        try:
            choice = choices[0]
            text = choice["message"].get("content") if self.endpoint == "chat" else choice.get("text")
        except (AttributeError, KeyError, TypeError, IndexError):
            raise ServerFault("response choice has an unexpected shape") from None
        if text is None:
            raise ServerFault("response choice has no text")
        usage = payload.get("usage") or {}
        return str(text), usage if isinstance(usage, dict) else {}

    def _clean(self, text: str) -> str:
        return redact(text, self._key.reveal())


__all__ = ["KNOWN_CONTEXT", "OpenAICompatReader", "known_context"]

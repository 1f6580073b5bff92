"""The one client of OpenAI-compatible servers (OpenAI, vLLM, llama.cpp's server, TGI, ...) and its one failure rule.

Chat and completion readers, the embeddings retriever and the judge all send
their requests through :class:`OpenAIClient`, so a server's answer means the
same thing everywhere:

- **401, 403, 404**: the key is refused, the model or the route does not exist.
  No other request can succeed either, so :class:`ServerRefused` (a
  ``UserError``) stops the run with one line.
- **429, 408, 409, 5xx, a dropped or refused connection, a timeout, a torn
  reply**: the fault may pass, so the attempt raises ``core.retry.Transient``
  (``ServerFault`` when it speaks of the server's health: 5xx, connection,
  timeout, torn reply) and the caller's ``RetryPolicy`` tries again.
- **any other 4xx** (400, 413, 422: the input is too long, filtered):
  :class:`~core.errors.RequestRejected`, an example failure; retrying cannot help.

The API key comes only from the environment or a key file; it is held in a
:class:`Secret`, never put in a URL, a repr, a log or an error message
(:func:`redact`), and the HTTP libraries' loggers are kept from logging
headers (:func:`quiet_http_loggers`).  Built on httpx rather than the
``openai`` SDK so retries, fail-over across a fleet and the failure rule are
ours, in one place.
"""
from __future__ import annotations

import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from core.errors import ParamError, RequestRejected, UserError
from core.retry import Transient, parse_retry_after

OPENAI_BASE_URL = "https://api.openai.com/v1"
RETRYABLE_STATUS = frozenset({408, 409, 429})
REFUSED_STATUS = frozenset({401, 403, 404})
_BEARER = re.compile(r"(Bearer\s+)\S+", re.IGNORECASE)
_KEYLIKE = re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}")
# libraries that may log a request's headers (and so a key) at DEBUG
HTTP_LOGGERS = ("httpx", "httpcore", "urllib3", "openai", "hpack", "h2")


class ServerRefused(UserError):
    """The server refused the key, the model or the route (HTTP 401, 403, 404): nothing else will succeed."""


class ServerFault(Transient):
    """A retryable fault that speaks of the server's health (refused, dropped, timed out, 5xx, torn reply);
    a fleet counts it toward ejecting the server.  A 429 / 408 / 409 is a plain ``Transient``."""


class Secret:
    """Holds an API key; prints as ``***`` so it cannot leak through repr or f-strings."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "***"

    __str__ = __repr__


def redact(text: str, secret: str | None = None) -> str:
    """Remove an API key from ``text``: the literal key, ``Bearer <token>`` and ``sk-...`` look-alikes."""
    if secret:
        text = text.replace(secret, "***")
    return _KEYLIKE.sub("sk-***", _BEARER.sub(r"\1***", text))


def quiet_http_loggers() -> None:
    """Keep the HTTP libraries from logging headers at DEBUG, even when a server echoes a key back.

    Their INFO lines (method, URL, status) carry no header; everything below INFO is dropped.
    """
    for name in HTTP_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level < logging.INFO:
            logger.setLevel(logging.INFO)


def check_urls(urls: list[Any], what: str = "openai", field: str = "base_urls") -> list[str]:
    """The URLs without trailing slashes; a ``ParamError`` naming the first entry that is not an http(s) URL
    with a host and (if any) a numeric port, or that carries a key in its user-info."""
    out = []
    for url in urls:
        where = f"in {field}" if field == "base_urls" else f"({field})"
        try:
            parts = urlsplit(url) if isinstance(url, str) else None
            port_ok = parts is not None and (parts.port or True) and not (parts.netloc.endswith(":"))
        except ValueError:  # a port that is not a number
            parts, port_ok = None, False
        if parts is None or not port_ok or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ParamError(f"{what}: {redact(str(url))!r} {where} is not an http:// or https:// URL with a host "
                             "and a numeric port")
        if parts.username is not None or parts.password is not None:
            raise ParamError(f"{what}: a URL {where} carries credentials in its user-info; configs are copied into "
                             "run directories, so give the key through api_key_env or api_key_file instead")
        out.append(url.rstrip("/"))
    if len(set(out)) != len(out):
        dupes = sorted({u for u in out if out.count(u) > 1})
        raise ParamError(f"{what}: {field} lists {', '.join(dupes)} more than once")
    return out


def read_api_key(env: str, path: str | os.PathLike | None, *, required: bool, what: str = "openai") -> Secret:
    """The key from ``path`` (a file outside any run directory) or the environment variable ``env``.

    ``required``: the server is OpenAI's own, which refuses requests without one; other servers (vLLM
    without ``--api-key``) accept any bearer token, so ``EMPTY`` is sent.
    """
    if path is not None:
        try:
            key = Path(path).read_text(encoding="utf-8").strip()
        except OSError as err:
            raise UserError(f"{what}: cannot read API key file {path}: {err.strerror}") from None
        if not key:
            raise UserError(f"{what}: API key file {path} is empty")
        return Secret(key)
    key = os.environ.get(env, "").strip()
    if not key:
        if required:
            raise UserError(f"{what}: no API key: set the environment variable {env} (or give api_key_file)")
        key = "EMPTY"
    return Secret(key)


class OpenAIClient:
    """One server: ``post(path, body)`` returns the JSON reply or raises by the one failure rule above."""

    def __init__(self, base_url: str, key: Secret, *, timeout_s: float = 60.0, connections: int = 8) -> None:
        self.base_url, self._key, self.timeout_s, self.connections = base_url.rstrip("/"), key, timeout_s, connections
        self._client: Any = None
        self._lock = threading.Lock()
        quiet_http_loggers()

    def _http(self) -> Any:
        with self._lock:
            if self._client is None:
                import httpx

                limits = httpx.Limits(max_connections=self.connections, max_keepalive_connections=self.connections)
                self._client = httpx.Client(timeout=self.timeout_s, limits=limits)
            return self._client

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key.reveal()}"}

    def clean(self, text: str) -> str:
        return redact(text, self._key.reveal())

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One HTTP call; the reply's JSON object, or ``ServerRefused`` / ``Transient`` / ``ServerFault`` /
        ``RequestRejected`` with a key-free reason."""
        import httpx

        try:
            resp = self._http().post(f"{self.base_url}/{path}", json=body, headers=self._headers())
        except httpx.TimeoutException as err:
            raise ServerFault(f"timeout after {self.timeout_s}s ({type(err).__name__})") from None
        except (httpx.LocalProtocolError, httpx.UnsupportedProtocol) as err:  # our request is bad: retrying won't help
            raise RequestRejected(f"invalid request ({type(err).__name__}: {self.clean(str(err))})") from None
        except httpx.TransportError as err:
            raise ServerFault(f"connection error ({type(err).__name__}: {self.clean(str(err))})") from None
        if resp.status_code != 200:
            reason = f"HTTP {resp.status_code}: {self.clean(resp.text)[:300]}"
            if resp.status_code >= 500:
                raise ServerFault(reason)
            if resp.status_code in RETRYABLE_STATUS:
                raise Transient(reason, parse_retry_after(resp.headers) if resp.status_code == 429 else None)
            if resp.status_code in REFUSED_STATUS:
                raise ServerRefused(f"{self.base_url}/{path} refused the request ({reason.splitlines()[0][:200]}); "
                                    "check the API key, the model name and the base URL")
            raise RequestRejected(reason)
        try:
            payload = resp.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ServerFault("malformed JSON in a 200 response") from None
        if not isinstance(payload, dict):
            raise ServerFault("a 200 response that is not a JSON object")
        return payload

    def healthy(self) -> bool:
        """Whether the server answers ``GET /models`` with 200 (a fleet's probe before readmitting it)."""
        import httpx

        try:
            resp = httpx.get(f"{self.base_url}/models", headers=self._headers(), timeout=min(self.timeout_s, 5.0))
        except httpx.HTTPError:
            return False
        return resp.status_code == 200

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


__all__ = ["OPENAI_BASE_URL", "OpenAIClient", "Secret", "ServerFault", "ServerRefused", "check_urls",
           "quiet_http_loggers", "read_api_key", "redact"]

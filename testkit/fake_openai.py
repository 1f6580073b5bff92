"""A real, local OpenAI-compatible HTTP server with fault injection, for tests and benchmarks.

It speaks the OpenAI wire format on 127.0.0.1 for ``POST /v1/chat/completions``,
``POST /v1/completions``, ``POST /v1/embeddings`` and ``GET /v1/models``.
Replies are deterministic functions of the request: completions come from the
``responder`` (default: :class:`readers.extractive.ExtractiveReader`'s answer),
embeddings are feature-hashed bag-of-words vectors, L2-normalised.

Faults are injected with probability ``fault_rate`` and are a deterministic
function of (``seed``, request body, how many times that body was seen), so a
retried request meets a fresh draw and a whole run is reproducible no matter
how concurrent requests interleave.  Fault kinds:

``429`` / ``429_retry_after`` (with ``Retry-After`` and ``retry-after-ms``
headers), ``500`` / ``502`` / ``503``, ``hang`` (waits ``hang_s`` before
answering, past a client's timeout), ``drop`` (closes the socket with no
response), ``malformed_json`` (a 200 with a torn JSON body), ``empty_choices``
(a 200 with ``choices: []`` or ``data: []``).

Fleet tests: ``kill()`` stops a server abruptly (in-flight requests are cut
with no reply, new connections are refused, as when a process dies) and
``start()`` brings it back on the same port; ``unhealthy = True`` makes it
answer 503 to everything, ``GET /v1/models`` (a health probe) included;
``stats`` counts probes and the most requests it ever had in flight.

Run one by hand: ``python -m testkit.fake_openai --port 8000 --fault-rate 0.3``.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import logging
import math
import random
import re
import socket
import struct
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Sequence

from readers.extractive import ExtractiveReader
from readers.truncation import cut_at_stop

log = logging.getLogger(__name__)

FAULT_KINDS: tuple[str, ...] = (
    "429", "429_retry_after", "500", "502", "503", "hang", "drop", "malformed_json", "empty_choices",
)
Responder = Callable[[str, dict], str]
_WORD = re.compile(r"\w+", re.UNICODE)


def hashed_embedding(text: str, dim: int = 64) -> list[float]:
    """Feature-hashed bag of words (signed, blake2b), L2-normalised; all zeros for a text with no words."""
    vec = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dim
        vec[bucket] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec))
    return [v / norm for v in vec] if norm else vec


def prompt_of(body: dict) -> str:
    """The text a chat or completion request asks about (chat messages joined by newlines)."""
    if "messages" in body:
        parts = []
        for msg in body["messages"]:
            content = msg.get("content", "")
            if isinstance(content, list):  # content parts
                content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
            parts.append(str(content))
        return "\n".join(parts)
    prompt = body.get("prompt", "")
    return "\n".join(prompt) if isinstance(prompt, list) else str(prompt)


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) drops SYNs when a client opens many connections at once;
    # the kernel resends them after 1 s, which a client with a 1 s timeout sees as ConnectTimeout.
    request_queue_size = 256


class FakeOpenAIServer:
    """A bounded ``ThreadingHTTPServer`` in a background thread; use as a context manager.

    ``max_requests`` / ``max_seconds`` make it stop by itself so a forgotten
    server never outlives a test.  ``service_time_s`` and ``max_concurrency``
    model a server with fixed capacity (``max_concurrency / service_time_s``
    requests per second) for throughput benchmarks; requests beyond the cap queue.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        responder: Responder | None = None,
        embedding_dim: int = 64,
        fault_rate: float = 0.0,
        faults: Sequence[str] = FAULT_KINDS,
        seed: int = 0,
        hang_s: float = 5.0,
        retry_after_s: float = 0.05,
        service_time_s: float = 0.0,
        max_concurrency: int | None = None,
        max_requests: int | None = 10_000,
        max_seconds: float | None = 600.0,
        models: Sequence[str] = ("fake-model",),
        require_auth: bool = True,
    ) -> None:
        if not 0.0 <= fault_rate <= 1.0:
            raise ValueError(f"fault_rate must be in [0, 1], got {fault_rate}")
        unknown = [f for f in faults if f not in FAULT_KINDS]
        if unknown or not faults:
            raise ValueError(f"unknown fault kinds {unknown} (or none given); choose from {', '.join(FAULT_KINDS)}")
        self.host, self.port = host, port
        extractive = ExtractiveReader()
        self.responder: Responder = responder or (
            lambda prompt, body: extractive.answer(prompt, int(body.get("max_tokens") or 128))
        )
        self.embedding_dim = embedding_dim
        self.fault_rate, self.faults, self.seed = fault_rate, tuple(faults), seed
        self.hang_s, self.retry_after_s, self.service_time_s = hang_s, retry_after_s, service_time_s
        self.retry_after_value: str | None = None
        self.max_requests, self.max_seconds = max_requests, max_seconds
        self.models, self.require_auth = tuple(models), require_auth
        self._slots = threading.Semaphore(max_concurrency) if max_concurrency else None
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()
        self._stats: dict[str, Any] = {"requests": 0, "ok": 0, "faults_injected": Counter(), "by_path": Counter(),
                                       "probes": 0, "in_flight": 0, "max_in_flight": 0}
        self.arrivals: list[tuple[float, str]] = []  # (monotonic time, path); no headers, never the key
        self.unhealthy = False  # answer 503 to every request, health probes included
        self._connections: set[socket.socket] = set()
        self._killed = threading.Event()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # -- lifecycle --------------------------------------------------------
    def start(self) -> "FakeOpenAIServer":
        """Serve in a background thread; after ``stop()`` or ``kill()`` this serves again on the same port."""
        self._stopping.clear()
        self._killed.clear()
        handler = type("Handler", (_Handler,), {"server_ref": self})
        self._httpd = _Server((self.host, self.port), handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        if self.max_seconds is not None:
            self._timer = threading.Timer(self.max_seconds, self.stop)
            self._timer.daemon = True
            self._timer.start()
        return self

    def stop(self) -> None:
        """Stop serving; hanging handlers are released at once."""
        self._stopping.set()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            if threading.current_thread() is not self._thread:
                httpd.shutdown()
            httpd.server_close()
        if self._timer is not None:
            self._timer.cancel()

    def kill(self) -> None:
        """Die as a killed process would: in-flight requests are cut with no reply, new ones are refused."""
        self._killed.set()
        self.stop()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._httpd is not None and not self._stopping.is_set()

    @property
    def stats(self) -> dict[str, Any]:
        """A snapshot: ``requests`` (POSTs), ``ok``, ``faults_injected`` (by kind), ``by_path``, ``probes``
        (``GET /v1/models``), ``in_flight`` and ``max_in_flight`` (POSTs being served, now and at most)."""
        with self._lock:
            return {
                "requests": self._stats["requests"],
                "ok": self._stats["ok"],
                "faults_injected": dict(self._stats["faults_injected"]),
                "by_path": dict(self._stats["by_path"]),
                "probes": self._stats["probes"],
                "in_flight": self._stats["in_flight"],
                "max_in_flight": self._stats["max_in_flight"],
            }

    def _track(self, conn: socket.socket, open_: bool) -> None:
        with self._lock:
            (self._connections.add if open_ else self._connections.discard)(conn)

    def _flight(self, delta: int) -> None:
        with self._lock:
            self._stats["in_flight"] += delta
            self._stats["max_in_flight"] = max(self._stats["max_in_flight"], self._stats["in_flight"])

    # -- decisions (called by the handler) -------------------------------
    def _admit(self, path: str, raw_body: bytes) -> tuple[bool, str | None]:
        """Count the request; return (admitted, fault kind or None)."""
        with self._lock:
            if self.max_requests is not None and self._stats["requests"] >= self.max_requests:
                return False, None
            self._stats["requests"] += 1
            self._stats["by_path"][path] += 1
            self.arrivals.append((time.monotonic(), path))
            reached_cap = self.max_requests is not None and self._stats["requests"] >= self.max_requests
            key = hashlib.sha256(path.encode() + b"\0" + raw_body).hexdigest()
            attempt = self._seen[key]
            self._seen[key] += 1
        if reached_cap:  # stop by itself once the bound is reached, after answering this one
            self._stopping.set()
            threading.Thread(target=self.stop, daemon=True).start()
        fault = None
        if self.fault_rate > 0:
            rng = random.Random(f"{self.seed}:{key}:{attempt}")
            if rng.random() < self.fault_rate:
                fault = rng.choice(self.faults)
                with self._lock:
                    self._stats["faults_injected"][fault] += 1
        return True, fault

    def _count_ok(self) -> None:
        with self._lock:
            self._stats["ok"] += 1

    def answer(self, path: str, body: dict) -> dict:
        """The fault-free JSON reply to a request (raises ValueError on a bad request)."""
        model = body.get("model") or self.models[0]
        created = 0  # deterministic replies
        if path.endswith("/embeddings"):
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else texts
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise ValueError("'input' must be a string or a list of strings")
            dim = int(body.get("dimensions") or self.embedding_dim)
            data = []
            for i, text in enumerate(texts):
                vec = hashed_embedding(text, dim)
                emb: Any = vec
                if body.get("encoding_format") == "base64":
                    emb = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode("ascii")
                data.append({"object": "embedding", "index": i, "embedding": emb})
            n_tokens = sum(len(t.split()) for t in texts)
            return {"object": "list", "data": data, "model": model,
                    "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}
        prompt = prompt_of(body)
        stop = body.get("stop") or []
        text = cut_at_stop(self.responder(prompt, body), [stop] if isinstance(stop, str) else stop)
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        rid = "fake-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
        if path.endswith("/chat/completions"):
            choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
            return {"id": rid, "object": "chat.completion", "created": created, "model": model,
                    "choices": [choice], "usage": usage}
        choice = {"index": 0, "finish_reason": "stop", "text": text, "logprobs": None}
        return {"id": rid, "object": "text_completion", "created": created, "model": model,
                "choices": [choice], "usage": usage}


class _Handler(BaseHTTPRequestHandler):
    server_ref: FakeOpenAIServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes; Nagle would add ~40 ms each
    _POST_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")

    def log_message(self, format: str, *args: Any) -> None:  # request line only, never headers
        log.debug("fake-openai: " + format, *args)

    def setup(self) -> None:
        super().setup()
        self.server_ref._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:  # the socket was shut down by kill()
            pass
        self.server_ref._track(self.connection, False)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (e.g. timed out on a hang)
            self.close_connection = True

    def _error(self, status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind, "code": status}}, headers)

    def _authorised(self) -> bool:
        if not self.server_ref.require_auth:
            return True
        value = self.headers.get("Authorization", "")
        if value.startswith("Bearer ") and value[len("Bearer ") :].strip():
            return True
        self._error(401, "missing or malformed 'Authorization: Bearer <key>' header", "invalid_request_error")
        return False

    def do_GET(self) -> None:
        if not self._authorised():
            return
        if self.path.rstrip("/") != "/v1/models":
            self._error(404, f"no route GET {self.path}", "invalid_request_error")
            return
        srv = self.server_ref
        with srv._lock:
            srv._stats["probes"] += 1
        if srv.unhealthy:
            self._error(503, "unhealthy (set by the test)", "server_error")
            return
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "ctxcomp-fake"} for m in srv.models]
        self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        srv = self.server_ref
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if len(raw) < length:  # the client went away mid-request (a killed process): nothing to answer
            self.close_connection = True
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        if not self._authorised():
            return
        if path not in self._POST_PATHS:
            self._error(404, f"no route POST {self.path}", "invalid_request_error")
            return
        admitted, fault = srv._admit(path, raw)
        if not admitted:
            self._error(503, "fake server reached max_requests", "server_error")
            return
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("request body must be a JSON object")
        except ValueError as err:
            self._error(400, f"bad JSON body: {err}", "invalid_request_error")
            return
        if srv.unhealthy:
            self._error(503, "unhealthy (set by the test)", "server_error")
            return
        slots = srv._slots
        if slots is not None:
            while not slots.acquire(timeout=0.05):
                if srv._killed.is_set():
                    self.close_connection = True
                    return
        srv._flight(+1)
        try:
            if srv.service_time_s > 0:
                srv._killed.wait(srv.service_time_s)
            if srv._killed.is_set():  # killed while serving: no reply at all
                self.close_connection = True
                return
            self._reply(path, body, fault)
        finally:
            srv._flight(-1)
            if slots is not None:
                slots.release()
            if srv._stopping.is_set():  # no keep-alive past the end: the next request must fail to connect
                self.close_connection = True

    def _reply(self, path: str, body: dict, fault: str | None) -> None:
        srv = self.server_ref
        if fault == "429":
            self._error(429, "rate limit reached (injected)", "rate_limit_error")
        elif fault == "429_retry_after":
            wait = srv.retry_after_s
            headers = {"Retry-After": str(max(1, math.ceil(wait))), "retry-after-ms": str(int(wait * 1000))}
            if srv.retry_after_value is not None:  # a test-chosen header (an HTTP date, say), alone
                headers = {"Retry-After": srv.retry_after_value}
            self._error(429, "rate limit reached (injected)", "rate_limit_error", headers)
        elif fault in ("500", "502", "503"):
            self._error(int(fault), f"server error {fault} (injected)", "server_error")
        elif fault == "drop":
            self.close_connection = True  # no status line, no body: the client sees a disconnect
        elif fault == "hang":
            srv._stopping.wait(srv.hang_s)
            self._error(504, "hung (injected)", "server_error")
        else:
            try:
                payload = srv.answer(path, body)
            except (ValueError, TypeError) as err:
                self._error(400, str(err), "invalid_request_error")
                return
            if fault == "malformed_json":
                self._send_json(200, json.dumps(payload).encode("utf-8")[: 25])
            elif fault == "empty_choices":
                payload["data" if path.endswith("/embeddings") else "choices"] = []
                self._send_json(200, payload)
            else:
                srv._count_ok()
                self._send_json(200, payload)


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until Ctrl-C (or until --max-requests / --max-seconds)."""
    p = argparse.ArgumentParser(prog="python -m testkit.fake_openai", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--fault-rate", type=float, default=0.0)
    p.add_argument("--faults", default=",".join(FAULT_KINDS), help="comma-separated fault kinds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hang-s", type=float, default=5.0)
    p.add_argument("--service-time-s", type=float, default=0.0)
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--max-requests", type=int, default=None)
    p.add_argument("--max-seconds", type=float, default=None)
    p.add_argument("--embedding-dim", type=int, default=64)
    args = p.parse_args(argv)
    server = FakeOpenAIServer(
        host=args.host, port=args.port, fault_rate=args.fault_rate, faults=args.faults.split(","), seed=args.seed,
        hang_s=args.hang_s, service_time_s=args.service_time_s, max_concurrency=args.max_concurrency,
        max_requests=args.max_requests, max_seconds=args.max_seconds, embedding_dim=args.embedding_dim,
    ).start()
    print(f"fake OpenAI server at {server.base_url} (Ctrl-C to stop)", flush=True)
    try:
        while server.running:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        print(json.dumps(server.stats), flush=True)


if __name__ == "__main__":
    main()

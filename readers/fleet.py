"""Which server of an OpenAI-compatible fleet gets the next request: least in flight, sick ones ejected.

``Fleet`` only keeps score; it makes no HTTP call of its own.  The reader
asks it for a server (:meth:`Fleet.acquire`), makes the call, and reports the
outcome (:meth:`Fleet.release`).  The rules:

- **Routing.** The admitted server with the fewest requests in flight; ties go
  to the one that was sent the fewest so far, then to the first listed.
- **Ejection.** ``eject_after`` consecutive *health* faults (refused or dropped
  connections, timeouts, 5xx, torn replies; not 429, which says "busy", not
  "broken") eject a server for ``cooldown_s`` seconds.  A success resets the count.
- **Probe, then re-admission.** When the cool-down is over, the next
  ``acquire`` starts a probe (``probe(url) -> bool``, e.g. ``GET /models``) in a
  background thread; the server gets traffic again only once the probe
  succeeds, and goes back to cool-down if it fails.
- **Nowhere else to go.** When no server is admitted, every server is tried
  (in order of least in flight) rather than failing requests that a recovered
  server might answer; a success there re-admits that server at once.

Retries and backoff are not here: the reader runs every request through the
project's one ``RetryPolicy``, and one attempt of it tries each admitted
server at most once (see ``readers.openai_compat``).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from core.errors import ParamError

log = logging.getLogger(__name__)

State = Literal["up", "ejected", "probing"]


@dataclass(eq=False)
class Server:
    """One server's standing; ``failures`` counts consecutive health faults."""

    url: str
    in_flight: int = 0
    sent: int = 0
    failures: int = 0
    state: State = "up"
    until: float = 0.0  # end of the cool-down, when ejected
    ejections: int = 0
    probes: int = 0
    last_error: str | None = None


class Fleet:
    """Thread-safe standing of every server of one reader (see the module docstring)."""

    def __init__(self, urls: Sequence[str], *, probe: Callable[[str], bool], eject_after: int = 3,
                 cooldown_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        if not urls:
            raise ParamError("openai: base_urls is empty; give at least one server URL")
        self.servers = [Server(u) for u in urls]
        self.eject_after, self.cooldown_s = eject_after, cooldown_s
        self._probe, self._clock = probe, clock
        self._lock = threading.Lock()
        self._probe_threads: list[threading.Thread] = []

    def __len__(self) -> int:
        return len(self.servers)

    # -- routing ----------------------------------------------------------
    def acquire(self, exclude: Collection[Server] = ()) -> Server | None:
        """The server for the next call (its in-flight count already raised), or None when every candidate
        is in ``exclude`` (the servers this attempt has already tried)."""
        with self._lock:
            self._start_due_probes()
            up = [s for s in self.servers if s.state == "up"]
            pool = [s for s in (up or self.servers) if s not in exclude]
            if not pool:
                return None
            server = min(pool, key=lambda s: (s.in_flight, s.sent))
            server.in_flight += 1
            server.sent += 1
            return server

    def release(self, server: Server, *, ok: bool, health_fault: bool = False, reason: str | None = None) -> None:
        """Report how the call on ``server`` ended; ``health_fault`` counts toward ejection."""
        with self._lock:
            server.in_flight -= 1
            if ok:
                server.failures = 0
                if server.state != "up":  # answered while nothing else was admitted: proof enough
                    log.info("openai fleet: %s answered again; re-admitted", server.url)
                    server.state = "up"
                return
            if not health_fault:
                return
            server.failures += 1
            server.last_error = reason
            if server.state == "up" and server.failures >= self.eject_after:
                server.state, server.until = "ejected", self._clock() + self.cooldown_s
                server.ejections += 1
                log.warning("openai fleet: %s ejected for %.0f s after %d consecutive failures (last: %s)",
                            server.url, self.cooldown_s, server.failures, reason)

    # -- probes -----------------------------------------------------------
    def _start_due_probes(self) -> None:
        now = self._clock()
        for server in self.servers:
            if server.state == "ejected" and now >= server.until:
                server.state = "probing"
                server.probes += 1
                thread = threading.Thread(target=self._run_probe, args=(server,), daemon=True,
                                          name=f"ctxcomp-probe-{server.url}")
                self._probe_threads = [t for t in self._probe_threads if t.is_alive()] + [thread]
                thread.start()

    def _run_probe(self, server: Server) -> None:
        try:
            healthy = bool(self._probe(server.url))
        except Exception as err:  # a probe that cannot even run counts as a failed probe
            log.debug("openai fleet: probe of %s raised %s", server.url, type(err).__name__)
            healthy = False
        with self._lock:
            if server.state != "probing":  # re-admitted meanwhile by a success in the nowhere-else-to-go case
                return
            if healthy:
                server.state, server.failures = "up", 0
                log.info("openai fleet: %s passed its probe; re-admitted", server.url)
            else:
                server.state, server.until = "ejected", self._clock() + self.cooldown_s
                log.info("openai fleet: %s failed its probe; ejected for another %.0f s", server.url, self.cooldown_s)

    def wait_for_probes(self, timeout_s: float = 10.0) -> None:
        """Block until the probes running now are done (for tests and an orderly close)."""
        deadline = time.monotonic() + timeout_s
        for thread in list(self._probe_threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    def snapshot(self) -> list[dict]:
        """Each server's state, in-flight and sent counts, ejections and probes (no secrets: URLs only)."""
        with self._lock:
            return [{"url": s.url, "state": s.state, "in_flight": s.in_flight, "sent": s.sent,
                     "failures": s.failures, "ejections": s.ejections, "probes": s.probes} for s in self.servers]

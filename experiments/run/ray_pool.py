"""Ray for ctxcomp: check an address, connect or start a local instance, kill actors, and one work queue.

Shared by the grid executor (``executors.RayExecutor``) and the corpus encoder pool
(``sharding``), and importing nothing of the run, so neither depends on the other.
:class:`WorkQueue` hands items to a pool of actors, a few in flight per actor,
and brings each result back to this process (the single writer) as it arrives.
"""
from __future__ import annotations

import os
import socket
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

from core.errors import UserError

# Settings a worker on the driver's own machine takes from the driver (never secrets).
FORWARDED_ENV = ("CTXCOMP_CACHE_DIR", "CTXCOMP_MODEL_CACHE_DIR", "CTXCOMP_NO_PROGRESS", "HF_HUB_OFFLINE",
                 "TRANSFORMERS_OFFLINE", "HF_HOME", "HF_DATASETS_OFFLINE")


class RayExecutorError(UserError):
    """Ray is missing, or the cluster named by ``--ray-address`` cannot be reached."""


def check_address(address: str, timeout_s: float = 5.0) -> None:
    """Refuse an address that is not ``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``, or whose port does not answer."""
    if address == "auto":
        return
    target = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit() or "/" in target:
        raise RayExecutorError(f"--ray-address must be 'auto', HOST:PORT or ray://HOST:PORT, got {address!r}")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise RayExecutorError(f"cannot reach the Ray cluster at {address}: {reason} "
                               f"(is `ray start --head` running there, and is the port open?)") from None


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayExecutorError("--executor ray needs Ray: pip install 'ctxcomp[ray]' (or pip install 'ray>=2.9')") from None
    return ray


def connect(address: str | None, num_cpus: int | None = None) -> bool:
    """Make sure this process is connected to Ray; returns whether this call connected it (and so should
    shut it down).  No address: a new local instance with ``num_cpus`` CPUs (default: all).  An address is
    checked first (one line naming it when unreachable), also when Ray is already connected."""
    ray = import_ray()
    if address is not None:
        check_address(address)
    if ray.is_initialized():
        return False
    quiet = {"include_dashboard": False, "logging_level": "ERROR"}
    if address is None:
        ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, **quiet)
        return True
    try:
        ray.init(address=address, **quiet)
    except ConnectionError as err:
        hint = " (start one with `ray start --head`)" if address == "auto" else ""
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise RayExecutorError(f"cannot join the Ray cluster at {address}: {first}{hint}") from None
    return True  # joined by us: disconnect on close (the cluster itself keeps running)


def kill_actors(ray: Any, actors: Sequence[Any]) -> None:
    """Kill each actor for good (no restart); one already gone is no error."""
    for actor in actors:
        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # already gone
            pass


def unwrap(err: BaseException) -> BaseException:
    """A user's mistake raised in an actor comes back as itself (one line at the CLI); a bug keeps Ray's
    error, which is also an instance of the original class and carries the remote traceback."""
    cause = getattr(err, "cause", None)
    return cause if isinstance(cause, UserError) else err


T = TypeVar("T")
# (item, actor slot, actor, error) -> True to hand the item out again, False to stop the queue
OnLost = Callable[[T, int, Any, BaseException], bool]


class WorkQueue(Generic[T]):
    """Items handed to ``actors`` through ``call(actor, item) -> ObjectRef``, ``depth`` in flight per actor.

    ``run`` returns when every item has come back to ``on_result`` (in this process, as each arrives).  An
    item whose code raised goes to ``on_error``; without one, the error is raised at once (a user's mistake
    as itself).  An item whose actor died goes to ``on_lost``, which may put a fresh actor in
    ``queue.actors[slot]`` and says whether to hand the item out again; without one, the error is raised.
    After an error or a lost item that is not handed out again, nothing new is submitted and the items in
    flight are drained.  On any exception in this process (Ctrl-C), the items in flight are cancelled.
    """

    def __init__(self, ray: Any, actors: list[Any], call: Callable[[Any, T], Any], *, depth: int = 2) -> None:
        self.ray, self.actors, self.call, self.depth = ray, actors, call, max(1, depth)
        self.running: dict[Any, tuple[T, int, Any]] = {}
        self.stopped = False

    def run(self, items: Iterable[T], on_result: Callable[[T, Any], None], *,
            on_error: Callable[[T, BaseException], None] | None = None, on_lost: OnLost[T] | None = None,
            before_wait: Callable[[int], None] | None = None) -> None:
        exc = self.ray.exceptions
        queue: deque[T] = deque(items)
        load = [0] * len(self.actors)

        def submit() -> None:
            for slot in range(len(self.actors)):
                while not self.stopped and queue and load[slot] < self.depth:
                    item = queue.popleft()
                    actor = self.actors[slot]
                    self.running[self.call(actor, item)] = (item, slot, actor)
                    load[slot] += 1

        try:
            submit()
            while self.running:
                if before_wait is not None:
                    before_wait(len(self.running))
                [ref], _ = self.ray.wait(list(self.running), num_returns=1)
                item, slot, actor = self.running.pop(ref)
                load[slot] -= 1
                try:
                    value = self.ray.get(ref)
                except (exc.RayActorError, exc.ActorUnavailableError) as err:
                    if on_lost is None:
                        raise
                    if on_lost(item, slot, actor, err):
                        queue.appendleft(item)
                        submit()
                    else:
                        self.stopped = True
                    continue
                except exc.RayTaskError as err:
                    if on_error is None:
                        raise unwrap(err) from None
                    on_error(item, unwrap(err))
                    self.stopped = True
                    continue
                on_result(item, value)
                submit()
        except BaseException:
            for ref in self.running:  # stop what runs; what came back is kept
                try:
                    self.ray.cancel(ref)
                except Exception:  # already finished, or its actor is gone
                    pass
            raise


__all__ = ["FORWARDED_ENV", "RayExecutorError", "WorkQueue", "check_address", "connect", "import_ray", "kill_actors",
           "unwrap"]

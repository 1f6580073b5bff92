"""Reaching Ray: check an address, connect or start a local instance, kill actors.

Shared by the grid executor (``ray_executor``) and the corpus encoder pool
(``encode``), and importing nothing of the run, so neither depends on the other.
"""
from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import Any

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


__all__ = ["FORWARDED_ENV", "RayExecutorError", "check_address", "connect", "import_ray", "kill_actors"]

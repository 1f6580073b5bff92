"""The one retry policy of every remote call: exponential backoff with full jitter, Retry-After obeyed."""
from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from core.errors import ParamError, TransientError

T = TypeVar("T")

def parse_retry_after(headers: Mapping[str, str] | Any) -> float | None:
    """Seconds a server asked us to wait: ``retry-after-ms``, then ``Retry-After`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):  # a garbled header must not turn a retryable 429 into a crash
        return None
    return max(when.timestamp() - time.time(), 0.0)


class Transient(Exception):
    """Raised by one attempt of a remote call when the fault may pass (a retry can help)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.retry_after = reason, retry_after


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter; a server's Retry-After is obeyed up to ``retry_after_max_s``.

    Every HTTP client in ctxcomp retries through this one policy.  An attempt
    signals a retryable fault by raising :class:`Transient`; anything else it
    raises (a bad request, a programming error) passes through untouched.
    """

    max_retries: int = 6
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 300.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.backoff_base_s < 0 or self.backoff_max_s < 0 or self.retry_after_max_s < 0:
            raise ParamError(f"retry settings must be >= 0, got {self}")

    @classmethod
    def of(cls, value: "RetryPolicy | Mapping[str, Any] | None") -> "RetryPolicy":
        """A policy from a config section (``{max_retries: 3, backoff_max_s: 10}``), a policy, or the defaults."""
        if value is None:
            return cls()
        if isinstance(value, RetryPolicy):
            return value
        if not isinstance(value, Mapping):
            raise ParamError(f"retry must be a mapping of retry settings, got {type(value).__name__}")
        fields_ = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(value) - fields_)
        if unknown:
            raise ParamError(f"retry: unknown setting {', '.join(map(repr, unknown))}; accepted: {', '.join(sorted(fields_))}")
        return cls(**value)

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random | None = None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` (0-based ``attempt`` just failed)."""
        cap = min(self.backoff_max_s, self.backoff_base_s * 2**attempt)
        wait = (rng or random).uniform(0.0, cap)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.retry_after_max_s))
        return wait

    def call(
        self,
        attempt: Callable[[], T],
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        on_retry: Callable[[int, str, float], None] | None = None,
    ) -> tuple[T, int]:
        """Run ``attempt`` until it returns; returns (result, retries used).

        Raises :class:`TransientError` with the last reason once ``max_retries``
        retries are spent.
        """
        for n in range(self.max_retries + 1):
            try:
                return attempt(), n
            except Transient as fault:
                if n == self.max_retries:
                    raise TransientError(f"gave up after {n + 1} attempts: {fault.reason}") from None
                wait = self.delay(n, fault.retry_after, rng)
                if on_retry is not None:
                    on_retry(n, fault.reason, wait)
                sleep(wait)
        raise AssertionError("unreachable")


__all__ = ["RetryPolicy", "Transient", "parse_retry_after"]

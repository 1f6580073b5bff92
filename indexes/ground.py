"""The ground every ctxcomp package stands on: one of each piece of plumbing.

This is the one module that every floor may import (``../shared/DESIGN.md``),
so it holds only what several floors must share and nothing that knows a
component, a dataset or a file format:

- the error classes that decide what is a user's mistake, what is a remote
  fault and what is a bug (``UserError``, ``TransientError``);
- the counting rule for text without a model tokenizer (LongBench words:
  word-character runs, every CJK ideograph its own word);
- the generic ``Registry`` (short names, lazy ``"module:attr"`` strings, entry
  points ``ctxcomp.<kind>``, "did you mean", duplicates refused);
- the one component-spec parser (``ComponentSpec``) and the one parameter
  check (``check_params``), which walks nested component sections;
- the one retry policy of every HTTP client (``RetryPolicy``, ``parse_retry_after``).
"""
from __future__ import annotations

import difflib
import email.utils
import inspect
import pkgutil
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# ---------------------------------------------------------------- errors


class UserError(ValueError):
    """Something the user gave is wrong: a config, a data file, a parameter, a command line.

    The CLI prints these as one line and exits 2.  Every other exception is
    either a ``TransientError`` (recorded per example) or a bug (a traceback).
    """


class UnknownComponentError(UserError, KeyError):
    """A config named a component, task or metric that no registry knows."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ParamError(UserError):
    """A component got a parameter it does not take, misses a required one, or got a bad value."""


class TransientError(RuntimeError):
    """A remote service kept failing (network, timeouts, 429/5xx) after every retry.

    The runner records the example as failed with this reason and ``--resume``
    tries it again; it is never turned into an empty prediction.
    """


# ---------------------------------------------------------------- counting

# One "word" as LongBench counts them: every CJK ideograph alone, otherwise a
# maximal run of word characters (what survives ``re.split(r"\W", ...)``).
_CJK = "\u4e00-\u9fa5"
WORD = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")


def word_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the words :func:`count_words` counts, in order."""
    return [m.span() for m in WORD.finditer(text)]


def count_words(text: str) -> int:
    """Words in LongBench's sense; the counting rule wherever no model tokenizer is available.

    The text is lowercased first, as LongBench's splitter does (it can change
    the count only for the rare characters whose lowercase form is longer).
    """
    return sum(1 for _ in WORD.finditer(text.lower()))


def word_pieces(text: str) -> list[str]:
    """``text`` cut before every word, so ``"".join(pieces) == text`` and ``len(pieces) == count_words(text)``.

    Leading non-word characters ride with the first word; a text without
    words has no pieces.  Truncating a list of pieces keeps text verbatim.
    """
    starts = [m.start() for m in WORD.finditer(text)]
    if not starts:
        return []
    bounds = [0, *starts[1:], len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


# ---------------------------------------------------------------- registry


_ALL: dict[str, "Registry[Any]"] = {}


def registries() -> dict[str, "Registry[Any]"]:
    """Every registry created so far, by kind (what ``ctxcomp list`` shows)."""
    return dict(_ALL)


class Registry(Generic[T]):
    """Names for one kind of component: classes, or objects such as task specs and metrics.

    A name resolves, in order, to a registered short name (a class/object or a
    lazy ``"module:attr"`` string), an entry point of the group
    ``ctxcomp.<kind>``, or an import path ``"pkg.module:attr"`` given by the
    user.  ``base`` is checked on resolution (a subclass, or an instance).
    """

    def __init__(self, kind: str, base: type | None = None, *, noun: str | None = None) -> None:
        self.kind = kind  # plural, as in the entry-point group ``ctxcomp.<kind>``
        self.noun = noun or (kind[:-1] if kind.endswith("s") else kind)
        self.base = base
        self._entries: dict[str, Any] = {}
        self._entry_points_loaded = False
        self._lock = threading.Lock()
        _ALL[kind] = self

    # -- registration -----------------------------------------------------
    def add(self, name: str, target: Any) -> None:
        """Register ``target`` (a class, an object or a lazy ``"module:attr"`` string) under ``name``."""
        known = self._entries.get(name)
        if known is not None and known != target and not (isinstance(known, str) and _resolves_to(known, target)):
            if not (isinstance(known, str) and _being_imported(known)):
                raise ValueError(f"{self.noun} {name!r} is already registered as {known!r}")
        self._entries[name] = target

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@RETRIEVERS.register("mine")`` on a class (or a metric function)."""

        def decorate(target: T) -> T:
            self.add(name, target)
            return target

        return decorate

    # -- lookup -------------------------------------------------------------
    def names(self) -> list[str]:
        self._load_entry_points()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self._load_entry_points()
        return name in self._entries

    def get(self, name: str) -> Any:
        """The class or object behind ``name``; ``UnknownComponentError`` with close names otherwise."""
        if not isinstance(name, str) or not name:
            raise UnknownComponentError(f"a {self.noun} name must be a non-empty string, got {name!r}")
        self._load_entry_points()
        target = self._entries.get(name)
        if target is None and ":" in name:
            target = name
        if target is None:
            close = difflib.get_close_matches(name, self._entries, n=3, cutoff=0.5)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise UnknownComponentError(
                f"unknown {self.noun} {name!r}.{hint} Known: {', '.join(sorted(self._entries))}; "
                f"or give an import path 'package.module:Name'."
            )
        resolved = self._resolve(name, target)
        if self.base is not None and not _is_a(resolved, self.base):
            raise UnknownComponentError(
                f"{self.noun} {name!r} resolves to {resolved!r}, which is not a {self.base.__name__}"
            )
        return resolved

    def items(self) -> list[tuple[str, Any]]:
        """(name, class or object) for every entry that can be imported, for listings."""
        out = []
        for name in self.names():
            try:
                out.append((name, self.get(name)))
            except UnknownComponentError:
                continue
        return out

    def _resolve(self, name: str, target: Any) -> Any:
        if not isinstance(target, str):
            return target
        try:
            resolved = pkgutil.resolve_name(target)
        except (ImportError, AttributeError, ValueError) as err:
            raise UnknownComponentError(f"{self.noun} {name!r}: cannot import {target!r}: {err}") from err
        with self._lock:
            if self._entries.get(name) == target:
                self._entries[name] = resolved
        return resolved

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        for ep in entry_points(group=f"ctxcomp.{self.kind}"):
            self.add(ep.name, ep.value)

    # -- building -----------------------------------------------------------
    def check(self, spec: Any, *, injected: Iterable[str] = (), where: str = "") -> Any:
        """Resolve a spec and check its parameters (nested sections too); nothing is built."""
        spec = ComponentSpec.parse(spec, where or self.noun)
        target = self.get(spec.name)
        check_params(target, spec.params, what=f"{where + ' > ' if where else ''}{self.noun} {spec.name!r}",
                     injected=injected)
        return target

    def build(self, spec: Any, **injected: Any) -> Any:
        """``get(name)(**params, **injected)`` after :meth:`check`; ``injected`` go only where declared."""
        spec = ComponentSpec.parse(spec, self.noun)
        target = self.check(spec, injected=injected)
        accepted = _accepted(target)
        given = {k: v for k, v in injected.items() if accepted is None or k in accepted}
        return target(**spec.params, **given)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r})"


def _is_a(resolved: Any, base: type) -> bool:
    return (isinstance(resolved, type) and issubclass(resolved, base)) or isinstance(resolved, base)


def _being_imported(lazy: str) -> bool:
    """Whether the module of a lazy ``"module:attr"`` entry is importing right now (it registers itself,
    as a metric module does with ``@metric`` while its entry point is being resolved)."""
    import sys

    module = sys.modules.get(lazy.split(":", 1)[0])
    spec = getattr(module, "__spec__", None)
    return module is not None and bool(getattr(spec, "_initializing", False))


def _resolves_to(lazy: str, target: Any) -> bool:
    try:
        return pkgutil.resolve_name(lazy) is target
    except (ImportError, AttributeError, ValueError):
        return False


# ---------------------------------------------------------------- specs and parameters

SpecLike = str | Mapping[str, Any]


@dataclass(frozen=True)
class ComponentSpec:
    """A config section naming a component: ``"bm25"`` or ``{name: bm25, params: {...}, label: ...}``."""

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None

    @classmethod
    def parse(cls, spec: Any, what: str = "component") -> "ComponentSpec":
        if isinstance(spec, ComponentSpec):
            return spec
        if isinstance(spec, str):
            if not spec.strip():
                raise ParamError(f"{what}: the component name is empty")
            return cls(spec, {})
        if isinstance(spec, Mapping):
            extra = set(spec) - {"name", "params", "label"}
            if "name" not in spec or extra:
                raise ParamError(f"{what} must be a name or {{name: ..., params: {{...}}}}; got keys {sorted(spec)}")
            params = spec.get("params") or {}
            if not isinstance(params, Mapping):
                raise ParamError(f"{what}: params must be a mapping, got {type(params).__name__}")
            return cls(str(spec["name"]), dict(params), spec.get("label"))
        name = getattr(spec, "name", None)
        if isinstance(name, str) and hasattr(spec, "params"):  # a config model with the same fields
            return cls(name, dict(spec.params or {}), getattr(spec, "label", None))
        raise ParamError(f"{what} must be a name or a mapping, got {type(spec).__name__}")

    def with_params(self, **params: Any) -> "ComponentSpec":
        """The same section with ``params`` overriding its own (what ``make_reader("openai", model=...)`` means)."""
        return ComponentSpec(self.name, {**self.params, **params}, self.label) if params else self


@dataclass(frozen=True)
class Nested:
    """Declares that a constructor parameter is itself a component section (or a list of them).

    A component lists these in a class attribute ``nested = {"retriever": Nested(RETRIEVERS)}``
    so :func:`check_params` can check the inner section before anything is built.
    ``injected`` names parameters the outer component supplies itself (a chunker's ``size``).
    """

    registry: Registry[Any]
    many: bool = False
    injected: tuple[str, ...] = ()


def _accepted(target: Any) -> set[str] | None:
    """Keyword names ``target(...)`` accepts; ``None`` when it takes ``**kwargs`` or is not callable with keywords."""
    if not callable(target) or not isinstance(target, type):
        return set()
    params = inspect.signature(target).parameters.values()
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def constructor_parameters(target: Any) -> list[inspect.Parameter]:
    """The keyword parameters a component class takes (for checks and ``ctxcomp list``)."""
    if not isinstance(target, type):
        return []
    return [p for p in inspect.signature(target).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def check_params(target: Any, params: Mapping[str, Any], *, what: str, injected: Iterable[str] = ()) -> None:
    """Refuse unknown and missing parameters of ``target`` (a class), nested sections included.

    One line per problem, naming the component and the parameter, e.g.
    ``compressor 'retrieval' > retriever 'bm25': unknown parameter 'k3'; accepted: k1, b, ...``.
    Objects (task specs, metrics) take no parameters.
    """
    injected = set(injected)
    if not isinstance(target, type):
        if params:
            raise ParamError(f"{what} takes no parameters, got {', '.join(map(repr, params))}")
        return
    signature = constructor_parameters(target)
    takes_any = any(p.kind == p.VAR_KEYWORD for p in inspect.signature(target).parameters.values())
    names = [p.name for p in signature if p.name not in injected]
    unknown = [k for k in params if k not in names and not takes_any]
    if unknown:
        raise ParamError(f"{what}: unknown parameter {', '.join(map(repr, unknown))}; "
                         f"accepted: {', '.join(names) or '(none)'}")
    missing = [p.name for p in signature
               if p.default is p.empty and p.name not in params and p.name not in injected]
    if missing:
        raise ParamError(f"{what}: missing required parameter {', '.join(map(repr, missing))}")
    for name, nested in (getattr(target, "nested", None) or {}).items():
        value = params.get(name)
        if value is None:
            continue
        items = value if nested.many else [value]
        if nested.many and not isinstance(value, (list, tuple)):
            raise ParamError(f"{what}: {name} must be a list of component sections, got {type(value).__name__}")
        for item in items:
            nested.registry.check(item, injected=nested.injected, where=what)


# ---------------------------------------------------------------- retries


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


__all__ = [
    "ComponentSpec", "Nested", "ParamError", "Registry", "RetryPolicy", "SpecLike", "Transient", "TransientError",
    "UnknownComponentError", "UserError", "WORD", "check_params", "constructor_parameters", "count_words",
    "parse_retry_after", "registries", "word_pieces", "word_spans",
]

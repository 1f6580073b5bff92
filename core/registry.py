"""The one generic registry of the project, and the one parser of a config section naming a component.

Every kind of component (retrievers, readers, compressors, chunkers, tasks,
metrics) owns one :class:`Registry` in its own package.  A name resolves to a
registered short name (a class, an object, or a lazy ``"module:attr"``
string), an entry point of the group ``ctxcomp.<kind>``, or an import path
``"pkg.module:attr"`` given by the user; the base class is checked, a typo gets
"did you mean", and duplicates are refused.

A plugin is a component defined outside ctxcomp's own packages.  Its module is
looked up as ``python -m`` would, the working directory included, and a
plugin that cannot be used (not found, an abstract method missing, a
constructor that refuses its parameters with ``ValueError`` / ``TypeError``)
is one line naming it (``PluginError``), not a traceback.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import os
import pkgutil
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from core.checks import accepted_keywords, check_params
from core.errors import ParamError, PluginError, UnknownComponentError, UserError

T = TypeVar("T")

# ctxcomp's own top-level packages: a component defined anywhere else is a plugin
OWN_PACKAGES = frozenset({"core", "indexes", "readers", "retrievers", "compressors", "experiments"})

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

    def __init__(self, kind: str, base: type | None = None, *, noun: str | None = None,
                 discover: Callable[[], None] | None = None) -> None:
        self.kind = kind  # plural, as in the entry-point group ``ctxcomp.<kind>``
        self.noun = noun or (kind[:-1] if kind.endswith("s") else kind)
        self.base = base
        # fills the registry on first lookup (benchmark folders register tasks and metrics), so importing a
        # registry never imports every component
        self._discover = discover
        self._entries: dict[str, Any] = {}
        self._entry_points_loaded = False
        self._from_entry_points: set[str] = set()
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
        if isinstance(resolved, type) and inspect.isabstract(resolved):
            missing = ", ".join(sorted(getattr(resolved, "__abstractmethods__", ())))
            base = f" of {self.base.__name__}" if self.base is not None else ""
            raise PluginError(f"{self.noun} {name!r} ({resolved.__module__}.{resolved.__qualname__}) does not "
                              f"implement the abstract method(s) {missing}{base}; define them in the class")
        return resolved

    def is_plugin(self, name: str) -> bool:
        """Whether ``name`` comes from outside ctxcomp: an import path, an entry point, or a class defined in
        another package (a class registered in code)."""
        self._load_entry_points()
        if name not in self._entries or name in self._from_entry_points:
            return True
        target = self._entries[name]
        if isinstance(target, str):
            return defined_outside(target.split(":", 1)[0])
        if isinstance(target, type) or inspect.isfunction(target):
            return defined_outside(target.__module__)
        return False  # an object registered in code (a task spec, a metric): only a path or an entry point says plugin

    def items(self) -> list[tuple[str, Any]]:
        """(name, class or object) for every entry that can be imported, for listings."""
        out = []
        for name in self.names():
            try:
                out.append((name, self.get(name)))
            except UserError:
                continue
        return out

    def _resolve(self, name: str, target: Any) -> Any:
        if not isinstance(target, str):
            return target
        resolved = import_target(target, f"{self.noun} {name!r}")
        with self._lock:
            if self._entries.get(name) == target:
                self._entries[name] = resolved
        return resolved

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded:
            return
        self._entry_points_loaded = True
        if self._discover is not None:
            self._discover()
        for ep in entry_points(group=f"ctxcomp.{self.kind}"):
            self.add(ep.name, ep.value)
            self._from_entry_points.add(ep.name)

    # -- building -----------------------------------------------------------
    def check(self, spec: Any, *, injected: Iterable[str] = (), where: str = "") -> Any:
        """Resolve a spec and check its parameters (nested sections too); nothing is built."""
        spec = ComponentSpec.parse(spec, where or self.noun)
        target = self.get(spec.name)
        what = f"{where + ' > ' if where else ''}{self.noun} {spec.name!r}"
        check_params(target, spec.params, what=what, injected=injected)
        own_check = getattr(target, "check_config", None)
        if isinstance(target, type) and callable(own_check):  # what only the component knows (server URLs)
            own_check(**spec.params)
        return target

    def build(self, spec: Any, **injected: Any) -> Any:
        """``get(name)(**params, **injected)`` after :meth:`check`; ``injected`` go only where declared.

        A plugin's constructor that refuses its parameters with ``ValueError`` or ``TypeError`` becomes a
        ``PluginError`` naming the plugin and the parameters (the original is its cause, for ``--debug``);
        the same from one of ctxcomp's own components is a bug and keeps its traceback."""
        spec = ComponentSpec.parse(spec, self.noun)
        target = self.check(spec, injected=injected)
        accepted = accepted_keywords(target)
        given = {k: v for k, v in injected.items() if accepted is None or k in accepted}
        try:
            return target(**spec.params, **given)
        except PluginError as err:  # a plugin nested in this section: the message names the path to it
            raise PluginError(f"{self.noun} {spec.name!r} > {err}") from err
        except UserError:
            raise
        except (ValueError, TypeError) as err:
            if not defined_outside(getattr(target, "__module__", None)):
                raise
            shown = repr(dict(spec.params))
            shown = f"params {shown if len(shown) <= 200 else shown[:197] + '...'}" if spec.params else "no params"
            raise PluginError(f"{self.noun} {spec.name!r} with {shown}: {type(err).__name__} in __init__: "
                              f"{' '.join(str(err).split())}") from err

    def walk(self, spec: Any, where: str = "") -> Iterator[tuple["Registry[Any]", "ComponentSpec", str]]:
        """(registry, section, where) for this section and every component section nested in its parameters
        (the ``nested`` declarations), depth first; names are resolved, nothing is built."""
        spec = ComponentSpec.parse(spec, where or self.noun)
        where = f"{where + ' > ' if where else ''}{self.noun} {spec.name!r}"
        yield self, spec, where
        for param, section in (getattr(self.get(spec.name), "nested", None) or {}).items():
            value = spec.params.get(param)
            if value is None:
                continue
            for item in value if section.many and isinstance(value, (list, tuple)) else [value]:
                yield from section.registry.walk(item, where)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r})"


def _is_a(resolved: Any, base: type) -> bool:
    return (isinstance(resolved, type) and issubclass(resolved, base)) or isinstance(resolved, base)


def _being_imported(lazy: str) -> bool:
    """Whether the module of a lazy ``"module:attr"`` entry is importing right now (it registers itself,
    as a metric module does with ``@metric`` while its entry point is being resolved)."""
    module = sys.modules.get(lazy.split(":", 1)[0])
    spec = getattr(module, "__spec__", None)
    return module is not None and bool(getattr(spec, "_initializing", False))


def _resolves_to(lazy: str, target: Any) -> bool:
    try:
        return pkgutil.resolve_name(lazy) is target
    except (ImportError, AttributeError, ValueError):
        return False


def defined_outside(module: str | None) -> bool:
    """Whether a module is not one of ctxcomp's own (so what it defines is a plugin)."""
    return bool(module) and module.split(".", 1)[0] not in OWN_PACKAGES


def import_target(path: str, what: str) -> Any:
    """The object behind ``"pkg.module:attr"``, looked up as ``python -m`` would: installed packages and
    ``PYTHONPATH`` first, then the working directory (added to ``sys.path`` when the module is found there,
    so the plugin's own imports of its siblings work too).

    A module found nowhere is one line saying where it was looked for; a module that was found but whose own
    import failed (a dependency missing, a syntax error) is one line naming it and the reason.
    """
    module = path.split(":", 1)[0]
    try:
        return pkgutil.resolve_name(path)
    except ModuleNotFoundError as err:
        if not _is_the_module(err, module):
            error = PluginError if defined_outside(module) else UnknownComponentError
            raise error(f"{what}: cannot import {path!r}: its module was found, but importing it failed: {err}") from err
        first = err
    except SyntaxError as err:
        raise PluginError(f"{what}: cannot import {path!r}: {err.filename}:{err.lineno}: {err.msg}") from err
    except (ImportError, AttributeError, ValueError) as err:
        raise UnknownComponentError(f"{what}: cannot import {path!r}: {err}{_close_attribute(path)}") from err
    here = os.getcwd()
    if not any(os.path.abspath(entry or ".") == here for entry in sys.path):
        sys.path.append(here)
        importlib.invalidate_caches()
        try:
            return import_target(path, what)
        except UnknownComponentError:
            sys.path.remove(here)
            raise
    pythonpath = os.environ.get("PYTHONPATH")
    raise UnknownComponentError(
        f"{what}: cannot import {path!r}: {first}; looked in the installed packages of {sys.prefix}, "
        f"{'on PYTHONPATH ' + repr(pythonpath) if pythonpath else 'PYTHONPATH is not set'}, and in the working "
        f"directory {here}; run from the folder that holds {module.split('.', 1)[0]!r}, add that folder to "
        "PYTHONPATH, or install the package"
    ) from first


def _close_attribute(path: str) -> str:
    """``"; did you mean 'mod:Name'?"`` when ``path``'s module imported but lacks its attribute and defines close names."""
    module, _, attr = path.partition(":")
    loaded = sys.modules.get(module)
    if loaded is None or not attr or "." in attr:
        return ""
    own = [n for n, v in vars(loaded).items() if not n.startswith("_") and getattr(v, "__module__", module) == module]
    close = difflib.get_close_matches(attr, own, n=3, cutoff=0.6)
    return f"; did you mean {', '.join(repr(f'{module}:{c}') for c in close)}?" if close else ""


def _is_the_module(err: ModuleNotFoundError, module: str) -> bool:
    """Whether ``err`` says ``module`` itself (or a package above it) is missing, not something it imports."""
    missing = err.name or ""
    return missing == module or module.startswith(missing + ".")


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


__all__ = ["OWN_PACKAGES", "ComponentSpec", "Registry", "SpecLike", "defined_outside", "import_target", "registries"]

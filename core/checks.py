"""The one check of a component's parameters: names, required ones, nested sections, and values.

Names come from the constructor's signature; values are checked against its
annotations with pydantic in strict mode (``top_n: PositiveInt | None`` refuses
``0`` and ``'big'``; ``Literal['score', 'document']`` refuses ``'rank'``), before
anything is built or loaded.  Values are checked, never converted: the
constructor receives exactly what the config holds, so a config's meaning
cannot shift with the checker.  An annotation that cannot be resolved where
the class is defined (a name imported only for type checkers) is not checked.
"""
from __future__ import annotations

import functools
import inspect
import re
import sys
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.errors import ParamError

# error types that say what the value should satisfy, not merely that it is of another type
_CONSTRAINTS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "literal_error",
                          "too_short", "too_long", "multiple_of", "finite_number", "sequence_str",
                          "string_pattern_mismatch"})


@dataclass(frozen=True)
class Nested:
    """Declares that a constructor parameter is itself a component section (or a list of them).

    A component lists these in a class attribute ``nested = {"retriever": Nested(RETRIEVERS)}``
    so :func:`check_params` can check the inner section before anything is built.
    ``injected`` names parameters the outer component supplies itself (a chunker's ``size``).
    """

    registry: Any  # a core.registry.Registry
    many: bool = False
    injected: tuple[str, ...] = ()


def constructor_parameters(target: Any) -> list[inspect.Parameter]:
    """The keyword parameters a component class takes (for checks and ``ctxcomp list``)."""
    if not isinstance(target, type):
        return []
    return [p for p in _signature(target).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


@functools.lru_cache(maxsize=None)
def _signature(target: type) -> inspect.Signature:
    """A class's constructor signature, read once: a grid checks and builds the same classes hundreds of times."""
    return inspect.signature(target)


def accepted_keywords(target: Any) -> set[str] | None:
    """Keyword names ``target(...)`` accepts; ``None`` when it takes ``**kwargs``."""
    if not isinstance(target, type):
        return set()
    if any(p.kind == p.VAR_KEYWORD for p in _signature(target).parameters.values()):
        return None
    return {p.name for p in constructor_parameters(target)}


def check_params(target: Any, params: Mapping[str, Any], *, what: str, injected: Iterable[str] = ()) -> None:
    """Refuse unknown, missing and ill-typed parameters of ``target`` (a class), nested sections included.

    One line per problem, naming the component and the parameter, e.g.
    ``compressor 'retrieval' > retriever 'bm25': unknown parameter 'k3'; accepted: k1, b, ...`` or
    ``compressor 'retrieval': top_n must be greater than 0, got 0``.
    Objects (task specs, metrics) take no parameters.
    """
    injected = set(injected)
    if not isinstance(target, type):
        if params:
            raise ParamError(f"{what} takes no parameters, got {', '.join(map(repr, params))}")
        return
    signature = constructor_parameters(target)
    takes_any = accepted_keywords(target) is None
    names = [p.name for p in signature if p.name not in injected]
    unknown = [k for k in params if k not in names and not takes_any]
    if unknown:
        raise ParamError(f"{what}: unknown parameter {', '.join(map(repr, unknown))}; "
                         f"accepted: {', '.join(names) or '(none)'}")
    missing = [p.name for p in signature
               if p.default is p.empty and p.name not in params and p.name not in injected]
    if missing:
        raise ParamError(f"{what}: missing required parameter {', '.join(map(repr, missing))}")
    nested = getattr(target, "nested", None) or {}
    hints = _annotations(target)
    for name, value in params.items():
        if name in nested or name in injected or name not in hints:
            continue
        _check_value(hints[name], value, f"{what}: {name}")
    for name, section in nested.items():
        value = params.get(name)
        if value is None:
            continue
        if section.many and not isinstance(value, (list, tuple)):
            raise ParamError(f"{what}: {name} must be a list of component sections, got {type(value).__name__}")
        for item in value if section.many else [value]:
            section.registry.check(item, injected=section.injected, where=what)


def annotation_accepts(target: Any, name: str, value: Any) -> bool | None:
    """Whether ``target``'s constructor annotation of ``name`` accepts ``value`` as it is (strict, as the check);
    None when there is no annotation to ask (none given, unresolvable, or ``Any``).  A run config asks it to tell
    a list that is one value (``retrievers: [...]``) from a list of values to try (a grid axis)."""
    annotation = _annotations(target).get(name) if isinstance(target, type) else None
    adapter = _adapter(annotation) if annotation is not None and annotation is not Any else None
    if adapter is None:
        return None
    from pydantic import ValidationError

    try:
        adapter.validate_python(value)
    except ValidationError:
        return False
    return True


def _check_value(annotation: Any, value: Any, where: str) -> None:
    from pydantic import ValidationError

    adapter = _adapter(annotation)
    if adapter is None:
        return
    try:
        adapter.validate_python(value)
    except ValidationError as err:
        said = next((e for e in err.errors() if e["type"] in _CONSTRAINTS), None)
        raise ParamError(f"{where} {_rule(said) if said else f'must be {describe(annotation)}'}, got {value!r}") from None


def _rule(error: Mapping[str, Any]) -> str:
    """pydantic's sentence for a broken constraint, said as a rule: ``must be greater than 0``."""
    if error["type"] == "sequence_str":
        return "must be a list, not a single string"
    return re.sub(r"^(Input|String|Value|List|Number) should", "must", error["msg"])


@functools.lru_cache(maxsize=None)
def _adapter(annotation: Any) -> Any:
    """A strict pydantic validator for one annotation; None when pydantic cannot describe the type."""
    from pydantic import ConfigDict, PydanticSchemaGenerationError, TypeAdapter

    try:
        return TypeAdapter(annotation, config=ConfigDict(strict=True, arbitrary_types_allowed=True))
    except (PydanticSchemaGenerationError, TypeError, NameError):
        return None


@functools.lru_cache(maxsize=None)
def _annotations(target: type) -> dict[str, Any]:
    """The constructor's resolved annotations (``Annotated`` kept); unresolvable ones are left out.  Resolved
    once per class (callers only read the mapping)."""
    init = target.__init__
    try:
        return typing.get_type_hints(init, include_extras=True)
    except Exception:  # one name imported only under TYPE_CHECKING: resolve the others one by one
        pass
    module = sys.modules.get(getattr(init, "__module__", ""), None)
    namespace = dict(vars(module)) if module else {}
    out = {}
    for name, raw in getattr(init, "__annotations__", {}).items():
        try:
            out[name] = eval(raw, namespace) if isinstance(raw, str) else raw  # noqa: S307 - the class's own annotation
        except Exception:
            continue
    return out


def describe(annotation: Any) -> str:
    """A type in words for an error message: ``int | None`` -> ``an integer or null``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        base, *meta = args
        limits = [f"{op} {getattr(m, attr)}" for m in meta for attr, op in
                  (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")) if getattr(m, attr, None) is not None]
        return describe(base) + (f" {' and '.join(limits)}" if limits else "")
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " or ".join(dict.fromkeys(describe(a) for a in args))
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false", type(None): "null",
             dict: "a mapping", list: "a list"}
    if annotation in names:
        return names[annotation]
    if origin is not None:
        base = getattr(origin, "__name__", str(origin))
        return {"Mapping": "a mapping", "dict": "a mapping", "Sequence": "a list", "list": "a list",
                "tuple": "a list"}.get(base, f"a {base}")
    return f"a {getattr(annotation, '__name__', str(annotation))}"


__all__ = ["Nested", "accepted_keywords", "annotation_accepts", "check_params", "constructor_parameters", "describe"]

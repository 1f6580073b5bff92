"""A walk over every registered component of every kind: each resolves, and the one parameter check catches
an unknown parameter (and names what is missing) before anything is built."""
from __future__ import annotations

import inspect

import pytest

from core.checks import constructor_parameters
from core.errors import ParamError
from core.registry import registries
from experiments.cli.listing import KINDS, _load_builtin_registries

_load_builtin_registries()
ENTRIES = [(kind, name) for kind in KINDS for name in registries()[kind].names()]
INJECTED = {"compressors": ("tokenizer", "reader"), "chunkers": ("size", "overlap")}


def test_every_kind_has_its_builtins():
    counts = {kind: len(registries()[kind].names()) for kind in KINDS}
    assert counts["tasks"] >= 44 and counts["metrics"] >= 20 and counts["readers"] >= 4
    assert {"full", "truncate", "retrieval", "summarize", "top_k"} <= set(registries()["compressors"].names())


@pytest.mark.parametrize("kind, name", ENTRIES, ids=[f"{k}:{n}" for k, n in ENTRIES])
def test_each_component_resolves_and_its_parameters_are_checked(kind, name):
    registry = registries()[kind]
    target = registry.get(name)
    injected = INJECTED.get(kind, ())
    if not isinstance(target, type):  # task specs and metrics are objects without parameters
        with pytest.raises(ParamError, match="takes no parameters"):
            registry.check({"name": name, "params": {"anything": 1}})
        return
    required = [p.name for p in constructor_parameters(target)
                if p.default is inspect.Parameter.empty and p.name not in injected]
    if required:
        with pytest.raises(ParamError, match=f"{registry.noun} '{name}': missing required parameter '{required[0]}'"):
            registry.check(name, injected=injected)
    else:
        registry.check(name, injected=injected)
    with pytest.raises(ParamError, match=f"{registry.noun} '{name}': unknown parameter 'not_a_parameter'"):
        registry.check({"name": name, "params": {"not_a_parameter": 1, **{r: 1 for r in required}}}, injected=injected)

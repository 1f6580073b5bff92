"""The one parameter check: names, values against the constructor's annotations, nested sections, own checks."""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import pytest
from pydantic import PositiveInt

from core.checks import Nested, check_params, describe
from core.errors import ParamError
from core.registry import Registry

if TYPE_CHECKING:
    from collections import OrderedDict  # a name the checker cannot resolve at run time


class Leaf:
    def __init__(self, k1: float = 1.5, mode: Literal["a", "b"] = "a", flag: bool = False) -> None:
        self.k1, self.mode, self.flag = k1, mode, flag


LEAVES: Registry[object] = Registry("test-leaves")
LEAVES.add("leaf", Leaf)


class Outer:
    nested = {"inner": Nested(LEAVES)}

    def __init__(self, top_n: PositiveInt | None = None, inner: object = "leaf", names: list[str] | None = None,
                 hidden: OrderedDict | None = None) -> None:
        self.top_n, self.inner, self.names, self.hidden = top_n, inner, names, hidden


def check(**params):
    check_params(Outer, params, what="thing 'outer'")


@pytest.mark.parametrize("params, message", [
    ({"top_n": 0}, "thing 'outer': top_n must be greater than 0, got 0"),
    ({"top_n": "big"}, "thing 'outer': top_n must be an integer > 0 or null, got 'big'"),
    ({"top_n": True}, "top_n must be an integer > 0 or null, got True"),  # a YAML `yes` is not a count
    ({"top_n": 2.0}, "top_n must be an integer > 0 or null, got 2.0"),
    ({"names": "ab"}, "names must be a list or null, got 'ab'"),
    ({"inner": {"name": "leaf", "params": {"k1": "abc"}}}, "thing 'outer' > test-leave 'leaf': k1 must be a number, got 'abc'"),
    ({"inner": {"name": "leaf", "params": {"mode": "c"}}}, "mode must be 'a' or 'b', got 'c'"),
])
def test_bad_values_are_one_line_param_errors_naming_component_and_parameter(params, message):
    with pytest.raises(ParamError) as err:
        check(**params)
    assert str(err.value) == message or message in str(err.value)
    assert "\n" not in str(err.value)


def test_good_values_pass_unconverted_and_unresolvable_annotations_are_skipped():
    check(top_n=3, names=["a"], inner={"name": "leaf", "params": {"k1": 2, "flag": True}}, hidden={"x": 1})
    built = LEAVES.build({"name": "leaf", "params": {"k1": 2}})
    assert built.k1 == 2 and type(built.k1) is int  # checked, never converted: the config's value reaches the class


def test_a_components_own_check_runs_with_the_registry_check():
    class Own:
        def __init__(self, a: int = 1, b: int = 2) -> None:
            pass

        @classmethod
        def check_config(cls, **params):
            if params.get("a", 1) > params.get("b", 2):
                raise ParamError("own: a must not exceed b")

    reg: Registry[object] = Registry("test-owns")
    reg.add("own", Own)
    reg.check({"name": "own", "params": {"a": 1}})
    with pytest.raises(ParamError, match="a must not exceed b"):
        reg.check({"name": "own", "params": {"a": 3}})


def test_describe_says_types_in_words():
    assert describe(int | None) == "an integer or null"
    assert describe(Literal["x", "y"]) == "one of 'x', 'y'"
    assert describe(PositiveInt) == "an integer > 0"

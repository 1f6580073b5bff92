"""The ground (core/): one registry, one spec parser, one parameter check, one retry policy, one counting rule."""
from __future__ import annotations

import email.utils
import random
import time

import pytest

from core.checks import Nested, check_params
from core.errors import ParamError, TransientError, UnknownComponentError
from core.registry import ComponentSpec, Registry
from core.retry import RetryPolicy, Transient, parse_retry_after
from core.text import count_words, word_pieces, word_spans


class Base:
    pass


class Alpha(Base):
    def __init__(self, size: int, *, colour: str = "red") -> None:
        self.size, self.colour = size, colour


class Outer(Base):
    nested = {"inner": Nested(None), "many": Nested(None, many=True)}  # registries filled in below

    def __init__(self, inner="alpha", many=(), tokenizer=None) -> None:
        self.inner, self.many = inner, many


def _registry() -> Registry:
    reg = Registry("test-things", Base, noun="thing")
    reg.add("alpha", Alpha)
    reg.add("outer", Outer)
    Outer.nested = {"inner": Nested(reg, injected=("size",)), "many": Nested(reg, many=True, injected=("size",))}
    return reg


def test_lookup_suggests_close_names_and_refuses_duplicates_and_wrong_bases():
    reg = _registry()
    assert reg.get("alpha") is Alpha and reg.get("tests.core.test_ground:Alpha") is Alpha
    with pytest.raises(UnknownComponentError, match="Did you mean 'alpha'"):
        reg.get("alpah")
    with pytest.raises(ValueError, match="already registered"):
        reg.add("alpha", Outer)
    reg.add("alpha", Alpha)  # the same target again is fine
    with pytest.raises(UnknownComponentError, match="not a Base"):
        reg.get("tests.core.test_ground:ComponentSpec")
    with pytest.raises(UnknownComponentError, match="cannot import"):
        reg.get("no.such.module:Thing")


def test_spec_parser_takes_names_and_sections_only():
    assert ComponentSpec.parse("bm25") == ComponentSpec("bm25", {})
    assert ComponentSpec.parse({"name": "bm25", "params": {"k1": 1.2}, "label": "B"}) == ComponentSpec("bm25", {"k1": 1.2}, "B")
    for bad, match in (({"params": {}}, "must be a name"), ({"name": "x", "parms": {}}, "parms"),
                       ({"name": "x", "params": [1]}, "params must be a mapping"), (3, "must be a name"), ("  ", "empty")):
        with pytest.raises(ParamError, match=match):
            ComponentSpec.parse(bad, "retriever")


def test_parameter_check_names_unknown_and_missing_parameters_nested_too():
    reg = _registry()
    with pytest.raises(ParamError, match=r"^thing 'alpha': missing required parameter 'size'$"):
        reg.check("alpha")
    with pytest.raises(ParamError, match=r"thing 'alpha': unknown parameter 'color'; accepted: size, colour"):
        reg.check({"name": "alpha", "params": {"size": 1, "color": "blue"}})
    reg.check({"name": "outer", "params": {"inner": {"name": "alpha", "params": {"colour": "blue"}}}},
              injected=("tokenizer",))  # `size` of the inner section is supplied by the outer component
    with pytest.raises(ParamError, match=r"thing 'outer' > thing 'alpha': unknown parameter 'shade'"):
        reg.check({"name": "outer", "params": {"many": ["alpha", {"name": "alpha", "params": {"shade": 1}}]}})
    with pytest.raises(ParamError, match="many must be a list"):
        reg.check({"name": "outer", "params": {"many": "alpha"}})
    with pytest.raises(ParamError, match="takes no parameters"):
        check_params(object(), {"x": 1}, what="metric 'm'")


def test_build_gives_injected_values_only_where_declared():
    reg = _registry()
    built = reg.build({"name": "outer", "params": {"inner": "alpha"}}, tokenizer="T", reader="R")
    assert isinstance(built, Outer) and built.inner == "alpha"
    alpha = reg.build({"name": "alpha", "params": {"size": 3}}, tokenizer="T")
    assert (alpha.size, alpha.colour) == (3, "red")


def test_retry_policy_backs_off_obeys_retry_after_up_to_its_cap_and_gives_up():
    policy = RetryPolicy(max_retries=3, backoff_base_s=0.5, backoff_max_s=2.0, retry_after_max_s=10.0)
    rng = random.Random(0)
    assert all(0 <= policy.delay(n, None, rng) <= min(2.0, 0.5 * 2**n) for n in range(6))
    assert policy.delay(0, 7.0, rng) == 7.0 and policy.delay(0, 600.0, rng) == 10.0
    waits, attempts = [], []

    def flaky():
        attempts.append(1)
        if len(attempts) < 3:
            raise Transient("HTTP 503", retry_after=1.5 if len(attempts) == 1 else None)
        return "ok"

    assert policy.call(flaky, sleep=waits.append, rng=rng) == ("ok", 2)
    assert waits[0] == 1.5 and 0 <= waits[1] <= 1.0
    with pytest.raises(TransientError, match="gave up after 4 attempts: HTTP 500"):
        policy.call(lambda: (_ for _ in ()).throw(Transient("HTTP 500")), sleep=lambda s: None)
    with pytest.raises(KeyError):  # anything that is not Transient passes through at once
        policy.call(lambda: {}["x"], sleep=lambda s: None)
    assert RetryPolicy.of({"max_retries": 1}).max_retries == 1
    with pytest.raises(ParamError, match="unknown setting 'retries'"):
        RetryPolicy.of({"retries": 1})


def test_retry_after_in_seconds_milliseconds_and_dates():
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "3"}) == 0.25
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    in_30s = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28.0 <= parse_retry_after({"retry-after": in_30s}) <= 30.0
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after({}) is None


@pytest.mark.parametrize("text, words", [
    ("The cat sat.", 3), ("北京是中国的首都。", 8), ("mixed 中文 text", 4), ("  ...  ", 0), ("don't e-mail", 4),
])
def test_counting_rule_is_longbench_words(text, words):
    assert count_words(text) == len(word_spans(text)) == len(word_pieces(text)) == words
    if words:
        assert "".join(word_pieces(text)) == text

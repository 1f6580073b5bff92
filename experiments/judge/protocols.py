"""What the judge is asked and how its answers are read: the request templates, the strict parsers, the labels.

Each protocol's requests are filled from ``experiments/judge/prompts/``; an answer that does not hold exactly
what the protocol asks (one verdict; integer fields in their ranges; numbered key points) raises
:class:`Unparseable`, which ``experiments.judge.judging`` records as a failed judgement, never a tie.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib.resources import files
from typing import Any

from core.errors import UnknownComponentError, UserError
from experiments.tasks.specs import get_task

PROTOCOLS = ("pairwise", "score")
NO_EXAMPLES = "score-no-examples"  # the label of HELMET-rubric judgements asked without HELMET's few-shot examples
VERDICT = re.compile(r"\[\[([ABC])\]\]")
JSON_OBJECT = re.compile(r"\{[^{}]*\}")


def prompt(name: str) -> str:
    return (files("experiments.judge") / "prompts" / f"{name}.txt").read_text(encoding="utf-8")


class Unparseable(ValueError):
    """The judge answered, but not in the required form."""


def parse_verdict(text: str) -> str:
    """``A``, ``B`` or ``C`` when the output holds exactly one distinct verdict, else ``Unparseable``."""
    found = set(VERDICT.findall(text))
    if not found:
        raise Unparseable("no verdict [[A]], [[B]] or [[C]] in the judge's output")
    if len(found) > 1:
        raise Unparseable(f"conflicting verdicts {sorted(found)} in the judge's output")
    return found.pop()


def last_json_object(text: str) -> dict[str, Any]:
    """The last JSON object (without nested braces) of the judge's output."""
    objects = JSON_OBJECT.findall(text)
    if not objects:
        raise Unparseable("no JSON object in the judge's output")
    try:
        return json.loads(objects[-1])
    except json.JSONDecodeError as err:
        raise Unparseable(f"the last JSON object does not parse ({err.msg})") from None


def parse_scores(text: str, ranges: Mapping[str, tuple[int, int | None]]) -> dict[str, int]:
    """The last JSON object of the output, with every field an integer within its (inclusive) range."""
    return check_fields(last_json_object(text), ranges)


def check_fields(data: Mapping[str, Any], ranges: Mapping[str, tuple[int, int | None]]) -> dict[str, int]:
    """Every field of ``ranges`` an integer within its (inclusive) range, else ``Unparseable``."""
    out = {}
    for key, (lo, hi) in ranges.items():
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise Unparseable(f"field {key!r} is missing or not an integer: {value!r}")
        if value < lo or (hi is not None and value > hi):
            raise Unparseable(f"field {key!r} = {value} is outside {lo}..{hi if hi is not None else ''}")
        out[key] = value
    return out


def parse_keypoints(text: str) -> list[str]:
    """The numbered lines ``1. ...`` of the judge's key-point list (at least one)."""
    points = [m.group(1).strip() for m in re.finditer(r"^\s*\d+[.)]\s+(.+)$", text, flags=re.MULTILINE)]
    if not points:
        raise Unparseable("no numbered key points in the judge's output")
    return points


def _check_precision(data: Mapping[str, Any], allow_empty: bool = False) -> dict[str, int]:
    p = check_fields(data, {"precision": (0, None), "sentence_count": (0 if allow_empty else 1, None)})
    if p["precision"] > p["sentence_count"]:
        raise Unparseable(f"precision {p['precision']} exceeds sentence_count {p['sentence_count']}")
    return p


def _parse_precision(text: str) -> dict[str, int]:
    return _check_precision(last_json_object(text))


def _helmet_object(text: str) -> dict[str, Any]:
    """The JSON object HELMET's ``parse_json`` reads from the judge's output."""
    from experiments.tasks.helmet.metrics import helmet_json

    data = helmet_json(text)
    if not isinstance(data, dict):
        raise Unparseable("no JSON object that HELMET's parse_json reads in the judge's output")
    return data


def protocol_label(protocol: str, spec_name: str, helmet_examples: bool = True) -> str:
    """The protocol a judgement is recorded under: ``score-no-examples`` for HELMET's rubric asked without its
    few-shot examples (another judgement than the default's), else the protocol itself."""
    if protocol == "score" and not helmet_examples and _kind(spec_name) == "helmet":
        return NO_EXAMPLES
    return protocol


def _kind(spec_name: str) -> str:
    """How the score protocol judges a task: ``helmet`` (its rubric), ``summary`` or ``qa``."""
    try:
        spec = get_task(spec_name)
    except (UnknownComponentError, UserError):
        return "qa"
    return "helmet" if spec.judge else "summary" if "summar" in spec.category else "qa"


__all__ = ["JSON_OBJECT", "NO_EXAMPLES", "PROTOCOLS", "VERDICT", "Unparseable", "check_fields", "last_json_object",
           "parse_keypoints", "parse_scores", "parse_verdict", "prompt", "protocol_label"]

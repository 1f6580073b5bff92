"""RULER's tasks as settings, and the pieces its haystacks are made of (Hsieh et al., 2024; ``experiments.tasks.ruler.generate``
generates the records): the noise sentences, the needle template, the 40 depths, the key words, each task's
setting and the haystack increment, and the one seeded draw every random choice comes from.
"""
from __future__ import annotations

import random
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "One of the special magic {type_needle_v} for {key} is: {value}."
DEPTHS = [round(100 * i / 39) for i in range(40)]
_CTX = "\x00CONTEXT\x00"
_ADJS = ("ancient agreeable brave calm clever curious damp eager elegant fancy fierce gentle glossy grumpy hollow "
         "humble icy jolly keen lively lucky mellow misty nimble odd plain proud quiet rapid rusty shiny silent "
         "sleepy smooth sour steady tame tender vivid wary").split()
_NOUNS = ("anchor badger basket beacon bison button candle canyon cedar comet cricket dagger dolphin ember falcon "
          "fiddle garden glacier harbor helmet island jacket kettle lantern meadow mirror nectar orchard otter "
          "parcel pebble quarry raven saddle summit thistle tunnel walnut willow").split()


@dataclass(frozen=True)
class Setting:
    kind: str  # RULER's task: niah, variable_tracking, common_words_extraction, freq_words_extraction, qa
    haystack: str = "essay"
    keys: int = 1
    values: int = 1
    queries: int = 1


TASKS = {
    "niah_single": Setting("niah"),
    "niah_multikey": Setting("niah", keys=4),
    "niah_multivalue": Setting("niah", values=4),
    "niah_multiquery": Setting("niah", keys=4, queries=4),
    "vt": Setting("variable_tracking", haystack="noise"),
    "cwe": Setting("common_words_extraction", haystack="words"),
    "fwe": Setting("freq_words_extraction", haystack="words"),
    "qa": Setting("qa", haystack="documents"),
}
INCREMENT = {"essay": 500, "noise": 25, "words": 10, "documents": 10}


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


class _Draw:
    """Every random choice of one generation, from one seeded generator."""

    def __init__(self, seed: str) -> None:
        self.rng = random.Random(seed)  # a str seed is hashed with SHA-512: the same in every process

    def key(self) -> str:
        return f"{self.rng.choice(_ADJS)}-{self.rng.choice(_NOUNS)}"

    def number(self, digits: int = 7) -> str:
        return str(self.rng.randint(10 ** (digits - 1), 10 ** digits - 1))

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def pseudo_word(self) -> str:
        return "".join(self.rng.choice("bdfgklmnprstvz") + self.rng.choice("aeiou") for _ in range(self.rng.randint(2, 4)))


def _insert(haystack: list[str], items: Sequence[str], draw: _Draw, *, at_depths: bool) -> tuple[list[str], list[int]]:
    """``items`` placed among ``haystack`` units: at RULER's depths (essay) or at random indexes (noise)."""
    units = list(haystack)
    if at_depths:
        cuts = sorted(int(len(units) * d / 100) for d in draw.rng.sample(DEPTHS, len(items)))
    else:
        cuts = sorted(draw.rng.sample(range(len(units) + 1), len(items)))
    for offset, (cut, item) in enumerate(zip(cuts, items)):
        units.insert(cut + offset, item)
    return units, [c + o for o, c in enumerate(cuts)]


__all__ = ["DEPTHS", "INCREMENT", "NEEDLE", "NOISE", "TASKS", "Setting"]

"""Deterministic synthetic data for the offline quickstart.

Multi-document QA about fictional entities ("The capital of the island nation
of Velmora is Quastin."): every question has one gold passage and distractor
passages about OTHER fictional entities of the same kind, written as plain
English sentences.  The facts are invented, so no reader can answer from
memory (closed-book stays near zero), retrieval must match the entity name
among passages that share every other content word, and contexts are short
enough for a tiny offline LLM.  Examples use task ``nq_multidoc``, so the
Lost in the Middle prompt and best-subspan EM apply unchanged.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from experiments.data.records import Example, render_litm_documents
from indexes.text import contains_answer
from indexes.types import Passage

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "qu", "st", "th"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
_CODAS = ["", "", "n", "r", "l", "s", "th", "m"]


class _Names:
    """Pronounceable invented names, never repeated within one data set."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int) -> str:
        choice = self.rng.choice
        while True:
            name = "".join([choice(_ONSETS) + choice(_VOWELS) + choice(_CODAS) for _ in range(syllables)]).capitalize()
            if name.lower() not in self.used and len(name) >= 5:
                self.used.add(name.lower())
                return name

    def place(self) -> str:
        return self.word(self.rng.choice((2, 3)))

    def person(self) -> str:
        return f"{self.word(2)} {self.word(self.rng.choice((2, 3)))}"


@dataclass(frozen=True)
class _Kind:
    """One kind of fact: how to name the entity and answer, state the fact, and ask about it."""

    entity: Callable[[_Names], str]
    answer: Callable[[_Names], str]
    title: str
    fact: str
    question: str


_KINDS = (
    _Kind(lambda n: n.place(), lambda n: n.place(), "{e}",
          "The capital of the island nation of {e} is {a}.", "What is the capital of the island nation of {e}?"),
    _Kind(lambda n: n.place(), lambda n: n.person(), "{e} Trading Company",
          "The {e} Trading Company was founded by the merchant {a}.", "Who founded the {e} Trading Company?"),
    _Kind(lambda n: n.place(), lambda n: "Lake " + n.place(), "{e} River",
          "The {e} River flows into {a}.", "Which lake does the {e} River flow into?"),
    _Kind(lambda n: n.place(), lambda n: n.person(), "{e} engine",
          "The {e} engine was invented by the engineer {a}.", "Who invented the {e} engine?"),
    _Kind(lambda n: n.place(), lambda n: "Mount " + n.place(), "{e} Range",
          "The highest peak of the {e} Range is {a}.", "What is the highest peak of the {e} Range?"),
)

_FILLER = (
    "Historians trace the earliest written records of {t} to the year {year}.",
    "Local guides describe {t} as {adj} and often crowded during the {season}.",
    "A survey in {year} counted roughly {num} visitors who came to see {t}.",
    "Many travellers remember {t} for its {adj} {thing}.",
    "Several books about {t} were published in the decades after {year}.",
    "Scholars still debate how {t} got its name, and no account is accepted by all.",
    "In the {season}, the weather around {t} is usually {weather}.",
    "Old maps show {t} close to a road used by traders carrying {goods}.",
    "A small museum dedicated to {t} displays {num} objects from its past.",
    "Residents say that {t} changed little until the arrival of the railway in {year}.",
)
_ADJ = ["quiet", "colourful", "famous", "remote", "busy", "peaceful", "rugged", "lively"]
_WEATHER = ["mild", "windy", "rainy", "dry", "cold", "warm", "foggy"]
_THINGS = ["markets", "old bridges", "stone towers", "gardens", "harbour lights", "festivals", "wooden houses"]
_SEASONS = ["spring", "summer", "autumn", "winter"]
_GOODS = ["salt", "wool", "copper", "spices", "timber", "grain", "amber"]


def _passage_text(rng: random.Random, fact: str, subject: str, words: int) -> str:
    """The fact as the second sentence, framed by filler sentences about ``subject`` until ``words`` are reached."""
    fillers = list(_FILLER)
    rng.shuffle(fillers)
    choice, randint = rng.choice, rng.randint
    sentences: list[str] = []
    count = 0
    for template in fillers:
        sentences.append(template.format(
            t=subject, year=randint(1200, 1950), adj=choice(_ADJ), thing=choice(_THINGS),
            season=choice(_SEASONS), weather=choice(_WEATHER), num=randint(200, 90000), goods=choice(_GOODS),
        ))
        count += len(sentences[-1].split())
        if len(sentences) == 1:
            sentences.append(fact)
            count += len(fact.split())
        if count >= words:
            break
    return " ".join(sentences)


def _passage(rng: random.Random, names: _Names, kind: _Kind, words: int, doc_id: str, gold: bool
             ) -> tuple[Passage, str, str]:
    entity, answer = kind.entity(names), kind.answer(names)
    title = kind.title.format(e=entity)
    text = _passage_text(rng, kind.fact.format(e=entity, a=answer), title if "{e} " in kind.title else entity, words)
    return Passage(text=text, title=title, doc_id=doc_id, is_gold=gold, has_answer=gold), entity, answer


def make_multidoc_qa(n: int, num_docs: int = 10, words_per_doc: int = 80, seed: int = 0) -> list[Example]:
    """``n`` questions, each with its gold passage among ``num_docs`` documents.

    Question ``i`` asks about fact kind ``i mod 5``; its distractors are
    passages about other invented entities of the same kind (same sentence
    shapes, different names and answers).  The gold sits at position
    ``i mod num_docs``, so positions are covered evenly.  Same seed, same data.
    """
    if n < 0 or num_docs < 1 or words_per_doc < 10:
        raise ValueError(f"need n >= 0, num_docs >= 1, words_per_doc >= 10; got {n}, {num_docs}, {words_per_doc}")
    rng = random.Random(seed)
    names = _Names(rng)
    examples = []
    for i in range(n):
        kind = _KINDS[i % len(_KINDS)]
        gold, entity, answer = _passage(rng, names, kind, words_per_doc, f"synth{i}-gold", True)
        others = []
        while len(others) < num_docs - 1:
            candidate = _passage(rng, names, kind, words_per_doc, f"synth{i}-d{len(others)}", False)[0]
            if not contains_answer(candidate.text, (answer,)):  # invented names can nest ("Brath" in "Brathen")
                others.append(candidate)
        position = i % num_docs
        others.insert(position, gold)
        examples.append(Example(
            id=f"synth-s{seed}-{i}",
            task="nq_multidoc",
            query=kind.question.format(e=entity),
            context=render_litm_documents(others),
            answers=(answer,),
            passages=tuple(others),
            source=f"synthetic:seed={seed}:{i}",
            meta={"gold_position": position, "num_docs": num_docs, "protocol": "gold_position"},
        ))
    return examples

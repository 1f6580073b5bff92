"""Build M4LE-style long instances from short-context examples (Kwan et al., 2023, arXiv 2310.19240).

M4LE turns a short-context task into a long one: sample N = target length /
median instance length short instances, mark each with an identifier
("Passage 3"), concatenate them, and ask about one (single-span) or several
(multi-span) of them, by identifier (explicit) or by content (semantic); a
global task needs the whole input.  The relevant passages are spread evenly
over positions across instances, so scores can be read by position too.

Records are written in M4LE's JSONL format (``instruction, input, answers,
input_length, total_length, length_bucket``) plus ``id``, ``task``,
``ability`` and ``relevant`` (1-based identifiers of the relevant passages)
for traceability; the question goes in ``instruction`` so query-aware
compressors see it.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from statistics import median
from typing import Any, Iterable, Sequence

from core.errors import UserError
from experiments.data.records import Example

ABILITIES = ("explicit_single", "semantic_single", "explicit_multi", "semantic_multi", "global")
SPANS_PER_MULTI = 3


@dataclass(frozen=True)
class _Item:
    """One short instance: a passage and the question it answers."""

    text: str
    title: str
    question: str
    answers: tuple[str, ...]
    label: str | None


def _items(examples: Iterable[Example]) -> list[_Item]:
    """Short instances, one per distinct question; the passage is the gold one when the example has passages."""
    items: dict[str, _Item] = {}
    for ex in examples:
        passage = next((p for p in ex.passages if p.is_gold), ex.passages[0] if ex.passages else None)
        text, title = (passage.text, passage.title) if passage else (ex.context, "")
        if not text.strip():
            raise UserError(f"example {ex.id!r} ({ex.source or 'no source'}) has no passage text")
        label = ex.meta.get("label")
        items.setdefault(ex.query, _Item(text, title, ex.query, tuple(ex.answers), None if label is None else str(label)))
    return list(items.values())


def _words(text: str) -> int:
    return len(text.split())


def spread_positions(instance: int, n_instances: int, n_passages: int, n_spans: int) -> list[int]:
    """0-based positions of the relevant passages of instance ``instance``.

    The passages are cut into ``n_spans`` equal strata; across instances the
    relevant passage of each stratum walks from its first to its last slot,
    so every position is covered evenly (single-span: one stratum, the whole input).
    """
    frac = instance / (n_instances - 1) if n_instances > 1 else 0.5
    bounds = [round(s * n_passages / n_spans) for s in range(n_spans + 1)]
    return [lo + round(frac * (hi - lo - 1)) for lo, hi in zip(bounds, bounds[1:])]


def _render(items: Sequence[_Item]) -> str:
    blocks = []
    for j, item in enumerate(items, 1):
        head = f"Passage {j} (Title: {item.title}):" if item.title else f"Passage {j}:"
        blocks.append(f"{head}\n{item.text}")
    return "\n\n".join(blocks)


def _join_names(ids: Sequence[int]) -> str:
    names = [f"Passage {j}" for j in ids]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _ask(ability: str, items: Sequence[_Item], relevant: Sequence[int], rng: random.Random
         ) -> tuple[str, list[str], list[int]]:
    """(instruction, answers, 1-based relevant identifiers) for one instance."""
    ids = [p + 1 for p in relevant]
    chosen = [items[p] for p in relevant]
    if ability == "explicit_single":
        return (f"Read the passages below and answer the question about Passage {ids[0]}. Only give the answer."
                f"\nQuestion: {chosen[0].question}", list(chosen[0].answers), ids)
    if ability == "semantic_single":
        return ("Read the passages below and answer the question. Only give the answer."
                f"\nQuestion: {chosen[0].question}", list(chosen[0].answers), ids)
    if ability == "explicit_multi":
        questions = "\n".join(f"Passage {j}: {item.question}" for j, item in zip(ids, chosen))
        return (f"Read the passages below and answer one question about each of {_join_names(ids)}. "
                f"Give one answer per line, in this order.\n{questions}",
                ["\n".join(item.answers[0] for item in chosen)], ids)
    if ability == "semantic_multi":
        shuffled = list(chosen)
        rng.shuffle(shuffled)
        questions = "\n".join(f"- {item.question}" for item in shuffled)
        return ("Read the passages below. Which passages answer the following questions? Give only the passage "
                f"numbers, in increasing order, separated by commas.\n{questions}", [", ".join(map(str, ids))], ids)
    labels = sorted({item.label for item in items})
    label = rng.choice(labels)
    ids = [j for j, item in enumerate(items, 1) if item.label == label]
    return (f"Read all the passages below. How many of them are about {label}? Give only the number.",
            [str(len(ids))], ids)


def build_m4le(
    examples: Sequence[Example],
    *,
    target_words: int,
    ability: str,
    n_instances: int,
    seed: int = 0,
    task_name: str = "m4le_nq",
) -> list[dict[str, Any]]:
    """``n_instances`` long instances of about ``target_words`` words each, in M4LE's JSONL format.

    ``examples`` are short-context QA examples (e.g. nq-open-oracle: question,
    answers, one gold passage).  ``global`` counts the passages of one label
    and needs every example to carry ``meta['label']``.  Same seed, same records.
    """
    if ability not in ABILITIES:
        raise UserError(f"unknown M4LE ability {ability!r}; choose from {', '.join(ABILITIES)}")
    if target_words < 1 or n_instances < 0:
        raise UserError(f"need target_words >= 1 and n_instances >= 0, got {target_words}, {n_instances}")
    items = _items(examples)
    if not items:
        raise UserError("no source examples to build M4LE instances from")
    if ability == "global" and any(item.label is None for item in items):
        raise UserError("ability 'global' counts passages by label: every source example needs meta['label']")
    block_words = median(_words(_render([item])) for item in items)  # identifier and title count too
    n_passages = max(1, round(target_words / block_words))
    n_spans = SPANS_PER_MULTI if ability.endswith("_multi") else 1
    if n_passages > len(items) or n_passages < n_spans:
        raise UserError(
            f"{target_words} words need {n_passages} passages (median {block_words} words) "
            f"but there are {len(items)} distinct source examples and {ability} needs at least {n_spans}"
        )
    rng = random.Random(seed)
    records = []
    for i in range(n_instances):
        chosen = [items[j] for j in rng.sample(range(len(items)), n_passages)]
        relevant = spread_positions(i, n_instances, n_passages, n_spans)
        instruction, answers, ids = _ask(ability, chosen, relevant, rng)
        text = _render(chosen)
        records.append({
            "id": f"{task_name}-{ability}-{target_words}-{i}",
            "task": task_name,
            "ability": ability,
            "instruction": instruction,
            "input": text,
            "answers": answers,
            "input_length": _words(text),
            "total_length": _words(instruction) + _words(text),
            "length_bucket": target_words,
            "relevant": ids,
        })
    return records

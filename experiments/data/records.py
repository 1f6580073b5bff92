"""The example record every loader produces and every later stage reads, and how multi-document contexts render."""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from indexes.types import Passage


@dataclass(frozen=True)
class Example:
    """One evaluation item.

    ``context`` is the full long text, byte for byte as published (for
    multi-document tasks, the passages rendered in order).  ``passages`` is
    set for multi-document tasks so compressors can treat each passage as a
    unit.  ``source`` is ``"path:line"`` so every score traces back to input.
    """

    id: str
    task: str
    query: str
    context: str
    answers: tuple[str, ...]
    passages: tuple[Passage, ...] = ()
    lang: str = "en"
    all_classes: tuple[str, ...] = ()
    length: int = 0
    source: str = ""
    meta: dict = field(default_factory=dict, compare=False)


def render_litm_documents(passages: Iterable[Passage]) -> str:
    """Documents as Lost in the Middle's QA prompt shows them: ``Document [i](Title: t) text``, 1-based, one per line."""
    return "\n".join(f"Document [{i}](Title: {p.title}) {p.text}" for i, p in enumerate(passages, start=1))


def render_litm_kv(pairs: Iterable[str]) -> str:
    """Key-value pairs (each ``"key": "value"``) as Lost in the Middle renders its JSON object."""
    return "{" + ",\n ".join(pairs) + "}"


_SWEPT_ID = re.compile(r"@(?:gold|key)(\d+)$")


def swept_id(base_id: str, kind: str, position: int) -> str:
    """The id of ``base_id`` asked with its gold document (``kind="gold"``) or key (``"key"``) at ``position``:
    one convention, so the report can pair the positions of one question."""
    return f"{base_id}@{kind}{position}"


def split_swept_id(example_id: str) -> tuple[str, int] | None:
    """``("q7", 4)`` for ``"q7@gold4"`` or ``"q7@key4"``; ``None`` for an id no sweep made."""
    m = _SWEPT_ID.search(example_id)
    return (example_id[: m.start()], int(m.group(1))) if m else None

"""Records shared by every floor above: a chunk of text and a titled passage."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Passage:
    """A titled unit of a multi-document context (HotpotQA paragraph, Lost-in-the-Middle document)."""

    text: str
    title: str = ""
    doc_id: str = ""
    is_gold: bool = False
    has_answer: bool = False
    score: float | None = None  # the retrieval score when the passage came from a ranking

    def scored(self, score: float | None) -> Passage:
        """This passage with ``score``: ``dataclasses.replace`` without its per-call field lookup, which was most
        of an open-domain search over a corpus (2,655 questions x 50 hits)."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__, score=score)  # frozen: set once, before anyone holds it
        return new


@dataclass(frozen=True)
class Chunk:
    """A span of one document; later stages refer to it by ``chunk_id``.

    ``start``/``end`` are character offsets into the original document, so
    ``document[start:end] == text`` always holds for chunkers that do not
    rewrite text.
    """

    chunk_id: str
    doc_id: str
    index: int
    start: int
    end: int
    text: str
    title: str = ""


@runtime_checkable
class Chunker(Protocol):
    """Splits one document into chunks in document order."""

    def split(self, text: str, doc_id: str = "doc") -> list[Chunk]: ...


def make_chunk_id(doc_id: str, index: int) -> str:
    return f"{doc_id}#{index}"


def whole_chunk(doc_id: str, text: str, title: str = "") -> Chunk:
    """One chunk that is all of ``text`` (a passage as its own retrieval unit), id ``{doc_id}#0``."""
    return Chunk(make_chunk_id(doc_id, 0), doc_id, 0, 0, len(text), text, title)


def render_passage(passage: Passage) -> str:
    """A titled passage as a reader sees it: the title on the line above the text (the text alone when untitled)."""
    return f"{passage.title}\n{passage.text}" if passage.title else passage.text


def unique_passages(passages: Iterable[Passage]) -> list[Passage]:
    """The passages without repeats of the same (title, text), first occurrence kept, in order."""
    return list({(p.title, p.text): p for p in passages}.values())

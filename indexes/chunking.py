"""Chunkers: split one document into spans that keep exact character offsets.

Every chunker returns :class:`~indexes.types.Chunk` records in document order
with ``text[start:end] == chunk.text`` (the one documented exception is
``longbench`` with ``compat=True``).  Chunkers are registered in
:data:`CHUNKERS`; build one with :func:`make_chunker`.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import ParamError, UserError
from core.registry import ComponentSpec, Registry
from core.text import count_words, word_spans
from indexes.types import Chunk, Chunker, Passage, make_chunk_id, whole_chunk

CHUNKERS: Registry[Any] = Registry("chunkers")

# LongBench's sentence delimiters; the capturing group keeps each delimiter
# (plus the whitespace after it) as its own piece.
LONGBENCH_SPLIT = re.compile(r"([。？！；\n.!?;]\s*)")


def _require_text(text: str) -> None:
    if not isinstance(text, str):
        raise UserError(f"chunker expects a str, got {type(text).__name__}")
    if not text.strip():
        raise UserError("cannot chunk empty or whitespace-only text")


def _check_window(size: int, overlap: int) -> None:
    if size <= 0:
        raise ParamError(f"chunk size must be positive, got {size}")
    if overlap < 0 or overlap >= size:
        raise ParamError(f"overlap must satisfy 0 <= overlap < size, got overlap={overlap}, size={size}")


def _span_chunk(text: str, doc_id: str, index: int, start: int, end: int) -> Chunk:
    return Chunk(make_chunk_id(doc_id, index), doc_id, index, start, end, text[start:end])


def _windows(n_units: int, size: int, overlap: int) -> Iterable[tuple[int, int]]:
    """Index ranges [lo, hi) of units per window; the last window ends at ``n_units``."""
    stride = size - overlap
    lo = 0
    while True:
        hi = min(lo + size, n_units)
        yield lo, hi
        if hi >= n_units:
            return
        lo += stride


# ---------------------------------------------------------------------------
@dataclass
class LongBenchChunker:
    """LongBench's retrieval splitter: sentences packed greedily up to ``size`` words.

    Reference: the released LongBench retrieval scripts (github.com/THUDM/LongBench, ``LongBench/retrieval/splitter.py``).
    Pieces from :data:`LONGBENCH_SPLIT` join the open chunk while its word count
    plus theirs stays <= ``size``; otherwise the chunk closes and the piece opens
    the next one, so an over-long sentence becomes a chunk of its own. No overlap.

    ``compat=True`` reproduces the script byte for byte, including its quirk of
    adding a single space for every empty piece (between adjacent delimiters,
    e.g. ``"!?"``); those chunks' ``text`` then differs from ``document[start:end]``
    (the offsets still cover the span the chunk came from).  The default drops
    that quirk, so text and offsets agree, and drops chunks with no visible text.
    """

    size: int = 500
    overlap: int = 0
    compat: bool = False

    def __post_init__(self) -> None:
        _check_window(self.size, 0)
        if self.overlap:
            raise ParamError("the longbench chunker has no overlap (the released splitter never overlaps)")

    def split(self, text: str, doc_id: str = "doc") -> list[Chunk]:
        _require_text(text)
        spans: list[tuple[int, int, str]] = []  # (start, end, chunk text)
        cur_pieces: list[str] = []
        cur_chars = cur_words = cur_start = cur_end = 0
        pos = 0
        for piece in LONGBENCH_SPLIT.split(text):
            p_start, pos = pos, pos + len(piece)
            n = count_words(piece)
            if cur_chars and cur_words + n <= self.size:
                added = " " if (piece == "" and self.compat) else piece
                cur_pieces.append(added)
                cur_chars += len(added)
                cur_words += n
                cur_end = pos
                continue
            if cur_chars:
                spans.append((cur_start, cur_end, "".join(cur_pieces)))
            cur_pieces, cur_chars, cur_words, cur_start, cur_end = [piece], len(piece), n, p_start, pos
        if cur_chars:
            spans.append((cur_start, cur_end, "".join(cur_pieces)))
        if not self.compat:
            spans = [s for s in spans if s[2].strip()]
        return [
            Chunk(make_chunk_id(doc_id, i), doc_id, i, start, end, chunk_text)
            for i, (start, end, chunk_text) in enumerate(spans)
        ]


@dataclass
class WordChunker:
    """Fixed windows of ``size`` words with ``overlap`` words shared between neighbours.

    Words are counted as LongBench counts them (each CJK ideograph is a word), so
    the same size means the same thing on Chinese.  A chunk runs from its first
    word to just before the next window-external word (trailing whitespace
    trimmed), so punctuation is kept and offsets are exact.
    """

    size: int = 200
    overlap: int = 0

    def __post_init__(self) -> None:
        _check_window(self.size, self.overlap)

    def split(self, text: str, doc_id: str = "doc") -> list[Chunk]:
        _require_text(text)
        spans = word_spans(text)
        if not spans:  # only punctuation/symbols: one chunk of the whole text
            start = len(text) - len(text.lstrip())
            return [_span_chunk(text, doc_id, 0, start, len(text.rstrip()))]
        chunks = []
        for i, (lo, hi) in enumerate(_windows(len(spans), self.size, self.overlap)):
            start = 0 if lo == 0 else spans[lo][0]
            end = spans[hi][0] if hi < len(spans) else len(text)
            while end > start and text[end - 1].isspace():
                end -= 1
            while text[start].isspace():
                start += 1
            chunks.append(_span_chunk(text, doc_id, i, start, end))
        return chunks


@dataclass
class TokenChunker:
    """Windows of ``size`` tokens of a Hugging Face tokenizer or a tiktoken encoding.

    ``tokenizer``: a name, a local path or a tokenizer object (needs a *fast*
    tokenizer, for offset mappings).  ``encoding``: a tiktoken encoding name
    (e.g. ``"cl100k_base"``; tiktoken downloads it on first use).  Character
    spans come from the tokenizer's own offsets, so ``text[start:end]`` is exact.
    """

    size: int = 512
    overlap: int = 0
    tokenizer: Any = None
    encoding: str | None = None

    def __post_init__(self) -> None:
        _check_window(self.size, self.overlap)
        if (self.tokenizer is None) == (self.encoding is None):
            raise ParamError("the tokens chunker needs exactly one of tokenizer= (Hugging Face) or encoding= (tiktoken)")
        self._tok: Any = None

    def _token_spans(self, text: str) -> list[tuple[int, int]]:
        if self.encoding is not None:
            return self._tiktoken_spans(text)
        if self._tok is None:
            if isinstance(self.tokenizer, str):
                from transformers import AutoTokenizer

                self._tok = AutoTokenizer.from_pretrained(self.tokenizer)
            else:
                self._tok = self.tokenizer
        if not getattr(self._tok, "is_fast", False):
            raise ParamError("the tokens chunker needs a fast Hugging Face tokenizer (offset mappings)")
        enc = self._tok(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return [(s, e) for s, e in enc["offset_mapping"] if e > s]

    def _tiktoken_spans(self, text: str) -> list[tuple[int, int]]:
        import tiktoken

        if self._tok is None:
            self._tok = tiktoken.get_encoding(self.encoding)
        # Byte offsets of each token, mapped back to character offsets; a token
        # that splits a multi-byte character is widened to whole characters.
        char_of_byte = []
        for ci, ch in enumerate(text):
            char_of_byte.extend([ci] * len(ch.encode("utf-8")))
        char_of_byte.append(len(text))
        spans, byte_pos = [], 0
        for token in self._tok.encode(text, disallowed_special=()):
            n = len(self._tok.decode_single_token_bytes(token))
            s, e = char_of_byte[byte_pos], char_of_byte[byte_pos + n]
            if e == s and byte_pos + n < len(char_of_byte) - 1:
                e = s + 1
            spans.append((s, e))
            byte_pos += n
        return spans

    def split(self, text: str, doc_id: str = "doc") -> list[Chunk]:
        _require_text(text)
        spans = self._token_spans(text)
        if not spans:
            raise UserError("the tokenizer produced no tokens for this text")
        return [
            _span_chunk(text, doc_id, i, spans[lo][0], spans[hi - 1][1])
            for i, (lo, hi) in enumerate(_windows(len(spans), self.size, self.overlap))
        ]


@dataclass
class RecursiveChunker:
    """LangChain's ``RecursiveCharacterTextSplitter``; ``size``/``overlap`` in characters."""

    size: int = 1000
    overlap: int = 0
    separators: Sequence[str] | None = None

    def __post_init__(self) -> None:
        _check_window(self.size, self.overlap)

    def split(self, text: str, doc_id: str = "doc") -> list[Chunk]:
        _require_text(text)
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        splitter = RecursiveCharacterTextSplitter(
            chunk_size=self.size,
            chunk_overlap=self.overlap,
            add_start_index=True,
            separators=list(self.separators) if self.separators else None,
        )
        chunks = []
        for i, doc in enumerate(splitter.create_documents([text])):
            start = doc.metadata["start_index"]
            if start < 0:  # LangChain could not locate the piece; find it ourselves
                start = text.find(doc.page_content)
            chunks.append(_span_chunk(text, doc_id, i, start, start + len(doc.page_content)))
        return chunks


_SENTENCE_END = re.compile(r"(?<=[。？！；.!?;])\s+|(?<=[。？！；])|\n+")


@dataclass
class SentenceChunker:
    """Whole sentences packed up to ``size`` characters (a sentence longer than that stays whole)."""

    size: int = 1000
    overlap: int = 0

    def __post_init__(self) -> None:
        _check_window(self.size, 0)
        if self.overlap:
            raise ParamError("the sentences chunker has no overlap")

    def split(self, text: str, doc_id: str = "doc") -> list[Chunk]:
        _require_text(text)
        bounds, pos = [], 0
        for m in _SENTENCE_END.finditer(text):
            if m.start() > pos:
                bounds.append((pos, m.start()))
            pos = m.end()
        if pos < len(text):
            bounds.append((pos, len(text)))
        sentences = [(s, e) for s, e in bounds if text[s:e].strip()]
        packed: list[tuple[int, int]] = []
        for s, e in sentences:
            if packed and e - packed[-1][0] <= self.size:
                packed[-1] = (packed[-1][0], e)
            else:
                packed.append((s, e))
        return [_span_chunk(text, doc_id, i, s, e) for i, (s, e) in enumerate(packed)]


CHUNKERS.add("longbench", LongBenchChunker)
CHUNKERS.add("words", WordChunker)
CHUNKERS.add("tokens", TokenChunker)
CHUNKERS.add("recursive", RecursiveChunker)
CHUNKERS.add("sentences", SentenceChunker)


def make_chunker(spec: Any, size: int, *, overlap: int = 0, **params: Any) -> Chunker:
    """Build a chunker from a name or ``{name, params}`` section with ``size`` and ``overlap``.

    ``params`` are defaults that the section's own params override.
    """
    spec = ComponentSpec.parse(spec, "chunker")
    spec = ComponentSpec(spec.name, {**params, **spec.params}, spec.label)
    chunker = CHUNKERS.build(spec, size=size, overlap=overlap)
    if not isinstance(chunker, Chunker):
        raise TypeError(f"chunker {spec.name!r} built {chunker!r}, which has no split(text, doc_id) method")
    return chunker


def passages_to_chunks(passages: Sequence[Passage], doc_prefix: str = "p") -> list[Chunk]:
    """One chunk per passage (the passage is the retrieval unit); titles kept, ids ``{prefix}{i}#0``.

    Ids follow the passage's position (``p.doc_id`` may repeat across passages),
    so they are unique and ``chunks[i]`` comes from ``passages[i]``.
    """
    chunks = []
    for i, p in enumerate(passages):
        doc_id = f"{doc_prefix}{i}"
        chunks.append(whole_chunk(doc_id, p.text, p.title))
    return chunks


__all__ = [
    "CHUNKERS",
    "LONGBENCH_SPLIT",
    "LongBenchChunker",
    "RecursiveChunker",
    "SentenceChunker",
    "TokenChunker",
    "WordChunker",
    "make_chunker",
    "passages_to_chunks",
]

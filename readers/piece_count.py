"""Exact token counts of a byte-level BPE tokenizer without encoding the text.

A dry run and RULER's generator count tokens of long texts many times (RULER's fit counts whole prompts of up
to tens of thousands of tokens 5-7 times per length, a dry run counts every prompt), and only the count is
read.  Encoding is most of that time, and most of encoding is the pre-tokenizer's regular expression with
offsets tracked.  A byte-level BPE tokenizer (GPT-2's, SmolLM2's, Llama 3's, Qwen's) cuts the text into
pre-tokens by one regular expression and never merges across them, so

    count(text) = sum of count(piece) over the text's pre-tokens,

and a text's pre-tokens repeat (words), so each distinct piece is encoded once.  This holds exactly only for
tokenizers of that form (no normalizer, the regular expression then byte-level mapping, BPE without dropout)
and texts without an added token in them; :meth:`PieceCounter.of` returns None for any other tokenizer, and
:meth:`PieceCounter.__call__` returns None for such a text, so the caller encodes it.  The pattern runs in the
``regex`` package (Unicode properties, as the tokenizer's Oniguruma); :class:`readers.sizing.JsonTokenizer`
checks the first counts against full encodes and stops using the counter if one differs.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# the pre-tokenizer of GPT-2 (``ByteLevel`` with ``use_regex``), as the tokenizers library defines it
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# the same pieces of an ASCII text, in the standard library's faster engine: letters and digits are ASCII's, and
# whitespace is spelled out (``re``'s \s also takes \x1c-\x1f, which Unicode's White_Space does not)
_WS = r"\t\n\v\f\r "
GPT2_ASCII = rf"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^{_WS}A-Za-z0-9]+|[{_WS}]+(?![^{_WS}])|[{_WS}]+"""


def _pattern(pre: dict[str, Any] | None) -> str | None:
    """The one regular expression that cuts pre-tokens, for the pre-tokenizers whose pieces are then only
    byte-mapped; None for any other."""
    if not pre:
        return None
    if pre.get("type") == "ByteLevel":
        return GPT2_PATTERN if pre.get("use_regex", True) and not pre.get("add_prefix_space") else None
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    if not steps or len(steps) != 2:
        return None
    split, byte_level = steps
    if (split.get("type") != "Split" or split.get("behavior") != "Isolated" or split.get("invert")
            or "Regex" not in (split.get("pattern") or {})):
        return None
    if byte_level.get("type") != "ByteLevel" or byte_level.get("use_regex") or byte_level.get("add_prefix_space"):
        return None
    return split["pattern"]["Regex"]


class _StandIns(dict):
    """``str.translate``'s table from each character beyond ASCII to an ASCII one of its class in the GPT-2
    pattern, which then cuts the text at the same places: a letter (``\\p{L}``) to "a", a number (``\\p{N}``) to
    "0", whitespace to a tab (whitespace, but not the space that may lead a piece), anything else to "#" (none of
    them is the apostrophe of the pattern's contractions).  Classes are the ``regex`` package's, as in
    :data:`GPT2_PATTERN`; each character is classed once, when first seen."""

    def __missing__(self, code: int) -> str:
        import regex

        char = chr(code)
        stand_in = "a" if regex.match(r"\p{L}", char) else "0" if regex.match(r"\p{N}", char) else \
            "\t" if regex.match(r"\s", char) else "#"
        self[code] = stand_in if code > 127 else char
        return self[code]


class PieceCounter:
    """Counts a text's tokens as the sum of its pre-tokens' counts, each distinct piece encoded once."""

    def __init__(self, rust: Any, pattern: str, added: list[str]) -> None:
        import regex

        self.rust = rust
        self.split = regex.compile(pattern).findall
        self.split_ascii = re.compile(GPT2_ASCII).findall if pattern == GPT2_PATTERN else self.split
        self.stand_ins = _StandIns() if pattern == GPT2_PATTERN else None
        self.added = added
        self.pieces: dict[str, int] = {}

    @classmethod
    def of(cls, rust: Any, path: str | Path) -> PieceCounter | None:
        """The counter of the tokenizer in ``path`` (``tokenizer.json``) loaded as ``rust``; None when the
        tokenizer is not of the form whose counts add up over pre-tokens, or ``regex`` is missing."""
        try:
            import regex  # noqa: F401  (a dependency of transformers; without it, texts are encoded)

            config = json.loads(Path(path).read_text(encoding="utf-8"))
        except (ImportError, OSError, ValueError):
            return None
        model = config.get("model") or {}
        pattern = _pattern(config.get("pre_tokenizer"))
        if config.get("normalizer") or model.get("type") != "BPE" or model.get("dropout") or pattern is None:
            return None
        added = [t["content"] for t in config.get("added_tokens") or () if t.get("content")]
        try:
            return cls(rust, pattern, added)
        except Exception:  # a pattern ``regex`` cannot compile: encode instead
            return None

    def pieces_of(self, text: str) -> list[str] | None:
        """The text's pre-tokens, which tile it; None where the tokenizer would cut it otherwise (an added token
        in it, or a pattern that leaves gaps, which the tokenizer would make pieces of too)."""
        if any(token in text for token in self.added):
            return None
        return self._tiled(text)

    def _tiled(self, text: str) -> list[str] | None:
        if text.isascii():
            pieces = self.split_ascii(text)
        elif self.stand_ins is not None:  # cut where its ASCII stand-in is cut: the same spans, the faster engine
            pieces, at = [], 0
            for length in map(len, self.split_ascii(text.translate(self.stand_ins))):
                pieces.append(text[at:at + length])
                at += length
        else:
            pieces = self.split(text)
        return pieces if sum(map(len, pieces)) == len(text) else None

    def _end_pieces(self, text: str, tokens: int, *, from_end: bool) -> list[str] | None:
        """The text's first (or last) pre-tokens that hold its first (last) ``tokens`` tokens, in text order;
        found by cutting only a window of the text into pieces, widened until it holds them.  A window's pieces
        are the text's except the one or two at the window's open edge (a run or a look-ahead cut short there),
        so those are dropped."""
        size = 8 * tokens + 256
        while True:
            if size >= len(text):
                window, edge = text, 0
            else:
                window, edge = (text[len(text) - size:], 2) if from_end else (text[:size], 2)
            pieces = self._tiled(window)
            if pieces is None:
                return None
            pieces = pieces[edge:] if from_end else pieces[:len(pieces) - edge]
            counts = self.counts_of(pieces)
            if sum(counts) >= tokens or not edge:
                got, i = 0, len(pieces) if from_end else 0
                while got < tokens and (i > 0 if from_end else i < len(pieces)):
                    i -= from_end
                    got += counts[i]
                    i += not from_end
                return pieces[i:] if from_end else pieces[:i]
            size *= 2

    def counts_of(self, pieces: list[str]) -> list[int]:
        """Each piece's token count, the new ones encoded in one batch (a call per piece costs more than its
        encoding)."""
        known = self.pieces
        new = [piece for piece in set(pieces) if piece not in known]
        if new:
            for piece, encoding in zip(new, self.rust.encode_batch(new, add_special_tokens=False)):
                known[piece] = len(encoding.ids)
        return list(map(known.__getitem__, pieces))

    def __call__(self, text: str) -> int | None:
        """The text's token count (no special tokens added), or None where it must be encoded whole."""
        pieces = self.pieces_of(text)
        return None if pieces is None else sum(self.counts_of(pieces))

    def end_ids(self, text: str, head: int, tail: int) -> tuple[list[int], list[int]] | None:
        """The first ``head`` and the last ``tail`` ids of the text's encoding, made by encoding only the pieces
        that hold them (no merge crosses a piece, so they are the whole encoding's); None as ``__call__``."""
        if any(token in text for token in self.added):
            return None
        first: list[int] = []
        last: list[int] = []
        for tokens, from_end in ((head, False), (tail, True)):
            if tokens <= 0:
                continue
            pieces = self._end_pieces(text, tokens, from_end=from_end)
            if pieces is None:
                return None
            # each piece encoded on its own, as it is counted: a prefix encoded whole could end in whitespace
            # that the pattern's look-ahead cuts differently at the end of a text than inside it
            ids = [i for encoding in self.rust.encode_batch(pieces, add_special_tokens=False) for i in encoding.ids]
            if from_end:
                last = ids[len(ids) - tokens:] if len(ids) > tokens else ids
            else:
                first = ids[:tokens]
        return first, last


__all__ = ["GPT2_ASCII", "GPT2_PATTERN", "PieceCounter"]

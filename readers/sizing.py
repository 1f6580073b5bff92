"""What a dry run needs of a reader without loading its model: how it counts tokens, its window, its row label.

A reader class may say this itself with a class method ``sizing(**params) -> ReaderSizing`` that loads no
weights (a tokenizer file at most); :func:`reader_sizing` asks it, and for a reader that does not say
(a plugin) falls back to LongBench words and the ``max_context`` its parameters or class give.  The
sizing says whether its tokenizer *is* the reader's own (``same_tokens``): only then are token counts
exact, and only then may a generator that sizes data in this reader's tokens (``reader:NAME``) use it
instead of building the reader.
"""
from __future__ import annotations

import inspect
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.registry import ComponentSpec
from core.text import count_pieces
from readers.base import Generation, GenerationRequest, Reader, Tokenizer
from readers.piece_count import PieceCounter
from readers.tokenizers import WordTokenizer

WORDS = "LongBench words"


@dataclass(frozen=True)
class ReaderSizing:
    """A reader as a dry run sees it: ``tokenizer`` counts (and cuts) as the reader will when ``same_tokens``;
    ``max_context`` is its window in those tokens (None: it never cuts); ``basis`` says how tokens are counted,
    in words for the user."""

    tokenizer: Tokenizer
    max_context: int | None
    label: str
    basis: str
    same_tokens: bool
    truncation: str = "middle"


class JsonTokenizer:
    """A Hugging Face fast tokenizer read from its ``tokenizer.json`` with the ``tokenizers`` library alone:
    the same ids as ``transformers``' fast tokenizer of that file (no special tokens added), in a fraction
    of the import time."""

    checks = 3  # counts by pre-tokens checked against the whole encode before they are trusted

    def __init__(self, path: str | os.PathLike) -> None:
        from tokenizers import Tokenizer as RustTokenizer

        self.path = str(path)
        self.rust = RustTokenizer.from_file(self.path)
        self.pieces = PieceCounter.of(self.rust, self.path)
        self.checked = 0

    def encode(self, text: str) -> list[int]:
        return self.rust.encode(text, add_special_tokens=False).ids

    def count(self, text: str) -> int:
        """``len(encode(text))``, summed over the text's pre-tokens where the tokenizer allows it
        (:class:`readers.piece_count.PieceCounter`): the first few are checked against the whole encode, and a
        difference switches the summing off for this tokenizer."""
        n = self.pieces(text) if self.pieces is not None else None
        if n is None:
            return len(self.encode(text))
        if self.checked < self.checks:
            self.checked += 1
            whole = len(self.encode(text))
            if whole != n:
                self.pieces = None
                return whole
        return n

    def end_ids(self, text: str, head: int, tail: int) -> tuple[list[int], list[int]] | None:
        """The first ``head`` and last ``tail`` ids of ``encode(text)`` without encoding the middle (what a middle
        truncation reads), once counts by pieces have passed their checks; the first few are checked against
        the whole encode too.  None: encode the text whole."""
        if self.pieces is None or self.checked < self.checks:
            return None
        ends = self.pieces.end_ids(text, head, tail)
        if ends is not None and self.checked < 2 * self.checks:
            self.checked += 1
            ids = self.encode(text)
            if ends != (ids[:head] if head > 0 else [], ids[len(ids) - tail:] if tail > 0 else []):
                self.pieces = None
                return None
        return ends

    def decode(self, ids: Sequence[int]) -> str:
        return self.rust.decode(list(ids), skip_special_tokens=False)

    def encode_all(self, texts: Sequence[str]) -> list[list[int]]:
        """``encode`` of many texts in one batch, which the library spreads over every core."""
        return [e.ids for e in self.rust.encode_batch(list(texts), add_special_tokens=False)]

    def __repr__(self) -> str:
        return f"JsonTokenizer({self.path!r})"


def tokenizer_file(name_or_path: str) -> Path | None:
    """``tokenizer.json`` of a local folder, or of a hub id already in the Hugging Face cache; None otherwise
    (nothing is downloaded)."""
    folder = Path(name_or_path).expanduser()
    if folder.is_dir():
        found = folder / "tokenizer.json"
        return found if found.is_file() else None
    return _hub_file(name_or_path, "tokenizer.json")


def hub_config(name_or_path: str, filename: str = "config.json") -> dict[str, Any]:
    """A model's ``config.json`` (or another JSON file of it) from its folder or the Hugging Face cache (``{}`` when
    not on this machine)."""
    folder = Path(name_or_path).expanduser()
    path = folder / filename if folder.is_dir() else _hub_file(name_or_path, filename)
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else {}
    except (OSError, ValueError):
        return {}


def _hub_file(repo: str, filename: str) -> Path | None:
    if repo.count("/") > 1 or not repo.strip():
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo, filename)
    except Exception:  # an id the hub library refuses: not in the cache, then
        return None
    return Path(found) if isinstance(found, str) else None


def from_tokenizer_file(name_or_path: str, *, max_context: int | None, label: str, truncation: str = "middle",
                        what: str | None = None) -> ReaderSizing:
    """The sizing of a reader whose tokenizer is a Hugging Face tokenizer (a folder or a hub id): exact when
    its ``tokenizer.json`` is on this machine, LongBench words (said so) otherwise."""
    found = tokenizer_file(name_or_path)
    if found is None:
        return ReaderSizing(WordTokenizer(), max_context, label, f"{WORDS} (the tokenizer of {name_or_path} is not "
                            "on this machine; its model's tokens differ)", False, truncation)
    return ReaderSizing(JsonTokenizer(found), max_context, label, f"{what or name_or_path}'s tokenizer", True,
                        truncation)


def reader_sizing(spec: Any) -> ReaderSizing:
    """The sizing of the reader a config section names, built without its model; see the module docstring."""
    from readers.registry import READERS

    section = ComponentSpec.parse(spec, "reader")
    target = READERS.get(section.name)
    own = getattr(target, "sizing", None)
    if callable(own):
        return own(**section.params)
    max_context = section.params.get("max_context")
    if max_context is None and isinstance(target, type):
        default = inspect.signature(target).parameters.get("max_context")
        max_context = default.default if default is not None and default.default is not default.empty else None
    if max_context is None:
        max_context = getattr(target, "max_context", None)
    return ReaderSizing(WordTokenizer(), max_context if isinstance(max_context, int) else None, section.name,
                        f"{WORDS} (reader {section.name!r} gives no tokenizer without loading its model)", False,
                        str(section.params.get("truncation", "middle")))


class DryRunReader(Reader):
    """The reader a compressor is built with in a dry run: it counts as the reader will and refuses to generate."""

    def __init__(self, sizing: ReaderSizing) -> None:
        self.tokenizer = sizing.tokenizer
        self.max_context = sizing.max_context or 10**9

    @property
    def identity(self) -> str:
        return "dry-run"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        raise RuntimeError("a dry run calls no model")  # a compressor that did is a bug of the dry run


_SAFE_CUT = re.compile(r"(?<=[^\W\d_]) (?=[^\W\d_])")  # a space between two letters
_SPLICE_INSET = 200  # characters inside each end of a spliced span
_SPLICE_CHECKS = 3  # pairs of cuts a checked splice is tried at
_WINDOW_CHECKS = 16  # short windows of a checked span the splice formula is tried on


def _spliced(count: Callable[[str], int], head: str, span: str, tail: str, first: int, last: int) -> int:
    """count(head + span + tail) from count(span), with ``span`` cut at ``first`` and ``last`` (safe cuts): the
    pieces that cross each cut are counted with their neighbour, so edge effects of the tokenizer cancel."""
    start, end = span[:first], span[last:]
    return count(head + start) + count(span) - count(start) - count(end) + count(end + tail)


class CountingTokenizer:
    """A reader's tokenizer that counts each distinct text once: contexts and chunks recur across grid points,
    and the compressors built here count with it too.  ``encode`` gives ids whose length is known at once and
    which are made only when read (a compressor that only counts never makes them; LongBench words are counted
    by a regular expression); :meth:`count_all` counts many texts in one batch of a fast tokenizer."""

    def __init__(self, sizing: ReaderSizing) -> None:
        self.tokenizer = sizing.tokenizer
        self.words = isinstance(sizing.tokenizer, WordTokenizer)
        self.batch = getattr(sizing.tokenizer, "encode_all", None)
        self.count = getattr(sizing.tokenizer, "count", None)  # a count without ids (JsonTokenizer's)
        self.end_ids = getattr(sizing.tokenizer, "end_ids", None)  # ... and a middle cut's ids without the middle
        self.counts: dict[str, int] = {}
        self.kept: dict[str, list[int]] = {}  # the contexts' ids (a truncation reads them at every budget)
        self.recent: dict[str, list[int]] = {}  # the ids last made, a few texts
        self.splices_ok, self.checked = True, 0  # see ``splice``

    def encode(self, text: str) -> Sequence[int]:
        if text not in self.counts and not self.words and self.count is None:
            return self.ids(text)
        return _Ids(self, text)

    def ids(self, text: str) -> list[int]:
        """The text's ids, made now (or kept from a moment ago)."""
        made = self.kept.get(text) or self.recent.get(text)
        if made is None:
            made = self.tokenizer.encode(text)
            self.counts[text] = len(made)
            if len(self.recent) >= 8:
                self.recent.pop(next(iter(self.recent)))
            self.recent[text] = made
        return made

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def end_slice(self, text: str, index: slice) -> list[int] | None:
        """``encode(text)[index]`` for a slice from either end, from the ends alone where the tokenizer can
        (``JsonTokenizer.end_ids``); None: read the whole ids."""
        if self.end_ids is None or index.step is not None or text in self.kept or text in self.recent:
            return None
        n = self(text)
        start, stop, _ = index.indices(n)
        if start == 0 and stop < n:
            ends = self.end_ids(text, stop, 0)
            return None if ends is None else ends[0]
        if stop == n and 0 < start:
            ends = self.end_ids(text, 0, n - start)
            return None if ends is None else ends[1]
        return None

    def __call__(self, text: str) -> int:
        n = self.counts.get(text)
        if n is None:
            if self.words:
                n = count_pieces(text)
            else:
                n = self.count(text) if self.count is not None else len(self.ids(text))
            self.counts[text] = n
        return n

    def splice(self, text: str, part: str) -> bool:
        """Count ``text`` from the count of ``part``, a long span it holds once (a prompt and the whole context
        in it), encoding only its two ends: the prompt of a whole context is otherwise tokenized twice, which
        was the largest share of a dry run.

        Exact where the tokenizer never merges across a space between two letters (byte-level BPE, the
        GPT-2 and Llama 3 pre-tokenizers, SentencePiece's metaspace): the span is cut at such a space a
        little inside each end, and count(text) = count(head + start) + count(part) - count(start) - count(end)
        + count(end + tail).  The first two splices of each tokenizer are checked against the whole count, each
        at three different pairs of cuts, and the same formula on 16 short windows of the span (a tokenizer that
        merges across spaces can hit the right total at a few pairs by chance, not at all of them); if any
        differs, splicing is off for that tokenizer and every text is counted whole."""
        if self.words or not self.splices_ok or part not in self.counts or len(part) < 4 * _SPLICE_INSET:
            return False
        at = text.find(part)
        if at < 0 or text.find(part, at + 1) >= 0:
            return False
        firsts = [m.start() for _, m in zip(range(_SPLICE_CHECKS), _SAFE_CUT.finditer(part, _SPLICE_INSET))]
        lasts: list[int] = []
        for begin in (len(part) - 2 * _SPLICE_INSET, len(part) // 2):  # a wider window where the end is a table
            lasts = [m.start() for m in _SAFE_CUT.finditer(part, begin, len(part) - _SPLICE_INSET)][::-1][:_SPLICE_CHECKS]
            if lasts:
                break
        if not firsts or not lasts or firsts[0] >= lasts[0]:
            return False
        head, tail = text[:at], text[at + len(part):]

        def total(first: int, last: int) -> int:
            start, end = part[:first], part[last:]
            self.count_all([head + start, start, end, end + tail])  # one batch; the formula reads the counts
            return _spliced(self, head, part, tail, first, last)

        if self.checked < 2:
            pairs = [(f, l) for f, l in zip(firsts, lasts) if f < l]
            if len(pairs) < _SPLICE_CHECKS:  # too few cuts to check here: count this text whole, check the next
                return False
            self.checked += 1
            whole = len(self.tokenizer.encode(text))
            if any(total(f, l) != whole for f, l in pairs) or not self._exact_in_windows(part):
                self.splices_ok = False
                return False
        spliced = total(firsts[0], lasts[0])
        self.counts[text] = spliced
        return True

    def _exact_in_windows(self, part: str) -> bool:
        """The splice formula tried on ``_WINDOW_CHECKS`` short windows spread over ``part``, each cut at two
        safe cuts between its own ragged edges: cheap (a few words each), and with word lengths varying from
        window to window, a tokenizer that merges across spaces misses the whole count in some of them, where
        three pairs of cuts on one text can all agree with it by chance."""
        cuts = [m.start() for m in _SAFE_CUT.finditer(part)]
        if len(cuts) < 4:
            return True
        count = lambda piece: len(self.tokenizer.encode(piece))  # noqa: E731 - short texts, never kept
        step = max(1, (len(cuts) - 3) // _WINDOW_CHECKS)
        for n, i in enumerate(range(0, len(cuts) - 3, step)):
            if n == _WINDOW_CHECKS:
                break
            f, last = cuts[i + 1], cuts[i + 2]
            a, s = max(0, cuts[i] - 1 - n % 7), cuts[i] + 1  # the window's head ends inside a word
            e, b = cuts[i + 3], min(len(part), cuts[i + 3] + 2 + n % 5)
            head, span, tail = part[a:s], part[s:e], part[e:b]
            if _spliced(count, head, span, tail, f - s, last - s) != count(part[a:b]):
                return False
        return True

    def count_all(self, texts: Iterable[str], *, keep: bool = False) -> None:
        """Count every text not counted yet, in one batch where the tokenizer takes one; ``keep`` their ids."""
        # LongBench words are counted, never made into ids; a tokenizer that reads a middle cut's ends alone makes
        # a context's ids only if something reads more than its ends
        keeps = keep and not self.words and self.end_ids is None
        new = [t for t in dict.fromkeys(texts) if t not in self.counts or (keeps and t not in self.kept)]
        if self.batch is None or len(new) < 2 or (self.count is not None and not keeps):
            for text in new:
                self(text)
                if keeps:  # a context counted before (by another task or point) is cut at every budget: keep it
                    self.kept[text] = self.ids(text)
            return
        for text, ids in zip(new, self.batch(new)):
            self.counts[text] = len(ids)
            if keeps:
                self.kept[text] = ids


class _Ids(Sequence[int]):
    """A text's token ids as ``CountingTokenizer.encode`` gives them: the length from the count, the ids made when read."""

    def __init__(self, counter: CountingTokenizer, text: str) -> None:
        self.counter, self.text = counter, text

    def __len__(self) -> int:
        return self.counter(self.text)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            ends = self.counter.end_slice(self.text, index)
            if ends is not None:
                return ends
        return self.counter.ids(self.text)[index]

    def __iter__(self) -> Any:
        return iter(self.counter.ids(self.text))


__all__ = ["CountingTokenizer", "DryRunReader", "JsonTokenizer", "ReaderSizing", "from_tokenizer_file",
           "hub_config", "reader_sizing", "tokenizer_file"]

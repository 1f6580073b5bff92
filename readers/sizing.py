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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.registry import ComponentSpec
from readers.base import Tokenizer
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

    def __init__(self, path: str | os.PathLike) -> None:
        from tokenizers import Tokenizer as RustTokenizer

        self.path = str(path)
        self.rust = RustTokenizer.from_file(self.path)

    def encode(self, text: str) -> list[int]:
        return self.rust.encode(text, add_special_tokens=False).ids

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


def hub_config(name_or_path: str) -> dict[str, Any]:
    """A model's ``config.json`` from its folder or the Hugging Face cache (``{}`` when not on this machine)."""
    folder = Path(name_or_path).expanduser()
    path = folder / "config.json" if folder.is_dir() else _hub_file(name_or_path, "config.json")
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


__all__ = ["JsonTokenizer", "ReaderSizing", "from_tokenizer_file", "hub_config", "reader_sizing", "tokenizer_file"]

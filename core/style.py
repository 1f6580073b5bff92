"""A plot colour fixed by a component's class, so a line looks the same in every run and figure, a plugin's as a
built-in's, whatever name a config gives it."""
from __future__ import annotations

import zlib
from collections.abc import Sequence


def fixed_colour(key: str, palette: Sequence[str]) -> str:
    """The colour of ``palette`` that ``key`` picks: the same in every run and process (unlike ``hash``)."""
    return palette[zlib.crc32(key.encode()) % len(palette)]


def class_colour(cls: type, palette: Sequence[str]) -> str:
    """The colour of ``palette`` that the class's import path picks."""
    return fixed_colour(f"{cls.__module__}:{cls.__qualname__}", palette)


__all__ = ["class_colour", "fixed_colour"]

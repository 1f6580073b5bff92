"""The one progress bar: tqdm on stderr, off when asked (``progress=False``) or when ``CTXCOMP_NO_PROGRESS`` is set.

Work that takes long inside one example (a summary per chunk, LLMLingua's passes) says how far it is through
:func:`progress_note`; a run shows the note beside its bar (:func:`reporting_progress`), elsewhere it goes nowhere.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def progress_enabled(enabled: bool = True) -> bool:
    """Whether a bar should show: the caller wants one and the environment does not forbid it."""
    return enabled and not os.environ.get("CTXCOMP_NO_PROGRESS")


def progress_bar(total: int | None, desc: str, *, unit: str = "ex", enabled: bool = True, leave: bool = True,
                 position: int | None = None) -> Any:
    """A tqdm bar on stderr (``disable`` when :func:`progress_enabled` says no); use it as a context manager."""
    from tqdm.auto import tqdm

    if _is_terminal(sys.stderr):
        return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=leave, position=position,
                    disable=not progress_enabled(enabled))
    return tqdm(total=total, desc=desc, unit=unit, file=PlainLines(sys.stderr), leave=leave, position=None,
                mininterval=PLAIN_EVERY_S, disable=not progress_enabled(enabled))


# How often a bar redrawn as plain lines (stderr redirected to a file or a pipe) writes one: a log, not a film.
PLAIN_EVERY_S = 30.0


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class PlainLines:
    """A stream for tqdm that is not a terminal: each redraw becomes one plain line, without the carriage
    returns and cursor escapes a terminal needs (they make a redirected log unreadable)."""

    _ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def write(self, text: str) -> None:
        for part in self._ESCAPES.sub("", text).replace("\r", "\n").split("\n"):
            if part.strip():
                self.stream.write(part.rstrip() + "\n")

    def flush(self) -> None:
        self.stream.flush()


# A corpus this large is indexed with its own bar (per batch of passages); the per-example contexts of a run are
# far smaller, so they never draw one.
LARGE_CORPUS = 5000


def corpus_progress(items: Iterable[T], total: int, desc: str, *,
                    passages: Callable[[T], int] = lambda item: 1) -> Iterator[T]:
    """``items`` with a passages bar when ``total`` is a large corpus, so indexing never looks hung.

    ``total`` counts passages; ``passages(item)`` says how many one item stands for (a batch: its length),
    so the bar counts passages whether it walks them one by one or a batch at a time."""
    with progress_bar(total, desc, unit="passage", enabled=total >= LARGE_CORPUS, leave=False) as bar:
        for item in items:
            yield item
            bar.update(passages(item))


Note = Callable[[str], None]
_notes: contextvars.ContextVar[Note | None] = contextvars.ContextVar("ctxcomp_progress_notes", default=None)


@contextlib.contextmanager
def reporting_progress(show: Note) -> Iterator[None]:
    """Within the block, :func:`progress_note` lines go to ``show`` (the run's bar)."""
    token = _notes.set(show)
    try:
        yield
    finally:
        _notes.reset(token)


def progress_note() -> Note:
    """Where to say how far a long step inside one example is; a no-op outside a run.  Take it in the calling
    thread: a reader's worker threads do not see the run's context."""
    return _notes.get() or _silent


def _silent(_message: str) -> None:
    return None


__all__ = ["LARGE_CORPUS", "PlainLines", "corpus_progress", "progress_bar", "progress_enabled", "progress_note",
           "reporting_progress"]

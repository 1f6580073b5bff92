"""The reader contract: a batch of requests in, the same number of generations out, in order."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import ClassVar, Literal, Protocol, Sequence, runtime_checkable

from core.errors import UserError

TruncationPolicy = Literal["middle", "left", "right", "none"]


class ReaderError(UserError):
    """A reader cannot start or cannot serve a request as configured (a missing model package,
    ``chat=True`` for a model without a chat template).  Remote faults are not this: they come
    back as a ``Generation`` with ``error`` set."""


@runtime_checkable
class Tokenizer(Protocol):
    """The two calls truncation and token accounting need."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt and its decoding settings; frozen so it can key a cache.

    ``chat=None`` lets the reader decide (chat template when the model has one);
    ``False`` forces completion style (LongBench few-shot and code tasks).
    ``system`` is sent as a system message to chat readers (L-Eval's released
    baselines do so) and put in front of the prompt otherwise.
    ``context_span`` is where the task's context sits in ``prompt``, as
    ``(start, end)`` character offsets (``None``: not marked).  The prompt
    builder sets it, so a reader that answers from the context alone (the
    extractive baseline) never reads the instructions, template or question
    as evidence; model readers ignore it.  It is not part of the generation
    cache key (``readers.cache``): the builder derives it from the prompt it
    writes, so the same prompt always carries the same span.  ``prompt_version``: the version of the task's own
    prompts (bumped when they change, so only that task's cached generations are asked again); it joins the
    cache key when above 1, so the keys of prompts never bumped stay as they were.
    """

    prompt: str
    max_new_tokens: int = 128
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    chat: bool | None = None
    system: str | None = None
    context_span: tuple[int, int] | None = None
    prompt_version: int = 1

    def flat_prompt(self) -> str:
        """The text a completion-style reader sees: the system text glued in front, as L-Eval's prompts read."""
        return f"{self.system}{self.prompt}" if self.system else self.prompt


@dataclass(frozen=True)
class Generation:
    """What a reader returns for one request.

    ``error`` is set (and ``text`` is empty) only when the reader gave up;
    callers must record such a generation as failed, never score it.
    """

    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    cached: bool = False
    truncated: bool = False
    cost_usd: float = 0.0
    error: str | None = None
    retries: int = 0
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None


ProgressHook = Callable[[int], None]
StepHook = Callable[[int, int], None]
ResultHook = Callable[[int, "Generation"], None]


class Reader(ABC):
    """Base class of every reader.

    Subclasses set ``max_context`` (tokens the model accepts, prompt plus
    generation) and ``tokenizer``, and implement ``generate``; truncation of
    over-long prompts uses the reader's own tokenizer (``readers.truncation``),
    so every reader truncates the same way.  A reader without a model
    tokenizer counts LongBench words (``readers.tokenizers.WordTokenizer``).

    Inside ``with reader.reporting(progress, step, result):`` a reader calls
    ``progress(n)`` as requests complete and, where it can, ``step(i, total)``
    per generated token, so a long batch never looks hung.  A reader whose
    calls cost money also calls ``result(i, generation)`` (``_finished``) as
    soon as request ``i`` of the batch returns, so the generation cache keeps
    it even if the process is killed before the batch ends.

    A reader class says what a dry run and the generation cache need of it in the class itself:
    ``backend_packages`` (the libraries that compute its output, whose versions go into its cache key,
    ``readers.cache.key_versions``) and, optionally, a class method ``sizing(**params) -> ReaderSizing`` that
    counts as it will without loading its model (``readers.sizing``; without one a dry run counts LongBench words).
    """

    backend_packages: ClassVar[tuple[str, ...]] = ()
    max_context: int = 4096
    truncation: TruncationPolicy = "middle"
    _tokenizer: Tokenizer | None = None
    _progress: ProgressHook | None = None
    _step: StepHook | None = None
    _result: ResultHook | None = None

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            from readers.tokenizers import WordTokenizer

            self._tokenizer = WordTokenizer()
        return self._tokenizer

    @tokenizer.setter
    def tokenizer(self, value: Tokenizer) -> None:
        self._tokenizer = value

    @property
    def label(self) -> str:
        """A short name for report rows (the config's ``label`` wins); plugins default to their identity."""
        return self.identity

    @property
    @abstractmethod
    def identity(self) -> str:
        """A string that names the model and everything that changes its output (for cache keys)."""

    @abstractmethod
    def generate(self, requests: Sequence[GenerationRequest]) -> list[Generation]:
        """Return one generation per request, in input order."""

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text))

    def prompt_overhead(self, request: GenerationRequest) -> int:
        """Tokens this reader adds around ``request.prompt`` inside its window (a chat template, a system message),
        so a caller can tell how much of the prompt itself the window cut; a reader that adds nothing says 0."""
        return 0

    @contextmanager
    def reporting(self, progress: ProgressHook | None, step: StepHook | None = None,
                  result: ResultHook | None = None) -> Iterator["Reader"]:
        """Report completed requests (token steps, each finished generation) to these hooks while the block runs."""
        previous = self._progress, self._step, self._result
        self._progress, self._step, self._result = progress, step, result
        try:
            yield self
        finally:
            self._progress, self._step, self._result = previous

    def _advance(self, n: int = 1) -> None:
        if self._progress is not None and n:
            self._progress(n)

    def _finished(self, index: int, generation: "Generation") -> "Generation":
        """Hand request ``index``'s generation to the result hook the moment it exists; returns it."""
        if self._result is not None:
            self._result(index, generation)
        return generation

    def close(self) -> None:
        """Release resources (HTTP pools, GPU memory)."""

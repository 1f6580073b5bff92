"""The compressor contract: an example-like input in, a ``CompressedContext`` out."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, Sequence

from core.checks import Nested
from core.errors import ExampleFailure
from indexes.types import Passage
from readers.base import Tokenizer


class Compressible(Protocol):
    """What a compressor needs from an example (``experiments.Example`` satisfies it)."""

    @property
    def id(self) -> str: ...

    @property
    def query(self) -> str: ...

    @property
    def context(self) -> str: ...

    @property
    def passages(self) -> Sequence[Passage]: ...

    @property
    def lang(self) -> str: ...


@dataclass(frozen=True)
class CompressedContext:
    """The context a reader will see, with everything needed to trace it.

    ``passages`` is non-empty when the compressor kept whole titled passages
    (multi-document tasks); prompts then format them as documents.
    ``trace`` holds compressor-specific intermediates (per-chunk summaries,
    retrieved ids before cut-off, ...), JSON-serialisable.
    """

    text: str
    kept_chunks: tuple[str, ...] = ()
    scores: tuple[float, ...] = ()
    passages: tuple[Passage, ...] = ()
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0
    trace: dict = field(default_factory=dict, compare=False)

    @property
    def ratio(self) -> float:
        """Compression ratio, tokens in / tokens out (1.0 for the full context)."""
        return self.tokens_in / self.tokens_out if self.tokens_out else float("inf")


class CompressionError(ExampleFailure):
    """A compressor could not produce a context for one example (a summarizer that failed or wrote
    nothing usable, a budget smaller than any chunk, an example without a query).

    The runner records the example as failed with this reason and never scores it; any other
    exception from a compressor is a bug and stops the run.
    """


class Compressor(ABC):
    """Base class; the runner calls only ``compress`` and never branches on the kind.

    ``tokenizer`` is injected by the runner (the reader's tokenizer) so tokens
    in/out and token budgets are in the reader's units; without one, LongBench
    words are counted.  ``nested`` declares constructor parameters that are
    component sections themselves, so the one parameter check can look inside.
    """

    nested: ClassVar[dict[str, Nested]] = {}

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        if tokenizer is None:
            from readers.tokenizers import WordTokenizer

            tokenizer = WordTokenizer()
        self.tokenizer = tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text))

    @property
    def identity(self) -> str:
        return type(self).__name__

    @property
    def label(self) -> str:
        """A short name for report rows (the config's ``label`` wins); plugins default to their identity."""
        return self.identity

    def encoded_texts(self) -> int:
        """Texts this compressor's retrievers sent to an encoder so far (0 when it embeds nothing)."""
        return 0

    @abstractmethod
    def compress(self, item: Compressible) -> CompressedContext: ...

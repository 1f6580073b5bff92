"""The compressor contract: an example-like input in, a ``CompressedContext`` out."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, Sequence

from core.checks import Nested
from core.errors import ExampleFailure, ParamError
from core.style import class_colour
from indexes.types import Passage
from readers.base import Generation, Tokenizer, TruncationPolicy
from readers.truncation import truncate_text

# How a compressor takes a token budget (``Compressor.budget_support``): not at all; always within it (the
# runner treats any overshoot as a bug); or aiming at it, the overshoot recorded per example (llmlingua).
BudgetSupport = Literal["none", "guaranteed", "best_effort"]


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
class ModelWork:
    """A compressor's own model work for one example: what it cost beside the reader's reading.

    ``calls`` are model calls made, ``cache_hits`` those a cache served; ``tokens_in`` / ``tokens_out`` what
    the model read and wrote (a summarizer's prompts and summaries; the llmlingua LM's tokens read);
    ``model_s`` the model's time with every cache-served result counted at the time it took when it was
    made, and ``served_s`` the time this run spent fetching those results (so the runner can replace the
    one by the other: a cache hit never reports its own near-zero time as the model's).  Embeddings:
    ``embed_calls`` encoder calls, ``embed_texts`` texts encoded, ``embed_hits`` texts the cache served.
    """

    calls: int = 0
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    model_s: float = 0.0
    cached_model_s: float = 0.0
    served_s: float = 0.0
    embed_calls: int = 0
    embed_texts: int = 0
    embed_hits: int = 0

    @classmethod
    def of_generations(cls, generations: Sequence[Generation]) -> "ModelWork":
        """The work behind a batch of generations; a cached one counts the latency recorded when it was made."""
        cached = [g for g in generations if g.cached]
        recorded = sum(float(g.meta.get("cached_latency_s", 0.0)) for g in cached)
        return cls(
            calls=len(generations) - len(cached), cache_hits=len(cached),
            tokens_in=sum(g.tokens_in for g in generations), tokens_out=sum(g.tokens_out for g in generations),
            model_s=sum(g.latency_s for g in generations if not g.cached) + recorded, cached_model_s=recorded,
            served_s=sum(g.latency_s for g in cached),
        )

    @classmethod
    def of_encoder(cls, counts: Mapping[str, float]) -> "ModelWork":
        """The embedding work a retriever reports (``Retriever.encoder_work``, or the difference of two)."""
        return cls(embed_calls=int(counts.get("calls", 0)), embed_texts=int(counts.get("texts", 0)),
                   embed_hits=int(counts.get("hits", 0)),
                   model_s=float(counts.get("encode_s", 0.0)) + float(counts.get("cached_s", 0.0)),
                   cached_model_s=float(counts.get("cached_s", 0.0)), served_s=float(counts.get("lookup_s", 0.0)))


@dataclass(frozen=True)
class CompressedContext:
    """The context a reader will see, with everything needed to trace it.

    ``passages`` is non-empty when the compressor kept whole titled passages
    (multi-document tasks); prompts then format them as documents.
    ``trace`` holds compressor-specific intermediates (per-chunk summaries,
    retrieved ids before cut-off, ...), JSON-serialisable.  ``budget`` is the
    token budget the compressor was given (None: none); ``work`` its own model work.

    ``kept_spans`` is what the compressor kept, said by the compressor itself so that nothing downstream
    (the view's highlighting, the report) needs to know its kind: sorted, non-overlapping ``[start, end)``
    character spans of the example's original ``context``.  ``None`` says the text is not a selection of the
    context (a summary, a rewrite), so there is nothing to highlight; ``()`` says nothing was kept.
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
    budget: int | None = None
    work: ModelWork = field(default_factory=ModelWork, compare=False)
    kept_spans: tuple[tuple[int, int], ...] | None = field(default=None, compare=False)

    @property
    def ratio(self) -> float:
        """Compression ratio, tokens in / tokens out (1.0 for the full context)."""
        return self.tokens_in / self.tokens_out if self.tokens_out else float("inf")

    @property
    def over_budget(self) -> bool:
        """Whether the kept context is longer than the budget it was given (never, for a guaranteed budget)."""
        return self.budget is not None and self.tokens_out > self.budget


@dataclass(frozen=True)
class Sizing:
    """What a dry run may know of one example's compression without calling a model (``Compressor.sizing``).

    ``tokens``: the context tokens the compressor keeps of the example, exactly (``exact``) or at most;
    ``why``: how a bound was had, for the dry run's basis column; ``model_calls``: a key per distinct model
    call the compressor would make (a summarizer's chunk and focus), which the dry run counts once across a grid.
    """

    tokens: int
    exact: bool
    why: str = ""
    model_calls: frozenset[Any] = frozenset()


# the plots' colours for compressors whose class names none, picked by the class's import path so that a line
# keeps its colour in every run and figure (matplotlib's tab10 without the ones built-ins use)
PALETTE = ("#17becf", "#bcbd22", "#e377c2", "#8c564b", "#ff7f0e", "#9edae5", "#aec7e8", "#98df8a")


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

    The budget hook: ``budget_support`` says whether ``compress(item, budget)``
    takes a token budget and whether it keeps within it (``BudgetSupport``);
    ``replaced_by_budget`` names the constructor parameters that set the size
    themselves, which a budget axis replaces (giving both is an error).  The
    runner calls ``check_budget`` for every grid point before anything runs,
    and passes ``budget`` only to a compressor that takes one.

    ``calls_model``: False for a compressor whose own code calls no model (the
    sections it nests, a retriever, still may), so a dry run may run it to
    count its prompts exactly; a compressor that does not say is taken to call one.
    ``sizing`` tells a dry run what it keeps of an example without running a model.

    Style, read by the report's plots from the class (never from a name): ``color`` (None: a palette colour
    fixed by the class's import path, ``style``) and ``marker`` (matplotlib's).  ``reference``: the arm every
    other is compared with (the full context); a plugin sets it only for a baseline of that kind.
    """

    nested: ClassVar[dict[str, Nested]] = {}
    budget_support: ClassVar[BudgetSupport] = "none"
    calls_model: ClassVar[bool] = True
    replaced_by_budget: ClassVar[tuple[str, ...]] = ()
    color: ClassVar[str | None] = None
    marker: ClassVar[str] = "P"
    reference: ClassVar[bool] = False

    @classmethod
    def style(cls) -> tuple[str, str]:
        """(colour, marker) of this compressor's lines in every plot: its own ``color``, else a palette colour
        fixed by the class's import path (the same in every run, whatever the config calls it)."""
        return cls.color or class_colour(cls, PALETTE), cls.marker

    @classmethod
    def resolved_params(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` with the constructor's defaults filled in, as the report reads a point's settings (which
        retriever, which order) without knowing the compressor: a subclass whose default is decided inside
        ``__init__`` (``None`` meaning something) says so here."""
        import inspect

        defaults = {name: p.default for name, p in inspect.signature(cls).parameters.items()
                    if p.default is not p.empty and name not in ("tokenizer", "reader")}
        return {**defaults, **params}

    @classmethod
    def check_budget(cls, params: Mapping[str, Any], budgeted: bool, *, what: str = "") -> None:
        """Refuse a budget axis for a compressor that takes none, or beside a parameter that sets the size;
        subclasses add what they need without one (``truncate`` needs ``max_tokens``)."""
        what = what or f"compressor {cls.__name__}"
        if not budgeted:
            return
        if cls.budget_support == "none":
            raise ParamError(f"{what} takes no token budget (budget support: none); remove its budget/ratio, "
                             "or leave it out of the budget axis with `budget: []`")
        clash = [name for name in cls.replaced_by_budget if params.get(name) is not None]
        if clash:
            raise ParamError(f"{what}: {', '.join(clash)} and the budget axis both set the size; give one of them")

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        if tokenizer is None:
            from readers.tokenizers import WordTokenizer

            tokenizer = WordTokenizer()
        self.tokenizer = tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text))

    def fit(self, text: str, budget: int, policy: TruncationPolicy = "middle") -> tuple[str, bool]:
        """``text`` cut by the one truncation until it counts at most ``budget`` tokens; (text, whether cut).

        Cutting to M tokens and decoding can re-encode to a few more than M (a character split between
        tokens, merges across the join), so the cut is repeated a little shorter until the count fits.
        """
        limit = budget
        text_out, cut = truncate_text(text, self.tokenizer, limit, policy)
        while cut and limit > 0 and self.count_tokens(text_out) > budget:
            limit -= max(1, self.count_tokens(text_out) - budget)
            text_out, _ = truncate_text(text, self.tokenizer, max(limit, 0), policy)
        return text_out, cut

    @property
    def identity(self) -> str:
        return type(self).__name__

    def applied_identity(self, budget: int | None) -> str:
        """The identity with the settings one call applied (what ``ctxcomp show`` prints): under a budget axis
        the budget replaces ``replaced_by_budget``; a compressor whose defaults a budget leaves unapplied says
        so by overriding this."""
        return self.identity if budget is None else f"{self.identity} at budget={budget}"

    @property
    def label(self) -> str:
        """A short name for report rows (the config's ``label`` wins); plugins default to their identity."""
        return self.identity

    @property
    def line_label(self) -> str:
        """The name of this compressor's line on a budget axis: its label without the settings a budget
        replaces (the runner appends the budget, ``truncate(middle) @512``)."""
        return self.label

    def sizing(self, item: Compressible, budget: int | None = None) -> Sizing:
        """What a dry run may say of this example's kept context without calling a model: by default an honest
        upper bound (the whole context, within a budget the compressor guarantees).  A compressor that can
        count exactly without its model (what it keeps is decided by sizes alone) overrides this with
        ``exact=True``; the dry run then reports its rows as exact."""
        context = self.count_tokens(item.context)
        if budget is not None and self.budget_support == "guaranteed":
            return Sizing(min(budget, context), False, "at most the whole context, within its budget")
        return Sizing(context, False, "at most the whole context")

    def warm_up(self) -> None:
        """Load what this compressor loads lazily (a model); the runner calls it before timing ``compress``,
        so the first example's time does not count the loading."""

    def encoded_texts(self) -> int:
        """Texts this compressor's retrievers sent to an encoder so far (0 when it embeds nothing)."""
        return 0

    @abstractmethod
    def compress(self, item: Compressible, budget: int | None = None) -> CompressedContext:
        """The context the reader will see; ``budget`` (reader tokens) is given only to a compressor whose
        ``budget_support`` is not ``"none"``, and the result then carries it (``CompressedContext.budget``)."""

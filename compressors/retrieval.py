"""Retrieval-based compression: keep the top-N chunks of the context for the query.

The LongBench protocol (paper section 4, Table 4): split each example's
context into chunks of M words, index that example's chunks alone, keep the
top-N chunks for the example's question and concatenate them.  The paper's
grid is M x N in {200 x 7, 500 x 3}.

Known flaws of the released scripts are fixed by default; ``longbench_compat``
reproduces them on purpose (for parity runs): score order, no separator
between chunks, the exact splitter quirks, and BM25 over raw strings
(character tokens).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar, Literal

from pydantic import PositiveInt

from compressors.base import (
    BudgetSupport,
    CompressedContext,
    Compressible,
    CompressionError,
    Compressor,
    ModelWork,
    Sizing,
)
from compressors.spans import Span, normalized, passage_offsets
from core.checks import Nested
from core.errors import ParamError
from core.registry import ComponentSpec, SpecLike
from indexes.chunking import CHUNKERS, make_chunker
from indexes.types import Chunk, Passage, render_passage, whole_chunk
from readers.base import Tokenizer
from retrievers.base import Hit, Retriever
from retrievers.contract import Checked
from retrievers.registry import RETRIEVERS, make_retriever
from retrievers.sizing import LongestFirst

Order = Literal["score", "document"]
Unit = Literal["chunk", "passage", "auto"]
DEFAULT_TOP_N = 3
DEFAULT_CHUNK_SIZE = 500  # words, LongBench's BM25 setting
DEFAULT_SEPARATOR = "\n\n"


def split_context(chunker: Any, item: Compressible) -> list[Chunk]:
    """The example's context split by ``chunker``; an empty context or split fails the example."""
    if not item.context or not item.context.strip():
        raise CompressionError(f"example {item.id!r}: context is empty or whitespace; nothing to compress")
    chunks = chunker.split(item.context, doc_id=str(item.id))
    if not chunks:
        raise CompressionError(f"example {item.id!r}: the chunker produced no chunks from a non-empty context")
    return chunks


class RetrievalCompressor(Compressor):
    """Keep the chunks (or titled passages) of the context that best match the query.

    Parameters
    ----------
    retriever: a retriever name or ``{name, params}`` section; built once,
        re-indexed per example (each example's chunks form their own corpus).
    chunker, chunk_size: how the context is split; ``chunk_size`` is in the
        chunker's units (words for ``longbench``, characters for Chinese;
        default 500).  Titled passages are units of their own (``unit``).
    top_n: keep this many chunks (default 3 when there is no budget).
    token_budget: instead (or as well), keep chunks in rank order while the
        joined text stays within this many ``count_tokens`` units; a chunk
        that would overflow ends the selection (the ranking is never skipped over).
        A budget axis does the same with the budget of each grid point
        (``top_n`` then caps the count only when given).
    order: ``score`` (best first, as LongBench) or ``document`` (original order).
    separator: placed between kept chunks.
    unit: ``passage`` treats each titled passage of a multi-document item as
        one unit; ``auto`` does so when the item has passages; ``chunk``
        always splits the rendered context.
    longbench_compat: reproduce the released scripts (see module docstring).
    """

    nested = {"retriever": Nested(RETRIEVERS), "chunker": Nested(CHUNKERS, injected=("size", "overlap"))}
    budget_support: ClassVar[BudgetSupport] = "guaranteed"
    replaced_by_budget: ClassVar[tuple[str, ...]] = ("token_budget",)
    calls_model = False  # its retriever decides
    color, marker = "#1f77b4", "o"

    @classmethod
    def resolved_params(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        """The settings an instance uses, for whoever reads a point without building it (the report, a dry run),
        and the one place ``__init__`` takes them from: an unset ``order`` is score order, an unset ``separator``
        :data:`DEFAULT_SEPARATOR` (none in ``longbench_compat``), an unset ``chunk_size``
        :data:`DEFAULT_CHUNK_SIZE`, and an unset ``top_n`` :data:`DEFAULT_TOP_N` unless a token budget sizes the
        selection."""
        resolved = super().resolved_params(params)
        unset = {"order": "score", "separator": "" if resolved.get("longbench_compat") else DEFAULT_SEPARATOR,
                 "chunk_size": DEFAULT_CHUNK_SIZE, "top_n": DEFAULT_TOP_N if resolved.get("token_budget") is None else None}
        return {**resolved, **{name: value for name, value in unset.items() if resolved.get(name) is None}}

    def __init__(
        self,
        retriever: SpecLike = "bm25",
        chunker: SpecLike = "longbench",
        chunk_size: PositiveInt | None = None,
        top_n: PositiveInt | None = None,
        token_budget: PositiveInt | None = None,
        order: Order | None = None,
        separator: str | None = None,
        unit: Unit = "auto",
        longbench_compat: bool = False,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        super().__init__(tokenizer)
        if longbench_compat:
            if order not in (None, "score") or separator not in (None, ""):
                raise ParamError(
                    "retrieval: longbench_compat fixes order='score' and separator=''; "
                    f"got order={order!r}, separator={separator!r}"
                )
        settings = self.resolved_params({"chunk_size": chunk_size, "top_n": top_n, "token_budget": token_budget,
                                         "order": order, "separator": separator, "longbench_compat": longbench_compat})
        self.top_n: int | None = settings["top_n"]
        self.top_n_given = top_n
        self.token_budget = token_budget
        self.order: str = settings["order"]
        self.separator: str = settings["separator"]
        self.unit = unit
        self.chunk_size_given = chunk_size is not None
        self.chunk_size: int = settings["chunk_size"]
        self.longbench_compat = longbench_compat

        self._chunker_spec = ComponentSpec.parse(chunker, "retrieval: chunker")
        compat_chunker = {"compat": True} if longbench_compat and self._chunker_spec.name == "longbench" else {}
        self._chunker = make_chunker(self._chunker_spec, self.chunk_size, **compat_chunker)

        retriever_spec = ComponentSpec.parse(retriever, "retrieval: retriever")
        compat_retriever = {"longbench_compat": True} if longbench_compat and retriever_spec.name == "bm25" else {}
        self.retriever: Retriever = make_retriever(ComponentSpec(
            retriever_spec.name, {**compat_retriever, **retriever_spec.params}, retriever_spec.label))

    @property
    def identity(self) -> str:
        limit = f"top_n={self.top_n}" if self.token_budget is None else f"top_n={self.top_n},budget={self.token_budget}"
        return self._identity(limit)

    def applied_identity(self, budget: int | None) -> str:
        """Under a budget axis the default ``top_n`` is not applied (only a given one caps the count)."""
        if budget is None:
            return self.identity
        return self._identity((f"top_n={self.top_n_given}," if self.top_n_given is not None else "") + f"budget={budget}")

    def _identity(self, limit: str) -> str:
        compat = ",longbench_compat" if self.longbench_compat else ""
        return (
            f"retrieval({self.retriever.identity},{self._chunker_spec.name}:{self.chunk_size},{limit},"
            f"order={self.order},unit={self.unit},sep={self.separator!r}{compat})"
        )

    def encoded_texts(self) -> int:
        return self.retriever.encoded_texts()

    def warm_up(self) -> None:
        self.retriever.warm_up()

    @property
    def label(self) -> str:
        return self._label(self.top_n, self.token_budget)

    @property
    def line_label(self) -> str:
        return self._label(self.top_n_given, None)

    def _label(self, top_n: int | None, token_budget: int | None) -> str:
        retriever = getattr(self.retriever, "label", None) or self.retriever.identity
        size = f"{self.chunk_size}x" if self.chunk_size_given else "top"
        # no top_n: as many chunks as the budget holds, said in words ("100x any"): a `*` would read as a report's
        # significance mark
        amount = f"{size}{top_n}" if top_n is not None else f"{size} any"
        if token_budget is not None:
            amount += f", <={token_budget} tokens"
        compat = ", longbench_compat" if self.longbench_compat else ""
        return f"retrieval({retriever}, {amount}, order={self.order}{compat})"

    # -- units ----------------------------------------------------------------
    def _units(self, item: Compressible) -> tuple[list[Chunk], dict[str, Passage]]:
        """The retrieval units of ``item`` and, for passage units, the passage behind each chunk id."""
        passages = tuple(item.passages or ())
        use_passages = self.unit == "passage" or (self.unit == "auto" and bool(passages))
        if not use_passages:
            return split_context(self._chunker, item), {}
        if not passages:
            raise CompressionError(f"example {item.id!r}: unit='passage' but the example has no passages")
        if not any(p.text.strip() for p in passages):
            raise CompressionError(f"example {item.id!r}: every passage is empty; nothing to compress")
        return self._passage_chunks(passages)

    def _passage_chunks(self, passages: tuple[Passage, ...]) -> tuple[list[Chunk], dict[str, Passage]]:
        """Each titled passage split by the chunker (a passage within ``chunk_size`` stays whole); every
        piece keeps its passage's title, so retrievers can index title and text, and readers see both."""
        chunks: list[Chunk] = []
        passage_of: dict[str, Passage] = {}
        for i, p in enumerate(passages):
            doc_id = f"p{i}"
            parts = self._chunker.split(p.text, doc_id=doc_id) if p.text.strip() else []
            if len(parts) <= 1:  # the common case, made directly (a dry run makes tens of thousands)
                pieces = [(whole_chunk(doc_id, p.text, p.title), p)]
            else:
                pieces = [(replace(part, title=p.title), replace(p, text=part.text)) for part in parts]
            for chunk, passage in pieces:
                chunks.append(chunk)
                passage_of[chunk.chunk_id] = passage
        return chunks, passage_of

    def _render(self, chunk: Chunk, passage: Passage | None) -> str:
        """A passage unit keeps its title on the line above its text; a chunk is its text.

        Chunk edges are stripped (LongBench chunks end in the delimiter's trailing
        whitespace) so the separator alone sits between chunks; compat mode keeps
        them verbatim, as the released BM25 script did.
        """
        if passage is not None:
            return render_passage(passage)
        return chunk.text if self.longbench_compat else chunk.text.strip()

    @staticmethod
    def _unit_spans(item: Compressible, chunks: list[Chunk], passage_of: dict[str, Passage]) -> dict[str, Span]:
        """Each unit's span of the context: a chunk's own offsets, a passage piece's offset in its passage moved
        by where that passage sits in the context (a passage the context does not hold has none)."""
        if not passage_of:
            return {c.chunk_id: (c.start, c.end) for c in chunks}
        offsets = passage_offsets(item.context, tuple(item.passages))
        at = {f"p{i}": offset for i, offset in enumerate(offsets) if offset is not None}
        return {c.chunk_id: (at[c.doc_id] + c.start, at[c.doc_id] + c.end) for c in chunks if c.doc_id in at}

    def sizing(self, item: Compressible, budget: int | None = None) -> Sizing:
        """A dry run's bound: within a budget, the budget; else the ``top_n`` longest units, the most any
        retriever could rank first (the retriever itself is not asked: it may call a model)."""
        if budget is not None or self.token_budget is not None:
            return super().sizing(item, budget if budget is not None else self.token_budget)
        chunks, passage_of = self._units(item)
        ranked = LongestFirst(self.count_tokens).index(chunks).search([item.query or "?"], k=len(chunks))[0]
        kept = self._compress_ranked(item, chunks, ranked, passage_of)
        return Sizing(kept.tokens_out, False, "the longest units its retriever could rank first")

    # -- selection ------------------------------------------------------------
    def _select(self, ranked: list[Hit], passage_of: dict[str, Passage], top_n: int | None,
                budget: int | None) -> list[Hit]:
        """The kept hits, in rank order: a fixed N, or a prefix of the ranking that fits the budget."""
        limit = top_n if top_n is not None else len(ranked)
        if budget is None:
            return ranked[:limit]
        kept: list[Hit] = []
        texts: list[str] = []
        for hit in ranked[:limit]:
            candidate = texts + [self._render(hit.chunk, passage_of.get(hit.chunk.chunk_id))]
            if self.count_tokens(self.separator.join(candidate)) > budget:
                break
            kept.append(hit)
            texts = candidate
        return kept

    def _compress_ranked(self, item: Compressible, chunks: list[Chunk], ranked: list[Hit], passage_of: dict[str, Passage],
                         budget: int | None = None, work: ModelWork | None = None) -> CompressedContext:
        limit = self.token_budget if budget is None else budget
        kept = self._select(ranked, passage_of, self.top_n if budget is None else self.top_n_given, limit)
        if ranked and not kept:
            best = self.count_tokens(self._render(ranked[0].chunk, passage_of.get(ranked[0].chunk.chunk_id)))
            name = "token_budget" if budget is None else "budget"
            raise CompressionError(
                f"example {item.id!r}: {name}={limit} is smaller than the best chunk ({best} tokens); "
                f"raise {name} or lower chunk_size"
            )
        if self.order == "document":
            position = {c.chunk_id: i for i, c in enumerate(chunks)}
            kept = sorted(kept, key=lambda h: position[h.chunk.chunk_id])
        kept_passages = tuple(passage_of[h.chunk.chunk_id] for h in kept) if passage_of else ()
        text = self.separator.join(self._render(h.chunk, passage_of.get(h.chunk.chunk_id)) for h in kept)
        spans = {unit: [*span] for unit, span in self._unit_spans(item, chunks, passage_of).items()}
        return CompressedContext(
            text=text,
            kept_chunks=tuple(h.chunk.chunk_id for h in kept),
            scores=tuple(float(h.score) for h in kept),
            passages=kept_passages,
            tokens_in=self.count_tokens(item.context),
            tokens_out=self.count_tokens(text),
            trace={
                "ranking": [[h.chunk.chunk_id, round(float(h.score), 6)] for h in ranked],
                "unit_spans": spans,  # each ranked unit's span of the context: the view marks answer-bearing rows
                "n_chunks": len(chunks),
                "chunker": "passages" if passage_of else f"{self._chunker_spec.name}:{self.chunk_size}",
                "retriever": self.retriever.identity,
                "order": self.order,
            },
            budget=budget,
            work=work or ModelWork(),
            kept_spans=normalized(tuple(spans[h.chunk.chunk_id]) for h in kept if h.chunk.chunk_id in spans),
        )

    def compress(self, item: Compressible, budget: int | None = None) -> CompressedContext:
        if not item.query or not item.query.strip():
            raise CompressionError(
                f"example {item.id!r}: empty query; retrieval needs one (use 'summarize' or 'truncate' for query-less tasks)"
            )
        chunks, passage_of = self._units(item)
        before = self.retriever.encoder_work()
        ranked = Checked.index(self.retriever, chunks).search([item.query], k=len(chunks))[0]
        after = self.retriever.encoder_work()
        work = ModelWork.of_encoder({key: after[key] - before[key] for key in after})
        return self._compress_ranked(item, chunks, ranked, passage_of, budget, work)

"""Keep the first k passages of a multi-document item, in the order they come.

The open-domain protocol hands each question the ranking of a corpus-wide
retriever as its passages; this compressor cuts that ranking at k, so one
grid over k gives the reader-accuracy-vs-k curve with every other setting
fixed.  The trace keeps the whole ranking with its scores.  On a budget
axis it keeps the ranked passages while they fit the budget (``k``, when
given, still caps them).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import PositiveInt

from compressors.base import BudgetSupport, CompressedContext, Compressible, CompressionError, Compressor
from compressors.spans import normalized, passage_offsets
from core.errors import ParamError
from indexes.types import render_passage
from readers.base import Tokenizer


class TopKPassages(Compressor):
    """The first ``k`` passages (all of them when there are fewer), rendered as title line + text."""

    budget_support: ClassVar[BudgetSupport] = "guaranteed"
    calls_model = False
    color, marker = "#9467bd", "v"

    def __init__(self, k: PositiveInt | None = None, separator: str = "\n\n", tokenizer: Tokenizer | None = None) -> None:
        super().__init__(tokenizer)
        self.k, self.separator = k, separator

    @classmethod
    def check_budget(cls, params: Mapping[str, Any], budgeted: bool, *, what: str = "") -> None:
        super().check_budget(params, budgeted, what=what)
        if not budgeted and params.get("k") is None:
            raise ParamError(f"{what or 'compressor top_k'}: give k, or put it on a budget axis (`budget:` or `ratio:`)")

    @property
    def identity(self) -> str:
        return f"top_k(k={self.k},sep={self.separator!r})"

    @property
    def label(self) -> str:
        return "top-k" if self.k is None else f"top-{self.k}"

    def compress(self, item: Compressible, budget: int | None = None) -> CompressedContext:
        passages = tuple(item.passages)
        if not passages:
            raise CompressionError(f"example {item.id!r}: top_k needs an item with passages (a ranked list)")
        if self.k is None and budget is None:
            raise ParamError("top_k: give k, or a budget")
        kept = passages[: self.k]
        if budget is not None:
            fitting = 0
            while fitting < len(kept) and self.count_tokens(
                    self.separator.join(render_passage(p) for p in kept[: fitting + 1])) <= budget:
                fitting += 1
            if not fitting:
                raise CompressionError(f"example {item.id!r}: budget={budget} is smaller than the first passage "
                                       f"({self.count_tokens(render_passage(kept[0]))} tokens)")
            kept = kept[:fitting]
        text = self.separator.join(render_passage(p) for p in kept)
        span: dict[int, tuple[int, int]] = {}  # by passage object: doc ids may repeat
        unit_spans: dict[str, list[int]] = {}
        for p, at in zip(passages, passage_offsets(item.context, passages)):
            if at is not None:
                span[id(p)] = (at, at + len(p.text))
                unit_spans.setdefault(p.doc_id, [at, at + len(p.text)])
        return CompressedContext(
            text=text,
            kept_chunks=tuple(p.doc_id for p in kept),
            scores=tuple(p.score if p.score is not None else float("nan") for p in kept),
            passages=kept,
            tokens_in=self.count_tokens(item.context),
            tokens_out=self.count_tokens(text),
            # each ranked passage's span of the context, so the view marks answer-bearing rows
            trace={"k": self.k, "ranking": [[p.doc_id, p.score] for p in passages],
                   "unit_spans": unit_spans},
            budget=budget,
            kept_spans=normalized(span[id(p)] for p in kept if id(p) in span),
        )

"""Truncation to a token budget: the simplest compressor and the usual baseline.

It uses the project's one truncation (``readers.truncation``): LongBench's
middle rule (keep ``M // 2`` tokens at each end), or keep the start / the end.
The budget is in the reader's tokens (the runner injects the reader's
tokenizer); without one, in LongBench words (every CJK character a word), and
then the kept text is a verbatim prefix and suffix of the context.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import PositiveInt

from compressors.base import BudgetSupport, CompressedContext, Compressible, Compressor
from compressors.spans import edge_spans
from core.errors import ParamError
from readers.base import Tokenizer
from readers.truncation import truncate_text

Policy = Literal["middle", "left", "right"]


class TruncateCompressor(Compressor):
    """Keep at most ``max_tokens`` of the context (or the budget it is given), cutting the side ``policy`` names.

    ``policy`` names the side that is cut, as Hugging Face's ``truncation_side``
    does: ``middle`` keeps both ends (LongBench), ``left`` keeps the end,
    ``right`` keeps the start.  Titled passages of multi-document items are not
    kept as units (``passages`` is empty).  On a budget axis the budget takes
    the place of ``max_tokens``, and the kept text never counts more tokens.
    """

    budget_support: ClassVar[BudgetSupport] = "guaranteed"
    replaced_by_budget: ClassVar[tuple[str, ...]] = ("max_tokens",)
    calls_model = False
    color, marker = "#7f7f7f", "x"

    def __init__(self, max_tokens: PositiveInt | None = None, policy: Policy = "middle",
                 tokenizer: Tokenizer | None = None) -> None:
        super().__init__(tokenizer)
        self.max_tokens = max_tokens
        self.policy = policy

    @classmethod
    def check_budget(cls, params: Mapping[str, Any], budgeted: bool, *, what: str = "") -> None:
        super().check_budget(params, budgeted, what=what)
        if not budgeted and params.get("max_tokens") is None:
            raise ParamError(f"{what or 'compressor truncate'}: give max_tokens, or put it on a budget axis "
                             "(`budget:` or `ratio:`)")

    @property
    def identity(self) -> str:
        size = "" if self.max_tokens is None else f"max_tokens={self.max_tokens},"
        return f"truncate({size}policy={self.policy})"

    @property
    def label(self) -> str:
        return f"truncate({self.policy})" if self.max_tokens is None else f"truncate({self.max_tokens}, {self.policy})"

    def compress(self, item: Compressible, budget: int | None = None) -> CompressedContext:
        limit = budget if budget is not None else self.max_tokens
        if limit is None:
            raise ParamError("truncate: give max_tokens, or a budget")
        if budget is None:  # the fixed-size form: ``max_tokens`` by the configured policy
            text, cut = truncate_text(item.context, self.tokenizer, limit, self.policy)  # type: ignore[arg-type]
        else:
            text, cut = self.fit(item.context, budget, self.policy)  # type: ignore[arg-type]
        return CompressedContext(
            text=text,
            tokens_in=self.count_tokens(item.context),
            tokens_out=self.count_tokens(text),
            trace={"policy": self.policy, "max_tokens": limit, "truncated": cut},
            budget=budget,
            kept_spans=edge_spans(item.context, text, head=self.policy != "left", tail=self.policy != "right"),
        )
